//! What every encoder promises about the batch it writes into: each byte of a datagram is
//! written (a batch full of old bytes gives the same datagrams as a fresh one), a failure
//! leaves the batch as it was and pushes nothing, and `BatchFull` counts slots.

use core::net::{Ipv4Addr, SocketAddrV4};

use uuid::Uuid;

use super::{BatchFull, Datagrams, bigpacket, ddp, sacn};

const POISON: u8 = 0xa5;

/// A batch whose every byte is `POISON`, as a batch is after frames of other bytes.
fn poisoned(slots: usize, slot_len: usize) -> Datagrams {
    let mut d = Datagrams::new(slots, slot_len);
    d.buf.fill(POISON);
    d
}

fn datagrams(d: &Datagrams) -> Vec<(Vec<u8>, SocketAddrV4)> {
    d.iter().map(|(b, to)| (b.to_vec(), to)).collect()
}

/// Runs `emit` on a clone of the encoder into a fresh batch and into a poisoned one and
/// asserts both hold the same datagrams, which must not be empty.
fn same_when_poisoned<E: Clone>(
    enc: &E,
    slots: usize,
    slot_len: usize,
    mut emit: impl FnMut(&mut E, &mut Datagrams),
) {
    let mut fresh = Datagrams::new(slots, slot_len);
    emit(&mut enc.clone(), &mut fresh);
    let mut dirty = poisoned(slots, slot_len);
    emit(&mut enc.clone(), &mut dirty);
    assert!(!fresh.is_empty());
    assert!(fresh.iter().all(|(b, _)| !b.is_empty()));
    assert_eq!(datagrams(&dirty), datagrams(&fresh));
}

fn sacn_cfg(first_universe: u16, sync: Option<u16>) -> sacn::Config {
    sacn::Config {
        cid: Uuid::from_bytes([0x42; 16]),
        source_name: "poison".into(),
        priority: 100,
        first_universe,
        universe_size: 510,
        sync_universe: sync,
        dest: sacn::Dest::Multicast { port: sacn::PORT },
    }
}

fn pixels(n: usize) -> Vec<u8> {
    // Nonzero everywhere but with zeros too, so a byte left unwritten cannot pass as one
    // the encoder meant.
    (0..n).map(|i| (i % 13) as u8 * 19).collect()
}

fn dest() -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 9), 4048)
}

#[test]
fn sacn_emits_every_byte_into_a_poisoned_batch() {
    // 1200 channels: two full universes and a short one the encoder pads.
    let px = pixels(1200);
    let enc = sacn::Encoder::new(sacn_cfg(7, Some(9)), px.len());
    let (slots, len) = (4, sacn::MAX_DISCOVERY_PACKET.max(sacn::MAX_PACKET));
    same_when_poisoned(&enc, slots, len, |e, out| e.encode(&px, out).unwrap());
    same_when_poisoned(&enc, slots, len, |e, out| {
        e.encode_terminate(&px, out).unwrap()
    });
    same_when_poisoned(&enc, slots, len, |e, out| e.encode_sync(out).unwrap());
    same_when_poisoned(&enc, slots, len, |e, out| e.encode_discovery(out).unwrap());
}

#[test]
fn ddp_emits_every_byte_into_a_poisoned_batch() {
    // Three packets, the last one short.
    let px = pixels(3000);
    let enc = ddp::Encoder::new(ddp::DATA_TYPE_RGB8, 3);
    same_when_poisoned(&enc, 4, ddp::HEADER_LEN + ddp::MAX_DATA, |e, out| {
        e.encode(&px, dest(), out).unwrap()
    });
}

#[test]
fn bigpacket_emits_every_byte_into_a_poisoned_batch() {
    let px = pixels(300);
    let enc = bigpacket::Encoder::new(5, false);
    let len = bigpacket::Encoder::datagram_len(px.len());
    same_when_poisoned(&enc, 1, len, |e, out| {
        e.encode(&px, 1_700_000_000_000_000, 0, dest(), out)
            .unwrap()
    });
}

/// One datagram in the batch already, then an encoder that needs `n` more of `len` bytes.
fn expect_full(err: BatchFull, n: usize, slots: usize, len: usize, slot_len: usize) {
    assert_eq!(
        err,
        BatchFull {
            needed: 1 + n,
            slots,
            datagram_len: len,
            slot_len,
        }
    );
}

