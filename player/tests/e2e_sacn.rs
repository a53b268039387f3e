//! sACN end to end: the real player's multicast on loopback, received by the `sacn`
//! crate's receiver (an implementation we did not write), compared channel by channel.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::player::{Player, http_port};

type Received = BTreeMap<u16, Vec<Vec<u8>>>;

/// Receives `universes` for `for_` on a thread; returns once the receiver has joined
/// them, so a player started after this is heard from its first packet.
fn receive(universes: Vec<u16>, for_: Duration) -> std::thread::JoinHandle<Received> {
    let (listening, ready) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || {
        let mut rx = sacn::receive::SacnReceiver::with_ip("127.0.0.1:5568".parse().unwrap(), None)
            .expect("sacn receiver");
        rx.listen_universes(&universes).expect("listen");
        let _ = listening.send(());
        collect(rx, for_)
    });
    ready
        .recv_timeout(Duration::from_secs(10))
        .expect("the sACN receiver joins its universes");
    h
}

fn collect(mut rx: sacn::receive::SacnReceiver, for_: Duration) -> Received {
    let mut got: BTreeMap<u16, Vec<Vec<u8>>> = BTreeMap::new();
    let end = Instant::now() + for_;
    while Instant::now() < end {
        if let Ok(data) = rx.recv(Some(Duration::from_millis(100))) {
            for d in data {
                got.entry(d.universe).or_default().push(d.values);
            }
        }
    }
    got
}

#[test]
fn solid_pattern_received_by_sacn_crate_receiver_equals_expected_channels() {
    let profile = "name: t\nprotocol: sacn\npixels: 300\npixel_format: rgb8\ncolor_order: grb\ndestination: 239.255.0.1:5568\nsacn:\n  first_universe: 3101\n  priority: 150\n";
    let show = format!(
        "interface: lo\nmulticast_loop: true\nhttp: 127.0.0.1:{}\nunit_id: e2e\noutputs:\n  - name: legacy\n    profile: t\ncontent:\n  playlist:\n    - pattern: solid\n      color: \"#102030\"\n      seconds: 30\n",
        http_port(1)
    );
    let rx = receive(vec![3101, 3102], Duration::from_secs(3));
    let player = Player::start(&show, &[("t", profile)], &["--duration", "4"]);
    let got = rx.join().expect("receiver thread");
    let (ok, stderr) = player.wait();
    assert!(ok, "player failed: {stderr}");
    let pixel = [0x20, 0x10, 0x30]; // GRB on the wire
    let mut expected = pixel.repeat(300);
    expected.resize(2 * 510, 0);
    for (i, u) in [3101u16, 3102].iter().enumerate() {
        let frames = got
            .get(u)
            .unwrap_or_else(|| panic!("no data for universe {u}: {stderr}"));
        assert!(
            frames.len() > 30,
            "universe {u}: only {} packets in 3 s",
            frames.len()
        );
        for v in frames {
            assert_eq!(v[0], 0, "start code");
            assert_eq!(&v[1..], &expected[i * 510..(i + 1) * 510], "universe {u}");
        }
    }
}

/// Every universe the receiver got equals the matching channels of a frame of the
/// sequence, in order; and the frames advance with time. The sequence is the generated
/// corpus file with the layout of an xLights 2020 export (8492 channels, 600 frames of
/// 50 ms, 60 zstd blocks).
#[test]
fn fseq_frames_received_by_sacn_crate_receiver_equal_the_sequence() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = common::fseq_writer::write_corpus_file(dir.path(), "xl-8492ch-600f.fseq");
    fseq_over_sacn_equals_the_sequence(&path, 2);
}

/// The same with a real xLights export; run by `scripts/tests.d/21-fseq-real.sh`.
#[test]
#[ignore = "needs real xLights exports: scripts/tests.d/21-fseq-real.sh"]
fn real_exports_fseq_frames_received_by_sacn_crate_receiver_equal_the_sequence() {
    let path = common::fseq_writer::real_exports_dir().join("dusk-to-dawn.fseq");
    fseq_over_sacn_equals_the_sequence(&path, 3);
}

fn fseq_over_sacn_equals_the_sequence(path: &std::path::Path, port_offset: u16) {
    use pfx_player::source::fseq;
    let mut file = fseq::open(path).unwrap_or_else(|e| panic!("{e}"));
    let frame_len = file.frame_len();
    let frames: Vec<Vec<u8>> = (0..file.frames())
        .map(|n| {
            let mut b = vec![0; frame_len];
            file.read_frame(n, &mut b).expect("read frame");
            b
        })
        .collect();
    let pixels = frame_len / 3;
    let universes = (pixels * 3).div_ceil(510);
    let first = 3201u16;
    let profile = format!(
        "name: t\nprotocol: sacn\npixels: {pixels}\npixel_format: rgb8\ncolor_order: rgb\ndestination: 239.255.0.1:5568\nsacn:\n  first_universe: {first}\n"
    );
    let show = format!(
        "interface: lo\nmulticast_loop: true\nhttp: 127.0.0.1:{}\nunit_id: e2e\noutputs:\n  - name: legacy\n    profile: t\ncontent:\n  playlist:\n    - fseq: {}\n",
        http_port(port_offset),
        path.display()
    );
    let list: Vec<u16> = (0..universes as u16).map(|i| first + i).collect();
    let rx = receive(list, Duration::from_secs(3));
    let player = Player::start(&show, &[("t", &profile)], &["--duration", "4"]);
    let got = rx.join().expect("receiver thread");
    let (ok, stderr) = player.wait();
    assert!(ok, "player failed: {stderr}");
    assert_eq!(
        got.len(),
        universes,
        "universes received: {:?}",
        got.keys().collect::<Vec<_>>()
    );
    let mut matched_frames = std::collections::BTreeSet::new();
    for (u, packets) in &got {
        let i = (*u - first) as usize;
        for v in packets {
            let start = i * 510;
            let end = (start + 510).min(pixels * 3);
            let slots = &v[1..];
            let hits: Vec<usize> = frames
                .iter()
                .enumerate()
                .filter(|(_, f)| {
                    f[start..end] == slots[..end - start]
                        && slots[end - start..].iter().all(|&b| b == 0)
                })
                .map(|(n, _)| n)
                .collect();
            assert!(
                !hits.is_empty(),
                "universe {u}: received data matches no frame of {}",
                path.display()
            );
            // Many frames repeat slices; the earliest match still moves with time.
            matched_frames.insert(hits[0]);
        }
    }
    // 3 s of a 50 ms sequence: the content moves on.
    assert!(
        matched_frames.len() >= 5,
        "frames did not advance: {matched_frames:?}"
    );
}
