//! bigPacket v1 encoder: one datagram per pole per frame (docs/protocols/bigpacket.md).

use core::net::SocketAddrV4;

use super::{BatchFull, Datagrams, FrameShape};

pub const PORT: u16 = 5599;
pub const MAGIC: [u8; 4] = *b"BGPK";
pub const VERSION: u8 = 1;
pub const FLAG_END: u8 = 0x01;
pub const FORMAT_RGB8: u8 = 1;
pub const FORMAT_RGBW8: u8 = 2;

/// Field offsets, as in the spec's table.
mod field {
    use std::ops::Range;
    pub const MAGIC: Range<usize> = 0..4;
    pub const VERSION: usize = 4;
    pub const FLAGS: usize = 5;
    pub const FORMAT: usize = 6;
    pub const HEADER_LEN: usize = 7;
    pub const POLE_ID: Range<usize> = 8..10;
    pub const PIXELS: Range<usize> = 10..12;
    pub const SEQUENCE: Range<usize> = 12..16;
    pub const TIMESTAMP: Range<usize> = 16..24;
    pub const PAYLOAD_LEN: Range<usize> = 24..26;
    pub const RESERVED: Range<usize> = 26..28;
    pub const CRC: Range<usize> = 28..32;
}

pub const HEADER_LEN: usize = field::CRC.end;
/// Largest UDP payload over IPv4 minus our header.
pub const MAX_PAYLOAD: usize = 65507 - HEADER_LEN;

/// The one datagram a frame of a pole of `channels` bytes (whole pixels) takes.
pub fn frame_shape(channels: usize) -> FrameShape {
    let len = Encoder::datagram_len(channels);
    FrameShape {
        datagrams: vec![len],
        slots: 1,
        slot_len: len,
    }
}

/// Per-pole encoder state: the frame sequence.
#[derive(Debug, Clone)]
pub struct Encoder {
    pole_id: u16,
    format: u8,
    bytes_per_pixel: usize,
    sequence: u32,
}

impl Encoder {
    pub fn new(pole_id: u16, rgbw: bool) -> Encoder {
        let (format, bytes_per_pixel) = if rgbw {
            (FORMAT_RGBW8, 4)
        } else {
            (FORMAT_RGB8, 3)
        };
        Encoder {
            pole_id,
            format,
            bytes_per_pixel,
            sequence: 0,
        }
    }

    /// Datagram size for a pole of `channels` bytes (whole pixels).
    pub fn datagram_len(channels: usize) -> usize {
        HEADER_LEN + channels
    }

    /// Emits one frame. `pixels` is in wire colour order, whole pixels; `timestamp_us` is
    /// the sender's CLOCK_REALTIME in µs.
    pub fn encode(
        &mut self,
        pixels: &[u8],
        timestamp_us: u64,
        flags: u8,
        dest: SocketAddrV4,
        out: &mut Datagrams,
    ) -> Result<(), BatchFull> {
        let len = HEADER_LEN + pixels.len();
        out.reserve(1, len)?;
        if pixels.len() > MAX_PAYLOAD {
            return Err(out.full(1, len));
        }
        let pixel_count = (pixels.len() / self.bytes_per_pixel) as u16;
        let payload_len = pixel_count as usize * self.bytes_per_pixel;
        let payload = &pixels[..payload_len];
        let sequence = self.sequence;
        self.sequence = self.sequence.wrapping_add(1);
        let (pole_id, format) = (self.pole_id, self.format);
        out.push_with(dest, |b| {
            b[field::MAGIC].copy_from_slice(&MAGIC);
            b[field::VERSION] = VERSION;
            b[field::FLAGS] = flags;
            b[field::FORMAT] = format;
            b[field::HEADER_LEN] = HEADER_LEN as u8;
            b[field::POLE_ID].copy_from_slice(&pole_id.to_be_bytes());
            b[field::PIXELS].copy_from_slice(&pixel_count.to_be_bytes());
            b[field::SEQUENCE].copy_from_slice(&sequence.to_be_bytes());
            b[field::TIMESTAMP].copy_from_slice(&timestamp_us.to_be_bytes());
            b[field::PAYLOAD_LEN].copy_from_slice(&(payload_len as u16).to_be_bytes());
            b[field::RESERVED].fill(0);
            b[field::CRC].copy_from_slice(&crc32fast::hash(payload).to_be_bytes());
            b[HEADER_LEN..HEADER_LEN + payload_len].copy_from_slice(payload);
            HEADER_LEN + payload_len
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The worked example of docs/protocols/bigpacket.md, byte for byte.
    const EXAMPLE: [u8; 38] = [
        0x42, 0x47, 0x50, 0x4B, // magic
        0x01, // version
        0x00, // flags
        0x01, // RGB8
        0x20, // header length 32
        0x00, 0x03, // pole id 3
        0x00, 0x02, // 2 pixels
        0x00, 0x00, 0x00, 0x07, // sequence 7
        0x00, 0x06, 0x0A, 0x24, 0x18, 0x1E, 0x40, 0x00, // 1.7e15 µs
        0x00, 0x06, // payload length
        0x00, 0x00, // reserved
        0x43, 0x87, 0x7D, 0xA9, // CRC-32 of the payload
        0xFF, 0x00, 0x00, 0x00, 0x80, 0xFF,
    ];

    fn dest() -> SocketAddrV4 {
        SocketAddrV4::new([239, 255, 80, 1].into(), PORT)
    }

    #[test]
    fn emit_matches_spec_example() {
        let mut out = Datagrams::new(1, 64);
        // Poison the slot so a byte the encoder forgets to write shows up.
        out.push_with(dest(), |b| {
            b.fill(0xa5);
            0
        });
        out.clear();
        let mut enc = Encoder::new(3, false);
        enc.sequence = 7;
        enc.encode(
            &[0xFF, 0, 0, 0, 0x80, 0xFF],
            1_700_000_000_000_000,
            0,
            dest(),
            &mut out,
        )
        .unwrap();
        assert_eq!(out.get(0).0, &EXAMPLE[..]);
        assert_eq!(out.get(0).1, dest());
        assert_eq!(enc.sequence, 8);
    }

    #[test]
    fn sequence_wraps_and_partial_pixel_is_not_sent() {
        let mut out = Datagrams::new(2, 64);
        let mut enc = Encoder::new(0, false);
        enc.sequence = u32::MAX;
        enc.encode(&[1, 2, 3, 4], 0, FLAG_END, dest(), &mut out)
            .unwrap();
        enc.encode(&[1, 2, 3], 0, 0, dest(), &mut out).unwrap();
        let (a, _) = out.get(0);
        assert_eq!(&a[12..16], &u32::MAX.to_be_bytes());
        assert_eq!(a[5], FLAG_END);
        assert_eq!(&a[10..12], &[0, 1]); // one whole pixel; the stray byte is dropped
        assert_eq!(a.len(), HEADER_LEN + 3);
        assert_eq!(&out.get(1).0[12..16], &[0, 0, 0, 0]);
    }

    #[test]
    fn full_batch_is_an_error_not_a_panic() {
        let mut out = Datagrams::new(1, 40);
        let mut enc = Encoder::new(0, false);
        assert!(enc.encode(&[0; 30], 0, 0, dest(), &mut out).is_err());
        enc.encode(&[0; 3], 0, 0, dest(), &mut out).unwrap();
        assert!(enc.encode(&[0; 3], 0, 0, dest(), &mut out).is_err());
    }
}
