//! Protocol encoders (sACN, DDP, bigPacket): the pure `pfx-wire` crate, re-exported so
//! `wire::Datagrams`, `wire::sacn` and the rest keep their paths.

pub use pfx_wire::*;
