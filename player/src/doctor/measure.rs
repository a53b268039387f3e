//! Gathers the doctor's evidence: one measurement, no retries. Anything that makes the
//! measurement itself impossible is a `CannotMeasure` with the reason (exit 2).

use std::ffi::CStr;
use std::io::Read;
use std::net::Ipv4Addr;
use std::time::Duration;

use super::sniff::{self, joined_groups};
use super::{Evidence, OutputWindow};
use crate::nic::{NicReader, link, monitor::hostname};

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CannotMeasure(pub String);

/// The interface of the default IPv4 route (lowest metric) from /proc/net/route. Pure.
pub fn default_route_iface(proc_net_route: &str) -> Option<String> {
    proc_net_route
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // Iface Destination Gateway Flags RefCnt Use Metric Mask ...
            if f.len() >= 8 && f[1] == "00000000" && f[7] == "00000000" {
                Some((f[6].parse::<u64>().unwrap_or(u64::MAX), f[0].to_string()))
            } else {
                None
            }
        })
        .min()
        .map(|(_, iface)| iface)
}

pub fn default_iface() -> Result<String, CannotMeasure> {
    let text = std::fs::read_to_string("/proc/net/route").unwrap_or_default();
    default_route_iface(&text).ok_or_else(|| {
        CannotMeasure(
            "this host has no default route to pick the interface from; name it with --iface IF"
                .into(),
        )
    })
}

/// Lines of the kernel log that are NETDEV WATCHDOG reports for `iface`. Pure.
pub fn watchdog_lines_for<'a>(log: impl Iterator<Item = &'a str>, iface: &str) -> Vec<String> {
    let needle = format!("NETDEV WATCHDOG: {iface} ");
    log.filter(|l| l.contains(&needle))
        .map(|l| {
            // /dev/kmsg records are "pri,seq,usec,flags;message".
            match l.split_once(';') {
                Some((head, msg)) if head.contains(',') => msg.trim().to_string(),
                _ => l.trim().to_string(),
            }
        })
        .collect()
}

/// Kernel log since boot: /dev/kmsg (non-blocking, one record per read), else `journalctl -k`.
fn kernel_log() -> Result<Vec<String>, String> {
    let kmsg = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags_nonblock()
        .open("/dev/kmsg");
    let kmsg_err = match kmsg {
        Ok(mut f) => {
            let mut lines = Vec::new();
            let mut buf = vec![0u8; 8192];
            loop {
                match f.read(&mut buf) {
                    Ok(0) => return Ok(lines),
                    Ok(n) => lines.push(String::from_utf8_lossy(&buf[..n]).into_owned()),
                    // EPIPE: a record was overwritten while reading; keep going.
                    Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(lines),
                    Err(e) => break e.to_string(),
                }
            }
        }
        Err(e) => e.to_string(),
    };
    match std::process::Command::new("journalctl")
        .args(["-k", "-b", "-o", "cat", "--no-pager", "-q"])
        .output()
    {
        Ok(out) if out.status.success() => Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()),
        Ok(out) => Err(format!(
            "/dev/kmsg: {kmsg_err}; journalctl -k: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Err(format!("/dev/kmsg: {kmsg_err}; journalctl -k: {e}")),
    }
}

trait NonBlock {
    fn custom_flags_nonblock(&mut self) -> &mut Self;
}
impl NonBlock for std::fs::OpenOptions {
    fn custom_flags_nonblock(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.custom_flags(libc::O_NONBLOCK)
    }
}

/// Every IPv4 address of every interface (getifaddrs(3)).
pub fn ipv4_addresses() -> Vec<(String, Ipv4Addr, u8)> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills head with a list we free below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return out;
    }
    let mut p = head;
    while !p.is_null() {
        // SAFETY: p walks the list returned by getifaddrs.
        let ifa = unsafe { &*p };
        p = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_netmask.is_null() {
            continue;
        }
        // SAFETY: ifa_addr is non-null and points to a sockaddr.
        if unsafe { (*ifa.ifa_addr).sa_family } as i32 != libc::AF_INET {
            continue;
        }
        // SAFETY: AF_INET addresses and netmasks are sockaddr_in.
        let (addr, mask) = unsafe {
            (
                *(ifa.ifa_addr as *const libc::sockaddr_in),
                *(ifa.ifa_netmask as *const libc::sockaddr_in),
            )
        };
        // SAFETY: ifa_name is a NUL-terminated string.
        let name = unsafe { CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
        let ip = Ipv4Addr::from(u32::from_be(addr.sin_addr.s_addr));
        let prefix = u32::from_be(mask.sin_addr.s_addr).count_ones() as u8;
        if !ip.is_loopback() {
            out.push((name, ip, prefix));
        }
    }
    // SAFETY: head came from getifaddrs.
    unsafe { libc::freeifaddrs(head) };
    out
}

