//! `pfx-fleet discover`: browse `_pfx._tcp.local.` with mdns-sd for a while and return
//! what the units advertise (TXT unit=, version=, http_port=, profiles=).

use mdns_sd::{IfKind, ServiceDaemon, ServiceEvent};
use serde::Serialize;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

pub const SERVICE: &str = "_pfx._tcp.local.";

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Found {
    pub unit: String,
    pub addr: Option<Ipv4Addr>,
    pub version: Option<String>,
    pub http_port: Option<u16>,
    pub profiles: Option<String>,
    pub fullname: String,
}

#[derive(Debug, thiserror::Error)]
#[error("mDNS: {0}")]
pub struct DiscoverError(String);

pub fn browse(
    window: Duration,
    port: u16,
    loopback_only: bool,
) -> Result<Vec<Found>, DiscoverError> {
    let e = |x: mdns_sd::Error| DiscoverError(x.to_string());
    let d = ServiceDaemon::new_with_port(port).map_err(e)?;
    if loopback_only {
        d.disable_interface(IfKind::All).map_err(e)?;
        d.enable_interface(IfKind::LoopbackV4).map_err(e)?;
    }
    let rx = d.browse(SERVICE).map_err(e)?;
    let deadline = Instant::now() + window;
    let mut found: Vec<Found> = Vec::new();
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(ServiceEvent::ServiceResolved(info)) => {
                let unit = info
                    .get_property_val_str("unit")
                    .map(str::to_string)
                    .unwrap_or_else(|| info.fullname.split('.').next().unwrap_or("").to_string());
                let mut addrs: Vec<Ipv4Addr> = info.get_addresses_v4().into_iter().collect();
                addrs.sort();
                let f = Found {
                    unit,
                    addr: addrs.first().copied(),
                    version: info.get_property_val_str("version").map(str::to_string),
                    http_port: info
                        .get_property_val_str("http_port")
                        .and_then(|p| p.parse().ok()),
                    profiles: info.get_property_val_str("profiles").map(str::to_string),
                    fullname: info.fullname.clone(),
                };
                found.retain(|x| x.unit != f.unit);
                found.push(f);
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    let _ = d.stop_browse(SERVICE);
    let _ = d.shutdown();
    found.sort_by(|a, b| a.unit.cmp(&b.unit));
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real advertiser (mdns-sd, as the player does) on loopback only, on a private port.
    #[test]
    fn discovers_a_loopback_advertiser_with_its_txt() {
        let port = 20000 + (std::process::id() % 20000) as u16;
        let d = ServiceDaemon::new_with_port(port).unwrap();
        d.disable_interface(IfKind::All).unwrap();
        d.enable_interface(IfKind::LoopbackV4).unwrap();
        let info = mdns_sd::ServiceInfo::new(
            SERVICE,
            "unit-7",
            "unit-7.local.",
            "127.0.0.1",
            8080,
            &[
                ("unit", "unit-7"),
                ("version", "1.2.3"),
                ("http_port", "8080"),
                ("profiles", "gen3"),
            ][..],
        )
        .unwrap();
        d.register(info).unwrap();
        let found = browse(Duration::from_secs(3), port, true).unwrap();
        let _ = d.shutdown();
        let u = found
            .iter()
            .find(|f| f.unit == "unit-7")
            .expect("unit-7 discovered");
        assert_eq!(u.version.as_deref(), Some("1.2.3"));
        assert_eq!(u.http_port, Some(8080));
        assert_eq!(u.addr, Some(Ipv4Addr::LOCALHOST));
    }
}
