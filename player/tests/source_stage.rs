//! The source stage on the real binary, received on loopback: a sequence shorter than the
//! layout leaves black past its end (not the previous item's light), and a corrupt block
//! in the middle of a show is counted, logged and shown while frames keep going out.

mod common;

use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::fseq_writer::{Spec, frames, write};
use common::player::{Player, http_port};
use common::wait::wait_until;
use pfx_player::source::fseq::FseqFile;

/// DDP header bytes before the channel data.
const DDP_HEADER: usize = 10;

/// A DDP pole of `pixels` RGB pixels sending to a fresh loopback port.
fn pole(pixels: usize) -> (UdpSocket, String) {
    let rx = UdpSocket::bind("127.0.0.1:0").expect("bind receiver");
    rx.set_read_timeout(Some(Duration::from_millis(50)))
        .expect("timeout");
    let port = rx.local_addr().expect("addr").port();
    let profile = format!(
        "name: t\nprotocol: ddp\npixels: {pixels}\npixel_format: rgb8\ncolor_order: rgb\ndestination: 127.0.0.1:{port}\nddp:\n  data_type: 0x0B\n  destination_id: 1\n"
    );
    (rx, profile)
}

/// Every datagram's channel data, with when it arrived, until `stop` is set.
fn collect(
    rx: UdpSocket,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<(Instant, Vec<u8>)>> {
    std::thread::spawn(move || {
        let mut got = Vec::new();
        let mut buf = [0u8; 2048];
        while !stop.load(Ordering::Relaxed) {
            if let Ok(n) = rx.recv(&mut buf)
                && n > DDP_HEADER
            {
                got.push((Instant::now(), buf[DDP_HEADER..n].to_vec()));
            }
        }
        got
    })
}

fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    text.split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
}

/// Playlist: a white solid pattern over 20 pixels, then a sequence of 10 pixels. Once the
/// sequence plays, pixels 10..20 must be black on the wire.
#[test]
fn short_sequence_after_a_pattern_leaves_black_past_its_end() {
    const SEQ_CHANNELS: usize = 30;
    let dir = tempfile::tempdir().expect("tempdir");
    let seq = frames(80, SEQ_CHANNELS);
    let path = dir.path().join("short.fseq");
    std::fs::write(&path, write(&Spec::default(), &seq)).expect("write fseq");
    let (rx, prof) = pole(20);
    let show = format!(
        "interface: lo\nfps: 40\nhttp: 127.0.0.1:{}\nunit_id: tail\noutputs:\n  - name: p\n    profile: t\ncontent:\n  playlist:\n    - pattern: solid\n      color: \"#ffffff\"\n      seconds: 1\n    - fseq: {}\n",
        http_port(11),
        path.display()
    );
    let stop = Arc::new(AtomicBool::new(false));
    let reader = collect(rx, stop.clone());
    let player = Player::start(&show, &[("t", &prof)], &["--duration", "6"]);
    let (ok, stderr) = player.wait();
    stop.store(true, Ordering::Relaxed);
    let got = reader.join().expect("reader");
    assert!(ok, "player failed: {stderr}");

    let white = got
        .iter()
        .filter(|(_, d)| d.iter().all(|&b| b == 255))
        .count();
    let from_seq: Vec<&Vec<u8>> = got
        .iter()
        .map(|(_, d)| d)
        .filter(|d| seq.iter().any(|f| d[..SEQ_CHANNELS] == f[..]))
        .collect();
    assert!(
        white >= 20,
        "only {white} all-white frames from the pattern (of {}): {stderr}",
        got.len()
    );
    assert!(
        from_seq.len() >= 40,
        "only {} frames from the sequence (of {}): {stderr}",
        from_seq.len(),
        got.len()
    );
    for d in &from_seq {
        assert_eq!(d.len(), 60, "a DDP frame of 20 RGB pixels");
        assert!(
            d[SEQ_CHANNELS..].iter().all(|&b| b == 0),
            "channels past the sequence's end carry {:?}, not black",
            &d[SEQ_CHANNELS..]
        );
    }
}

