//! sACN and DDP sockets set DF (the kernel then skips the per-packet IP ID); bigPacket's
//! must not, because its datagrams are larger than the MTU and travel as IP fragments.
//! On a loopback whose MTU is an Ethernet's 1,500 bytes, in a namespace the test creates
//! (root only): a 6 KB bigPacket frame arrives whole, and a full-size DDP packet (1,478
//! bytes on the wire) still fits with DF set.

mod common;
#[path = "netns_util.rs"]
mod netns_util;

use std::net::UdpSocket;
use std::time::Duration;

use netns_util::{Netns, child_args, child_stdout, need_root};
use pfx_player::output::Output;

fn open(protocol: &str, pixels: usize, port: u16) -> Output {
    common::output::open_on_lo(
        &format!(
            "name: t
protocol: {protocol}
pixels: {pixels}
pixel_format: rgb8
color_order: rgb
destination: 127.0.0.1:{port}
"
        ),
        None,
    )
}

/// Sends one frame of `pixels` pixels and returns the datagram(s) that arrived.
fn one_frame(protocol: &str, pixels: usize) -> (Vec<Vec<u8>>, Vec<u8>, u64) {
    let rx = UdpSocket::bind("127.0.0.1:0").expect("bind");
    rx.set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    let mut out = open(protocol, pixels, rx.local_addr().expect("addr").port());
    for (i, b) in out.pixels_mut().iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
    out.send_frame(0);
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65536];
    while let Ok(n) = rx.recv(&mut buf) {
        got.push(buf[..n].to_vec());
    }
    let failed = out.counters().snapshot().frames_failed;
    (got, out.pixels().to_vec(), failed)
}

/// Runs inside the namespace only (a no-op in a normal test run).
#[test]
#[ignore = "a re-exec trampoline: runs only as a namespace test's child (netns_util::run_child)"]
fn child_send_at_mtu() {
    let Some(args) = child_args() else { return };
    let mtu = args.first().map(String::as_str).unwrap_or("1500");
    // 2,000 RGB pixels: one 6,032-byte bigPacket datagram, IP fragments at either MTU.
    let (got, px, failed) = one_frame("bigpacket", 2000);
    assert_eq!(failed, 0, "bigPacket send failed");
    assert_eq!(got.len(), 1, "bigPacket datagrams received");
    assert_eq!(got[0].len(), 32 + 6000, "bigPacket datagram length");
    assert_eq!(&got[0][32..], &px[..], "bigPacket payload");

    // 480 RGB pixels: exactly one full DDP packet, 1,440 data bytes: 1,478 bytes on the wire,
    // one packet with DF at MTU 1,500; at 1,400 it must go out fragmentable (no DF).
    let (got, px, failed) = one_frame("ddp", 480);
    assert_eq!(
        failed, 0,
        "DDP send failed (EMSGSIZE would mean DF broke it)"
    );
    assert_eq!(got.len(), 1, "DDP packets received");
    assert_eq!(got[0].len(), 10 + 1440, "DDP packet length");
    assert_eq!(&got[0][10..], &px[..], "DDP data");
    println!("child ok at MTU {mtu}");
}

#[test]
fn bigpacket_larger_than_the_mtu_arrives_and_ddp_fits_or_fragments_by_the_mtu() {
    if child_args().is_some() || !need_root("bigpacket_larger_than_the_mtu_arrives") {
        return;
    }
    for mtu in ["1500", "1400"] {
        let ns = Netns::new("mtu");
        ns.ip(&["link", "set", "lo", "mtu", mtu]);
        let out = ns.run_child("child_send_at_mtu", &[mtu]);
        let stdout = child_stdout(&out);
        assert!(
            out.status.success() && stdout.contains(&format!("child ok at MTU {mtu}")),
            "MTU {mtu}: stdout {stdout} stderr {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
