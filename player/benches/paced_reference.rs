//! What this machine allows a 60 fps loop, without pfx: the reference for the large-show
//! cells (bench/player.sh cells B and B5). Two paced loops on the player's clock (absolute
//! deadlines, SCHED_FIFO like the render thread), each for the given seconds:
//!
//! - `sendmmsg`: UNIVERSES sACN datagrams (1,000 unless given), encoded once before the
//!   loop, sent each frame by one bare `sendmmsg` loop on loopback multicast (the least any
//!   player can do per frame);
//! - `compute`: a fixed 512 KiB copy and sum per frame, no system calls: how often the host
//!   makes the same work slower (a frame taking 3x its median is counted as slowed).
//!
//! A miss is what the player counts: the frame's work ended after the next frame's deadline.
//! One attempt; a loop that could not send its datagrams is printed UNMEASURABLE.
//!
//! cargo bench -p pfx-player --bench paced_reference [-- SECONDS [UNIVERSES] [--no-compute]]

use std::os::fd::AsRawFd;

use pfx_player::engine::clock::FrameClock;
use pfx_player::output::{Sender, SocketOptions, open_udp, set_dont_fragment};
use pfx_player::sys::time::{mono_ns, sleep_until};
use pfx_player::wire::Datagrams;
use pfx_player::wire::sacn;

const FPS: u32 = 60;

struct Paced {
    frames: usize,
    misses: usize,
    work_us: Vec<f64>,
}

fn paced(seconds: f64, mut frame: impl FnMut() -> bool) -> Option<Paced> {
    let clock = FrameClock::new(mono_ns(), FPS);
    let ticks = (seconds * f64::from(FPS)) as u64;
    let mut out = Paced {
        frames: 0,
        misses: 0,
        work_us: Vec::with_capacity(ticks as usize),
    };
    let mut tick = 1;
    while tick <= ticks {
        sleep_until(clock.deadline(tick));
        let t0 = mono_ns();
        if !frame() {
            return None;
        }
        let t1 = mono_ns();
        out.frames += 1;
        out.misses += usize::from(clock.missed(tick, t1));
        out.work_us.push((t1 - t0) as f64 / 1000.0);
        tick = clock.next(tick, mono_ns()).tick;
    }
    Some(out)
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    let k = ((p / 100.0 * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[k - 1]
}

fn report(name: &str, r: Option<Paced>) {
    let Some(mut r) = r else {
        println!("{name}: UNMEASURABLE: a frame's datagrams were not all sent");
        return;
    };
    r.work_us.sort_by(f64::total_cmp);
    let p50 = pct(&r.work_us, 50.0);
    let slowed = r.work_us.iter().filter(|&&w| w > 3.0 * p50).count();
    println!(
        "{name}: frames {} deadline misses {}; frame work p50 {:.0} us p99 {:.0} us max {:.0} us; frames slowed to > 3x the median: {}",
        r.frames,
        r.misses,
        p50,
        pct(&r.work_us, 99.0),
        r.work_us.last().copied().unwrap_or(0.0),
        slowed
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut numbers = args.iter().filter_map(|a| a.parse::<f64>().ok());
    let seconds = numbers.next().unwrap_or(60.0);
    let universes = numbers.next().map_or(1000, |u| u as usize).max(1);
    let compute = !args.iter().any(|a| a == "--no-compute");
    let param = libc::sched_param { sched_priority: 10 };
    // SAFETY: plain syscall on the calling thread with a valid param.
    let fifo = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0;
    println!(
        "paced reference, {seconds} s per loop at {FPS} fps, {}",
        if fifo {
            "SCHED_FIFO"
        } else {
            "SCHED_OTHER (no CAP_SYS_NICE)"
        }
    );

    let mut batch = Datagrams::new(universes, sacn::MAX_PACKET);
    let mut enc = sacn::Encoder::new(
        sacn::Config {
            cid: uuid::Uuid::nil(),
            source_name: "paced reference".into(),
            priority: 100,
            first_universe: 20000,
            universe_size: 510,
            sync_universe: None,
            dest: sacn::Dest::Multicast { port: 5568 },
        },
        universes * 510,
    );
    let pixels: Vec<u8> = (0..universes * 510).map(|i| (i % 251) as u8).collect();
    enc.encode(&pixels, &mut batch)
        .expect("encode reference frame");
    let sock = open_udp(&SocketOptions {
        interface: "lo".into(),
        multicast_ttl: 0,
        multicast_loop: false,
        blocking: false,
        send_every_frame: false,
        send_buffer: Some(8 << 20),
    })
    .expect("socket");
    pfx_player::output::set_multicast_ifindex(
        &sock,
        pfx_player::sys::net::interface_index("lo").unwrap_or(1),
    )
    .expect("IP_MULTICAST_IF lo");
    set_dont_fragment(&sock).expect("DF");
    let mut sender = Sender::new(universes);
    let fd = sock.as_raw_fd();
    report(
        &format!("sendmmsg ({universes} datagrams, one thread)"),
        paced(seconds, || sender.send(fd, &batch, true).sent == universes),
    );
    if !compute {
        return;
    }

    let src = vec![7u8; 512 << 10];
    let mut dst = vec![0u8; 512 << 10];
    let mut sink = 0u64;
    report(
        "compute (512 KiB copy + sum)",
        paced(seconds, || {
            dst.copy_from_slice(std::hint::black_box(&src));
            sink = sink.wrapping_add(dst.iter().map(|&b| u64::from(b)).sum::<u64>());
            true
        }),
    );
    std::hint::black_box(sink);
}
