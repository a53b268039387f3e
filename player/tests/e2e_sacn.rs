//! sACN end to end: the real player's multicast on loopback, received by the `sacn`
//! crate's receiver (an implementation we did not write), compared channel by channel.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::player::{Player, http_port};

fn receive(universes: &[u16], for_: Duration) -> BTreeMap<u16, Vec<Vec<u8>>> {
    let mut rx = sacn::receive::SacnReceiver::with_ip("127.0.0.1:5568".parse().unwrap(), None).expect("sacn receiver");
    rx.listen_universes(universes).expect("listen");
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
    let rx = std::thread::spawn(|| receive(&[3101, 3102], Duration::from_secs(3)));
    std::thread::sleep(Duration::from_millis(300));
    let player = Player::start(&show, &[("t", profile)], &["--duration", "4"]);
    let got = rx.join().expect("receiver thread");
    let (ok, stderr) = player.wait();
    assert!(ok, "player failed: {stderr}");
    let pixel = [0x20, 0x10, 0x30]; // GRB on the wire
    let mut expected = pixel.repeat(300);
    expected.resize(2 * 510, 0);
    for (i, u) in [3101u16, 3102].iter().enumerate() {
        let frames = got.get(u).unwrap_or_else(|| panic!("no data for universe {u}: {stderr}"));
        assert!(frames.len() > 30, "universe {u}: only {} packets in 3 s", frames.len());
        for v in frames {
            assert_eq!(v[0], 0, "start code");
            assert_eq!(&v[1..], &expected[i * 510..(i + 1) * 510], "universe {u}");
        }
    }
}
