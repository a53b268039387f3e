//! No heap allocation in a frame: the built-in demo show (its three poles, bigPacket, sACN
//! and DDP, sending on loopback) runs on the real render thread, and after a warm-up 600
//! frames make no allocation on that thread. Counted by a global allocator in this test
//! binary only; it tells the render thread by its name (`pfx-render`), read with
//! prctl(PR_GET_NAME), which allocates nothing.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pfx_player::config::show::Item;
use pfx_player::engine::frame_loop::{self, Engine, ItemSource};
use pfx_player::geometry::Brightness;
use pfx_player::output::{Output, OutputOptions, SocketOptions};
use pfx_player::profiler::{self, OutputInfo, ProfilerConfig};

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
            r.set(if rc == 0 && name.starts_with(b"pfx-render\0") {
                1
            } else {
                2
            });
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
            Item::Pattern { kind, color, .. } => ItemSource::Pattern {
                kind: *kind,
                color: *color,
                seconds: 1.5,
            },
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

#[test]
fn demo_show_makes_no_allocation_on_the_render_thread_after_warm_up() {
    const WARM_UP: u64 = 60;
    const MEASURED: u64 = 600;
    let engine = demo_engine();
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
    let handle = frame_loop::spawn(engine, sink).expect("render thread starts");
    let frames = || prof.snapshot().since_start.frames;
    let wait_until = |n: u64| {
        let end = Instant::now() + Duration::from_secs(60);
        while frames() < n {
            assert!(
                Instant::now() < end,
                "the loop rendered only {} frames",
                frames()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    wait_until(WARM_UP);
    ARMED.store(true, Ordering::SeqCst);
    let armed_at = frames();
    wait_until(armed_at + MEASURED);
    ARMED.store(false, Ordering::SeqCst);
    let measured = frames() - armed_at;
    let allocs = RENDER_ALLOCS.load(Ordering::SeqCst);
    handle.stop();
    let snap = prof.snapshot();
    eprintln!(
        "{measured} frames measured at {fps} fps after {armed_at} of warm-up: {allocs} allocations on the render thread; {} packets sent",
        snap.outputs.iter().map(|o| o.counters.packets).sum::<u64>()
    );
    assert!(measured >= MEASURED, "{measured} frames");
    assert!(
        snap.outputs.iter().all(|o| o.counters.packets > 0),
        "every demo pole sent"
    );
    assert_eq!(
        allocs,
        0,
        "the render thread allocated {allocs} times in {measured} frames (the first of {} bytes)",
        FIRST_SIZE.load(Ordering::SeqCst)
    );
}
