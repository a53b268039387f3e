//! Link state and statistics: rtnetlink (stats64, carrier, carrier_changes, root qdisc),
//! ethtool LINKMODES (speed, duplex) with sysfs as fallback, and sysfs tx_timeout.

use std::path::Path;

use ethtool::{EthtoolAttr, EthtoolHandle, EthtoolLinkModeAttr, EthtoolLinkModeDuplex};
use futures::TryStreamExt;
use rtnetlink::packet_route::link::{LinkAttribute, LinkFlags};
use rtnetlink::packet_route::tc::{TcAttribute, TcHandle, TcStats2};

use super::NicError;
use crate::sys::net::interface_names;

/// What rtnetlink says about one link.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LinkInfo {
    pub index: u32,
    pub admin_up: bool,
    pub stats: LinkStats,
}

/// Carrier and IFLA_STATS64 counters of a link (part of `NicStatus`, in pfx-api).
pub use pfx_api::nic::LinkStats;

/// The interface's index, or a clear error naming it and listing the existing ones.
pub fn require_interface(iface: &str) -> Result<u32, NicError> {
    let unknown = || NicError::UnknownInterface {
        name: iface.to_string(),
        available: interface_names(),
    };
    crate::sys::net::interface_index(iface).ok_or_else(unknown)
}

fn rtnl_err(what: String, e: rtnetlink::Error) -> NicError {
    NicError::Netlink {
        what,
        detail: e.to_string(),
    }
}

pub async fn link_info(rtnl: &rtnetlink::Handle, iface: &str) -> Result<LinkInfo, NicError> {
    let index = require_interface(iface)?;
    let mut links = rtnl.link().get().match_index(index).execute();
    let msg = links
        .try_next()
        .await
        .map_err(|e| rtnl_err(format!("reading link {iface} over rtnetlink"), e))?
        .ok_or_else(|| NicError::UnknownInterface {
            name: iface.to_string(),
            available: interface_names(),
        })?;
    let mut info = LinkInfo {
        index,
        admin_up: msg.header.flags.contains(LinkFlags::Up),
        ..Default::default()
    };
    for attr in msg.attributes {
        match attr {
            LinkAttribute::Carrier(c) => info.stats.carrier = Some(c != 0),
            LinkAttribute::CarrierChanges(n) => info.stats.carrier_changes = Some(n.into()),
            LinkAttribute::Stats64(s) => {
                info.stats.rx_packets = Some(s.rx_packets);
                info.stats.tx_packets = Some(s.tx_packets);
                info.stats.rx_bytes = Some(s.rx_bytes);
                info.stats.tx_bytes = Some(s.tx_bytes);
                info.stats.tx_dropped = Some(s.tx_dropped);
                info.stats.tx_errors = Some(s.tx_errors);
            }
            _ => {}
        }
    }
    Ok(info)
}

/// The interface's root qdisc: its kind, drops and backlog (where UDP datagrams go when the
/// NIC is paused and the queue overflows; they are not `tx_dropped`). For `mq`, the root's
/// numbers already aggregate its children, so children are not added again.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RootQdisc {
    pub kind: Option<String>,
    pub drops: Option<u64>,
    pub backlog_bytes: Option<u64>,
}

pub async fn root_qdisc_stats(
    rtnl: &rtnetlink::Handle,
    index: u32,
) -> Result<Option<RootQdisc>, NicError> {
    let mut qdiscs = rtnl.qdisc().get().index(index as i32).execute();
    while let Some(msg) = qdiscs
        .try_next()
        .await
        .map_err(|e| rtnl_err("reading qdiscs over rtnetlink".into(), e))?
    {
        if msg.header.index != index as i32 || msg.header.parent != TcHandle::ROOT {
            continue;
        }
        let mut root = RootQdisc::default();
        let mut drops_backlog: Option<(u64, u64)> = None;
        for attr in &msg.attributes {
            match attr {
                TcAttribute::Kind(k) => root.kind = Some(k.clone()),
                TcAttribute::Stats2(list) => {
                    for s in list {
                        if let TcStats2::Queue(q) = s {
                            drops_backlog = Some((q.drops.into(), q.backlog.into()));
                        }
                    }
                }
                TcAttribute::Stats(s) if drops_backlog.is_none() => {
                    drops_backlog = Some((s.drops.into(), s.backlog.into()));
                }
                _ => {}
            }
        }
        root.drops = drops_backlog.map(|d| d.0);
        root.backlog_bytes = drops_backlog.map(|d| d.1);
        return Ok(Some(root));
    }
    Ok(None)
}

