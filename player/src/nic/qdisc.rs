//! Installs and removes the show interface's head-drop transmit queue over rtnetlink (what
//! `tc qdisc replace dev IF root pfifo_head_drop limit N` does), so the service needs only
//! CAP_NET_ADMIN and no `tc` binary. The plan is in `tx_queue`.

use futures::TryStreamExt;
use rtnetlink::packet_core::{
    DefaultNla, NLM_F_ACK, NLM_F_CREATE, NLM_F_REPLACE, NLM_F_REQUEST, NetlinkMessage,
    NetlinkPayload, Nla,
};
use rtnetlink::packet_route::RouteNetlinkMessage;
use rtnetlink::packet_route::tc::{TcAttribute, TcHandle, TcMessage, TcOption};

use super::error::NicError;
use super::link::require_interface;
use super::tx_queue::{Decision, KIND, Parent, decide};

/// TCA_OPTIONS: for the FIFOs a bare `struct tc_fifo_qopt { __u32 limit; }`, not nested.
const TCA_OPTIONS: u16 = 2;

/// What `apply` found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// Installed (or resized) ours; `replaced` is the kind that was there.
    Installed { replaced: Option<String> },
    /// Ours was already there with this limit.
    Unchanged,
    /// Left someone else's root qdisc in place.
    LeftForeign(String),
}

fn parent_handle(p: Parent) -> TcHandle {
    match p {
        Parent::Root => TcHandle::ROOT,
        Parent::Class(h) => TcHandle::from(h),
    }
}

fn netlink_err(what: String, e: impl std::fmt::Display) -> NicError {
    NicError::Netlink {
        what,
        detail: e.to_string(),
    }
}

/// Kind and FIFO limit of the qdisc at `parent` on interface `index`.
async fn current(
    rtnl: &rtnetlink::Handle,
    index: u32,
    parent: Parent,
) -> Result<Option<(String, Option<u32>)>, NicError> {
    let want = parent_handle(parent);
    let mut dump = rtnl.qdisc().get().index(index as i32).execute();
    while let Some(msg) = dump
        .try_next()
        .await
        .map_err(|e| netlink_err("reading qdiscs over rtnetlink".into(), e))?
    {
        if msg.header.index != index as i32 || msg.header.parent != want {
            continue;
        }
        let mut kind = None;
        let mut limit = None;
        for attr in &msg.attributes {
            match attr {
                TcAttribute::Kind(k) => kind = Some(k.clone()),
                TcAttribute::Options(opts) => {
                    for o in opts {
                        if let TcOption::Other(nla) = o
                            && nla.kind() == TCA_OPTIONS
                            && nla.value_len() >= 4
                        {
                            let mut v = vec![0u8; nla.value_len()];
                            nla.emit_value(&mut v);
                            limit = Some(u32::from_ne_bytes([v[0], v[1], v[2], v[3]]));
                        }
                    }
                }
                _ => {}
            }
        }
        return Ok(kind.map(|k| (k, limit)));
    }
    Ok(None)
}

async fn request(
    rtnl: &mut rtnetlink::Handle,
    msg: RouteNetlinkMessage,
    flags: u16,
    what: &str,
) -> Result<(), NicError> {
    let mut req = NetlinkMessage::from(msg);
    req.header.flags = NLM_F_REQUEST | NLM_F_ACK | flags;
    let mut resp = rtnl
        .request(req)
        .map_err(|e| netlink_err(what.to_string(), e))?;
    while let Some(m) = futures::StreamExt::next(&mut resp).await {
        if let NetlinkPayload::Error(e) = m.payload
            && let Some(code) = e.code
        {
            return Err(NicError::Io {
                what: what.to_string(),
                source: std::io::Error::from_raw_os_error(-code.get()),
            });
        }
    }
    Ok(())
}

/// Puts a head-drop FIFO of `limit` packets at `parent` unless `tx_queue::decide` says not to.
pub async fn apply_async(
    rtnl: &mut rtnetlink::Handle,
    iface: &str,
    parent: Parent,
    limit: u32,
) -> Result<Applied, NicError> {
    let index = require_interface(iface)?;
    let found = current(rtnl, index, parent).await?;
    match decide(parent, found.as_ref().map(|(k, l)| (k.as_str(), *l)), limit) {
        Decision::Keep => return Ok(Applied::Unchanged),
        Decision::Foreign(k) => return Ok(Applied::LeftForeign(k)),
        Decision::Install => {}
    }
    let mut msg = TcMessage::default();
    msg.header.index = index as i32;
    msg.header.parent = parent_handle(parent);
    msg.attributes.push(TcAttribute::Kind(KIND.into()));
    msg.attributes.push(TcAttribute::Other(DefaultNla::new(
        TCA_OPTIONS,
        limit.to_ne_bytes().to_vec(),
    )));
    request(
        rtnl,
        RouteNetlinkMessage::NewQueueDiscipline(msg),
        NLM_F_CREATE | NLM_F_REPLACE,
        &format!("installing a {KIND} queue (limit {limit}) at {parent} on {iface}"),
    )
    .await?;
    Ok(Applied::Installed {
        replaced: found.map(|(k, _)| k),
    })
}

/// Removes our queue from the root again, so the kernel's default comes back. Anything
/// else at the root, or a queue under a class, is left alone.
pub async fn remove_async(rtnl: &mut rtnetlink::Handle, iface: &str) -> Result<bool, NicError> {
    let index = require_interface(iface)?;
    match current(rtnl, index, Parent::Root).await? {
        Some((k, _)) if k == KIND => {}
        _ => return Ok(false),
    }
    let mut msg = TcMessage::default();
    msg.header.index = index as i32;
    msg.header.parent = TcHandle::ROOT;
    request(
        rtnl,
        RouteNetlinkMessage::DelQueueDiscipline(msg),
        0,
        &format!("removing the {KIND} queue from {iface}"),
    )
    .await?;
    Ok(true)
}

fn with_rtnl<T>(
    f: impl AsyncFnOnce(&mut rtnetlink::Handle) -> Result<T, NicError>,
) -> Result<T, NicError> {
    super::netlink_runtime()?.block_on(async {
        let (conn, mut rtnl, _) = rtnetlink::new_connection().map_err(|e| NicError::Io {
            what: "opening rtnetlink".into(),
            source: e,
        })?;
        tokio::spawn(conn);
        f(&mut rtnl).await
    })
}

/// Blocking `apply_async`, for the run shell (off the render thread).
pub fn apply(iface: &str, parent: Parent, limit: u32) -> Result<Applied, NicError> {
    with_rtnl(async |rtnl| apply_async(rtnl, iface, parent, limit).await)
}

/// Blocking `remove_async`.
pub fn remove(iface: &str) -> Result<bool, NicError> {
    with_rtnl(async |rtnl| remove_async(rtnl, iface).await)
}