fn with_one(slots: usize, slot_len: usize) -> Datagrams {
    let mut d = Datagrams::new(slots, slot_len);
    d.push_with(dest(), |b| {
        b[0] = 1;
        1
    });
    d
}

#[test]
fn batch_full_counts_slots_for_every_encoder() {
    // Too few slots.
    let px = pixels(1200);
    let mut s = sacn::Encoder::new(sacn_cfg(7, None), px.len());
    let mut out = with_one(3, sacn::MAX_PACKET);
    expect_full(
        s.encode(&px, &mut out).unwrap_err(),
        3,
        3,
        sacn::DATA_HEADER + 510,
        sacn::MAX_PACKET,
    );
    let mut d = ddp::Encoder::new(ddp::DATA_TYPE_RGB8, 1);
    let full = ddp::HEADER_LEN + ddp::MAX_DATA;
    let mut out = with_one(3, full);
    expect_full(
        d.encode(&px.repeat(3), dest(), &mut out).unwrap_err(),
        3,
        3,
        full,
        full,
    );
    let mut b = bigpacket::Encoder::new(1, false);
    let len = bigpacket::Encoder::datagram_len(px.len());
    let mut out = with_one(1, len);
    expect_full(
        b.encode(&px, 0, 0, dest(), &mut out).unwrap_err(),
        1,
        1,
        len,
        len,
    );

    // Slots too short: still a count of slots, and the datagram's length beside it.
    let mut out = with_one(8, 200);
    expect_full(
        s.encode(&px, &mut out).unwrap_err(),
        3,
        8,
        sacn::DATA_HEADER + 510,
        200,
    );
    let mut out = with_one(8, 200);
    expect_full(
        d.encode(&px, dest(), &mut out).unwrap_err(),
        1,
        8,
        ddp::HEADER_LEN + 1200,
        200,
    );
    let mut out = with_one(8, 200);
    expect_full(
        b.encode(&px, 0, 0, dest(), &mut out).unwrap_err(),
        1,
        8,
        len,
        200,
    );
    // A too-short slot for the sync packet and the discovery page.
    let mut s = sacn::Encoder::new(sacn_cfg(7, Some(9)), 10);
    let mut out = with_one(8, 40);
    expect_full(
        s.encode_sync(&mut out).unwrap_err(),
        1,
        8,
        sacn::SYNC_PACKET,
        40,
    );
    let mut out = with_one(8, 40);
    expect_full(s.encode_discovery(&mut out).unwrap_err(), 1, 8, 120 + 2, 40);
}

#[test]
fn a_failed_sacn_pack_pushes_nothing() {
    // Universes 65535 and 0: a discovery list that does not ascend, which the sacn crate
    // refuses to pack. The batch must keep exactly what it held, with no empty datagram.
    let mut s = sacn::Encoder::new(sacn_cfg(65535, None), 1020);
    let mut out = with_one(4, sacn::MAX_DISCOVERY_PACKET);
    let err = s.encode_discovery(&mut out).unwrap_err();
    assert_eq!(err.needed, 2, "{err}");
    assert_eq!(out.len(), 1);
    assert_eq!(out.get(0).0, &[1]);
    // And the data packets still encode: both universes.
    s.encode(&pixels(1020), &mut out).unwrap();
    assert_eq!(out.len(), 3);
    assert!(
        out.iter()
            .skip(1)
            .all(|(b, _)| b.len() == sacn::MAX_PACKET - 2)
    );
}

#[test]
fn a_failure_part_way_leaves_the_batch_as_it_was() {
    // Two discovery pages (514 universes): the second page holds 65535 and 0, which
    // is refused after the first page was pushed; the first must be taken back.
    let s = sacn::Encoder::new(sacn_cfg(65535 - 512, None), 514 * 510);
    let mut out = with_one(4, sacn::MAX_DISCOVERY_PACKET);
    assert!(s.encode_discovery(&mut out).is_err());
    assert_eq!(out.len(), 1);
    assert_eq!(out.get(0).0, &[1]);
}
