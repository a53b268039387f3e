//! Each protocol's `FrameShape` against what its encoder really emits: the sizes the
//! transmit queue, the DF decision and the batches are planned from must be the sizes
//! that go on the wire.

use core::net::SocketAddrV4;

use uuid::Uuid;

use super::{Datagrams, FrameShape, bigpacket, ddp, sacn};

fn lens(out: &Datagrams) -> Vec<usize> {
    out.iter().map(|(d, _)| d.len()).collect()
}

fn dest() -> SocketAddrV4 {
    SocketAddrV4::new([127, 0, 0, 1].into(), 9)
}

fn pixels(channels: usize) -> Vec<u8> {
    (0..channels).map(|i| (i % 251) as u8).collect()
}

/// Emits a frame (and whatever else the output sends) into a batch made from `shape` and
/// checks that the shape is exactly what came out: no encoder error, the same datagram
/// sizes in the same order, and a slot length that is the largest datagram seen.
fn check(shape: &FrameShape, emitted: impl FnOnce(&mut Datagrams) -> Vec<Vec<usize>>) {
    let mut batch = shape.batch();
    let runs = emitted(&mut batch);
    assert_eq!(runs[0], shape.datagrams, "the frame's datagrams");
    let largest = runs.iter().flatten().copied().max().unwrap_or(0);
    assert_eq!(
        shape.slot_len, largest,
        "slot length is the largest datagram"
    );
    let most = runs.iter().map(Vec::len).max().unwrap_or(0);
    assert_eq!(
        shape.slots, most,
        "slots are the most datagrams sent at once"
    );
}

fn sacn_encoder(channels: usize, universe_size: u16, sync: Option<u16>) -> sacn::Encoder {
    sacn::Encoder::new(
        sacn::Config {
            cid: Uuid::from_bytes([7; 16]),
            // A long name: source names are fixed-size fields, this must not change sizes.
            source_name: "pfx a rather long unit name on a long pole name".into(),
            priority: 100,
            first_universe: 1,
            universe_size,
            sync_universe: sync,
            dest: sacn::Dest::Multicast { port: sacn::PORT },
        },
        channels,
    )
}

#[test]
fn sacn_shape_is_what_the_encoder_sends_with_a_partial_last_universe() {
    // 300 RGB pixels over 510-channel universes: 510 + 390, the last one partial, padded by
    // the encoder to a full universe. Then a one-universe pole, an exact multiple, a pole
    // with more universes than one discovery page holds, and odd universe sizes.
    let cases: [(usize, u16, Option<u16>); 6] = [
        (900, 510, Some(9)),
        (900, 510, None),
        (30, 510, None),
        (1024, 512, Some(3)),
        (513 * 3, 3, None),
        (1000, 170, Some(1)),
    ];
    for (channels, size, sync) in cases {
        let from_config = sacn::frame_shape(channels, size, sync.is_some());
        let mut enc = sacn_encoder(channels, size, sync);
        assert_eq!(
            enc.frame_shape(),
            from_config,
            "{channels} channels / {size}"
        );
        let px = pixels(channels);
        check(&from_config, |b| {
            enc.encode(&px, b).expect("frame fits its shape");
            enc.encode_sync(b).expect("sync fits its shape");
            let frame = lens(b);
            b.clear();
            enc.encode_terminate(&px, b).expect("terminate fits");
            let terminate = lens(b);
            b.clear();
            enc.encode_discovery(b).expect("discovery fits");
            let discovery = lens(b);
            vec![frame, terminate, discovery]
        });
    }
    // The drift this shape fixed: the last universe is a full one on the wire.
    let s = sacn::frame_shape(900, 510, true);
    assert_eq!(s.datagrams, vec![636, 636, 49]);
}

#[test]
fn ddp_shape_is_what_the_encoder_sends_with_a_partial_last_packet() {
    for channels in [3000, 2880, 1440, 3, 1] {
        let shape = ddp::frame_shape(channels);
        let mut enc = ddp::Encoder::new(ddp::DATA_TYPE_RGB8, 1);
        check(&shape, |b| {
            enc.encode(&pixels(channels), dest(), b)
                .expect("frame fits its shape");
            vec![lens(b)]
        });
    }
}

#[test]
fn bigpacket_shape_is_what_the_encoder_sends() {
    for (channels, rgbw) in [(3000, false), (3, false), (40, true)] {
        let shape = bigpacket::frame_shape(channels);
        let mut enc = bigpacket::Encoder::new(0, rgbw);
        check(&shape, |b| {
            enc.encode(&pixels(channels), 0, 0, dest(), b)
                .expect("frame fits its shape");
            let frame = lens(b);
            b.clear();
            enc.encode(&pixels(channels), 0, bigpacket::FLAG_END, dest(), b)
                .expect("the end frame fits");
            vec![frame, lens(b)]
        });
    }
}
