//! No heap allocation in a frame: the built-in demo show (its three poles, bigPacket, sACN
//! and DDP, sending on loopback) runs on the real render thread, and after a warm-up 600
//! frames make no allocation on that thread; then the same poles play a looped sequence
//! through decode-ahead, and 600 frames of that allocate nothing either. Counted by a global allocator in this test
//! binary only; it tells the render thread by its name (`pfx-render`), read with
//! prctl(PR_GET_NAME), which allocates nothing. A show with a large sACN output, which
//! renders each frame in halves on the render thread and the output's helper
//! (`pfx-send`), allocates on neither.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

#[path = "common/fseq_writer.rs"]
mod fseq_writer;
#[path = "common/wait.rs"]
mod wait;

use pfx_player::config::show::{Item, PatternItem};
use pfx_player::engine::frame_loop::{self, Engine, ItemSource, OnEnd, RemoteLink, SyncLink};
use pfx_player::geometry::Brightness;
use pfx_player::output::{Output, OutputOptions, SocketOptions};
use pfx_player::profiler::{self, OutputInfo, ProfilerConfig};
use pfx_player::source::fseq::{FseqFile, Prefetcher};

/// The counters are global: the tests take turns.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Counting is on (after the warm-up).
static ARMED: AtomicBool = AtomicBool::new(false);
/// Allocations (alloc, alloc_zeroed, realloc) on the render thread while armed.
static RENDER_ALLOCS: AtomicU64 = AtomicU64::new(0);
/// The size of the first one, to say what it was.
static FIRST_SIZE: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// 0: not looked at yet, 1: the render thread, 2: another thread. No destructor, so
    /// using it never allocates.
    static ROLE: Cell<u8> = const { Cell::new(0) };
}

fn on_render_thread() -> bool {
    ROLE.try_with(|r| {
        if r.get() == 0 {
            let mut name = [0u8; 16];
            // SAFETY: PR_GET_NAME writes at most 16 bytes (NUL included) into `name`.
            let rc = unsafe { libc::prctl(libc::PR_GET_NAME, name.as_mut_ptr()) };
            let helper = pfx_player::output::WORKER_THREAD.as_bytes();
            let is_helper = name.starts_with(helper) && name.get(helper.len()) == Some(&0);
            r.set(
                if rc == 0 && (name.starts_with(b"pfx-render\0") || is_helper) {
                    1
                } else {
                    2
                },
            );
        }
        r.get() == 1
    })
    .unwrap_or(false)
}

fn count(size: usize) {
    if ARMED.load(Ordering::Relaxed) && on_render_thread() {
        let _ = FIRST_SIZE.compare_exchange(0, size as u64, Ordering::Relaxed, Ordering::Relaxed);
        RENDER_ALLOCS.fetch_add(1, Ordering::Relaxed);
    }
}

struct Counting;

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        count(l.size());
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        count(l.size());
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        count(n);
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Counting = Counting;

/// The demo show's outputs and playlist, opened as `pfx-player demo` opens them, with
/// each pattern shortened to 1.5 s so the measured frames cover every pattern, the item
/// changes and a loop restart.
fn demo_engine() -> Engine {
    let show = pfx_player::demo::demo_show().expect("built-in demo parses");
    let opts = OutputOptions {
        socket: SocketOptions {
            interface: show.config.interface.clone(),
            multicast_ttl: show.config.multicast_ttl,
            multicast_loop: show.config.multicast_loop,
            blocking: false,
            send_every_frame: false,
            send_buffer: None,
        },
        cid: uuid::Uuid::nil(),
        source_name: "alloc test".into(),
    };
    let outputs: Vec<Output> = show
        .outputs
        .iter()
        .map(|o| Output::open(o, &opts).expect("demo output opens on lo"))
        .collect();
    let items = show
        .playlist
        .iter()
        .map(|item| match item {
            Item::Pattern(p) => ItemSource::Pattern(PatternItem { seconds: 1.5, ..*p }),
            Item::Fseq(p) => panic!("the demo plays patterns only, not {}", p.display()),
        })
        .collect();
    Engine {
        outputs,
        brightness: Brightness::new(show.config.brightness),
        fps: show.config.fps,
        looped: show.config.content.looped,
        items,
    }
}

