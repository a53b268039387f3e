//! sACN (ANSI E1.31-2018) encoder on the `sacn` crate's packet types, packed into the
//! caller's buffers: no socket, no allocation per packet.

use core::net::{Ipv4Addr, SocketAddrV4};
use std::borrow::Cow;

use sacn::packet::{
    AcnRootLayerProtocol, DataPacketDmpLayer, DataPacketFramingLayer, E131RootLayer,
    E131RootLayerData, SynchronizationPacketFramingLayer, UniverseDiscoveryPacketFramingLayer,
    UniverseDiscoveryPacketUniverseDiscoveryLayer,
};
pub use sacn::packet::{DISCOVERY_UNI_PER_PAGE, E131_DISCOVERY_UNIVERSE};
use uuid::Uuid;

use super::{BatchFull, Datagrams, FrameShape};

pub const PORT: u16 = 5568;
/// A data packet's bytes before its slots: the root, framing and DMP layers (125) and the
/// DMX512 start code.
pub const DATA_HEADER: usize = 126;
/// A data packet with 512 slots.
pub const MAX_PACKET: usize = DATA_HEADER + 512;
/// A discovery page's bytes before its universe list (2 bytes per universe).
const DISCOVERY_HEADER: usize = 120;
/// A discovery page with 512 universes.
pub const MAX_DISCOVERY_PACKET: usize = DISCOVERY_HEADER + 2 * DISCOVERY_UNI_PER_PAGE;
/// A synchronization packet: the root layer and a framing layer carrying the sync address
/// (E1.31 §6.3).
pub const SYNC_PACKET: usize = 49;
/// E1.31 source names are at most 63 bytes plus a NUL.
const SOURCE_NAME_MAX: usize = 63;

/// 239.255.hi.lo for a universe, per E1.31 §9.3.1.
pub fn multicast_group(universe: u16) -> Ipv4Addr {
    Ipv4Addr::new(239, 255, (universe >> 8) as u8, universe as u8)
}

/// Slots per universe as the encoder uses it: E1.31 carries 1 to 512.
fn slots_per_universe(universe_size: u16) -> usize {
    usize::from(universe_size.clamp(1, 512))
}

/// Universes a pole of `channels` bytes spans (at least one).
pub fn universes(channels: usize, universe_size: u16) -> usize {
    channels.div_ceil(slots_per_universe(universe_size)).max(1)
}

/// The datagrams of a pole of `channels` bytes: one data packet per universe, each a full
/// universe (the encoder pads the last one), then the sync packet when `sync`; discovery
/// pages beside them every 10 s.
pub fn frame_shape(channels: usize, universe_size: u16, sync: bool) -> FrameShape {
    shape_of(
        universes(channels, universe_size),
        slots_per_universe(universe_size),
        sync,
    )
}

