//! Sockets: multicast options, non-blocking `sendmmsg`, drop accounting. One `Output` per
//! pole: its encoder, its socket, its datagram batch and its counters.

mod admit;
pub mod counters;
mod halves;
mod pole;
mod ratelimit;
mod send;
mod socket;
mod split;

pub use split::WORKER_THREAD;

use std::sync::atomic::{AtomicBool, Ordering};

/// The show's packets wait in the player's head-drop queue (set by `app::tx_queue` when
/// its queue is in place, cleared when it is not): a new frame then pushes the oldest
/// datagrams out, so an output on a stopped link keeps sending (docs/nic.md, "Whole
/// frames", rule 3). One interface per player, so one flag.
static QUEUE_KEEPS_NEWEST: AtomicBool = AtomicBool::new(false);

pub fn set_queue_keeps_newest(yes: bool) {
    QUEUE_KEEPS_NEWEST.store(yes, Ordering::Relaxed);
}

pub fn queue_keeps_newest() -> bool {
    QUEUE_KEEPS_NEWEST.load(Ordering::Relaxed)
}

pub use halves::{Fill, HalfTimes};
pub use pole::{Output, OutputError, OutputOptions};
pub use ratelimit::RateLimit;
pub use send::{SendOutcome, Sender};
pub use socket::{SocketOptions, open_udp, set_dont_fragment, set_multicast_ifindex};
