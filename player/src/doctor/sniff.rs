//! Multicast reaching an interface, counted at the Ethernet frame boundary with an
//! AF_PACKET socket: every received frame whose destination MAC is IPv4 multicast
//! (01:00:5e:...), grouped by the IP destination. Frame bytes are what the packet socket
//! sees: Ethernet header + payload, no preamble, inter-frame gap or FCS, so a share of
//! the link computed from them is a floor.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use serde::Serialize;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct GroupCount {
    pub frames: u64,
    pub bytes: u64,
}

/// What one sniff saw. Bytes are Ethernet frame bytes (header included, no FCS).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SniffResult {
    pub interface: String,
    /// Measured window: from the first receive call to the clock read after the last.
    pub seconds: f64,
    pub groups: BTreeMap<Ipv4Addr, GroupCount>,
    /// Frames the kernel dropped because this socket could not keep up (the counts are
    /// then a floor).
    pub kernel_drops: u64,
}

/// The IPv4 multicast group a received Ethernet frame is addressed to, if any.
/// Handles one 802.1Q tag. Pure.
pub fn multicast_group(frame: &[u8]) -> Option<Ipv4Addr> {
    if frame.len() < 14 || frame[0..3] != [0x01, 0x00, 0x5e] || frame[3] & 0x80 != 0 {
        return None;
    }
    let mut off = 12;
    let mut ethertype = u16::from_be_bytes([frame[off], frame[off + 1]]);
    if ethertype == 0x8100 {
        off += 4;
        ethertype = u16::from_be_bytes([*frame.get(off)?, *frame.get(off + 1)?]);
    }
    if ethertype != 0x0800 {
        return None;
    }
    let ip = frame.get(off + 2..)?;
    if ip.len() < 20 || ip[0] >> 4 != 4 {
        return None;
    }
    let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
    dst.is_multicast().then_some(dst)
}

/// 224.0.0.0/24: link-local control groups (IGMP queries, mDNS, OSPF...). Switches
/// flood them to every port even with IGMP snooping, so they are not a snooping problem.
pub fn is_link_local_group(g: Ipv4Addr) -> bool {
    let o = g.octets();
    o[0] == 224 && o[1] == 0 && o[2] == 0
}

/// Groups the interface has joined, from /proc/net/igmp. Pure over the file's text.
/// The kernel prints each group as the raw __be32 with %08X, so on a little-endian host
/// 224.0.0.1 reads "010000E0": the native-endian bytes of the parsed number are the address.
pub fn joined_groups(proc_net_igmp: &str, iface: &str) -> Vec<Ipv4Addr> {
    let mut out = Vec::new();
    let mut in_iface = false;
    for line in proc_net_igmp.lines().skip(1) {
        if !line.starts_with(char::is_whitespace) {
            // "2\teth0      :     1      V3"
            let mut parts = line.split_whitespace();
            let _idx = parts.next();
            let name = parts.next().unwrap_or("").trim_end_matches(':');
            in_iface = name == iface;
            continue;
        }
        if !in_iface {
            continue;
        }
        if let Some(hex) = line.split_whitespace().next()
            && let Ok(v) = u32::from_str_radix(hex, 16)
        {
            out.push(Ipv4Addr::from(v.to_ne_bytes()));
        }
    }
    out
}

#[derive(Debug, thiserror::Error)]
pub enum SniffError {
    #[error("cannot open a packet socket ({0}); the multicast count needs root or CAP_NET_RAW")]
    Socket(std::io::Error),
    #[error("cannot bind the packet socket to {iface}: {source}")]
    Bind {
        iface: String,
        source: std::io::Error,
    },
    #[error("receiving on {iface}: {source}")]
    Recv {
        iface: String,
        source: std::io::Error,
    },
}

fn setsockopt<T>(fd: &OwnedFd, level: i32, name: i32, v: &T) -> std::io::Result<()> {
    // SAFETY: v points to a live T of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (v as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Count multicast frames received on `ifindex` for `duration`.
pub fn sniff(iface: &str, ifindex: u32, duration: Duration) -> Result<SniffResult, SniffError> {
    // Protocol 0 at creation: receive nothing until bound to the one interface, so no
    // frame from another interface slips in before the bind.
    // SAFETY: plain socket(2).
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(SniffError::Socket(std::io::Error::last_os_error()));
    }
    // SAFETY: fresh valid fd.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let _ = setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &(4i32 << 20));
    let tv = libc::timeval {
        tv_sec: 0,
        tv_usec: 100_000,
    };
    setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVTIMEO, &tv).map_err(SniffError::Socket)?;

    // SAFETY: sockaddr_ll is plain old data.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: sll is a valid sockaddr_ll of the size passed.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(SniffError::Bind {
            iface: iface.into(),
            source: std::io::Error::last_os_error(),
        });
    }
    // Reset the statistics so drops count only this window.
    let _ = packet_drops(&fd);

    let mut res = SniffResult {
        interface: iface.to_string(),
        ..Default::default()
    };
    let mut buf = [0u8; 64];
    let start = Instant::now();
    let deadline = start + duration;
    while Instant::now() < deadline {
        // SAFETY: sockaddr_ll is plain old data.
        let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut from_len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        // MSG_TRUNC: copy only the headers into `buf` but return the frame's real length.
        // SAFETY: buf and from are valid for the sizes passed.
        let n = unsafe {
            libc::recvfrom(
                fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_TRUNC,
                (&mut from as *mut libc::sockaddr_ll).cast(),
                &mut from_len,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            match e.kind() {
                std::io::ErrorKind::WouldBlock
                | std::io::ErrorKind::TimedOut
                | std::io::ErrorKind::Interrupted => continue,
                _ => {
                    return Err(SniffError::Recv {
                        iface: iface.into(),
                        source: e,
                    });
                }
            }
        }
        // This host's own multicast, looped back to the socket, did not reach it over the wire.
        if from.sll_pkttype == libc::PACKET_OUTGOING {
            continue;
        }
        let len = n as usize;
        if let Some(g) = multicast_group(&buf[..len.min(buf.len())]) {
            let c = res.groups.entry(g).or_default();
            c.frames += 1;
            c.bytes += len as u64;
        }
    }
    res.seconds = start.elapsed().as_secs_f64();
    res.kernel_drops = packet_drops(&fd).unwrap_or(0);
    Ok(res)
}