/// A looped sequence over the demo's channels: 100 frames of 25 ms, so 600 frames at
/// 60 fps pass the loop seam (and its restart of decode-ahead) four times.
fn sequence_item(channels: usize) -> ItemSource {
    sequence_of(channels, 100)
}

fn sequence_of(channels: usize, count: usize) -> ItemSource {
    let spec = fseq_writer::Spec::default();
    let bytes = fseq_writer::write(&spec, &fseq_writer::frames(count, channels));
    let file = FseqFile::open_bytes("alloc.fseq", bytes).expect("written file opens");
    let (frames, step_ms, frame_len) = (
        file.frames(),
        u32::from(file.header().step_ms),
        file.frame_len(),
    );
    let mut prefetch = Box::new(Prefetcher::spawn(file, 16));
    assert!(prefetch.wait_for(0, Duration::from_secs(5)).is_some());
    ItemSource::Fseq {
        prefetch,
        frames,
        step_ms,
        frame_len,
    }
}

/// Runs `engine` on the render thread; after `warm_up` frames counts the render thread's
/// allocations over at least `measured` frames. Returns (frames measured, allocations).
fn measure(engine: Engine, warm_up: u64, measured: u64) -> (u64, u64) {
    measure_with(engine, warm_up, measured, OnEnd::Exit, SyncLink::Standalone)
}

fn measure_with(
    engine: Engine,
    warm_up: u64,
    measured: u64,
    on_end: OnEnd,
    sync: SyncLink,
) -> (u64, u64) {
    let infos = engine
        .outputs
        .iter()
        .map(|o| OutputInfo {
            name: o.name.clone(),
            protocol: "demo".into(),
            destination: String::new(),
            counters: o.counters(),
        })
        .collect();
    let fps = engine.fps;
    let (sink, prof) = profiler::start(
        ProfilerConfig {
            window: Duration::ZERO,
            fps,
        },
        infos,
    );
    RENDER_ALLOCS.store(0, Ordering::SeqCst);
    FIRST_SIZE.store(0, Ordering::SeqCst);
    let handle = frame_loop::spawn_with(engine, sink, on_end, sync).expect("render thread starts");
    let frames = || prof.snapshot().since_start.frames;
    let wait_until = |n: u64| {
        wait::wait_until(
            Duration::from_secs(60),
            &format!("the loop to render {n} frames"),
            || frames() >= n,
        )
    };
    wait_until(warm_up);
    ARMED.store(true, Ordering::SeqCst);
    let armed_at = frames();
    wait_until(armed_at + measured);
    ARMED.store(false, Ordering::SeqCst);
    let done = frames() - armed_at;
    let allocs = RENDER_ALLOCS.load(Ordering::SeqCst);
    handle.stop();
    let snap = prof.snapshot();
    eprintln!(
        "{done} frames measured at {fps} fps after {armed_at} of warm-up: {allocs} allocations on the render thread; {} packets sent; source late {} errors {}",
        snap.outputs.iter().map(|o| o.counters.packets).sum::<u64>(),
        snap.source_late,
        snap.source_errors,
    );
    assert!(
        snap.outputs.iter().all(|o| o.counters.packets > 0),
        "every demo pole sent"
    );
    (done, allocs)
}

// One test, two shows in turn: the counter is per render thread, so they must not overlap.
#[test]
fn demo_show_and_a_looped_sequence_make_no_allocation_on_the_render_thread() {
    let _turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    const WARM_UP: u64 = 60;
    const MEASURED: u64 = 600;
    let (frames, allocs) = measure(demo_engine(), WARM_UP, MEASURED);
    assert!(frames >= MEASURED, "{frames} frames");
    assert_eq!(
        allocs,
        0,
        "the demo show: the render thread allocated {allocs} times in {frames} frames (the first of {} bytes)",
        FIRST_SIZE.load(Ordering::SeqCst)
    );

    let mut engine = demo_engine();
    let channels = engine
        .outputs
        .iter()
        .map(|o| o.map().start + o.map().channels())
        .max()
        .unwrap_or(0);
    engine.items = vec![sequence_item(channels)];
    let (frames, allocs) = measure(engine, WARM_UP, MEASURED);
    assert!(frames >= MEASURED, "{frames} frames");
    assert_eq!(
        allocs,
        0,
        "a looped sequence: the render thread allocated {allocs} times in {frames} frames (the first of {} bytes)",
        FIRST_SIZE.load(Ordering::SeqCst)
    );
}

