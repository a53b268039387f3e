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

pub use halves::{Fill, HalfTimes};
pub use pole::{Output, OutputError, OutputOptions};
pub use ratelimit::RateLimit;
pub use send::{SendOutcome, Sender};
pub use socket::{SocketOptions, open_udp, set_dont_fragment, set_multicast_ifindex};
