//! Protocol encoders. Pure: a pixel slice in, datagrams into caller-owned buffers out; no
//! sockets, no allocation per frame.

pub mod bigpacket;
pub mod ddp;
pub mod sacn;
