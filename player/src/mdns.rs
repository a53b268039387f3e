//! mDNS advertisement of `_pfx._tcp`, so the fleet tool and a laptop on the venue LAN find
//! units, and, with FPP Connect on, of `_fppd._udp` for xLights (docs/fpp-connect.md). `mdns-sd` runs its own daemon thread and answers on every interface with an
//! address (loopback included, as of 0.21.7); dropping the guard unregisters (a goodbye
//! packet, TTL 0) and stops the daemon.

use std::time::Duration;

use mdns_sd::{ServiceDaemon, ServiceInfo};

pub const SERVICE_TYPE: &str = "_pfx._tcp.local.";
/// What xLights browses for FPP units; the port is MultiSync's.
pub const FPPD_SERVICE_TYPE: &str = "_fppd._udp.local.";
pub const FPPD_PORT: u16 = 32320;
/// How long Drop waits for the goodbye packet to go out.
const GOODBYE_WAIT: Duration = Duration::from_secs(1);

#[derive(Debug, thiserror::Error)]
pub enum MdnsError {
    #[error("mDNS: cannot start the responder ({0}); is UDP port 5353 usable here?")]
    Daemon(String),
    #[error("mDNS: unit id {unit_id:?} cannot be advertised: {reason}")]
    Service { unit_id: String, reason: String },
    #[error("mDNS: cannot register {fullname}: {reason}")]
    Register { fullname: String, reason: String },
}

/// The advertisement; dropping it withdraws it.
pub struct MdnsAdvert {
    daemon: ServiceDaemon,
    fullname: String,
    /// Further services on the same daemon (`_fppd._udp`).
    more: Vec<String>,
}

impl MdnsAdvert {
    /// e.g. `gen3-7._pfx._tcp.local.`
    pub fn fullname(&self) -> &str {
        &self.fullname
    }

    /// Also advertises `<unit_id>._fppd._udp.local.` on port 32320, same host and
    /// addresses, so xLights' FPP Connect finds the unit.
    pub fn add_fppd(&mut self, unit_id: &str) -> Result<String, MdnsError> {
        let host = format!("{}.local.", host_label(unit_id));
        let no_txt: &[(&str, &str)] = &[];
        let info = ServiceInfo::new(FPPD_SERVICE_TYPE, unit_id, &host, "", FPPD_PORT, no_txt)
            .map_err(|e| MdnsError::Service {
                unit_id: unit_id.into(),
                reason: e.to_string(),
            })?
            .enable_addr_auto();
        let fullname = info.get_fullname().to_string();
        self.daemon
            .register(info)
            .map_err(|e| MdnsError::Register {
                fullname: fullname.clone(),
                reason: e.to_string(),
            })?;
        self.more.push(fullname.clone());
        Ok(fullname)
    }
}

impl Drop for MdnsAdvert {
    fn drop(&mut self) {
        for name in &self.more {
            if let Ok(rx) = self.daemon.unregister(name) {
                let _ = rx.recv_timeout(GOODBYE_WAIT);
            }
        }
        if let Ok(rx) = self.daemon.unregister(&self.fullname) {
            let _ = rx.recv_timeout(GOODBYE_WAIT);
        }
        if let Ok(rx) = self.daemon.shutdown() {
            let _ = rx.recv_timeout(GOODBYE_WAIT);
        }
    }
}

/// A DNS host label from a unit id: letters, digits and '-', at most 63 bytes.
pub fn host_label(unit_id: &str) -> String {
    let mut s: String = unit_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect::<String>()
        .trim_matches('-')
        .to_string();
    s.truncate(63);
    if s.is_empty() { "pfx-unit".into() } else { s }
}

/// The TXT records: unit, version, http_port, profiles (comma-separated).
pub fn txt_records(
    unit_id: &str,
    http_port: u16,
    profiles: &[String],
    version: &str,
) -> Vec<(String, String)> {
    vec![
        ("unit".into(), unit_id.into()),
        ("version".into(), version.into()),
        ("http_port".into(), http_port.to_string()),
        ("profiles".into(), profiles.join(",")),
    ]
}

