//! sACN universe synchronization and frames cut short: the sync packet
//! goes only after a frame whose every universe went, so a receiver that waits for sync
//! never shows a torn frame. In a namespace the test creates (root only), `lo` gets a tbf
//! slower than the show, so the sender's socket fills and `sendmmsg` stops at EAGAIN in the
//! middle of frames. The output sends every frame as far as the socket takes it
//! (`send_every_frame`: no admission, so frames really are cut), once with a small output
//! (one thread: the sync packet is the batch's last datagram) and once with one of 140
//! universes (two halves on two threads, the sync packet sent after both).

mod common;
#[path = "netns_util.rs"]
mod netns_util;

use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use netns_util::{Netns, child_args, child_stdout, need_root};

const SYNC: u16 = 7000;

fn big_receive_buffer(s: &UdpSocket) {
    let v: libc::c_int = 64 << 20;
    // SAFETY: a valid socket and a c_int of the size given. SO_RCVBUFFORCE (root).
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// Sends `frames` frames of `universes` universes, frame k's every slot = k, every `gap`,
/// and checks what arrived: at least one frame cut and one sync packet, and no sync packet
/// after a frame of which a universe is missing.
fn run(universes: usize, frames: usize, gap: Duration) -> String {
    let rx = UdpSocket::bind("127.0.0.1:0").expect("bind");
    big_receive_buffer(&rx);
    rx.set_read_timeout(Some(Duration::from_millis(1500)))
        .expect("timeout");
    let port = rx.local_addr().expect("addr").port();
    let mut out = common::output::open_on_lo_with(
        &format!(
            "name: t\nprotocol: sacn\npixels: {}\npixel_format: rgb8\ncolor_order: rgb\ndestination: 127.0.0.1:{port}\nsacn:\n  first_universe: 1\n  sync_universe: {SYNC}\n",
            universes * 170
        ),
        None,
        true,
    );
    assert_eq!(
        out.renders_in_halves(),
        universes >= 128,
        "halves for {universes} universes"
    );
    let start = Instant::now();
    for k in 0..frames {
        out.pixels_mut().fill(k as u8);
        out.send_frame(0);
        let next = start + gap * (k as u32 + 1);
        // Pacing, not ordering: frames leave at the show's frame rate.
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    let c = out.counters().snapshot();
    // (frame mark, universes seen) of the newest frame begun, for each sync packet.
    let mut seen: Vec<Vec<bool>> = vec![vec![false; universes]; frames];
    let mut newest: Option<usize> = None;
    let (mut syncs, mut syncs_after_torn) = (0, 0);
    let mut buf = vec![0u8; 2048];
    while let Ok(n) = rx.recv(&mut buf) {
        let root_vector = u32::from_be_bytes([buf[18], buf[19], buf[20], buf[21]]);
        let framing_vector = u32::from_be_bytes([buf[40], buf[41], buf[42], buf[43]]);
        if root_vector == 0x0000_0008 && framing_vector != 0x0000_0001 {
            continue; // universe discovery
        }
        if root_vector == 0x0000_0008 {
            // E1.31 synchronization packet (49 bytes), its universe at 45..47.
            assert_eq!(n, 49, "sync packet length");
            assert_eq!(u16::from_be_bytes([buf[45], buf[46]]), SYNC);
            syncs += 1;
            if let Some(f) = newest
                && seen[f].iter().any(|&s| !s)
            {
                syncs_after_torn += 1;
            }
            continue;
        }
        assert_eq!(root_vector, 0x0000_0004, "data packet");
        let universe = usize::from(u16::from_be_bytes([buf[113], buf[114]]));
        let mark = usize::from(buf[126]);
        // Marks wrap at 256: the frame is the one nearest the newest begun.
        let f = match newest {
            None => mark,
            Some(cur) => {
                let base = cur - cur % 256;
                [base.wrapping_sub(256), base, base + 256]
                    .into_iter()
                    .map(|b| b.wrapping_add(mark))
                    .filter(|&x| x < frames)
                    .min_by_key(|&x| x.abs_diff(cur))
                    .expect("a frame for the mark")
            }
        };
        seen[f][universe - 1] = true;
        if newest.is_none_or(|cur| f > cur) {
            newest = Some(f);
        }
    }
    let whole = seen.iter().filter(|u| u.iter().all(|&s| s)).count();
    let torn = seen
        .iter()
        .filter(|u| u.iter().any(|&s| s) && !u.iter().all(|&s| s))
        .count();
    assert!(
        c.frames_partial > 0,
        "{universes} universes: no frame was cut, the test shows nothing ({c:?})"
    );
    assert!(torn > 0, "{universes} universes: no torn frame arrived");
    assert!(syncs > 0, "{universes} universes: no sync packet arrived");
    assert_eq!(
        syncs_after_torn, 0,
        "{universes} universes: sync packets after a torn frame ({syncs} in all)"
    );
    // A whole frame's sync packet can itself meet a full socket, so at most one each.
    assert!(
        syncs <= whole,
        "{universes} universes: {syncs} syncs for {whole} whole frames"
    );
    format!(
        "{universes} universes: {whole} whole, {torn} torn, {syncs} syncs, {} cut by the sender",
        c.frames_partial
    )
}

/// Runs inside the namespace only (a no-op in a normal test run).
#[test]
#[ignore = "a re-exec trampoline: runs only as a namespace test's child (netns_util::run_child)"]
fn child_sync_only_after_whole_frames() {
    let Some(_) = child_args() else { return };
    // 4 universes (2.7 KB on the wire, 1.1 ms at 20 Mbit/s) every 0.25 ms.
    println!("{}", run(4, 400, Duration::from_micros(250)));
    // 140 universes (95 KB, 38 ms at 20 Mbit/s) every 10 ms.
    println!("{}", run(140, 120, Duration::from_millis(10)));
    println!("child ok");
}

#[test]
fn a_sync_packet_follows_only_a_frame_whose_every_universe_went() {
    if child_args().is_some()
        || !need_root("a_sync_packet_follows_only_a_frame_whose_every_universe_went")
    {
        return;
    }
    let ns = Netns::new("sync");
    // A link slower than the show: datagrams wait in the tbf, charged to the sender's
    // socket, until its buffer is full and the next send stops at EAGAIN.
    ns.exec(&[
        "tc", "qdisc", "add", "dev", "lo", "root", "tbf", "rate", "20mbit", "burst", "8k",
        "latency", "2s",
    ]);
    let out = ns.run_child("child_sync_only_after_whole_frames", &[]);
    let stdout = child_stdout(&out);
    assert!(
        out.status.success() && stdout.contains("child ok"),
        "stdout {stdout} stderr {}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{stdout}");
}