/// A copy of a sequence with one block corrupted: the loop keeps sending, the frames of
/// the bad block are counted as `source_errors` in /profile and /metrics, the journal
/// names the file and the frame, and the show is back to fresh frames after the block.
#[test]
fn corrupt_block_mid_show_is_counted_logged_and_the_show_goes_on() {
    const CHANNELS: usize = 30;
    let dir = tempfile::tempdir().expect("tempdir");
    let seq = frames(400, CHANNELS);
    let spec = Spec {
        reserved_blocks: 0,
        ..Spec::default()
    };
    let mut bytes = write(&spec, &seq);
    let blocks = FseqFile::open_bytes("probe.fseq", bytes.clone())
        .expect("written file opens")
        .header()
        .blocks
        .clone();
    // Block 6: frames 90..106, about 2.3 s into the show at 25 ms a frame.
    let bad = blocks[6];
    for i in 4..bad.len as usize {
        bytes[bad.offset as usize + i] = 0xff;
    }
    let path = dir.path().join("corrupt-copy.fseq");
    std::fs::write(&path, &bytes).expect("write fseq");
    let bad_frames = bad.first_frame as usize..(bad.first_frame + bad.frames) as usize;

    let (rx, prof) = pole(10);
    let port = http_port(12);
    let show = format!(
        "interface: lo\nfps: 40\nhttp: 127.0.0.1:{port}\nunit_id: corrupt\noutputs:\n  - name: p\n    profile: t\ncontent:\n  loop: true\n  playlist:\n    - fseq: {}\n",
        path.display()
    );
    let stop = Arc::new(AtomicBool::new(false));
    let reader = collect(rx, stop.clone());
    let mut player = Player::start(&show, &[("t", &prof)], &["--duration", "6"]);
    // Past the bad block (ticks 90..106 of 25 ms) and the 60 frames checked after it; the
    // show is still on. A tick the loop passed over still moves the sequence on.
    let past = (bad_frames.end + 60) as u64;
    let p = player.wait_profile(
        port,
        &format!("the show {past} ticks in, past the bad block"),
        Duration::from_secs(20),
        |d| d.snapshot.since_start.frames + d.snapshot.since_start.skipped_ticks >= past,
    );
    let metrics = http_get(port, "/metrics").expect("/metrics answers");
    let (ok, stderr) = player.wait();
    stop.store(true, Ordering::Relaxed);
    let got = reader.join().expect("reader");
    assert!(ok, "player failed: {stderr}");

    let (errors, late) = (p.snapshot.source_errors, p.snapshot.source_late);
    eprintln!(
        "corrupt block {bad_frames:?}: source_errors {errors}, source_late {late}, {} datagrams",
        got.len()
    );
    // The 16 frames of the block, give or take the frame where the decoder retries.
    assert!(
        (8..=40).contains(&errors),
        "source_errors {errors} for a 16-frame corrupt block (late {late}): {stderr}"
    );
    assert!(
        metrics
            .lines()
            .any(|l| l == format!("pfx_source_errors_total {errors}")),
        "/metrics lacks pfx_source_errors_total {errors}:\n{metrics}"
    );
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("pfx_source_late_total ")),
        "/metrics lacks pfx_source_late_total"
    );

    // The journal: one line (rate-limited) naming the file and a frame of the bad block.
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("cannot be decoded"))
        .collect();
    assert!(
        !lines.is_empty() && lines.len() <= 2,
        "want one or two rate-limited lines, got {lines:?}"
    );
    let line = lines[0];
    assert!(
        line.contains(&path.display().to_string()),
        "names the file: {line}"
    );
    assert!(
        bad_frames
            .clone()
            .any(|f| line.contains(&format!("frame {f} "))),
        "names a frame of the bad block {bad_frames:?}: {line}"
    );

    // Frames kept flowing: no gap on the wire, and fresh frames after the bad block.
    let gap = got
        .windows(2)
        .map(|w| w[1].0 - w[0].0)
        .max()
        .unwrap_or_default();
    assert!(got.len() > 150, "only {} datagrams in 6 s", got.len());
    assert!(
        gap < Duration::from_millis(200),
        "the wire went quiet for {gap:?}"
    );
    let index = |d: &Vec<u8>| seq.iter().position(|f| d[..] == f[..]);
    let after = got
        .iter()
        .filter_map(|(_, d)| index(d))
        .filter(|&i| i >= bad_frames.end && i < bad_frames.end + 60)
        .count();
    assert!(
        after >= 40,
        "only {after} fresh frames in the 60 after the bad block"
    );
}

