//! Clocks and sleeping. The render loop runs on CLOCK_MONOTONIC; wall-clock (Unix) time is
//! only for stamps a reader outside this process compares (bigPacket's sender timestamp,
//! the profiler's history, the NIC readings).

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; the clocks used here exist on every Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Nanoseconds on CLOCK_MONOTONIC, the clock the loop sleeps on.
pub fn mono_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// Nanoseconds of CPU time the calling thread has used (CLOCK_THREAD_CPUTIME_ID).
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

fn since_epoch() -> std::time::Duration {
    // Before 1970 only on a broken clock; 0 then, rather than a panic.
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
}

/// Microseconds since the Unix epoch (CLOCK_REALTIME), for bigPacket's sender timestamp.
pub fn unix_micros() -> u64 {
    since_epoch().as_micros() as u64
}

/// Milliseconds since the Unix epoch (CLOCK_REALTIME), for readings shown to people and
/// other machines.
pub fn unix_ms() -> u64 {
    since_epoch().as_millis() as u64
}

/// Sleeps until CLOCK_MONOTONIC reaches `deadline_ns` (absolute, so a signal or a slow
/// wake-up never accumulates drift).
pub fn sleep_until(deadline_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: `ts` is a valid timespec; the remaining-time pointer may be null with
        // TIMER_ABSTIME.
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        if rc != libc::EINTR {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn sleep_until_returns_at_or_after_the_deadline() {
        let d = mono_ns() + 2 * MS;
        sleep_until(d);
        assert!(mono_ns() >= d);
    }

    #[test]
    fn unix_clocks_agree_and_are_after_2020() {
        let (us, ms) = (unix_micros(), unix_ms());
        assert!(ms > 1_577_836_800_000, "{ms}");
        assert!(
            us / 1000 <= ms + 1000 && ms <= us / 1000 + 1000,
            "{us} {ms}"
        );
    }

    #[test]
    fn thread_cpu_time_grows_with_work() {
        let a = thread_cpu_ns();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        assert!(thread_cpu_ns() > a, "{x}");
    }
}
