//! Sockets: multicast options, non-blocking `sendmmsg`, drop accounting.

pub mod counters;
