//! Live control end to end: the real player binary, two DDP poles on 127.0.0.1 read by
//! plain UDP sockets (decoded here from the DDP header: PUSH ends a frame), and requests
//! on the player's local control socket as the agent sends them.
//!
//! A blackout makes every pole black from one frame boundary on (no frame half lit, no
//! lit frame after the stamp the player answered); `resume` brings the show back; a
//! blackout survives a restart (SIGKILL, as a breaker would, then a new player on the
//! same data partition sends black from its first frame); bad input is refused naming
//! the choices and the light does not change; a test pattern on one output darkens the
//! others; brightness scales the show.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::UdpSocket;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::player::{Player, http_port};
use pfx_api::control::{ControlAnswer, ControlState};

/// 1000 pixels: 3000 bytes, three DDP packets a frame.
const PROFILE: &str = "name: p\nprotocol: ddp\npixels: 1000\npixel_format: rgb8\ncolor_order: rgb\ndestination: 127.0.0.1:4048\n";
const COLOR: [u8; 3] = [200, 100, 50];

fn unix_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_micros() as u64
}

fn show(a: u16, b: u16, http: u16) -> String {
    format!(
        "interface: lo\nfps: 40\nhttp: 127.0.0.1:{http}\nunit_id: live-test\noutputs:\n  - name: pole-a\n    profile: p\n    destination: 127.0.0.1:{a}\n  - name: pole-b\n    profile: p\n    destination: 127.0.0.1:{b}\ncontent:\n  playlist:\n    - pattern: solid\n      color: \"#c86432\"\n      seconds: 3600\n"
    )
}

/// One whole DDP frame as received: when its last packet was read (Unix µs) and its
/// pixel bytes.
struct Frame {
    at_us: u64,
    data: Vec<u8>,
}

/// Reads frames from `sock` for `dur` (a frame ends at the packet with PUSH).
fn frames(sock: &UdpSocket, dur: Duration) -> Vec<Frame> {
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .expect("timeout");
    let end = Instant::now() + dur;
    let mut out = Vec::new();
    let mut cur = Vec::new();
    // A frame counts from its first packet (offset 0): reading may start mid-frame.
    let mut started = false;
    let mut buf = [0u8; 2048];
    while Instant::now() < end {
        let Ok(n) = sock.recv(&mut buf) else { continue };
        if n < 10 {
            continue;
        }
        let offset = u32::from_be_bytes([buf[4], buf[5], buf[6], buf[7]]) as usize;
        if offset == 0 {
            cur.clear();
            started = true;
        }
        if !started || offset != cur.len() {
            started = false;
            continue;
        }
        cur.extend_from_slice(&buf[10..n]);
        if buf[0] & 0x01 != 0 {
            started = false;
            out.push(Frame {
                at_us: unix_us(),
                data: std::mem::take(&mut cur),
            });
        }
    }
    out
}

fn drain(sock: &UdpSocket) {
    sock.set_read_timeout(Some(Duration::from_millis(5)))
        .expect("timeout");
    let mut buf = [0u8; 2048];
    while sock.recv(&mut buf).is_ok() {}
}

fn all(f: &Frame, rgb: [u8; 3]) -> bool {
    f.data.len() == 3000 && f.data.chunks(3).all(|p| p == rgb)
}

fn black(f: &Frame) -> bool {
    f.data.len() == 3000 && f.data.iter().all(|b| *b == 0)
}

/// One request on the control socket, as the agent sends it.
fn ask(sock: &Path, body: &str) -> ControlAnswer {
    let mut s = UnixStream::connect(sock).expect("connect to the control socket");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    s.write_all(format!("{body}\n").as_bytes()).expect("send");
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).expect("answer");
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
}

fn profile_control(http: u16) -> Option<ControlState> {
    let r = pfx_api::http::request_path(
        "GET",
        &format!("http://127.0.0.1:{http}"),
        "/profile",
        &[],
        None,
        Duration::from_secs(2),
    )
    .expect("GET /profile");
    let d: pfx_api::profile::ProfileDoc = serde_json::from_slice(&r.body).expect("profile");
    d.control
}

fn wait_for_socket(p: &Path, player: &mut Player) {
    player.wait_until(
        Duration::from_secs(20),
        &format!("the control socket at {} to accept", p.display()),
        || UnixStream::connect(p).is_ok(),
    );
}