/// Advertises `<unit_id>._pfx._tcp.local.` on port `http_port`, host `<unit_id>.local.`,
/// with every address of every interface.
pub fn advertise(
    unit_id: &str,
    http_port: u16,
    profiles: &[String],
    version: &str,
) -> Result<MdnsAdvert, MdnsError> {
    let bad = |reason: String| MdnsError::Service {
        unit_id: unit_id.into(),
        reason,
    };
    if unit_id.is_empty() || unit_id.len() > 63 {
        return Err(bad("the instance name must be 1..=63 bytes".into()));
    }
    let txt = txt_records(unit_id, http_port, profiles, version);
    let txt_len: usize = txt.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
    if txt.iter().any(|(k, v)| k.len() + v.len() + 1 > 255) || txt_len > 1300 {
        return Err(bad(
            "TXT records too long (a record is at most 255 bytes): fewer or shorter profile names"
                .into(),
        ));
    }
    let host = format!("{}.local.", host_label(unit_id));
    let info = ServiceInfo::new(SERVICE_TYPE, unit_id, &host, "", http_port, &txt[..])
        .map_err(|e| bad(e.to_string()))?
        .enable_addr_auto();
    let fullname = info.get_fullname().to_string();
    let daemon = ServiceDaemon::new().map_err(|e| MdnsError::Daemon(e.to_string()))?;
    if let Err(e) = daemon.register(info) {
        let _ = daemon.shutdown();
        return Err(MdnsError::Register {
            fullname,
            reason: e.to_string(),
        });
    }
    Ok(MdnsAdvert {
        daemon,
        fullname,
        more: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_txt() {
        assert_eq!(host_label("Gen3 Pole_7"), "gen3-pole-7");
        assert_eq!(host_label("--"), "pfx-unit");
        let t = txt_records(
            "u1",
            8080,
            &["gen3-bigpacket".into(), "bench-ddp".into()],
            "0.1.0",
        );
        assert_eq!(t[2], ("http_port".into(), "8080".into()));
        assert_eq!(t[3], ("profiles".into(), "gen3-bigpacket,bench-ddp".into()));
        assert!(matches!(
            advertise("", 1, &[], "v"),
            Err(MdnsError::Service { .. })
        ));
        let long = vec!["p".repeat(300)];
        assert!(matches!(
            advertise("u", 1, &long, "v"),
            Err(MdnsError::Service { .. })
        ));
    }

    /// Advertise and browse inside a fresh loopback-only network namespace (this thread's
    /// own, made with unshare), so nothing reaches the host's LAN.
    #[test]
    fn found_by_a_browser_in_a_private_netns() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: needs root (network namespace)");
            return;
        }
        let t = std::thread::spawn(|| {
            // SAFETY: unshare only changes this thread's network namespace; the mDNS daemon
            // threads spawned below inherit it.
            assert_eq!(
                unsafe { libc::unshare(libc::CLONE_NEWNET) },
                0,
                "unshare(CLONE_NEWNET)"
            );
            let ok = std::process::Command::new("ip")
                .args(["link", "set", "lo", "up"])
                .status();
            assert!(ok.is_ok_and(|s| s.success()), "ip link set lo up");
            let advert =
                advertise("test-unit-1", 18080, &["bench-ddp".into()], "9.9.9").expect("advertise");
            let browser = ServiceDaemon::new().expect("browser daemon");
            let rx = browser.browse(SERVICE_TYPE).expect("browse");
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            let mut found = None;
            while std::time::Instant::now() < deadline {
                if let Ok(mdns_sd::ServiceEvent::ServiceResolved(info)) =
                    rx.recv_timeout(Duration::from_millis(200))
                {
                    found = Some(info);
                    break;
                }
            }
            let info = found.expect("resolved within 10 s");
            assert_eq!(info.get_fullname(), advert.fullname());
            assert_eq!(info.get_port(), 18080);
            assert_eq!(info.get_property_val_str("unit"), Some("test-unit-1"));
            assert_eq!(info.get_property_val_str("version"), Some("9.9.9"));
            assert_eq!(info.get_property_val_str("http_port"), Some("18080"));
            assert_eq!(info.get_property_val_str("profiles"), Some("bench-ddp"));
            // dropping the guard says goodbye
            drop(advert);
            let mut removed = false;
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while std::time::Instant::now() < deadline && !removed {
                removed = matches!(
                    rx.recv_timeout(Duration::from_millis(200)),
                    Ok(mdns_sd::ServiceEvent::ServiceRemoved(..))
                );
            }
            let _ = browser.shutdown();
            assert!(removed, "ServiceRemoved after drop");
        });
        t.join().expect("netns thread");
    }
}
