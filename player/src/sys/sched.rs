//! Scheduling of the threads a frame waits on: the render thread and the output send
//! helpers must not queue behind ordinary work.

use std::io;

/// The SCHED_FIFO priority pfx asks for: above every SCHED_OTHER thread, below the
/// kernel's own real-time threads (which use 50 and up).
pub const FIFO_PRIORITY: i32 = 10;

/// Puts the calling thread on SCHED_FIFO at `priority`; the error is the errno the kernel
/// gave.
pub fn set_fifo(priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: plain syscall on the calling thread with a valid param.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Puts the calling thread back on SCHED_OTHER (a thread spawned by a SCHED_FIFO one
/// inherits its policy). Dropping a policy needs no privilege.
pub fn set_normal() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: plain syscall on the calling thread with a valid param.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Why a thread stayed on SCHED_OTHER, in the words that say what to do about it.
pub fn why_not_raised(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EPERM) => format!("{e}: no CAP_SYS_NICE, or RLIMIT_RTPRIO is 0"),
        _ => e.to_string(),
    }
}

/// Best effort: SCHED_FIFO when the unit allows it (CAP_SYS_NICE), else the thread stays
/// normal and the debug log says why.
pub fn raise_priority(thread: &str) {
    if let Err(e) = set_fifo(FIFO_PRIORITY) {
        tracing::debug!("{thread} stays SCHED_OTHER ({})", why_not_raised(&e));
    }
}

/// Puts the calling thread at the back of the queue: nice 19 and the idle I/O class, so
/// what it reads and writes waits for every other thread's I/O (uploads, hashing).
/// Linux applies both per thread.
pub fn set_background() -> io::Result<()> {
    // SAFETY: gettid has no arguments; setpriority and ioprio_set act on that thread id.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) } as libc::id_t;
    // SAFETY: plain syscall with a valid thread id.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, 19) } != 0 {
        return Err(io::Error::last_os_error());
    }
    const IOPRIO_WHO_PROCESS: libc::c_long = 1;
    const IOPRIO_CLASS_IDLE: libc::c_long = 3;
    const IOPRIO_CLASS_SHIFT: libc::c_long = 13;
    // SAFETY: ioprio_set(which, who, ioprio) with a valid thread id; no pointers.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_ioprio_set,
            IOPRIO_WHO_PROCESS,
            tid as libc::c_long,
            IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_error_is_the_kernels_not_a_guess() {
        // An out-of-range priority is EINVAL for everyone, root or not, and changes nothing.
        let e = set_fifo(1000).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
        let why = why_not_raised(&e);
        assert!(!why.contains("CAP_SYS_NICE"), "{why}");
        let eperm = io::Error::from_raw_os_error(libc::EPERM);
        assert!(why_not_raised(&eperm).contains("CAP_SYS_NICE"));
    }
}
