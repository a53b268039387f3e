//! Protocol encoders. Pure: a pixel slice in, datagrams into caller-owned buffers out; no
//! sockets, no allocation per frame.
//!
//! Each protocol also says how big its frames are (`FrameShape`): the transmit-queue
//! limit, the DF/MTU decision, the send buffer and the batch are all sized from that, so
//! the sizes and the encoder cannot disagree.

pub mod bigpacket;
pub mod ddp;
pub mod sacn;

use core::net::SocketAddrV4;

/// A batch of datagrams for one output and one frame, in one buffer allocated up front:
/// `slots` datagrams of at most `slot_len` bytes each. Encoders fill it; `output` hands it
/// to `sendmmsg`. Slot addresses never move, so the send path can point iovecs at them.
#[derive(Debug)]
pub struct Datagrams {
    buf: Box<[u8]>,
    slot_len: usize,
    lens: Vec<usize>,
    dests: Vec<SocketAddrV4>,
}

/// The encoder was handed a batch that cannot take what it must emit: too few free slots,
/// or slots shorter than its datagrams. A programming error (batches are sized from the
/// protocol's `FrameShape`), reported rather than panicking; the batch is left as it was.
///
/// An sACN packet the `sacn` crate refuses to pack comes back as this too, with nothing
/// pushed for it (only a discovery list that wraps past universe 65535 is refused, and the
/// config allows universes 1..=63999 only).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "datagram batch full: needs {needed} slots of {datagram_len} bytes, has {slots} of {slot_len}"
)]
pub struct BatchFull {
    /// Slots the batch needed: the datagrams already in it plus the encoder's. A count of
    /// datagrams for every protocol, never bytes.
    pub needed: usize,
    /// Slots the batch has.
    pub slots: usize,
    /// Bytes of the largest datagram the encoder had to place.
    pub datagram_len: usize,
    /// Bytes per slot.
    pub slot_len: usize,
}

impl Datagrams {
    pub fn new(slots: usize, slot_len: usize) -> Datagrams {
        Datagrams {
            buf: vec![0u8; slots * slot_len].into_boxed_slice(),
            slot_len,
            lens: Vec::with_capacity(slots),
            dests: Vec::with_capacity(slots),
        }
    }

    pub fn clear(&mut self) {
        self.lens.clear();
        self.dests.clear();
    }

    pub fn len(&self) -> usize {
        self.lens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lens.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.buf.len() / self.slot_len.max(1)
    }

    pub fn slot_len(&self) -> usize {
        self.slot_len
    }

    /// Fails unless `n` more datagrams of up to `datagram_len` bytes fit; encoders call
    /// this before writing anything, so a batch is never left half-written.
    pub fn reserve(&self, n: usize, datagram_len: usize) -> Result<(), BatchFull> {
        if self.len() + n > self.capacity() || datagram_len > self.slot_len {
            return Err(self.full(n, datagram_len));
        }
        Ok(())
    }

    /// The error for `n` more datagrams of up to `datagram_len` bytes.
    pub fn full(&self, n: usize, datagram_len: usize) -> BatchFull {
        BatchFull {
            needed: self.len() + n,
            slots: self.capacity(),
            datagram_len,
            slot_len: self.slot_len,
        }
    }

    /// Appends a datagram written by `fill`, which gets the whole free slot and returns how
    /// many bytes it used. The caller has `reserve`d.
    pub fn push_with(&mut self, dest: SocketAddrV4, fill: impl FnOnce(&mut [u8]) -> usize) {
        self.try_push_with(dest, |slot| Some(fill(slot)));
    }

    /// Like `push_with`, but `fill` may fail (`None`): then nothing is pushed and the batch
    /// holds what it held before. Returns whether a datagram was pushed.
    pub fn try_push_with(
        &mut self,
        dest: SocketAddrV4,
        fill: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> bool {
        let i = self.lens.len();
        let slot = &mut self.buf[i * self.slot_len..(i + 1) * self.slot_len];
        let Some(n) = fill(slot) else {
            return false;
        };
        self.lens.push(n.min(self.slot_len));
        self.dests.push(dest);
        true
    }

    /// Drops the datagrams after the first `n` (an encoder undoing a frame it could not
    /// finish).
    pub fn truncate(&mut self, n: usize) {
        self.lens.truncate(n);
        self.dests.truncate(n);
    }

    pub fn get(&self, i: usize) -> (&[u8], SocketAddrV4) {
        let start = i * self.slot_len;
        (&self.buf[start..start + self.lens[i]], self.dests[i])
    }

    pub fn iter(&self) -> impl Iterator<Item = (&[u8], SocketAddrV4)> {
        (0..self.len()).map(|i| self.get(i))
    }

    /// Total payload bytes in the batch.
    pub fn bytes(&self) -> usize {
        self.lens.iter().sum()
    }
}

/// How one output's datagrams look on the wire, by the protocol's own rules. Computed once
/// when an output is configured, never per frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameShape {
    /// UDP payload size of each datagram of one frame, in sending order.
    pub datagrams: Vec<usize>,
    /// Datagrams the output's batch must hold at once: one frame's, or more when its
    /// housekeeping (sACN universe discovery) takes more.
    pub slots: usize,
    /// Bytes per batch slot: the largest datagram the output ever sends.
    pub slot_len: usize,
}

impl FrameShape {
    /// Datagrams per frame.
    pub fn per_frame(&self) -> usize {
        self.datagrams.len()
    }

    /// The largest datagram the output ever sends (frames and housekeeping).
    pub fn largest_datagram(&self) -> usize {
        self.slot_len
    }

    /// An empty batch that holds what this output sends at once.
    pub fn batch(&self) -> Datagrams {
        Datagrams::new(self.slots, self.slot_len)
    }
}

/// The IPv4 (20) and UDP (8) headers around each datagram.
pub const IPV4_UDP_HEADERS: usize = 28;

/// Packets on the wire for one UDP datagram of `payload` bytes over a link of `mtu` bytes:
/// IPv4 fragments carry multiples of 8 bytes of the UDP datagram (its header included).
pub fn ipv4_packets(payload: usize, mtu: usize) -> usize {
    const IP: usize = 20;
    const UDP: usize = 8;
    let mtu = mtu.max(IP + 8);
    if payload + IPV4_UDP_HEADERS <= mtu {
        return 1;
    }
    let per_fragment = (mtu - IP) / 8 * 8;
    (payload + UDP).div_ceil(per_fragment)
}

#[cfg(test)]
mod ipv4_tests {
    use super::ipv4_packets;

    #[test]
    fn fragments_follow_ipv4_rules() {
        // 1472 bytes of UDP payload is the most one 1500-byte packet carries.
        assert_eq!(ipv4_packets(1472, 1500), 1);
        assert_eq!(ipv4_packets(1473, 1500), 2);
        // 1480 bytes of UDP datagram per fragment: 8 + 2952 = 2960 = two full fragments.
        assert_eq!(ipv4_packets(2952, 1500), 2);
        assert_eq!(ipv4_packets(2953, 1500), 3);
        assert_eq!(ipv4_packets(65507, 1500), 45);
        assert_eq!(ipv4_packets(1450, 1400), 2);
    }
}

#[cfg(test)]
mod shape_tests;

#[cfg(test)]
mod batch_tests;
