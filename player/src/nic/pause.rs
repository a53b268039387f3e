//! PAUSE (802.3x flow control) over ethtool netlink: GET through the `ethtool` crate,
//! GET with ETHTOOL_FLAG_STATS and PAUSE_SET built from the crate's public types (the
//! crate has no SET and never sets the stats flag; docs/design.md, "PAUSE off").
//!
//! `pause_off` reads first and sets only when different, because on the Pi 4's bcmgenet a
//! set restarts autonegotiation (carrier drops for a couple of seconds); then it waits for
//! carrier and reads back. bcmgenet refuses a set with ENODEV until a PHY is attached (the
//! interface's first `up`), so refusals that mean "not yet" are retried within `--wait`.

use std::time::{Duration, Instant};

use ethtool::{
    EthtoolAttr, EthtoolCmd, EthtoolError, EthtoolHandle, EthtoolHeader, EthtoolMessage,
    EthtoolPauseAttr, EthtoolPauseStatAttr,
};
use futures::StreamExt;
use netlink_packet_core::{NLM_F_ACK, NLM_F_REQUEST, NetlinkMessage, NetlinkPayload};
use netlink_packet_generic::GenlMessage;

use super::{NicError, PauseSettings, driver_stats, link};

/// ETHTOOL_FLAG_STATS in ETHTOOL_A_HEADER_FLAGS: ask for the standard pause statistics.
const ETHTOOL_FLAG_STATS: u32 = 1 << 2;

/// A refusal from the kernel or driver: the errno, or a transport failure.
#[derive(Debug, Clone, PartialEq)]
pub enum OpError {
    Errno(i32),
    Other(String),
}

fn op_error(e: EthtoolError) -> OpError {
    match e {
        EthtoolError::NetlinkError(m) => match m.code {
            Some(c) => OpError::Errno(-c.get()),
            None => OpError::Other("netlink error without code".into()),
        },
        other => OpError::Other(other.to_string()),
    }
}

fn header(iface: &str, flags: Option<u32>) -> EthtoolAttr {
    let mut h = vec![EthtoolHeader::DevName(iface.to_string())];
    if let Some(f) = flags {
        h.push(EthtoolHeader::Flags(f));
    }
    EthtoolAttr::Pause(EthtoolPauseAttr::Header(h))
}

/// Send one request and collect the pause attributes of the replies.
async fn request(
    handle: &mut EthtoolHandle,
    msg: EthtoolMessage,
    flags: u16,
) -> Result<Vec<EthtoolPauseAttr>, OpError> {
    let mut m = NetlinkMessage::from(GenlMessage::from_payload(msg));
    m.header.flags = flags;
    let mut replies = handle.request(m).await.map_err(op_error)?;
    let mut attrs = Vec::new();
    while let Some(reply) = replies.next().await {
        let reply = reply.map_err(|e| OpError::Other(format!("decoding ethtool reply: {e}")))?;
        match reply.payload {
            NetlinkPayload::InnerMessage(genl) => {
                for nla in genl.payload.nlas {
                    if let EthtoolAttr::Pause(p) = nla {
                        attrs.push(p);
                    }
                }
            }
            NetlinkPayload::Error(e) => {
                if let Some(c) = e.code {
                    return Err(OpError::Errno(-c.get()));
                }
            }
            _ => {}
        }
    }
    Ok(attrs)
}

/// Standard pause statistics (ETHTOOL_A_PAUSE_STATS); each direction None when the
/// driver does not implement `get_pause_stats` (the kernel then omits it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StandardPauseStats {
    pub rx: Option<u64>,
    pub tx: Option<u64>,
}

/// `ethtool -a IF`, through the crate's own GET.
pub async fn get_settings(
    handle: &mut EthtoolHandle,
    iface: &str,
) -> Result<PauseSettings, OpError> {
    let msg = EthtoolMessage::new_pause_get(Some(iface));
    let attrs = request(handle, msg, NLM_F_REQUEST).await?;
    settings_from(&attrs).ok_or_else(|| OpError::Other("PAUSE reply without settings".into()))
}

fn settings_from(attrs: &[EthtoolPauseAttr]) -> Option<PauseSettings> {
    let mut s = PauseSettings::default();
    let mut seen = false;
    for a in attrs {
        match a {
            EthtoolPauseAttr::AutoNeg(v) => (s.autoneg, seen) = (*v, true),
            EthtoolPauseAttr::Rx(v) => (s.rx, seen) = (*v, true),
            EthtoolPauseAttr::Tx(v) => (s.tx, seen) = (*v, true),
            _ => {}
        }
    }
    seen.then_some(s)
}

