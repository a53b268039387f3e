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
    /// Per datagram of a frame (its universes, in order), how many times it went out in a
    /// frame that was sent in part; a datagram's frames are `frames_sent` plus its count
    /// here. Only frames sent in part touch it, so a healthy output pays nothing.
    pub partial_hits: Vec<AtomicU64>,
    /// What datagram 0 is called: the first universe of a sACN output, 0 otherwise.
    pub slot_base: u64,
    /// Frames cut short because the socket would block (EAGAIN/ENOBUFS).
    pub frames_dropped: AtomicU64,
    /// Frames cut short by any other error (interface gone, no route, ...).
    pub frames_failed: AtomicU64,
    errors: [AtomicU64; ERRNOS.len()],
    errors_other: AtomicU64,
}

impl OutputCounters {
    /// Counters for an output of `datagrams` per-frame datagrams whose first is `slot_base`.
    pub fn with_slots(datagrams: usize, slot_base: u64) -> OutputCounters {
        OutputCounters {
            partial_hits: (0..datagrams).map(|_| AtomicU64::new(0)).collect(),
            slot_base,
            ..OutputCounters::default()
        }
    }

    /// A frame went in part: datagrams `start`, `start + 1`, ... (`sent` of them, round the
    /// `body` datagrams from `offset`) went out.
    pub fn count_partial(&self, offset: usize, body: usize, start: usize, sent: usize) {
        if body == 0 {
            return;
        }
        for i in 0..sent.min(body) {
            if let Some(h) = self.partial_hits.get(offset + (start + i) % body) {
                h.fetch_add(1, Relaxed);
            }
        }
    }

    /// Each datagram's frames so far (`frames_sent` plus its partial count).
    pub fn slot_frames(&self, out: &mut Vec<u64>) {
        let whole = self.frames_sent.load(Relaxed);
        out.clear();
        out.extend(self.partial_hits.iter().map(|h| whole + h.load(Relaxed)));
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_sent_in_part_counts_the_datagrams_that_went_round_from_its_start() {
        let c = OutputCounters::with_slots(6, 100);
        c.frames_sent.store(5, Relaxed);
        // Datagrams 4, 5, 0 of a 6-datagram body went; then 2 of the second half (3..6).
        c.count_partial(0, 6, 4, 3);
        c.count_partial(3, 3, 1, 2);
        let mut v = Vec::new();
        c.slot_frames(&mut v);
        assert_eq!(v, [6, 5, 5, 5, 7, 7]);
        assert_eq!(c.slot_base, 100);
    }
}
