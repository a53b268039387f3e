//! The host this player runs on.

/// The kernel's host name, or None when it cannot be read.
pub fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
}

/// Asks this process's own supervisor to read its config again, exactly as an operator's
/// SIGHUP does.
pub fn request_reload() -> std::io::Result<()> {
    // SAFETY: kill with our own pid and a valid signal number.
    if unsafe { libc::kill(libc::getpid(), libc::SIGHUP) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Set by `request_graceful_reload`, taken by the supervisor at the SIGHUP it sends.
static GRACEFUL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `request_reload`, but the new show takes over when the item playing now ends (a
/// graceful stop), not at the next frame: what FPP Connect asks for after a posted
/// playlist. An operator's own SIGHUP stays immediate.
pub fn request_graceful_reload() -> std::io::Result<()> {
    GRACEFUL.store(true, std::sync::atomic::Ordering::SeqCst);
    request_reload()
}

/// Whether the reload being handled was asked for gracefully (and forgets it).
pub fn take_graceful_reload() -> bool {
    GRACEFUL.swap(false, std::sync::atomic::Ordering::SeqCst)
}

#[cfg(test)]
mod tests {
    #[test]
    fn hostname_matches_uname() {
        let mut u: libc::utsname = unsafe { std::mem::zeroed() };
        // SAFETY: `u` is a valid out-pointer for uname(2).
        assert_eq!(unsafe { libc::uname(&mut u) }, 0);
        // SAFETY: uname NUL-terminates nodename.
        let node = unsafe { std::ffi::CStr::from_ptr(u.nodename.as_ptr()) };
        assert_eq!(super::hostname().as_deref(), node.to_str().ok());
    }
}
