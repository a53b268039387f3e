//! A large output sends each frame from two threads (the render thread and the output's
//! send helper). Received by a real socket on loopback and parsed with the `sacn` crate's
//! packet parser (not ours): every universe arrives exactly once per frame, with its data.

mod common;

use std::collections::BTreeMap;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::time::Duration;

use sacn::packet::{AcnRootLayerProtocol, E131RootLayerData};

const UNIVERSES: usize = 1000;
const FRAMES: usize = 20;
const FIRST: u16 = 1;

/// Room for all the frames at once, so a slow reader on a busy machine loses nothing
/// (root may exceed net.core.rmem_max; the suite runs as root).
fn big_receive_buffer(s: &UdpSocket) {
    let _ = pfx_player::sys::net::set_int_option(
        s.as_raw_fd(),
        libc::SOL_SOCKET,
        libc::SO_RCVBUFFORCE,
        64 << 20,
    );
}

#[test]
fn split_send_delivers_every_universe_exactly_once_per_frame() {
    let rx = UdpSocket::bind("127.0.0.1:0").expect("bind receiver");
    big_receive_buffer(&rx);
    rx.set_read_timeout(Some(Duration::from_millis(500)))
        .expect("timeout");
    let port = rx.local_addr().expect("addr").port();

    let mut output = common::output::open_on_lo(
        &format!(
            "name: big\nprotocol: sacn\npixels: {}\npixel_format: rgb8\ncolor_order: rgb\ndestination: 127.0.0.1:{port}\nsacn:\n  first_universe: {FIRST}\n",
            UNIVERSES * 170
        ),
        Some(8 << 20),
    );
    assert!(
        output.send_helper_cpu_ns().is_some(),
        "a {UNIVERSES}-universe output must send through the split path"
    );

    // Each frame's pixels differ, and each universe's first channel says which universe
    // it is, so a datagram from the wrong half or the wrong frame cannot pass.
    let mut expected: Vec<Vec<Vec<u8>>> = Vec::new();
    for f in 0..FRAMES {
        let px = output.pixels_mut();
        for (i, b) in px.iter_mut().enumerate() {
            *b = ((i / 510) as u8) ^ (f as u8).wrapping_mul(37) ^ (i as u8);
        }
        expected.push(px.chunks(510).map(<[u8]>::to_vec).collect());
        output.send_frame(0);
    }
    let c = output.counters().snapshot();
    assert_eq!(c.packets, (UNIVERSES * FRAMES) as u64, "counted packets");
    assert_eq!(c.frames_sent, FRAMES as u64);

    // (universe, sequence number) -> times seen and the data. sACN numbers each
    // universe's packets in sequence, so with under 256 frames the pair names one frame.
    let mut seen: BTreeMap<(u16, u8), (usize, Vec<u8>)> = BTreeMap::new();
    let mut buf = vec![0u8; 2048];
    while let Ok(n) = rx.recv(&mut buf) {
        let pkt = AcnRootLayerProtocol::parse(&buf[..n]).expect("sacn crate parses it");
        let E131RootLayerData::DataPacket(d) = pkt.pdu.data else {
            continue;
        };
        let e = seen
            .entry((d.universe, d.sequence_number))
            .or_insert((0, Vec::new()));
        e.0 += 1;
        e.1 = d.data.property_values[1..].to_vec();
    }
    // In BTreeMap order, so each universe's list is sorted.
    let mut seqs: BTreeMap<u16, Vec<u8>> = BTreeMap::new();
    for ((u, s), (times, _)) in &seen {
        assert_eq!(*times, 1, "universe {u} sequence {s} arrived {times} times");
        seqs.entry(*u).or_default().push(*s);
    }
    assert_eq!(seqs.len(), UNIVERSES, "universes received");
    // A fresh encoder numbers each universe's frames 1, 2, 3, ...
    let want: Vec<u8> = (1..=FRAMES as u8).collect();
    for (u, got) in &seqs {
        assert_eq!(got, &want, "universe {u}: frames received");
    }
    for (f, frame) in expected.iter().enumerate() {
        for (u, channels) in frame.iter().enumerate() {
            let universe = FIRST + u as u16;
            let (_, data) = &seen[&(universe, want[f])];
            assert_eq!(
                data, channels,
                "universe {universe}, frame {f}: channel data"
            );
        }
    }
}
