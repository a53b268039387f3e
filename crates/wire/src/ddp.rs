//! DDP encoder (3waylabs Distributed Display Protocol): 10-byte header, 1440 data bytes per
//! packet, PUSH on the last packet of a frame, sequence 1..=15.

use core::net::SocketAddrV4;

use super::{BatchFull, Datagrams, FrameShape};

pub const PORT: u16 = 4048;
pub const HEADER_LEN: usize = 10;
/// Data bytes per packet: 480 RGB pixels, what every DDP implementation in the field sends.
pub const MAX_DATA: usize = 1440;
/// 8-bit RGB: type RGB (1) in bits 3-5, 8 bits per element (3) in bits 0-2.
pub const DATA_TYPE_RGB8: u8 = 0x0B;
pub const DATA_TYPE_RGBW8: u8 = 0x1B;
const FLAGS_V1: u8 = 0x40;
const FLAG_PUSH: u8 = 0x01;

mod field {
    use std::ops::Range;
    pub const FLAGS: usize = 0;
    pub const SEQUENCE: usize = 1;
    pub const DATA_TYPE: usize = 2;
    pub const ID: usize = 3;
    pub const OFFSET: Range<usize> = 4..8;
    pub const LENGTH: Range<usize> = 8..10;
}

/// The datagrams of a pole of `channels` bytes: full packets of MAX_DATA, the last
/// one with the rest.
pub fn frame_shape(channels: usize) -> FrameShape {
    let datagrams: Vec<usize> = (0..Encoder::packets_for(channels))
        .map(|i| HEADER_LEN + MAX_DATA.min(channels - i * MAX_DATA))
        .collect();
    FrameShape {
        slots: datagrams.len(),
        slot_len: HEADER_LEN + MAX_DATA.min(channels),
        datagrams,
    }
}

#[derive(Debug, Clone)]
pub struct Encoder {
    data_type: u8,
    id: u8,
    /// Last sequence number used, 1..=15.
    sequence: u8,
}

impl Encoder {
    pub fn new(data_type: u8, id: u8) -> Encoder {
        Encoder {
            data_type,
            id,
            sequence: 15,
        }
    }

    pub fn packets_for(channels: usize) -> usize {
        channels.div_ceil(MAX_DATA).max(1)
    }

    fn next_sequence(&mut self) -> u8 {
        // 0 means "no sequence" to a receiver, so the counter runs 1..=15.
        self.sequence = self.sequence % 15 + 1;
        self.sequence
    }

    pub fn encode(
        &mut self,
        pixels: &[u8],
        dest: SocketAddrV4,
        out: &mut Datagrams,
    ) -> Result<(), BatchFull> {
        let packets = Self::packets_for(pixels.len());
        out.reserve(packets, HEADER_LEN + MAX_DATA.min(pixels.len()))?;
        for i in 0..packets {
            let start = i * MAX_DATA;
            let chunk = &pixels[start.min(pixels.len())..(start + MAX_DATA).min(pixels.len())];
            let flags = if i + 1 == packets {
                FLAGS_V1 | FLAG_PUSH
            } else {
                FLAGS_V1
            };
            let seq = self.next_sequence();
            let (data_type, id) = (self.data_type, self.id);
            out.push_with(dest, |b| {
                b[field::FLAGS] = flags;
                b[field::SEQUENCE] = seq;
                b[field::DATA_TYPE] = data_type;
                b[field::ID] = id;
                b[field::OFFSET].copy_from_slice(&(start as u32).to_be_bytes());
                b[field::LENGTH].copy_from_slice(&(chunk.len() as u16).to_be_bytes());
                b[HEADER_LEN..HEADER_LEN + chunk.len()].copy_from_slice(chunk);
                HEADER_LEN + chunk.len()
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dest() -> SocketAddrV4 {
        SocketAddrV4::new([127, 0, 0, 1].into(), PORT)
    }

    #[test]
    fn three_thousand_bytes_make_three_packets_push_on_last() {
        let pixels: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
        let mut out = Datagrams::new(4, HEADER_LEN + MAX_DATA);
        let mut enc = Encoder::new(DATA_TYPE_RGB8, 1);
        enc.encode(&pixels, dest(), &mut out).unwrap();
        assert_eq!(out.len(), 3);
        // Hand-computed headers: flags, seq, type, id, offset BE, length BE.
        let expect = [
            [0x40, 1, 0x0B, 1, 0, 0, 0, 0, 0x05, 0xA0],
            [0x40, 2, 0x0B, 1, 0, 0, 0x05, 0xA0, 0x05, 0xA0],
            [0x41, 3, 0x0B, 1, 0, 0, 0x0B, 0x40, 0x00, 0x78],
        ];
        for (i, h) in expect.iter().enumerate() {
            let (d, to) = out.get(i);
            assert_eq!(&d[..10], h, "packet {i}");
            assert_eq!(&d[10..], &pixels[i * 1440..(i * 1440 + 1440).min(3000)]);
            assert_eq!(to, dest());
        }
    }

    #[test]
    fn sequence_runs_one_to_fifteen_never_zero_or_sixteen() {
        let mut out = Datagrams::new(1, 64);
        let mut enc = Encoder::new(DATA_TYPE_RGB8, 1);
        let mut seen = Vec::new();
        for _ in 0..31 {
            out.clear();
            enc.encode(&[1, 2, 3], dest(), &mut out).unwrap();
            seen.push(out.get(0).0[1]);
        }
        let want: Vec<u8> = (0..31).map(|i| (i % 15 + 1) as u8).collect();
        assert_eq!(seen, want);
    }

    #[test]
    fn exact_multiple_of_480_pixels_still_pushes() {
        let mut out = Datagrams::new(2, HEADER_LEN + MAX_DATA);
        let mut enc = Encoder::new(DATA_TYPE_RGB8, 1);
        enc.encode(&[7u8; 2880], dest(), &mut out).unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(out.get(0).0[0], 0x40);
        assert_eq!(out.get(1).0[0], 0x41);
        assert_eq!(&out.get(1).0[8..10], &[0x05, 0xA0]);
    }
}
