use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// One reading of the counters, as `/profile` carries it (defined in pfx-api).
pub use pfx_api::profile::CountersSnapshot;

/// errnos counted by name; anything else lands in `other`.
pub const ERRNOS: [(i32, &str); 8] = [
    (libc::EAGAIN, "EAGAIN"),
    (libc::ENOBUFS, "ENOBUFS"),
    (libc::ENETUNREACH, "ENETUNREACH"),
    (libc::ENODEV, "ENODEV"),
    (libc::EHOSTUNREACH, "EHOSTUNREACH"),
    (libc::EPERM, "EPERM"),
    (libc::EMSGSIZE, "EMSGSIZE"),
    (libc::EADDRNOTAVAIL, "EADDRNOTAVAIL"),
];

/// Per-output counters, written by the render thread with relaxed atomics (no lock) and
/// read by the profiler and HTTP threads.
#[derive(Debug, Default)]
pub struct OutputCounters {
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
    /// Frames whose every datagram the kernel accepted (sent whole).
    pub frames_sent: AtomicU64,
    /// Frames of which some datagrams went and the rest did not (sent in part): a torn
    /// frame on the pole unless it waits for sACN sync.
    pub frames_partial: AtomicU64,
    /// Frames of which nothing went: not started because the link was still busy with
    /// earlier ones or the socket had no room for all of it, or refused at the first
    /// datagram.
    pub frames_skipped: AtomicU64,
    /// Payload bytes and datagrams of one whole frame (set when the output opens), so a
    /// reader can set what went against what the show needs.
    pub frame_bytes: AtomicU64,
    pub frame_datagrams: AtomicU64,
    /// Frames cut short because the socket would block (EAGAIN/ENOBUFS).
    pub frames_dropped: AtomicU64,
    /// Frames cut short by any other error (interface gone, no route, ...).
    pub frames_failed: AtomicU64,
    errors: [AtomicU64; ERRNOS.len()],
    errors_other: AtomicU64,
}

impl OutputCounters {
    pub fn count_errno(&self, errno: i32) {
        match ERRNOS.iter().position(|(e, _)| *e == errno) {
            Some(i) => self.errors[i].fetch_add(1, Relaxed),
            None => self.errors_other.fetch_add(1, Relaxed),
        };
    }

    /// (name, count) for every errno seen at least once.
    pub fn errors(&self) -> Vec<(&'static str, u64)> {
        let mut v: Vec<(&'static str, u64)> = ERRNOS
            .iter()
            .zip(&self.errors)
            .map(|((_, n), c)| (*n, c.load(Relaxed)))
            .filter(|(_, c)| *c > 0)
            .collect();
        let other = self.errors_other.load(Relaxed);
        if other > 0 {
            v.push(("other", other));
        }
        v
    }

    pub fn snapshot(&self) -> CountersSnapshot {
        CountersSnapshot {
            packets: self.packets.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
            frames_sent: self.frames_sent.load(Relaxed),
            frames_partial: self.frames_partial.load(Relaxed),
            frames_skipped: self.frames_skipped.load(Relaxed),
            frame_bytes: self.frame_bytes.load(Relaxed),
            frame_datagrams: self.frame_datagrams.load(Relaxed),
            frames_dropped: self.frames_dropped.load(Relaxed),
            frames_failed: self.frames_failed.load(Relaxed),
            errors: self
                .errors()
                .into_iter()
                .map(|(n, c)| (n.to_string(), c))
                .collect(),
        }
    }
}