fn shape_of(universes: usize, size: usize, sync: bool) -> FrameShape {
    let mut datagrams = vec![DATA_HEADER + size; universes];
    if sync {
        datagrams.push(SYNC_PACKET);
    }
    let pages = universes.div_ceil(DISCOVERY_UNI_PER_PAGE);
    // The first page is the fullest.
    let discovery = DISCOVERY_HEADER + 2 * universes.min(DISCOVERY_UNI_PER_PAGE);
    FrameShape {
        slots: datagrams.len().max(pages),
        slot_len: datagrams.iter().copied().max().unwrap_or(0).max(discovery),
        datagrams,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dest {
    /// Each universe to its own multicast group, on this port.
    Multicast { port: u16 },
    /// Every packet to one address.
    Unicast(SocketAddrV4),
}

impl Dest {
    fn for_universe(self, universe: u16) -> SocketAddrV4 {
        match self {
            Dest::Multicast { port } => SocketAddrV4::new(multicast_group(universe), port),
            Dest::Unicast(a) => a,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    pub cid: Uuid,
    pub source_name: String,
    pub priority: u8,
    pub first_universe: u16,
    pub universe_size: u16,
    pub sync_universe: Option<u16>,
    pub dest: Dest,
}

#[derive(Debug, Clone)]
pub struct Encoder {
    cfg: Config,
    /// Last sequence number sent, per universe (index = universe - first).
    sequences: Vec<u8>,
    sync_sequence: u8,
    /// Start code followed by one universe's slots; `property_values` must be contiguous.
    scratch: [u8; 513],
}

impl Encoder {
    /// `channels` is the pole's byte count; it fixes how many universes it spans.
    pub fn new(mut cfg: Config, channels: usize) -> Encoder {
        if cfg.source_name.len() > SOURCE_NAME_MAX {
            let mut end = SOURCE_NAME_MAX;
            while !cfg.source_name.is_char_boundary(end) {
                end -= 1;
            }
            cfg.source_name.truncate(end);
        }
        let universes = universes(channels, cfg.universe_size);
        cfg.universe_size = slots_per_universe(cfg.universe_size) as u16;
        Encoder {
            cfg,
            sequences: vec![0; universes],
            sync_sequence: 0,
            scratch: [0; 513],
        }
    }

    pub fn universes(&self) -> usize {
        self.sequences.len()
    }

    pub fn universe_numbers(&self) -> impl Iterator<Item = u16> + '_ {
        (0..self.universes()).map(|i| self.cfg.first_universe.wrapping_add(i as u16))
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Datagrams a frame takes: one per universe, plus the sync packet.
    pub fn packets_per_frame(&self) -> usize {
        self.universes() + usize::from(self.cfg.sync_universe.is_some())
    }

    /// What this encoder's frames and discovery pages look like on the wire.
    pub fn frame_shape(&self) -> FrameShape {
        shape_of(
            self.universes(),
            usize::from(self.cfg.universe_size),
            self.cfg.sync_universe.is_some(),
        )
    }

    /// One data packet per universe. With sync configured, packets carry the sync address
    /// and the caller sends `encode_sync` after them.
    pub fn encode(&mut self, pixels: &[u8], out: &mut Datagrams) -> Result<(), BatchFull> {
        self.encode_data(pixels, false, out)
    }

    /// A stream-terminated packet per universe (E1.31 §6.7.1); send it three times.
    pub fn encode_terminate(
        &mut self,
        pixels: &[u8],
        out: &mut Datagrams,
    ) -> Result<(), BatchFull> {
        self.encode_data(pixels, true, out)
    }

    fn encode_data(
        &mut self,
        pixels: &[u8],
        terminated: bool,
        out: &mut Datagrams,
    ) -> Result<(), BatchFull> {
        let size = self.cfg.universe_size as usize;
        out.reserve(self.universes(), DATA_HEADER + size)?;
        let before = out.len();
        for i in 0..self.universes() {
            let start = (i * size).min(pixels.len());
            let slots = &pixels[start..(start + size).min(pixels.len())];
            // The last universe may be short; pad it to the universe size with zeros so a
            // receiver never keeps stale slots from a previous longer frame.
            self.scratch[0] = 0; // DMX512 null start code
            self.scratch[1..=slots.len()].copy_from_slice(slots);
            self.scratch[1 + slots.len()..=size].fill(0);
            self.sequences[i] = self.sequences[i].wrapping_add(1);
            let universe = self.cfg.first_universe.wrapping_add(i as u16);
            let packet = AcnRootLayerProtocol {
                pdu: E131RootLayer {
                    cid: self.cfg.cid,
                    data: E131RootLayerData::DataPacket(DataPacketFramingLayer {
                        source_name: Cow::Borrowed(&self.cfg.source_name),
                        priority: self.cfg.priority,
                        synchronization_address: self.cfg.sync_universe.unwrap_or(0),
                        sequence_number: self.sequences[i],
                        preview_data: false,
                        stream_terminated: terminated,
                        force_synchronization: false,
                        universe,
                        data: DataPacketDmpLayer {
                            property_values: Cow::Borrowed(&self.scratch[..=size]),
                        },
                    }),
                },
            };
            if let Err(e) = pack(&packet, self.cfg.dest.for_universe(universe), out) {
                out.truncate(before);
                return Err(e);
            }
        }
        Ok(())
    }

    /// The universe synchronization packet (E1.31 §6.3), after a frame's data packets.
    pub fn encode_sync(&mut self, out: &mut Datagrams) -> Result<(), BatchFull> {
        let Some(sync) = self.cfg.sync_universe else {
            return Ok(());
        };
        out.reserve(1, SYNC_PACKET)?;
        self.sync_sequence = self.sync_sequence.wrapping_add(1);
        let packet = AcnRootLayerProtocol {
            pdu: E131RootLayer {
                cid: self.cfg.cid,
                data: E131RootLayerData::SynchronizationPacket(SynchronizationPacketFramingLayer {
                    sequence_number: self.sync_sequence,
                    synchronization_address: sync,
                }),
            },
        };
        pack(&packet, self.cfg.dest.for_universe(sync), out)
    }

    /// Universe discovery pages (E1.31 §8) listing this encoder's universes.
    pub fn encode_discovery(&self, out: &mut Datagrams) -> Result<(), BatchFull> {
        let mut list = [0u16; DISCOVERY_UNI_PER_PAGE];
        let total = self.universes();
        let pages = total.div_ceil(DISCOVERY_UNI_PER_PAGE).max(1);
        // The first page is the fullest.
        out.reserve(
            pages,
            DISCOVERY_HEADER + 2 * total.min(DISCOVERY_UNI_PER_PAGE),
        )?;
        let before = out.len();
        let dest = match self.cfg.dest {
            Dest::Multicast { port } => {
                SocketAddrV4::new(multicast_group(E131_DISCOVERY_UNIVERSE), port)
            }
            Dest::Unicast(a) => a,
        };
        for page in 0..pages {
            let first = page * DISCOVERY_UNI_PER_PAGE;
            let n = (total - first).min(DISCOVERY_UNI_PER_PAGE);
            for (j, u) in list.iter_mut().take(n).enumerate() {
                *u = self.cfg.first_universe.wrapping_add((first + j) as u16);
            }
            let packet = AcnRootLayerProtocol {
                pdu: E131RootLayer {
                    cid: self.cfg.cid,
                    data: E131RootLayerData::UniverseDiscoveryPacket(
                        UniverseDiscoveryPacketFramingLayer {
                            source_name: Cow::Borrowed(&self.cfg.source_name),
                            data: UniverseDiscoveryPacketUniverseDiscoveryLayer {
                                page: page as u8,
                                last_page: (pages - 1) as u8,
                                universes: Cow::Borrowed(&list[..n]),
                            },
                        },
                    ),
                },
            };
            if let Err(e) = pack(&packet, dest, out) {
                out.truncate(before);
                return Err(e);
            }
        }
        Ok(())
    }
}

/// Packs `packet` into the batch's next slot. A packet the `sacn` crate refuses to pack
/// pushes nothing.
fn pack(
    packet: &AcnRootLayerProtocol<'_>,
    dest: SocketAddrV4,
    out: &mut Datagrams,
) -> Result<(), BatchFull> {
    let len = packet.len();
    out.reserve(1, len)?;
    if out.try_push_with(dest, |b| packet.pack(&mut b[..len]).ok().map(|()| len)) {
        Ok(())
    } else {
        Err(out.full(1, len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> Config {
        Config {
            cid: Uuid::from_bytes([0x11; 16]),
            source_name: "pfx test".into(),
            priority: 150,
            first_universe: 7,
            universe_size: 510,
            sync_universe: None,
            dest: Dest::Multicast { port: PORT },
        }
    }

    /// A data packet for universe 7, sequence 1, priority 150, two slots, laid out by hand
    /// from E1.31-2018 Table 4-1.
    fn hand_packet(slots: &[u8], seq: u8, options: u8, sync: u16) -> Vec<u8> {
        let n = slots.len() + 1; // with start code
        let mut p = Vec::new();
        p.extend_from_slice(&[0x00, 0x10, 0x00, 0x00]); // preamble, postamble size
        p.extend_from_slice(b"ASC-E1.17\0\0\0");
        let root_len = (22 + 77 + 10 + n) as u16; // from root flags&length to the end
        p.extend_from_slice(&(0x7000 | root_len).to_be_bytes());
        p.extend_from_slice(&[0, 0, 0, 4]); // VECTOR_ROOT_E131_DATA
        p.extend_from_slice(&[0x11; 16]); // CID
        let framing_len = (77 + 10 + n) as u16;
        p.extend_from_slice(&(0x7000 | framing_len).to_be_bytes());
        p.extend_from_slice(&[0, 0, 0, 2]); // VECTOR_E131_DATA_PACKET
        let mut name = [0u8; 64];
        name[..8].copy_from_slice(b"pfx test");
        p.extend_from_slice(&name);
        p.push(150); // priority
        p.extend_from_slice(&sync.to_be_bytes());
        p.push(seq);
        p.push(options);
        p.extend_from_slice(&7u16.to_be_bytes()); // universe
        let dmp_len = (10 + n) as u16;
        p.extend_from_slice(&(0x7000 | dmp_len).to_be_bytes());
        p.push(0x02); // VECTOR_DMP_SET_PROPERTY
        p.push(0xa1); // address & data type
        p.extend_from_slice(&[0x00, 0x00]); // first property address
        p.extend_from_slice(&[0x00, 0x01]); // address increment
        p.extend_from_slice(&(n as u16).to_be_bytes());
        p.push(0); // start code
        p.extend_from_slice(slots);
        p
    }

    #[test]
    fn data_packet_byte_for_byte() {
        let mut c = cfg();
        c.universe_size = 2;
        let mut enc = Encoder::new(c, 2);
        let mut out = Datagrams::new(1, MAX_PACKET);
        enc.encode(&[0xAB, 0xCD], &mut out).unwrap();
        let (bytes, dest) = out.get(0);
        assert_eq!(bytes, &hand_packet(&[0xAB, 0xCD], 1, 0, 0)[..]);
        assert_eq!(dest, SocketAddrV4::new(Ipv4Addr::new(239, 255, 0, 7), 5568));
    }

    #[test]
    fn terminate_sets_option_bit_and_sync_address_is_carried() {
        let mut c = cfg();
        c.universe_size = 2;
        c.sync_universe = Some(0x0102);
        let mut enc = Encoder::new(c, 2);
        let mut out = Datagrams::new(2, MAX_PACKET);
        enc.encode_terminate(&[1, 2], &mut out).unwrap();
        assert_eq!(out.get(0).0, &hand_packet(&[1, 2], 1, 0x40, 0x0102)[..]);
        enc.encode_sync(&mut out).unwrap();
        let (sync, dest) = out.get(1);
        assert_eq!(sync.len(), 49);
        assert_eq!(&sync[18..22], &[0, 0, 0, 8]); // VECTOR_ROOT_E131_EXTENDED
        assert_eq!(&sync[40..44], &[0, 0, 0, 1]); // synchronization
        assert_eq!(sync[44], 1); // sync sequence
        assert_eq!(&sync[45..47], &[1, 2]);
        assert_eq!(dest.ip(), &Ipv4Addr::new(239, 255, 1, 2));
    }

    #[test]
    fn frame_splits_into_510_channel_universes_with_own_sequences() {
        let pixels: Vec<u8> = (0..1200u32).map(|i| (i % 251) as u8).collect();
        let mut enc = Encoder::new(cfg(), pixels.len());
        assert_eq!(enc.universes(), 3);
        let mut out = Datagrams::new(3, MAX_PACKET);
        enc.encode(&pixels, &mut out).unwrap();
        for (i, (bytes, dest)) in out.iter().enumerate() {
            let parsed = AcnRootLayerProtocol::parse(bytes).unwrap();
            let E131RootLayerData::DataPacket(d) = parsed.pdu.data else {
                panic!("not data")
            };
            assert_eq!(d.universe, 7 + i as u16);
            assert_eq!(d.sequence_number, 1);
            assert_eq!(dest.ip(), &multicast_group(7 + i as u16));
            let v = &d.data.property_values;
            assert_eq!(v.len(), 511, "always a full universe");
            assert_eq!(v[0], 0);
            let want = &pixels[i * 510..((i + 1) * 510).min(1200)];
            assert_eq!(&v[1..=want.len()], want);
            assert!(v[1 + want.len()..].iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn discovery_lists_universes() {
        let enc = Encoder::new(cfg(), 3 * 510);
        let mut out = Datagrams::new(1, MAX_DISCOVERY_PACKET);
        enc.encode_discovery(&mut out).unwrap();
        let (bytes, dest) = out.get(0);
        assert_eq!(dest.ip(), &Ipv4Addr::new(239, 255, 250, 214));
        let parsed = AcnRootLayerProtocol::parse(bytes).unwrap();
        let E131RootLayerData::UniverseDiscoveryPacket(d) = parsed.pdu.data else {
            panic!("not discovery")
        };
        assert_eq!(&*d.data.universes, &[7, 8, 9]);
    }
}
