//! The player's side of the transmit-queue policy (`tx_queue:` in the show config):
//! installs the head-drop queue when the show starts or is reloaded, puts it back when the
//! interface was re-created (a new interface gets the kernel's default queue), removes it
//! when the player stops, and says in the log what it did and why when it could not.

use std::time::{Duration, Instant};

use crate::config::show::{Show, TxQueuePolicy};
use crate::nic::qdisc::{self, Applied};
use crate::nic::tx_queue::{self, Parent};
use crate::sys::net;

/// How often `refresh` looks whether the queue is still in place.
const REFRESH_EVERY: Duration = Duration::from_secs(2);

/// The queue this player keeps on its show interface. Removes it on drop if this player put
/// it at the root.
pub struct TxQueue {
    iface: String,
    /// Where and how big, while the policy is in force; None when the queue is left alone.
    plan: Option<(Parent, u32)>,
    installed_root: bool,
    last_check: Instant,
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

/// What the show's policy asks for on its interface.
enum Plan {
    /// `tx_queue: kernel`.
    Kernel,
    /// Loopback never stalls, and a host's lo carries everything else on it too.
    Loopback,
    Queue(Parent, u32),
}

fn plan(show: &Show) -> Plan {
    let iface = &show.config.interface;
    if show.config.tx_queue == TxQueuePolicy::Kernel {
        return Plan::Kernel;
    }
    if net::is_loopback(iface) {
        return Plan::Loopback;
    }
    let mtu = net::mtu(iface).unwrap_or(1500);
    // One frame of every output, in the sizes its protocol sends.
    let frame = show
        .outputs
        .iter()
        .flat_map(|o| o.profile.frame_shape().datagrams);
    Plan::Queue(show.tx_queue_parent, tx_queue::limit_packets(frame, mtu))
}

/// What `apply` would put on the interface, in words (for `run --check`).
pub fn describe(show: &Show) -> String {
    match plan(show) {
        Plan::Kernel => "tx queue: the kernel's (tx_queue: kernel)".into(),
        Plan::Loopback => "tx queue: none (loopback)".into(),
        Plan::Queue(parent, limit) => {
            format!(
                "tx queue: {} limit {limit} packets at {parent}",
                tx_queue::KIND
            )
        }
    }
}

/// Applies the show's policy; never fails the show (a player without CAP_NET_ADMIN still
/// plays, with the kernel's queue, and says so). `previous` is the guard of the show this
/// one replaces (SIGHUP): on another interface it is dropped, which gives that interface
/// its default back; on the same one, the new guard takes over its duty to clean up.
pub fn apply(show: &Show, previous: Option<TxQueue>) -> TxQueue {
    let iface = show.config.interface.clone();
    // Until the queue is known to be in place.
    crate::output::set_queue_keeps_newest(false);
    let mut q = TxQueue {
        iface: iface.clone(),
        plan: None,
        installed_root: false,
        last_check: Instant::now(),
    };
    if let Some(mut p) = previous
        && p.iface == iface
    {
        q.installed_root = std::mem::take(&mut p.installed_root);
    }
    match plan(show) {
        Plan::Kernel => {
            tracing::info!(interface = %iface, "tx queue: left as the kernel's (tx_queue: kernel)");
            // A reload from `newest` to `kernel`: dropping `q` gives the default back.
            let kept = TxQueue {
                iface,
                plan: None,
                installed_root: false,
                last_check: Instant::now(),
            };
            drop(q);
            kept
        }
        Plan::Loopback => {
            tracing::debug!(interface = %iface, "tx queue: loopback, left alone");
            q
        }
        Plan::Queue(parent, limit) => {
            q.plan = Some((parent, limit));
            q.install(false);
            q
        }
    }
}

impl TxQueue {
    fn install(&mut self, again: bool) {
        let Some((parent, limit)) = self.plan else {
            return;
        };
        let iface = &self.iface;
        match qdisc::apply(iface, parent, limit) {
            Ok(Applied::Installed { replaced }) => {
                tracing::info!(
                    interface = %iface,
                    %parent,
                    limit,
                    replaced = replaced.as_deref().unwrap_or("nothing"),
                    "tx queue: {} of one frame ({limit} packets){}; a stalled link keeps only the newest frame",
                    tx_queue::KIND,
                    if again { ", put back" } else { "" },
                );
                self.installed_root |= parent == Parent::Root;
                crate::output::set_queue_keeps_newest(true);
            }
            Ok(Applied::Unchanged) => {
                self.installed_root |= parent == Parent::Root;
                crate::output::set_queue_keeps_newest(true);
            }
            Ok(Applied::LeftForeign(kind)) => {
                crate::output::set_queue_keeps_newest(false);
                tracing::warn!(
                    interface = %iface,
                    "tx queue: the root qdisc is `{kind}`, which someone installed on purpose; left in place. \
                     After a stall the poles get what it queued, oldest first. To keep only the newest frame, \
                     set tx_queue_parent to the class the show's traffic goes through"
                );
                self.plan = None;
            }
            // The interface is away (the outputs say so, rate-limited); try again later.
            Err(e) if again => {
                crate::output::set_queue_keeps_newest(false);
                tracing::debug!(interface = %iface, "tx queue: {e}")
            }
            Err(e) => {
                crate::output::set_queue_keeps_newest(false);
                let hint = if e.errno() == Some(libc::EPERM) {
                    self.plan = None;
                    " (needs CAP_NET_ADMIN, which the pfx-player service has)"
                } else {
                    ""
                };
                tracing::warn!(
                    interface = %iface,
                    "tx queue: left as it is: {e}{hint}. After a stall the poles get a backlog of old frames first; \
                     set `tx_queue: kernel` to accept that and silence this"
                );
            }
        }
    }

    /// Puts the queue back if it went away (the interface was re-created). Cheap when it is
    /// in place: one netlink dump every REFRESH_EVERY. Called from the supervisor loop.
    pub fn refresh(&mut self, now: Instant) {
        if self.plan.is_none() || now.duration_since(self.last_check) < REFRESH_EVERY {
            return;
        }
        self.last_check = now;
        self.install(true);
    }
}