/// The same looped sequence played as a MultiSync master (unicast to a socket on
/// loopback, so open, start, sync and stop go out every lap), then as a remote following
/// a timeline another thread keeps publishing with jitter (so the pacer slews and jumps):
/// neither allocates on the render thread.
#[test]
fn a_sync_master_and_a_sync_remote_make_no_allocation_on_the_render_thread() {
    use pfx_player::config::show::{MasterLostThen, SyncRole, SyncSettings, SyncTransport};
    use pfx_player::sync::estimator::Estimate;
    use pfx_player::sync::shared::{Status, Timeline};
    use std::sync::Arc;
    let _turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    const WARM_UP: u64 = 60;
    const MEASURED: u64 = 600;
    let rx = std::net::UdpSocket::bind("127.0.0.1:0").expect("receiver");
    rx.set_read_timeout(Some(Duration::from_millis(100)))
        .expect("timeout");
    let settings = SyncSettings {
        role: SyncRole::Master,
        interface: "lo".into(),
        port: rx.local_addr().expect("addr").port(),
        transport: SyncTransport::Unicast,
        remotes: vec![std::net::Ipv4Addr::LOCALHOST],
        sequences: ".".into(),
        offset_ms: 0,
        lost_after_s: 5.0,
        lost_then: MasterLostThen::Stop,
    };
    let status = Arc::new(Status::default());
    let master =
        pfx_player::app::sync::open_master(&settings, status.clone()).expect("master socket");
    let mut engine = demo_engine();
    let channels = engine
        .outputs
        .iter()
        .map(|o| o.map().start + o.map().channels())
        .max()
        .unwrap_or(0);
    engine.items = vec![sequence_item(channels)];
    let (frames, allocs) = measure_with(
        engine,
        WARM_UP,
        MEASURED,
        OnEnd::Exit,
        SyncLink::Master(Box::new(master)),
    );
    assert!(frames >= MEASURED, "{frames} frames");
    assert_eq!(
        allocs,
        0,
        "a sync master: the render thread allocated {allocs} times in {frames} frames (the first of {} bytes)",
        FIRST_SIZE.load(Ordering::SeqCst)
    );
    let sent = status.sent.load(Ordering::SeqCst);
    let mut buf = [0u8; 2048];
    assert!(
        rx.recv(&mut buf).is_ok() && sent > 60,
        "the master sent {sent} sync packets"
    );

    // A remote: one long item, on a timeline that wanders by up to 0.3 ms and starts over
    // every 4 s.
    let timeline = Arc::new(Timeline::default());
    let status = Arc::new(Status::default());
    let link = SyncLink::Remote(Box::new(RemoteLink::new(timeline.clone(), status.clone())));
    let stop = Arc::new(AtomicBool::new(false));
    let publisher = {
        let (timeline, stop) = (timeline.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut generation = 1;
            let mut base = pfx_player::sys::time::mono_ns() as i64;
            let mut k = 0i64;
            while !stop.load(Ordering::Relaxed) {
                k += 1;
                if k % 16 == 0 {
                    generation += 1;
                    base = pfx_player::sys::time::mono_ns() as i64;
                }
                let e = Estimate {
                    base_ns: base + (k * 37_000) % 300_000,
                    rate: 0.0,
                    at_pos_ns: 0,
                    jitter_ns: 0,
                    samples: 16,
                };
                timeline.publish(generation, Some(e));
                // Pacing, not ordering: a new estimate about as often as the sync thread.
                std::thread::sleep(Duration::from_millis(250));
            }
        })
    };
    let mut engine = demo_engine();
    engine.looped = false;
    engine.items = vec![sequence_of(channels, 2000)];
    let (frames, allocs) = measure_with(engine, WARM_UP, MEASURED, OnEnd::Black, link);
    stop.store(true, Ordering::SeqCst);
    let _ = publisher.join();
    assert!(frames >= MEASURED, "{frames} frames");
    assert_eq!(
        allocs,
        0,
        "a sync remote: the render thread allocated {allocs} times in {frames} frames (the first of {} bytes)",
        FIRST_SIZE.load(Ordering::SeqCst)
    );
    assert!(
        status.jumps.load(Ordering::SeqCst) >= 2,
        "the remote followed the restarts"
    );
    assert!(
        status.corrections.load(Ordering::SeqCst) > 10,
        "the remote slewed"
    );
}