/// `ethtool -I -a IF`: settings plus the standard statistics.
pub async fn get_with_stats(
    handle: &mut EthtoolHandle,
    iface: &str,
) -> Result<(Option<PauseSettings>, StandardPauseStats), OpError> {
    let msg = EthtoolMessage {
        cmd: EthtoolCmd::PauseGet,
        nlas: vec![header(iface, Some(ETHTOOL_FLAG_STATS))],
    };
    let attrs = request(handle, msg, NLM_F_REQUEST).await?;
    let mut stats = StandardPauseStats::default();
    for a in &attrs {
        if let EthtoolPauseAttr::Stats(list) = a {
            for s in list {
                match s {
                    EthtoolPauseStatAttr::Rx(v) => stats.rx = Some(*v),
                    EthtoolPauseStatAttr::Tx(v) => stats.tx = Some(*v),
                    EthtoolPauseStatAttr::Other(_) => {}
                }
            }
        }
    }
    Ok((settings_from(&attrs), stats))
}

/// ETHTOOL_MSG_PAUSE_SET. Kernel numbering: PAUSE_SET (user->kernel) and PAUSE_GET_REPLY
/// (kernel->user) are both 22, so the crate's `PauseGetReply` command *is* a PAUSE_SET;
/// the kernel validates it against the PAUSE_SET policy.
pub async fn set_settings(
    handle: &mut EthtoolHandle,
    iface: &str,
    want: PauseSettings,
) -> Result<(), OpError> {
    let msg = EthtoolMessage {
        cmd: EthtoolCmd::PauseGetReply,
        nlas: vec![
            header(iface, None),
            EthtoolAttr::Pause(EthtoolPauseAttr::AutoNeg(want.autoneg)),
            EthtoolAttr::Pause(EthtoolPauseAttr::Rx(want.rx)),
            EthtoolAttr::Pause(EthtoolPauseAttr::Tx(want.tx)),
        ],
    };
    request(handle, msg, NLM_F_REQUEST | NLM_F_ACK)
        .await
        .map(|_| ())
}

/// What `pause-off` does given the current settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PauseAction {
    /// Already autoneg/rx/tx off: do not touch the link (a set would renegotiate it).
    Nothing,
    /// Set autoneg/rx/tx off. `autoneg off` matters: with it on, the next link flap
    /// renegotiates flow control back on.
    SetOff,
}

pub fn decide_pause_off(current: PauseSettings) -> PauseAction {
    if current == PauseSettings::OFF {
        PauseAction::Nothing
    } else {
        PauseAction::SetOff
    }
}

/// Whether a refusal may go away by itself: bcmgenet answers ENODEV until its PHY is
/// attached at the first `up`; some drivers say ENETDOWN/EAGAIN/EBUSY while the link is
/// being brought up. Anything else (EOPNOTSUPP, EPERM, EINVAL...) is final.
pub fn is_transient(errno: i32) -> bool {
    matches!(
        errno,
        libc::ENODEV | libc::ENETDOWN | libc::EAGAIN | libc::EBUSY
    )
}

/// Waiting for carrier after a set, decided from one observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CarrierWait {
    Done,
    KeepWaiting,
    /// The interface is administratively down: carrier cannot come; do not wait.
    NotUp,
}

/// After a set, a renegotiating driver drops carrier some hundreds of ms later; so
/// "carrier up" only counts once carrier has changed, or after `quiet` passed without
/// any change (drivers such as e1000 apply PAUSE without touching the link).
pub fn carrier_wait(
    admin_up: bool,
    carrier: Option<bool>,
    changes_before: Option<u64>,
    changes_now: Option<u64>,
    since_set: Duration,
    quiet: Duration,
) -> CarrierWait {
    if !admin_up {
        return CarrierWait::NotUp;
    }
    let changed = matches!((changes_before, changes_now), (Some(a), Some(b)) if b != a);
    match carrier {
        Some(true) if changed || since_set >= quiet => CarrierWait::Done,
        // No carrier information at all: nothing to wait for.
        None if since_set >= quiet => CarrierWait::Done,
        _ => CarrierWait::KeepWaiting,
    }
}