#[test]
fn blackout_at_a_frame_boundary_resume_and_a_blackout_that_survives_a_restart() {
    let a = UdpSocket::bind("127.0.0.1:0").expect("bind a");
    let b = UdpSocket::bind("127.0.0.1:0").expect("bind b");
    let (pa, pb) = (
        a.local_addr().expect("a").port(),
        b.local_addr().expect("b").port(),
    );
    let http = http_port(411);
    let data = tempfile::tempdir().expect("data");
    std::fs::write(data.path().join(pfx_store::MARKER), b"").expect("marker");
    let sock = data.path().join("control.sock");
    let sock_s = sock.to_str().expect("utf-8 path").to_string();
    let store = data.path().to_str().expect("utf-8 path").to_string();
    let extra = ["--store", &store, "--control-socket", &sock_s];
    let mut player = Player::start(&show(pa, pb, http), &[("p", PROFILE)], &extra);
    wait_for_socket(&sock, &mut player);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&sock)
        .expect("socket")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(
        mode, 0o600,
        "the control socket is for root and the player only"
    );

    let lit = frames(&a, Duration::from_millis(500));
    assert!(
        lit.len() > 10 && lit.iter().all(|f| all(f, COLOR)),
        "the show plays"
    );

    // Bad input: refused naming the choices; the light does not change.
    for (body, want) in [
        (
            r#"{"action":"play","playlist":"encore","by":"t","from":"local"}"#,
            "its playlists are `content`",
        ),
        (
            r#"{"action":"brightness","factor":1.5,"by":"t","from":"local"}"#,
            "brightness_max is 1; give 0 to 1",
        ),
        (
            r#"{"action":"test","pattern":"id","output":"pole-z","by":"t","from":"local"}"#,
            "`pole-a` or `pole-b`",
        ),
        (
            r#"{"action":"dim","by":"t","from":"local"}"#,
            "not a control request",
        ),
    ] {
        let ans = ask(&sock, body);
        assert!(!ans.accepted, "{body}");
        let e = ans.error.unwrap_or_default();
        assert!(e.contains(want), "{body}: {e}");
    }
    assert_eq!(profile_control(http), None, "nothing held after refusals");
    drain(&a);
    assert!(
        frames(&a, Duration::from_millis(300))
            .iter()
            .all(|f| all(f, COLOR))
    );

    // Blackout: from one frame on every frame of both poles is black.
    let asked = unix_us();
    let ans = ask(
        &sock,
        r#"{"action":"blackout","by":"tester","from":"local"}"#,
    );
    assert!(ans.accepted, "{:?}", ans.error);
    assert_eq!(ans.held_on_disk, Some(true), "{:?}", ans.note);
    let at = ans.effective_unix_us.expect("the frame boundary's stamp");
    assert!(
        at >= asked && at < asked + 1_000_000,
        "effective {at}, asked {asked}"
    );
    let (fa, fb) = std::thread::scope(|s| {
        let ha = s.spawn(|| frames(&a, Duration::from_millis(600)));
        let hb = s.spawn(|| frames(&b, Duration::from_millis(600)));
        (ha.join().expect("a"), hb.join().expect("b"))
    });
    for (name, fs) in [("pole-a", &fa), ("pole-b", &fb)] {
        assert!(fs.len() > 10, "{name}: {} frames", fs.len());
        // Every frame is whole: lit or black, never half of each.
        assert!(
            fs.iter().all(|f| all(f, COLOR) || black(f)),
            "{name}: a frame mixed lit and black pixels"
        );
        // After the first black frame, no lit one; and none lit was read a frame (25
        // ms) or more after the stamp (slack for this reader's own scheduling).
        let first_black = fs.iter().position(black).expect("black frames");
        assert!(
            fs[first_black..].iter().all(black),
            "{name}: lit after black"
        );
        assert!(
            fs[first_black].at_us + 1_000 >= at,
            "{name}: a black frame before the boundary"
        );
        assert!(
            fs[..first_black].iter().all(|f| f.at_us < at + 200_000),
            "{name}: lit long after the boundary"
        );
    }
    let c = profile_control(http).expect("/profile shows the override");
    assert_eq!(c.content, Some(pfx_api::control::Action::Blackout));
    assert_eq!(c.content_by.as_deref(), Some("tester@local"));
    assert!(
        c.content_since_unix_ms
            .is_some_and(|t| t * 1000 >= asked - 1_000_000)
    );
    assert!(
        pfx_store::held::path(data.path()).is_file(),
        "kept on the data partition"
    );

    // A breaker: the player dies without a word; a new one on the same partition is
    // black from its first frame.
    player.signal(libc::SIGKILL);
    let _ = player.child.wait();
    drain(&a);
    let mut player = Player::start(&show(pa, pb, http), &[("p", PROFILE)], &extra);
    let fs = frames(&a, Duration::from_millis(1500));
    assert!(fs.len() > 10, "the restarted player sends");
    assert!(
        fs.iter().all(black),
        "the restarted player lit a frame during a held blackout"
    );
    wait_for_socket(&sock, &mut player);

    // Resume: the show again, and the held file is gone.
    let ans = ask(&sock, r#"{"action":"resume","by":"tester","from":"local"}"#);
    assert!(ans.accepted && ans.state.is_clear(), "{ans:?}");
    assert!(!pfx_store::held::path(data.path()).exists());
    drain(&a);
    let fs = frames(&a, Duration::from_millis(400));
    assert!(
        fs.len() > 5 && fs.iter().all(|f| all(f, COLOR)),
        "resume brings the show back"
    );
    assert_eq!(profile_control(http), None);

    // A test pattern on one output: pole-b red, pole-a black.
    let ans = ask(
        &sock,
        r#"{"action":"test","pattern":"red","output":"pole-b","by":"tester","from":"local"}"#,
    );
    assert!(ans.accepted, "{:?}", ans.error);
    drain(&a);
    drain(&b);
    let (fa, fb) = std::thread::scope(|s| {
        let ha = s.spawn(|| frames(&a, Duration::from_millis(300)));
        let hb = s.spawn(|| frames(&b, Duration::from_millis(300)));
        (ha.join().expect("a"), hb.join().expect("b"))
    });
    assert!(fa.len() > 3 && fa.iter().all(black), "pole-a dark");
    assert!(
        fb.len() > 3 && fb.iter().all(|f| all(f, [255, 0, 0])),
        "pole-b red"
    );

    // Brightness is a layer under the content: resume the show, then half.
    assert!(ask(&sock, r#"{"action":"resume","by":"t","from":"local"}"#).accepted);
    let ans = ask(
        &sock,
        r#"{"action":"brightness","factor":0.5,"by":"tester","from":"local"}"#,
    );
    assert!(ans.accepted, "{:?}", ans.error);
    drain(&a);
    let fs = frames(&a, Duration::from_millis(300));
    assert!(
        fs.len() > 3 && fs.iter().all(|f| all(f, [100, 50, 25])),
        "half the show's brightness"
    );
    drop(player);
}

/// A scheduled show: `play` takes the engine (a playlist once, then black, the schedule
/// waiting), `resume` gives it back, `stop` lets the item playing end and then holds
/// black though the schedule would loop it.
#[test]
fn play_a_playlist_now_then_black_resume_and_a_graceful_stop() {
    let a = UdpSocket::bind("127.0.0.1:0").expect("bind a");
    let b = UdpSocket::bind("127.0.0.1:0").expect("bind b");
    let (pa, pb) = (
        a.local_addr().expect("a").port(),
        b.local_addr().expect("b").port(),
    );
    let http = http_port(412);
    let dir = tempfile::tempdir().expect("dir");
    let sock = dir.path().join("control.sock");
    let sock_s = sock.to_str().expect("utf-8 path").to_string();
    let show = format!(
        "interface: lo\nfps: 40\nhttp: 127.0.0.1:{http}\nunit_id: live-test-2\noutputs:\n  - name: pole-a\n    profile: p\n    destination: 127.0.0.1:{pa}\n  - name: pole-b\n    profile: p\n    destination: 127.0.0.1:{pb}\nplaylists:\n  main:\n    - pattern: solid\n      color: \"#ff0000\"\n      seconds: 3.0\n  sponsor:\n    - pattern: solid\n      color: \"#0000ff\"\n      seconds: 1.0\nschedule:\n  timezone: UTC\n  idle: main\n  entries:\n    - playlist: main\n      start: \"03:00\"\n      end: \"03:01\"\n      dates: [{{from: 2000-01-01, to: 2000-01-02}}]\n"
    );
    let mut player = Player::start(&show, &[("p", PROFILE)], &["--control-socket", &sock_s]);
    wait_for_socket(&sock, &mut player);
    let red = frames(&a, Duration::from_millis(300));
    assert!(
        red.len() > 3 && red.iter().all(|f| all(f, [255, 0, 0])),
        "idle plays main"
    );

    let ans = ask(
        &sock,
        r#"{"action":"play","playlist":"encore","by":"t","from":"local"}"#,
    );
    assert!(
        ans.error
            .unwrap_or_default()
            .contains("`main` or `sponsor`"),
        "the schedule's playlists are the choices"
    );

    let ans = ask(
        &sock,
        r#"{"action":"play","playlist":"sponsor","by":"t","from":"local"}"#,
    );
    assert!(ans.accepted, "{:?}", ans.error);
    let at = ans.effective_unix_us.expect("stamp");
    let fs = frames(&a, Duration::from_millis(1800));
    let blue: Vec<&Frame> = fs
        .iter()
        .filter(|f| f.at_us > at + 100_000 && f.at_us < at + 800_000)
        .collect();
    assert!(
        blue.len() > 10 && blue.iter().all(|f| all(f, [0, 0, 255])),
        "the sponsor's playlist plays now"
    );
    let after: Vec<&Frame> = fs.iter().filter(|f| f.at_us > at + 1_300_000).collect();
    assert!(
        after.len() > 5 && after.iter().all(|f| black(f)),
        "then black, held (the schedule waits)"
    );

    assert!(ask(&sock, r#"{"action":"resume","by":"t","from":"local"}"#).accepted);
    drain(&a);
    let fs = frames(&a, Duration::from_millis(300));
    assert!(
        fs.len() > 3 && fs.iter().all(|f| all(f, [255, 0, 0])),
        "resume: the schedule's main again"
    );

    // stop: the 3 s item (restarted by resume about 0.35 s ago) plays to its end, then
    // black; the schedule would have looped it.
    let ans = ask(&sock, r#"{"action":"stop","by":"t","from":"local"}"#);
    assert!(ans.accepted, "{:?}", ans.error);
    let at = ans.effective_unix_us.expect("stamp");
    let fs = frames(&a, Duration::from_millis(4000));
    let going: Vec<&Frame> = fs
        .iter()
        .filter(|f| f.at_us > at + 20_000 && f.at_us < at + 2_000_000)
        .collect();
    assert!(
        going.len() > 20 && going.iter().all(|f| all(f, [255, 0, 0])),
        "a graceful stop: the item plays to its end"
    );
    let late: Vec<&Frame> = fs.iter().filter(|f| f.at_us > at + 3_200_000).collect();
    assert!(
        late.len() > 20 && late.iter().all(|f| black(f)),
        "black after the item, held"
    );
    assert!(
        fs.iter().all(|f| all(f, [255, 0, 0]) || black(f)),
        "whole frames only"
    );
    let first_black = fs.iter().position(black).expect("black");
    assert!(
        fs[first_black..].iter().all(black),
        "no red after the stop took effect"
    );
    drop(player);
}

/// A `play` starts its sequence on the tick's deadline, not on the moment the render
/// thread woke: from there every tick shows the next frame, none twice. (Started on the
/// woken time, a later tick that woke a little earlier in its period reads a position
/// just short of its frame and shows the one before again, then skips one.)
#[test]
fn a_played_sequence_shows_each_frame_once_from_its_start() {
    let a = UdpSocket::bind("127.0.0.1:0").expect("bind a");
    let pa = a.local_addr().expect("a").port();
    let http = http_port(413);
    let dir = tempfile::tempdir().expect("dir");
    // 3000 channels a frame, frame f's first pixel says f (red: low byte, green: high).
    let numbered: Vec<Vec<u8>> = (0..2400u32)
        .map(|f| {
            let mut v = vec![9u8; 3000];
            v[0] = (f & 0xff) as u8;
            v[1] = (f >> 8) as u8;
            v
        })
        .collect();
    let spec = common::fseq_writer::Spec {
        step_ms: 25,
        ..Default::default()
    };
    let seq = dir.path().join("numbers.fseq");
    std::fs::write(&seq, common::fseq_writer::write(&spec, &numbered)).expect("fseq");
    let sock = dir.path().join("control.sock");
    let sock_s = sock.to_str().expect("utf-8 path").to_string();
    let show = format!(
        "interface: lo\nfps: 40\nhttp: 127.0.0.1:{http}\nunit_id: live-test-3\noutputs:\n  - name: pole-a\n    profile: p\n    destination: 127.0.0.1:{pa}\ncontent:\n  playlist:\n    - fseq: {}\n",
        seq.display()
    );
    let mut player = Player::start(&show, &[("p", PROFILE)], &["--control-socket", &sock_s]);
    wait_for_socket(&sock, &mut player);
    let number = |f: &Frame| u32::from(f.data[0]) | u32::from(f.data[1]) << 8;
    let mut repeats = Vec::new();
    for n in 0..6 {
        drain(&a);
        let ans = ask(
            &sock,
            r#"{"action":"play","playlist":"content","by":"t","from":"local"}"#,
        );
        assert!(ans.accepted, "play {n}: {ans:?}");
        let got: Vec<u32> = frames(&a, Duration::from_millis(1500))
            .iter()
            .filter(|f| f.data.len() == 3000)
            .map(number)
            .collect();
        let from = got
            .iter()
            .position(|&f| f < 4)
            .unwrap_or_else(|| panic!("play {n}: the sequence never started again: {got:?}"));
        let run = &got[from..got.len().min(from + 40)];
        assert!(run.len() >= 30, "play {n}: too few frames: {got:?}");
        if let Some(w) = run.windows(2).find(|w| w[1] == w[0]) {
            repeats.push(format!("play {n}: frame {} twice in {run:?}", w[0]));
        }
    }
    assert!(repeats.is_empty(), "a frame shown twice: {repeats:#?}");
    drop(player);
}