/// A 200-universe sACN output (34,000 pixels, GRB, with a sync universe) from channel
/// `start`: large enough to render in halves.
fn big_output(start: usize) -> Output {
    use pfx_player::config::DeviceProfile;
    use pfx_player::config::show::ResolvedOutput;
    let profile = DeviceProfile::from_str(
        "name: big\nprotocol: sacn\npixels: 34000\npixel_format: rgb8\ncolor_order: grb\ndestination: 127.0.0.1:9\nsacn:\n  sync_universe: 999\n",
        std::path::Path::new("<test>"),
    )
    .expect("test profile");
    let big = Output::open(
        &ResolvedOutput {
            name: "big".into(),
            destination: profile.destination,
            start,
            profile,
        },
        &OutputOptions {
            socket: SocketOptions {
                interface: "lo".into(),
                multicast_ttl: 0,
                multicast_loop: false,
                blocking: false,
                send_every_frame: false,
                send_buffer: None,
            },
            cid: uuid::Uuid::nil(),
            source_name: "alloc test".into(),
        },
    )
    .expect("200-universe output opens on lo");
    assert!(big.renders_in_halves(), "200 universes render in halves");
    big
}

/// The demo's poles and a 200-universe output beside them (its own channels), which
/// renders its frames in halves: the demo's patterns, then a looped sequence over all the
/// channels. Neither allocates on the render thread or on the output's helper.
#[test]
fn an_output_rendered_in_halves_makes_no_allocation_on_the_render_thread_or_its_helper() {
    let _turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    const WARM_UP: u64 = 60;
    const MEASURED: u64 = 600;
    let start = {
        let e = demo_engine();
        e.outputs
            .iter()
            .map(|o| o.map().start + o.map().channels())
            .max()
            .unwrap_or(0)
    };
    for sequence in [false, true] {
        let mut engine = demo_engine();
        engine.outputs.push(big_output(start));
        if sequence {
            engine.items = vec![sequence_item(start + 34000 * 3)];
        }
        let (frames, allocs) = measure(engine, WARM_UP, MEASURED);
        assert!(frames >= MEASURED, "{frames} frames");
        assert_eq!(
            allocs,
            0,
            "in halves ({}): the render thread and its helper allocated {allocs} times in {frames} frames (the first of {} bytes)",
            if sequence { "a sequence" } else { "patterns" },
            FIRST_SIZE.load(Ordering::SeqCst)
        );
    }
}

/// The dashboard watching: a viewer asks for the pixels every millisecond and reads the
/// copies back (so the render thread also meets a reader holding a slot), and after the
/// warm-up (the first copy sizes the buffers) the render thread still allocates nothing
/// while it copies nearly every frame.
#[test]
fn a_pixel_viewer_asking_every_frame_makes_no_allocation_on_the_render_thread() {
    let _turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let board = &pfx_player::pixels::BOARD;
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let viewer = std::thread::spawn(move || {
        let mut read = 0u64;
        while !s2.load(Ordering::Relaxed) {
            board.want();
            if board.encoded().is_some() {
                read += 1;
            }
            // Pacing, not ordering: a viewer asking about every frame (and more often).
            std::thread::sleep(Duration::from_millis(1));
        }
        read
    });
    let seq0 = board.seq();
    let (frames, allocs) = measure(demo_engine(), 60, 600);
    let copies = board.seq() - seq0;
    stop.store(true, Ordering::Relaxed);
    let read = viewer.join().expect("viewer");
    assert!(frames >= 600, "{frames} frames");
    assert!(
        copies >= 600 && read > 0,
        "{copies} copies in {frames} + 60 frames, {read} read back: the viewer was not served"
    );
    assert_eq!(
        allocs,
        0,
        "with a pixel viewer: the render thread allocated {allocs} times in {frames} frames (the first of {} bytes)",
        FIRST_SIZE.load(Ordering::SeqCst)
    );
}
