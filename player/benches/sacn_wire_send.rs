//! wire_send CPU per packet for UNIVERSES sACN universes (1,000 unless given), side by side
//! with a bare `sendmmsg`
//! loop sending the same bytes, in one run (ratios, not absolute times: these machines
//! drift). Rounds alternate A/B so drift hits both equally. One attempt, no retries; a
//! round whose guard fails is counted and excluded, and if too many fail the cell is
//! printed UNMEASURABLE.
//!
//! Fairness: the bare socket gets the same setup as pfx's (DF, see `set_dont_fragment`),
//! and pfx's CPU counts both threads of an output in halves: the render thread's own time
//! plus what the output's helper used meanwhile (each half encodes and sends its own
//! universes). Wall time per frame is printed beside it: two threads spend more CPU in
//! total to finish the frame sooner.
//!
//! cargo bench -p pfx-player --bench sacn_wire_send [-- ROUNDS [UNIVERSES]]

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::path::Path;

use pfx_player::config::DeviceProfile;
use pfx_player::config::show::ResolvedOutput;
use pfx_player::output::{
    Output, OutputOptions, Sender, SocketOptions, open_udp, set_dont_fragment,
};
use pfx_player::sys::time::{mono_ns, thread_cpu_ns};
use pfx_player::wire::Datagrams;

/// The send helper's CPU so far; 0 when the output has none, so the sum stays right.
fn output_helper_cpu(o: &Output) -> u64 {
    o.send_helper_cpu_ns().unwrap_or(0)
}

fn main() {
    let mut numbers = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse::<usize>().ok());
    let rounds = numbers.next().unwrap_or(200).max(1);
    let universes = numbers.next().unwrap_or(1000).max(1);
    let profile = DeviceProfile::from_str(
        &format!(
            "name: big\nprotocol: sacn\npixels: {}\npixel_format: rgb8\ncolor_order: rgb\ndestination: 239.255.0.1:5568\nsacn:\n  first_universe: 1000\n",
            universes * 170
        ),
        Path::new("<bench>"),
    )
    .expect("bench profile");
    let resolved = ResolvedOutput {
        name: "bench".into(),
        destination: profile.destination,
        start: 0,
        profile,
    };
    let sock = SocketOptions {
        interface: "lo".into(),
        multicast_ttl: 0,
        multicast_loop: false,
        blocking: false,
        send_every_frame: false,
        send_buffer: Some(8 << 20),
    };
    let opts = OutputOptions {
        socket: sock.clone(),
        cid: uuid::Uuid::nil(),
        source_name: "bench".into(),
    };
    let mut output = Output::open(&resolved, &opts).expect("open output on lo");
    for (i, b) in output.pixels_mut().iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }

    // The baseline: the same datagrams, encoded once, sent with a bare sendmmsg loop.
    let mut pre = Datagrams::new(universes, 700);
    {
        let mut enc = pfx_player::wire::sacn::Encoder::new(
            pfx_player::wire::sacn::Config {
                cid: uuid::Uuid::nil(),
                source_name: "bench bench".into(),
                priority: 100,
                first_universe: 1000,
                universe_size: 510,
                sync_universe: None,
                dest: pfx_player::wire::sacn::Dest::Multicast { port: 5568 },
            },
            universes * 510,
        );
        enc.encode(output.pixels(), &mut pre)
            .expect("encode baseline");
    }
    let bare_sock = open_udp(&sock).expect("bare socket");
    pfx_player::output::set_multicast_ifindex(
        &bare_sock,
        pfx_player::sys::net::interface_index("lo").unwrap_or(1),
    )
    .expect("multicast if");
    set_dont_fragment(&bare_sock).expect("DF on the bare socket");
    let mut bare = Sender::new(universes);

    let counters = output.counters();
    let mut a = Vec::with_capacity(rounds);
    let mut b = Vec::with_capacity(rounds);
    let mut wall_a = Vec::with_capacity(rounds);
    let mut wall_b = Vec::with_capacity(rounds);
    let mut excluded = 0;
    for _ in 0..rounds {
        let before = counters.packets.load(std::sync::atomic::Ordering::Relaxed);
        let h0 = output_helper_cpu(&output);
        let (w0, t0) = (mono_ns(), thread_cpu_ns());
        output.send_frame(0);
        let (t1, w1) = (thread_cpu_ns(), mono_ns());
        let h1 = output_helper_cpu(&output);
        let sent = counters.packets.load(std::sync::atomic::Ordering::Relaxed) - before;
        let (w2, t2) = (mono_ns(), thread_cpu_ns());
        let out = bare.send(bare_sock.as_raw_fd(), &pre, true);
        let (t3, w3) = (thread_cpu_ns(), mono_ns());
        // Guard: both sides must have sent every datagram, else the cell compares
        // different work. Excluded rounds are counted and printed.
        if sent as usize != universes || out.sent != universes {
            excluded += 1;
            continue;
        }
        a.push((t1 - t0 + (h1 - h0)) as f64 / universes as f64);
        b.push((t3 - t2) as f64 / universes as f64);
        wall_a.push((w1 - w0) as f64 / 1000.0);
        wall_b.push((w3 - w2) as f64 / 1000.0);
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(|x, y| x.total_cmp(y));
        v[v.len() / 2]
    };
    println!(
        "sACN wire_send, {universes} universes per frame, {rounds} alternating rounds, loopback multicast (lo)"
    );
    println!(
        "exclusion rule: a round where either side sent fewer than {universes} datagrams; excluded: {excluded}"
    );
    if a.len() < rounds / 2 {
        println!(
            "cell wire_send_vs_bare: UNMEASURABLE: {excluded} of {rounds} rounds failed the all-sent guard"
        );
        return;
    }
    let (pa, pb) = (med(&mut a), med(&mut b));
    let split = if output.renders_in_halves() {
        ", both threads of the halves"
    } else if output.send_helper_cpu_ns().is_some() {
        ", both threads of the split"
    } else {
        ", one thread"
    };
    println!(
        "pfx wire_send (encode + sendmmsg{split}): {:.0} ns CPU per packet (median)",
        pa
    );
    println!(
        "bare sendmmsg of the same bytes:   {:.0} ns CPU per packet (median)",
        pb
    );
    println!("ratio pfx/bare: {:.2} (target <= 1.2)", pa / pb);
    let (wa, wb) = (med(&mut wall_a), med(&mut wall_b));
    println!(
        "wall time per frame (median): pfx {wa:.0} us, bare one-thread sendmmsg {wb:.0} us, ratio {:.2}",
        wa / wb
    );
    let _ = SocketAddr::from(([0, 0, 0, 0], 0));
}