/// `nic pause-off --json` (defined in pfx-api, read by the fleet agent).
pub use pfx_api::nic::PauseOffOutcome;

/// How long after a set with no carrier change we assume the driver did not renegotiate.
const CARRIER_QUIET: Duration = Duration::from_secs(3);
const RETRY_EVERY: Duration = Duration::from_millis(500);

/// Turn PAUSE off on `iface` (autoneg, rx, tx), retrying transient refusals for up to
/// `wait`. Blocking; runs its own current-thread runtime.
pub fn pause_off(iface: &str, wait: Duration) -> Result<PauseOffOutcome, NicError> {
    super::netlink_runtime()?.block_on(pause_off_async(iface, wait))
}

fn io_err(what: &str, e: std::io::Error) -> NicError {
    NicError::Io {
        what: what.into(),
        source: e,
    }
}

pub async fn pause_off_async(iface: &str, wait: Duration) -> Result<PauseOffOutcome, NicError> {
    let start = Instant::now();
    link::require_interface(iface)?;
    let driver = driver_stats::driver_name(iface).unwrap_or_else(|_| "unknown".into());
    let (conn, mut eth, _) =
        ethtool::new_connection().map_err(|e| io_err("opening ethtool netlink", e))?;
    tokio::spawn(conn);
    let (rconn, rtnl, _) =
        rtnetlink::new_connection().map_err(|e| io_err("opening rtnetlink", e))?;
    tokio::spawn(rconn);

    let refused = |op: &'static str, err: OpError| match err {
        OpError::Errno(errno) => NicError::Driver {
            iface: iface.to_string(),
            op,
            errno,
            driver: driver.clone(),
        },
        OpError::Other(detail) => NicError::Netlink {
            what: format!("{op} on {iface}"),
            detail,
        },
    };

    let mut retries = 0u32;
    let (before, changed) = loop {
        let attempt = read_then_set(&mut eth, &rtnl, iface);
        match attempt.await {
            Ok((cur, changed, changes_before)) => {
                if changed {
                    wait_for_carrier(&rtnl, iface, changes_before, start, wait).await;
                }
                break (cur, changed);
            }
            Err((op, OpError::Errno(errno))) if is_transient(errno) => {
                if start.elapsed() + RETRY_EVERY > wait {
                    return Err(NicError::WaitExpired {
                        iface: iface.to_string(),
                        waited_s: start.elapsed().as_secs_f64(),
                        last: refused(op, OpError::Errno(errno)).to_string(),
                    });
                }
                retries += 1;
                tokio::time::sleep(RETRY_EVERY).await;
            }
            Err((op, e)) => return Err(refused(op, e)),
        }
    };

    let after = get_settings(&mut eth, iface)
        .await
        .map_err(|e| refused("PAUSE read-back", e))?;
    if after != PauseSettings::OFF {
        return Err(NicError::NotApplied {
            iface: iface.to_string(),
            read_back: after.to_string(),
            driver,
        });
    }
    let info = link::link_info(&rtnl, iface).await.ok();
    let carrier = info.as_ref().and_then(|i| i.stats.carrier);
    let note = match (&info, carrier) {
        (Some(i), _) if !i.admin_up => Some("interface is down: carrier not awaited".to_string()),
        (_, Some(false)) => Some(format!(
            "no carrier within the wait ({:.0} s)",
            wait.as_secs_f64()
        )),
        _ => None,
    };
    Ok(PauseOffOutcome {
        interface: iface.to_string(),
        driver,
        before,
        after,
        changed,
        retries,
        waited_s: start.elapsed().as_secs_f64(),
        carrier,
        note,
    })
}

/// One attempt: read, and set only when different. Returns the settings read, whether a
/// set was sent, and carrier_changes just before the set.
async fn read_then_set(
    eth: &mut EthtoolHandle,
    rtnl: &rtnetlink::Handle,
    iface: &str,
) -> Result<(PauseSettings, bool, Option<u64>), (&'static str, OpError)> {
    let cur = get_settings(eth, iface)
        .await
        .map_err(|e| ("PAUSE get", e))?;
    if decide_pause_off(cur) == PauseAction::Nothing {
        return Ok((cur, false, None));
    }
    let changes_before = link::link_info(rtnl, iface)
        .await
        .ok()
        .and_then(|i| i.stats.carrier_changes);
    set_settings(eth, iface, PauseSettings::OFF)
        .await
        .map_err(|e| ("PAUSE set", e))?;
    Ok((cur, true, changes_before))
}

