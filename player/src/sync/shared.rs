//! What the sync thread and the render thread share, lock-free: the master's timeline
//! (a seqlock the render thread reads each frame and never waits on), and the counters
//! `/profile` reports. The texts (master, sequence) sit behind a mutex that only the sync
//! thread and the HTTP thread take, never the render thread.

use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering, fence};

use super::estimator::Estimate;

/// The newest estimate of the master's timeline, published by the sync thread.
#[derive(Debug, Default)]
pub struct Timeline {
    seq: AtomicU64,
    generation: AtomicU64,
    /// 0 when there is no estimate; else 1.
    valid: AtomicU64,
    base_ns: AtomicI64,
    at_pos_ns: AtomicI64,
    rate_bits: AtomicU64,
    samples: AtomicU64,
}

/// One consistent read of the `Timeline`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Published {
    pub generation: u64,
    pub estimate: Option<Estimate>,
}

impl Timeline {
    /// Writer side (one writer: the sync thread).
    pub fn publish(&self, generation: u64, e: Option<Estimate>) {
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        self.generation.store(generation, Ordering::Relaxed);
        self.valid.store(u64::from(e.is_some()), Ordering::Relaxed);
        if let Some(e) = e {
            self.base_ns.store(e.base_ns, Ordering::Relaxed);
            self.at_pos_ns.store(e.at_pos_ns, Ordering::Relaxed);
            self.rate_bits.store(e.rate.to_bits(), Ordering::Relaxed);
            self.samples.store(e.samples as u64, Ordering::Relaxed);
        }
        self.seq.store(s.wrapping_add(2), Ordering::Release);
    }

    /// Reader side: a consistent copy, or None when the writer was busy on every try
    /// (the caller keeps what it had; it never waits).
    pub fn read(&self) -> Option<Published> {
        for _ in 0..4 {
            let s1 = self.seq.load(Ordering::Acquire);
            if s1 & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let generation = self.generation.load(Ordering::Relaxed);
            let valid = self.valid.load(Ordering::Relaxed) == 1;
            let base_ns = self.base_ns.load(Ordering::Relaxed);
            let at_pos_ns = self.at_pos_ns.load(Ordering::Relaxed);
            let rate = f64::from_bits(self.rate_bits.load(Ordering::Relaxed));
            let samples = self.samples.load(Ordering::Relaxed) as usize;
            fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) == s1 {
                return Some(Published {
                    generation,
                    estimate: valid.then_some(Estimate {
                        base_ns,
                        rate,
                        at_pos_ns,
                        jitter_ns: 0,
                        samples,
                    }),
                });
            }
        }
        None
    }
}

/// The texts of the sync status.
#[derive(Debug, Clone, Default)]
pub struct StatusText {
    pub master: Option<String>,
    pub state: String,
    pub sequence: Option<String>,
}

/// Counters and state for `/profile` and `/metrics`.
#[derive(Debug, Default)]
pub struct Status {
    pub text: Mutex<StatusText>,
    pub jitter_ns: AtomicU64,
    /// Monotonic time of the last sync packet; 0 = none yet.
    pub last_packet_ns: AtomicU64,
    pub received: AtomicU64,
    pub dropped: AtomicU64,
    /// Written by the render thread: base − target after its last step (remote).
    pub offset_ns: AtomicI64,
    pub corrections: AtomicU64,
    pub jumps: AtomicU64,
    /// Master: packets sent, and sends the kernel refused.
    pub sent: AtomicU64,
    pub send_errors: AtomicU64,
}

impl Status {
    pub fn set_text(&self, f: impl FnOnce(&mut StatusText)) {
        if let Ok(mut t) = self.text.lock() {
            f(&mut t);
        }
    }

    pub fn text(&self) -> StatusText {
        self.text.lock().map(|t| t.clone()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_published_estimate_reads_back_whole() {
        let t = Timeline::default();
        assert_eq!(t.read().unwrap().estimate, None);
        let e = Estimate {
            base_ns: -5,
            rate: 1e-5,
            at_pos_ns: 77,
            jitter_ns: 0,
            samples: 0,
        };
        t.publish(3, Some(e));
        assert_eq!(
            t.read(),
            Some(Published {
                generation: 3,
                estimate: Some(e)
            })
        );
        t.publish(4, None);
        assert_eq!(
            t.read().unwrap(),
            Published {
                generation: 4,
                estimate: None
            }
        );
    }

    #[test]
    fn a_reader_never_sees_a_torn_estimate() {
        use std::sync::atomic::AtomicBool;
        // The writer keeps publishing until the reader has made enough reads while it ran:
        // on a loaded 2-core host the reader thread may not be scheduled during a fixed
        // number of writes (CI once saw it read nothing), which would leave the test
        // vacuous. The cap keeps a reader that never gets a consistent copy from hanging.
        const WANT_READS: u64 = 10_000;
        const MAX_WRITES: u64 = 20_000_000;
        let t = std::sync::Arc::new(Timeline::default());
        let seen = std::sync::Arc::new(AtomicU64::new(0));
        let done = std::sync::Arc::new(AtomicBool::new(false));
        let (w, ws, wd) = (t.clone(), seen.clone(), done.clone());
        let writer = std::thread::spawn(move || {
            let mut g = 1u64;
            while g < MAX_WRITES && (g < 200_000 || ws.load(Ordering::Relaxed) < WANT_READS) {
                let v = g as i64;
                w.publish(
                    g,
                    Some(Estimate {
                        base_ns: v,
                        rate: 0.0,
                        at_pos_ns: -v,
                        jitter_ns: 0,
                        samples: 0,
                    }),
                );
                g += 1;
            }
            wd.store(true, Ordering::Release);
            g
        });
        while !done.load(Ordering::Acquire) {
            if let Some(Published {
                generation,
                estimate: Some(e),
            }) = t.read()
            {
                assert_eq!(e.base_ns, generation as i64);
                assert_eq!(e.at_pos_ns, -e.base_ns);
                seen.fetch_add(1, Ordering::Relaxed);
            }
        }
        let writes = writer.join().unwrap();
        let seen = seen.load(Ordering::Relaxed);
        assert!(
            seen >= WANT_READS,
            "only {seen} consistent reads during {writes} writes"
        );
    }
}
