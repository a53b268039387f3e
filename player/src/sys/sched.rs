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