async fn wait_for_carrier(
    rtnl: &rtnetlink::Handle,
    iface: &str,
    changes_before: Option<u64>,
    start: Instant,
    wait: Duration,
) {
    let set_at = Instant::now();
    // At least the quiet period, even if --wait is shorter: otherwise the read-back
    // could happen in the middle of a renegotiation.
    let deadline = start + wait.max(CARRIER_QUIET + Duration::from_secs(1));
    while Instant::now() < deadline {
        let Ok(info) = link::link_info(rtnl, iface).await else {
            return;
        };
        match carrier_wait(
            info.admin_up,
            info.stats.carrier,
            changes_before,
            info.stats.carrier_changes,
            set_at.elapsed(),
            CARRIER_QUIET,
        ) {
            CarrierWait::KeepWaiting => tokio::time::sleep(Duration::from_millis(100)).await,
            CarrierWait::Done | CarrierWait::NotUp => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PI4_DEFAULT: PauseSettings = PauseSettings {
        autoneg: true,
        rx: true,
        tx: true,
    };

    #[test]
    fn mock_bcmgenet_defaults_are_set_off() {
        assert_eq!(decide_pause_off(PI4_DEFAULT), PauseAction::SetOff);
    }

    #[test]
    fn already_off_is_left_alone() {
        // A set on bcmgenet renegotiates the link; never send one that changes nothing.
        assert_eq!(decide_pause_off(PauseSettings::OFF), PauseAction::Nothing);
    }

    #[test]
    fn autoneg_alone_still_needs_a_set() {
        let s = PauseSettings {
            autoneg: true,
            rx: false,
            tx: false,
        };
        assert_eq!(decide_pause_off(s), PauseAction::SetOff);
        let s = PauseSettings {
            autoneg: false,
            rx: true,
            tx: false,
        };
        assert_eq!(decide_pause_off(s), PauseAction::SetOff);
    }

    #[test]
    fn mock_bcmgenet_enodev_before_first_up_is_retried() {
        assert!(is_transient(libc::ENODEV));
        assert!(is_transient(libc::ENETDOWN));
    }

    #[test]
    fn mock_virtio_eopnotsupp_is_final() {
        assert!(!is_transient(libc::EOPNOTSUPP));
        assert!(!is_transient(libc::EPERM));
        assert!(!is_transient(libc::EINVAL));
    }

    #[test]
    fn mock_bcmgenet_renegotiation_waits_for_the_drop_and_return() {
        let q = Duration::from_secs(3);
        let ms = Duration::from_millis;
        // Right after the set, carrier still up and unchanged: the drop has not come yet.
        assert_eq!(
            carrier_wait(true, Some(true), Some(2), Some(2), ms(100), q),
            CarrierWait::KeepWaiting
        );
        // Dropped.
        assert_eq!(
            carrier_wait(true, Some(false), Some(2), Some(3), ms(900), q),
            CarrierWait::KeepWaiting
        );
        // Back.
        assert_eq!(
            carrier_wait(true, Some(true), Some(2), Some(4), ms(2500), q),
            CarrierWait::Done
        );
    }

    #[test]
    fn mock_e1000_no_renegotiation_done_after_quiet_period() {
        let q = Duration::from_secs(3);
        assert_eq!(
            carrier_wait(
                true,
                Some(true),
                Some(1),
                Some(1),
                Duration::from_secs(3),
                q
            ),
            CarrierWait::Done
        );
    }

    #[test]
    fn admin_down_does_not_wait_for_carrier() {
        let q = Duration::from_secs(3);
        assert_eq!(
            carrier_wait(false, Some(false), Some(1), Some(1), Duration::ZERO, q),
            CarrierWait::NotUp
        );
    }

    #[test]
    fn settings_parse_from_attrs() {
        let attrs = vec![
            EthtoolPauseAttr::Header(vec![]),
            EthtoolPauseAttr::AutoNeg(true),
            EthtoolPauseAttr::Rx(false),
            EthtoolPauseAttr::Tx(true),
        ];
        assert_eq!(
            settings_from(&attrs),
            Some(PauseSettings {
                autoneg: true,
                rx: false,
                tx: true
            })
        );
        assert_eq!(settings_from(&[EthtoolPauseAttr::Header(vec![])]), None);
    }
}