/// PACKET_STATISTICS: drops since the last call (the kernel resets them on read).
fn packet_drops(fd: &OwnedFd) -> std::io::Result<u64> {
    let mut st = libc::tpacket_stats {
        tp_packets: 0,
        tp_drops: 0,
    };
    let mut len = std::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
    // SAFETY: st is valid for len bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            (&mut st as *mut libc::tpacket_stats).cast(),
            &mut len,
        )
    };
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(st.tp_drops.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(dst_mac: [u8; 6], ethertype: u16, ip_dst: [u8; 4]) -> Vec<u8> {
        let mut f = Vec::new();
        f.extend_from_slice(&dst_mac);
        f.extend_from_slice(&[0x02, 0, 0, 0, 0, 1]);
        f.extend_from_slice(&ethertype.to_be_bytes());
        let mut ip = [0u8; 20];
        ip[0] = 0x45;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&[10, 0, 0, 2]);
        ip[16..20].copy_from_slice(&ip_dst);
        f.extend_from_slice(&ip);
        f
    }

    #[test]
    fn multicast_frame_gives_its_group() {
        let f = frame([0x01, 0x00, 0x5e, 0x01, 0x02, 0x03], 0x0800, [239, 1, 2, 3]);
        assert_eq!(multicast_group(&f), Some(Ipv4Addr::new(239, 1, 2, 3)));
    }

    #[test]
    fn unicast_and_broadcast_are_not_counted() {
        let f = frame([0x02, 0, 0, 0, 0, 9], 0x0800, [239, 1, 2, 3]);
        assert_eq!(multicast_group(&f), None);
        let f = frame([0xff; 6], 0x0800, [10, 0, 0, 255]);
        assert_eq!(multicast_group(&f), None);
        // 01:00:5e with the 24th bit set is not an IPv4 multicast MAC.
        let f = frame([0x01, 0x00, 0x5e, 0x81, 0x02, 0x03], 0x0800, [239, 1, 2, 3]);
        assert_eq!(multicast_group(&f), None);
        assert_eq!(multicast_group(&f[..10]), None);
    }

    #[test]
    fn vlan_tagged_multicast_is_counted() {
        let mut f = frame([0x01, 0x00, 0x5e, 0x7f, 0, 1], 0x0800, [239, 255, 0, 1]);
        // Insert an 802.1Q tag (VLAN 10) before the ethertype.
        f.splice(12..12, [0x81, 0x00, 0x00, 0x0a]);
        assert_eq!(multicast_group(&f), Some(Ipv4Addr::new(239, 255, 0, 1)));
    }

    #[test]
    fn link_local_groups() {
        assert!(is_link_local_group(Ipv4Addr::new(224, 0, 0, 251)));
        assert!(!is_link_local_group(Ipv4Addr::new(239, 255, 0, 1)));
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn igmp_groups_of_one_interface() {
        let text = "Idx\tDevice    : Count Querier\tGroup    Users Timer\tReporter\n\
                    1\tlo        :     1      V3\n\
                    \t\t\t\t010000E0     1 0:00000000\t\t0\n\
                    2\teth0      :     2      V3\n\
                    \t\t\t\tFB0000E0     1 0:00000000\t\t0\n\
                    \t\t\t\t010000E0     1 0:00000000\t\t0\n\
                    3\teth1      :     1      V3\n\
                    \t\t\t\t030201EF     1 0:00000000\t\t0\n";
        assert_eq!(
            joined_groups(text, "eth0"),
            vec![Ipv4Addr::new(224, 0, 0, 251), Ipv4Addr::new(224, 0, 0, 1)]
        );
        assert_eq!(
            joined_groups(text, "eth1"),
            vec![Ipv4Addr::new(239, 1, 2, 3)]
        );
        assert!(joined_groups(text, "eth2").is_empty());
    }
}
