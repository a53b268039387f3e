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

const BIG: usize = 5000;
const BIG_FRAMES: usize = 6;
const SYNC: u16 = 63999;

/// What the test's sequence frame `f` holds at channel `i`: the universe, the frame and
/// the position, mixed, so a datagram from the wrong half, universe or frame cannot pass.
fn channel(f: usize, i: usize) -> u8 {
    ((i / 510) as u8) ^ (f as u8).wrapping_mul(91) ^ (i as u8).rotate_left(3)
}

/// 5,000 universes (850,000 pixels) through the render path a show uses: each half of
/// the universes fills its channels from a sequence frame, maps and encodes them and
/// sends from its own thread. A real receiver on loopback, parsing with the `sacn` crate,
/// sees every universe exactly once per frame with the frame's bytes (black past the end
/// of a short frame), and the synchronization packet after all of them.
#[test]
fn five_thousand_universes_rendered_in_halves_arrive_once_per_frame_with_their_bytes() {
    use pfx_player::geometry::Brightness;
    use pfx_player::output::Fill;

    let rx = UdpSocket::bind("127.0.0.1:0").expect("bind receiver");
    big_receive_buffer(&rx);
    rx.set_read_timeout(Some(Duration::from_millis(500)))
        .expect("timeout");
    let port = rx.local_addr().expect("addr").port();
    let mut output = common::output::open_on_lo(
        &format!(
            "name: big\nprotocol: sacn\npixels: {}\npixel_format: rgb8\ncolor_order: rgb\ndestination: 127.0.0.1:{port}\nsacn:\n  first_universe: {FIRST}\n  sync_universe: {SYNC}\n",
            BIG * 170
        ),
        Some(8 << 20),
    );
    assert!(
        output.renders_in_halves(),
        "a {BIG}-universe sACN output must render in halves"
    );
    let len = output.map().channels();
    let mut channels = vec![0xa5u8; len];
    let brightness = Brightness::new(1.0);
    let mut buf = vec![0u8; 2048];
    for f in 0..BIG_FRAMES {
        let mut data: Vec<u8> = (0..len).map(|i| channel(f, i)).collect();
        if f == 3 {
            // A sequence shorter than the layout, ending inside the second half.
            data.truncate(len - 1000 * 510 - 77);
        }
        output.render_and_send(&mut channels, Fill::Frame(&data), &brightness);

        // universe -> (times seen, sequence number, channel data)
        let mut seen: BTreeMap<u16, (usize, u8, Vec<u8>)> = BTreeMap::new();
        let mut sync_after = None;
        while sync_after.is_none() {
            let n = match rx.recv(&mut buf) {
                Ok(n) => n,
                Err(e) => panic!(
                    "frame {f}: {} universes arrived, then nothing ({e}); no sync packet",
                    seen.len()
                ),
            };
            let pkt = AcnRootLayerProtocol::parse(&buf[..n]).expect("sacn crate parses it");
            match pkt.pdu.data {
                E131RootLayerData::DataPacket(d) => {
                    let e = seen
                        .entry(d.universe)
                        .or_insert((0, d.sequence_number, Vec::new()));
                    e.0 += 1;
                    e.2 = d.data.property_values[1..].to_vec();
                }
                E131RootLayerData::SynchronizationPacket(s) => {
                    assert_eq!(s.synchronization_address, SYNC);
                    sync_after = Some(seen.len());
                }
                _ => {}
            }
        }
        assert_eq!(
            sync_after,
            Some(BIG),
            "frame {f}: the sync packet came after all {BIG} universes"
        );
        for u in 0..BIG {
            let universe = FIRST + u as u16;
            let Some((times, seq, got)) = seen.get(&universe) else {
                panic!("frame {f}: universe {universe} never arrived");
            };
            assert_eq!(
                *times, 1,
                "frame {f}: universe {universe} arrived {times} times"
            );
            assert_eq!(
                usize::from(*seq),
                f + 1,
                "frame {f}: universe {universe} sequence"
            );
            let want: Vec<u8> = (u * 510..(u + 1) * 510)
                .map(|i| data.get(i).copied().unwrap_or(0))
                .collect();
            assert!(
                got == &want,
                "frame {f}: universe {universe}: channel data differs"
            );
        }
        assert_eq!(seen.len(), BIG, "frame {f}: no universe outside the output");
    }
    let c = output.counters().snapshot();
    assert_eq!(
        c.packets,
        (BIG_FRAMES * (BIG + 1)) as u64,
        "counted packets"
    );
    assert_eq!(c.frames_sent, BIG_FRAMES as u64);
    assert_eq!((c.frames_dropped, c.frames_failed), (0, 0));
}

/// A frame cut short starts the next one where it stopped: `send_rotated` hands the kernel
/// the body from `start` round to the datagram before it, and the datagrams after the body
/// (a sync packet, DDP's PUSH packet) last. A real receiver on loopback sees that order.
#[test]
fn a_rotated_frame_goes_from_its_start_round_the_body_and_keeps_its_tail_last() {
    use pfx_player::output::Sender;
    use pfx_player::wire::Datagrams;
    use std::net::SocketAddrV4;

    let rx = UdpSocket::bind("127.0.0.1:0").expect("bind receiver");
    big_receive_buffer(&rx);
    rx.set_read_timeout(Some(Duration::from_millis(500)))
        .expect("timeout");
    let dest = SocketAddrV4::new(
        std::net::Ipv4Addr::LOCALHOST,
        rx.local_addr().expect("addr").port(),
    );
    let tx = UdpSocket::bind("127.0.0.1:0").expect("bind sender");
    let mut batch = Datagrams::new(10, 4);
    for i in 0..10u8 {
        batch.push_with(dest, |b| {
            b[0] = i;
            1
        });
    }
    let mut s = Sender::new(10);
    let out = s.send_rotated(tx.as_raw_fd(), &batch, 0..10, 9, 4, false);
    assert_eq!((out.sent, out.errno), (10, None));
    let mut buf = [0u8; 16];
    let got: Vec<u8> = (0..10)
        .map(|_| {
            let n = rx.recv(&mut buf).expect("a datagram");
            assert_eq!(n, 1);
            buf[0]
        })
        .collect();
    assert_eq!(got, [4, 5, 6, 7, 8, 0, 1, 2, 3, 9]);
}
