//! The run shell's side of the transmit-queue policy (`tx_queue:` in the show config):
//! installs the head-drop queue when the show starts or is reloaded, removes it when the
//! player stops, and says in the log what it did and why when it could not.

use crate::config::show::{Show, TxQueuePolicy};
use crate::nic::qdisc::{self, Applied};
use crate::nic::txqueue::{self, Parent};

/// Removes the queue on drop if this player put it at the root.
pub struct TxQueue {
    iface: String,
    installed_root: bool,
}

impl Drop for TxQueue {
    fn drop(&mut self) {
        if !self.installed_root {
            return;
        }
        match qdisc::remove(&self.iface) {
            Ok(_) => {
                tracing::debug!(interface = %self.iface, "tx queue: the kernel's default is back")
            }
            Err(e) => tracing::warn!(interface = %self.iface, "tx queue: cannot remove ours: {e}"),
        }
    }
}

fn sysfs(iface: &str, what: &str) -> Option<String> {
    std::fs::read_to_string(format!("/sys/class/net/{iface}/{what}"))
        .ok()
        .map(|s| s.trim().to_string())
}

/// Applies the show's policy; never fails the show (a player without CAP_NET_ADMIN still
/// plays, with the kernel's queue, and says so).
/// `previous` is the guard of the show this one replaces (SIGHUP): on another interface it
/// is dropped, which gives that interface its default back; on the same one, the new guard
/// takes over its duty to clean up.
pub fn apply(show: &Show, previous: Option<TxQueue>) -> TxQueue {
    let iface = show.config.interface.clone();
    let had_root = match previous {
        Some(mut p) if p.iface == iface => std::mem::take(&mut p.installed_root),
        _ => false,
    };
    let none = || TxQueue {
        iface: iface.clone(),
        installed_root: had_root,
    };
    if show.config.tx_queue == TxQueuePolicy::Kernel {
        tracing::info!(interface = %iface, "tx queue: left as the kernel's (tx_queue: kernel)");
        // A reload from `newest` to `kernel`: the guard's drop gives the default back.
        drop(none());
        return TxQueue {
            iface,
            installed_root: false,
        };
    }
    // Loopback never stalls, and a host's lo carries everything else on it too.
    if sysfs(&iface, "type").as_deref() == Some("772") {
        tracing::debug!(interface = %iface, "tx queue: loopback, left alone");
        return none();
    }
    let parent = match show.config.tx_queue_parent.as_deref().map(Parent::parse) {
        None => Parent::Root,
        Some(Ok(p)) => p,
        Some(Err(e)) => {
            // `ShowConfig::resolve` already refused this; kept for a Show built otherwise.
            tracing::warn!("tx_queue_parent: {e}; tx queue left as it is");
            return none();
        }
    };
    let mtu = sysfs(&iface, "mtu")
        .and_then(|m| m.parse().ok())
        .unwrap_or(1500);
    let limit = txqueue::limit_packets(show.outputs.iter().map(|o| &o.profile), mtu);
    match qdisc::apply(&iface, parent, limit) {
        Ok(Applied::Installed { replaced }) => {
            tracing::info!(
                interface = %iface,
                %parent,
                limit,
                replaced = replaced.as_deref().unwrap_or("nothing"),
                "tx queue: {} of one frame ({limit} packets); a stalled link keeps only the newest frame",
                txqueue::KIND
            );
            TxQueue {
                iface,
                installed_root: parent == Parent::Root,
            }
        }
        Ok(Applied::Unchanged) => TxQueue {
            installed_root: had_root || parent == Parent::Root,
            iface,
        },
        Ok(Applied::LeftForeign(kind)) => {
            tracing::warn!(
                interface = %iface,
                "tx queue: the root qdisc is `{kind}`, which someone installed on purpose; left in place. \
                 After a stall the poles get what it queued, oldest first. To keep only the newest frame, \
                 set tx_queue_parent to the class the show's traffic goes through"
            );
            none()
        }
        Err(e) => {
            let hint = if e.errno() == Some(libc::EPERM) {
                " (needs CAP_NET_ADMIN, which the pfx-player service has)"
            } else {
                ""
            };
            tracing::warn!(
                interface = %iface,
                "tx queue: left as it is: {e}{hint}. After a stall the poles get a backlog of old frames first; \
                 set `tx_queue: kernel` to accept that and silence this"
            );
            none()
        }
    }
}