/// The prefetcher tells a late frame from one lost to a decode error, and after a corrupt
/// block it is back on the first frames past it (not `ahead` frames later).
#[test]
fn prefetcher_reports_failed_frames_and_recovers_after_the_bad_block() {
    use pfx_player::source::fseq::{Fetch, Prefetcher};
    let seq = frames(200, 12);
    let spec = Spec {
        reserved_blocks: 0,
        ..Spec::default()
    };
    let mut bytes = write(&spec, &seq);
    let bad = FseqFile::open_bytes("probe.fseq", bytes.clone())
        .expect("opens")
        .header()
        .blocks[3];
    for i in 4..bad.len as usize {
        bytes[bad.offset as usize + i] = 0xff;
    }
    let mut p = Prefetcher::spawn(
        FseqFile::open_bytes("corrupt.fseq", bytes).expect("opens"),
        32,
    );
    let (first, end) = (bad.first_frame, bad.first_frame + bad.frames);
    for n in 0..first {
        assert!(p.wait_for(n, Duration::from_secs(5)).is_some(), "frame {n}");
    }
    // The decoder, 32 frames ahead, hits the bad block.
    wait_until(
        Duration::from_secs(5),
        "the decoder to hit the bad block",
        || p.errors() >= 1,
    );
    for n in first..end {
        let (seeks, errors) = (p.stats().seeks, p.errors());
        let f = p.fetch(n);
        assert!(
            matches!(f, Fetch::Failed(Some(d)) if d == &seq[first as usize - 1][..]),
            "frame {n} in the bad block: {f:?}"
        );
        // A fetch that sent the decoder back to retry at n: it fails on the same block
        // again before the next frame is asked for.
        if p.stats().seeks > seeks {
            wait_until(
                Duration::from_secs(5),
                &format!("the decoder's retry at frame {n} to fail on the bad block"),
                || p.errors() > errors,
            );
        }
    }
    assert_eq!(p.stats().failed, u64::from(bad.frames));
    assert_eq!(p.stats().late, 0);
    // Past the block: at most the first frame is lost while the decoder restarts there,
    // and the frames after it come as they are decoded, with no seek (not `ahead` later).
    let _ = p.fetch(end);
    let seeks = p.stats().seeks;
    for n in end + 1..end + 20 {
        assert_eq!(
            p.wait_for(n, Duration::from_secs(5)),
            Some(&seq[n as usize][..]),
            "frame {n}"
        );
    }
    assert_eq!(
        p.stats().seeks,
        seeks,
        "the decoder went on from the frame after the block: {:?}",
        p.stats()
    );
}

/// Once the last frame is handed out the decoder starts over, so a looped sequence has
/// frame 0 ready when it comes round instead of sending its last frame again.
#[test]
fn prefetcher_has_frame_0_ready_when_the_sequence_comes_round() {
    use pfx_player::source::fseq::{Fetch, Prefetcher};
    let seq = frames(50, 9);
    let mut p = Prefetcher::spawn(
        FseqFile::open_bytes("loop.fseq", write(&Spec::default(), &seq)).expect("opens"),
        8,
    );
    for n in 0..50 {
        assert!(p.wait_for(n, Duration::from_secs(5)).is_some(), "frame {n}");
    }
    // The last frame again (the output rate is above the sequence's), then the loop seam.
    assert_eq!(p.fetch(49), Fetch::Ready(&seq[49][..]));
    // Handing out the last frame sent the decoder back to frame 0 (one seek); it is
    // decoded without another one, i.e. without frame 0 being asked for late.
    let seeks = p.stats().seeks;
    assert_eq!(
        p.wait_for(0, Duration::from_secs(5)),
        Some(&seq[0][..]),
        "frame 0 after the last"
    );
    assert_eq!(
        p.stats().seeks,
        seeks,
        "frame 0 was decoded ahead, not sought when asked for"
    );
    for n in 0..20 {
        assert_eq!(p.fetch(n), Fetch::Ready(&seq[n as usize][..]), "frame {n}");
        // Pacing, not ordering: a frame period (shorter than any real sequence's), the
        // rate at which the render loop asks; the decoder must keep up with it.
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!((p.stats().late, p.stats().failed), (0, 0));
}
