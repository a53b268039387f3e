//! The show interface's transmit queue, planned. When a switch PAUSEs the Pi, datagrams the
//! player already handed over wait in the interface's queue (the qdisc) and reach the poles
//! when the stall lifts: a kernel default queue delivers the oldest first, so every pole
//! gets a backlog of stale frames. pfx replaces it with a head-drop FIFO sized to one frame
//! of the show: while the link is stalled each new frame pushes the oldest datagrams out,
//! and when it lifts the queue holds the newest frame (docs/nic.md, "Transmit queue").
//!
//! Pure: the sizes, the decision whether to touch a queue, parsing the parent handle. The
//! netlink I/O is in `qdisc`.

use crate::wire::ipv4_packets;

/// The qdisc kind pfx installs.
pub const KIND: &str = "pfifo_head_drop";

/// Root qdiscs a kernel or distribution installs by default. pfx replaces only these (and
/// its own); anything else at the root (a shaper, a `tc` script) was put there by someone
/// on purpose and is left alone.
const KERNEL_DEFAULTS: &[&str] = &[
    "noqueue",
    "pfifo_fast",
    "fq_codel",
    "mq",
    "fq",
    "pfifo",
    "bfifo",
    "sfq",
    "cake",
    KIND,
];

/// Where the queue attaches: the interface's root, or under a class of someone else's
/// qdisc (`MAJOR:MINOR`, hexadecimal as `tc` writes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parent {
    Root,
    Class(u32),
}

impl Parent {
    /// `root` or `MAJOR:MINOR` with hexadecimal numbers (`tc` notation, e.g. `1:1`, `10:a`).
    pub fn parse(s: &str) -> Result<Parent, String> {
        let s = s.trim();
        if s == "root" {
            return Ok(Parent::Root);
        }
        let bad = || {
            format!("{s:?} is not `root` or a tc class handle MAJOR:MINOR (hexadecimal, e.g. 1:1)")
        };
        let (maj, min) = s.split_once(':').ok_or_else(bad)?;
        let maj = u16::from_str_radix(maj, 16).map_err(|_| bad())?;
        let min = u16::from_str_radix(min, 16).map_err(|_| bad())?;
        if maj == 0 || maj == 0xffff {
            return Err(bad());
        }
        Ok(Parent::Class((u32::from(maj) << 16) | u32::from(min)))
    }
}

impl std::fmt::Display for Parent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Parent::Root => f.write_str("root"),
            Parent::Class(h) => write!(f, "{:x}:{:x}", h >> 16, h & 0xffff),
        }
    }
}

/// The queue's limit in packets: one frame of every output. A limit of one frame is what
/// makes head-drop work: each output's socket may hold about two frames (see
/// `output::default_send_buffer`), so the queue overflows, and drops its oldest, before any
/// socket fills and refuses the new frame. `datagrams` are the UDP payload sizes of one
/// frame of every output (`wire::FrameShape::datagrams`).
pub fn limit_packets(datagrams: impl IntoIterator<Item = usize>, mtu: usize) -> u32 {
    let n: usize = datagrams
        .into_iter()
        .map(|len| ipv4_packets(len, mtu))
        .sum();
    n.clamp(1, u32::MAX as usize) as u32
}

/// What to do with the queue found at the parent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Install (or resize) ours.
    Install,
    /// Ours, already with this limit.
    Keep,
    /// Someone else's root qdisc (a shaper, a tc script): leave it, say how to combine.
    Foreign(String),
}

/// `found` is the kind and (for FIFOs) the limit of the qdisc now at the parent. Under a
/// class the operator named the spot explicitly, so whatever leaf is there is replaced.
pub fn decide(parent: Parent, found: Option<(&str, Option<u32>)>, limit: u32) -> Decision {
    match found {
        Some((k, l)) if k == KIND && l == Some(limit) => Decision::Keep,
        Some((k, _)) if parent == Parent::Root && !KERNEL_DEFAULTS.contains(&k) => {
            Decision::Foreign(k.to_string())
        }
        _ => Decision::Install,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DeviceProfile;
    use std::path::Path;

    fn profile(yaml: &str) -> DeviceProfile {
        DeviceProfile::from_str(yaml, Path::new("<test>")).expect("test profile")
    }

    /// One frame of every output, as the run shell passes it.
    fn frame(profiles: &[&DeviceProfile]) -> Vec<usize> {
        profiles.iter().flat_map(|p| p.frame_datagrams()).collect()
    }

    #[test]
    fn parent_parsing() {
        assert_eq!(Parent::parse("root"), Ok(Parent::Root));
        assert_eq!(Parent::parse("2:1"), Ok(Parent::Class(0x0002_0001)));
        assert_eq!(Parent::parse("10:a"), Ok(Parent::Class(0x0010_000a)));
        assert_eq!(
            Parent::parse("10:a").map(|p| p.to_string()),
            Ok("10:a".into())
        );
        for bad in [
            "", ":", "1", "1:", ":1", "0:1", "ffff:1", "g:1", "1:1:1", "1:10000", "root:1",
        ] {
            assert!(Parent::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn one_frame_of_the_three_pole_kinds() {
        let bp = profile(
            "name: a\nprotocol: bigpacket\npixels: 1000\npixel_format: rgb8\ncolor_order: grb\ndestination: 239.255.80.1:5599\n",
        );
        let sacn = profile(
            "name: b\nprotocol: sacn\npixels: 300\npixel_format: rgb8\ncolor_order: rgb\ndestination: 239.255.0.1:5568\nsacn:\n  sync_universe: 9\n",
        );
        let ddp = profile(
            "name: c\nprotocol: ddp\npixels: 600\npixel_format: rgb8\ncolor_order: rgb\ndestination: 10.0.0.9:4048\n",
        );
        // bigPacket: 32 + 3000 bytes = 3 fragments; sACN: 900 channels = 2 universes + sync,
        // the last one padded to a full universe as the encoder sends it; DDP: 1800
        // channels = 2 packets.
        assert_eq!(bp.frame_datagrams(), vec![3032]);
        assert_eq!(sacn.frame_datagrams(), vec![126 + 510, 126 + 510, 49]);
        assert_eq!(ddp.frame_datagrams(), vec![10 + 1440, 10 + 360]);
        assert_eq!(limit_packets(frame(&[&bp, &sacn, &ddp]), 1500), 3 + 3 + 2);
        // At MTU 1400 the full DDP packet (1,478 bytes on the wire) takes two.
        assert_eq!(limit_packets(frame(&[&bp, &sacn, &ddp]), 1400), 3 + 3 + 3);
        assert_eq!(sacn.largest_datagram(), 636);
        assert_eq!(ddp.largest_datagram(), 1450);
    }

    #[test]
    fn decisions() {
        use Decision::*;
        let r = Parent::Root;
        assert_eq!(decide(r, None, 8), Install);
        assert_eq!(decide(r, Some(("fq_codel", None)), 8), Install);
        assert_eq!(decide(r, Some(("mq", None)), 8), Install);
        assert_eq!(decide(r, Some((KIND, Some(8))), 8), Keep);
        assert_eq!(decide(r, Some((KIND, Some(4))), 8), Install);
        assert_eq!(decide(r, Some(("htb", None)), 8), Foreign("htb".into()));
        assert_eq!(decide(r, Some(("tbf", None)), 8), Foreign("tbf".into()));
        // Under a class the operator named, any leaf is replaced.
        assert_eq!(
            decide(Parent::Class(0x20001), Some(("bfifo", Some(1 << 22))), 8),
            Install
        );
    }
}