/// The local player's sync status from its `/profile` at `player` (a base URL), and its
/// frame rate; or why not.
pub fn player_sync(player: &str) -> Result<(pfx_api::profile::SyncStatus, u32), String> {
    let body =
        pfx_api::http::request_path("GET", player, "/profile", &[], None, Duration::from_secs(2))
            .and_then(|r| r.ok_body(player))
            .map_err(|e| format!("no player answered at {player}: {e}"))?;
    let doc: pfx_api::profile::ProfileDoc = serde_json::from_slice(&body)
        .map_err(|e| format!("{player}/profile is not a player's profile: {e}"))?;
    let fps = doc.snapshot.fps_target;
    doc.snapshot
        .sync
        .map(|s| (s, fps))
        .ok_or_else(|| format!("the player at {player} predates MultiSync"))
}

/// The local player's outputs (their counters) and its frame rate, from its `/profile`.
pub fn player_outputs(player: &str) -> Result<(Vec<pfx_api::profile::OutputStats>, u32), String> {
    let body =
        pfx_api::http::request_path("GET", player, "/profile", &[], None, Duration::from_secs(2))
            .and_then(|r| r.ok_body(player))
            .map_err(|e| format!("no player answered at {player}: {e}"))?;
    let doc: pfx_api::profile::ProfileDoc = serde_json::from_slice(&body)
        .map_err(|e| format!("{player}/profile is not a player's profile: {e}"))?;
    Ok((doc.snapshot.outputs, doc.snapshot.fps_target))
}

/// One measurement of `iface` over `seconds`; the sync status from the player at
/// `player`.
pub fn measure(iface: &str, seconds: Duration, player: &str) -> Result<Evidence, CannotMeasure> {
    let host = hostname();
    let ifindex = link::require_interface(iface).map_err(|e| CannotMeasure(e.to_string()))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CannotMeasure(format!("starting a runtime for netlink: {e}")))?;
    let mut reader = rt
        .block_on(async { NicReader::new() })
        .map_err(|e| CannotMeasure(e.to_string()))?;
    let outputs_before = player_outputs(player);
    let t0 = std::time::Instant::now();
    let before = rt
        .block_on(reader.read(iface))
        .map_err(|e| CannotMeasure(format!("reading {iface} before the sniff: {e}")))?;
    let sniffed =
        sniff::sniff(iface, ifindex, seconds).map_err(|e| CannotMeasure(e.to_string()))?;
    let after = rt
        .block_on(reader.read(iface))
        .map_err(|e| CannotMeasure(format!("reading {iface} after the sniff: {e}")))?;
    let outputs_after = player_outputs(player);
    let window_s = t0.elapsed().as_secs_f64();
    let igmp = std::fs::read_to_string("/proc/net/igmp").unwrap_or_default();
    let watchdog =
        kernel_log().map(|log| watchdog_lines_for(log.iter().map(String::as_str), iface));
    Ok(Evidence {
        interface: iface.to_string(),
        host,
        nic_before: before,
        nic_after: after,
        sniff: sniffed,
        joined: joined_groups(&igmp, iface),
        watchdog_lines: watchdog,
        addresses: ipv4_addresses(),
        sync: player_sync(player),
        outputs: match (outputs_before, outputs_after) {
            (Ok(b), Ok(a)) => Ok(OutputWindow {
                before: b.0,
                after: a.0,
                fps: a.1,
                seconds: window_s,
            }),
            (Err(e), _) | (_, Err(e)) => Err(e),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_route_lowest_metric_wins() {
        let t = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
                 wlan0\t00000000\t0101A8C0\t0003\t0\t0\t600\t00000000\t0\t0\t0\n\
                 eth0\t00000000\t0100000A\t0003\t0\t0\t100\t00000000\t0\t0\t0\n\
                 eth0\t0000000A\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n";
        assert_eq!(default_route_iface(t), Some("eth0".into()));
        let none =
            "Iface\tDestination\tGateway\n eth0\t0000000A\t00000000\t0001\t0\t0\t100\t00FFFFFF\n";
        assert_eq!(default_route_iface(none), None);
    }

    #[test]
    fn watchdog_lines_match_only_this_interface() {
        let log = [
            "4,1234,5678,-;NETDEV WATCHDOG: eth0 (bcmgenet): transmit queue 1 timed out 5000 ms",
            "4,1235,5679,-;NETDEV WATCHDOG: eth01 (r8169): transmit queue 0 timed out",
            "bcmgenet fd580000.ethernet eth0: Link is Up - 1Gbps/Full",
            "NETDEV WATCHDOG: eth0 (bcmgenet): transmit queue 0 timed out 5000 ms",
        ];
        let got = watchdog_lines_for(log.iter().copied(), "eth0");
        assert_eq!(
            got,
            vec![
                "NETDEV WATCHDOG: eth0 (bcmgenet): transmit queue 1 timed out 5000 ms",
                "NETDEV WATCHDOG: eth0 (bcmgenet): transmit queue 0 timed out 5000 ms"
            ]
        );
    }
}