/// Speed (Mbit/s) and duplex from ethtool LINKMODES; None where the driver does not know.
pub async fn speed_duplex(
    ethtool: &mut EthtoolHandle,
    iface: &str,
) -> (Option<u32>, Option<String>) {
    let mut speed = None;
    let mut duplex = None;
    if let Ok(mut replies) = ethtool.link_mode().get(Some(iface)).execute().await {
        while let Ok(Some(msg)) = replies.try_next().await {
            for nla in msg.payload.nlas {
                match nla {
                    EthtoolAttr::LinkMode(EthtoolLinkModeAttr::Speed(s))
                        if s != 0 && s != u32::MAX =>
                    {
                        speed = Some(s)
                    }
                    EthtoolAttr::LinkMode(EthtoolLinkModeAttr::Duplex(d)) => {
                        duplex = match d {
                            EthtoolLinkModeDuplex::Full => Some("full".to_string()),
                            EthtoolLinkModeDuplex::Half => Some("half".to_string()),
                            _ => None,
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    if speed.is_none() {
        speed = sysfs_speed(Path::new("/sys/class/net"), iface);
    }
    (speed, duplex)
}

fn sysfs_speed(root: &Path, iface: &str) -> Option<u32> {
    let s = std::fs::read_to_string(root.join(iface).join("speed")).ok()?;
    parse_speed(&s)
}

/// `/sys/class/net/IF/speed` holds Mbit/s, or -1 (and reading fails) when unknown.
pub fn parse_speed(s: &str) -> Option<u32> {
    match s.trim().parse::<i64>() {
        Ok(v) if v > 0 && v < u32::MAX as i64 => Some(v as u32),
        _ => None,
    }
}

/// Sum of `/sys/class/net/IF/queues/tx-*/tx_timeout`. None when no queue exposes it.
pub fn tx_timeouts(root: &Path, iface: &str) -> Option<u64> {
    let dir = std::fs::read_dir(root.join(iface).join("queues")).ok()?;
    let mut total = None;
    for entry in dir.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().starts_with("tx-") {
            continue;
        }
        if let Ok(s) = std::fs::read_to_string(entry.path().join("tx_timeout"))
            && let Ok(v) = s.trim().parse::<u64>()
        {
            total = Some(total.unwrap_or(0) + v);
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speed_parsing() {
        assert_eq!(parse_speed("1000\n"), Some(1000));
        assert_eq!(parse_speed("10\n"), Some(10));
        assert_eq!(parse_speed("-1\n"), None);
        assert_eq!(parse_speed("4294967295\n"), None);
        assert_eq!(parse_speed(""), None);
    }

    #[test]
    fn tx_timeouts_are_summed_over_queues() {
        let dir = tempfile::tempdir().unwrap();
        let q = dir.path().join("eth0/queues");
        for (name, v) in [("tx-0", "3\n"), ("tx-1", "4\n")] {
            std::fs::create_dir_all(q.join(name)).unwrap();
            std::fs::write(q.join(name).join("tx_timeout"), v).unwrap();
        }
        std::fs::create_dir_all(q.join("rx-0")).unwrap();
        assert_eq!(tx_timeouts(dir.path(), "eth0"), Some(7));
        assert_eq!(tx_timeouts(dir.path(), "eth1"), None);
    }

    #[test]
    fn unknown_interface_is_named() {
        let e = require_interface("pfx-no-such-if0").unwrap_err();
        let s = e.to_string();
        assert!(s.contains("pfx-no-such-if0") && s.contains("lo"), "{s}");
    }
}
