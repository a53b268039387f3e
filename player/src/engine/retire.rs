//! Drops what the render thread is done with on a thread of its own.
//!
//! A reload, a live play and the end of an item hand the loop a whole new engine. The old
//! one holds a decode-ahead thread per playlist item (each joined on drop), the outputs'
//! sockets and their half workers (joined too), and megabytes of frame buffers (unmapped
//! one by one). Dropped on the render thread, all of that lands inside one frame; here it
//! costs the render thread one channel send.

use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};
use std::thread::JoinHandle;

/// Retired values waiting for the drop thread. A reload is a rare event: a full queue
/// means the drop thread is stuck, and the render thread then drops inline (and says so)
/// rather than queueing without bound.
const DEPTH: usize = 4;

type Retired = Box<dyn Send>;

pub struct Retirer {
    tx: Option<SyncSender<Retired>>,
    thread: Option<JoinHandle<()>>,
}

impl Retirer {
    /// Starts the drop thread. Without one (the OS refused a thread), values are dropped
    /// where they are retired, as before.
    pub fn new() -> Retirer {
        let (tx, rx) = sync_channel::<Retired>(DEPTH);
        let thread = std::thread::Builder::new()
            .name("pfx-retire".into())
            .spawn(move || {
                // Spawned by the render thread, it inherits its SCHED_FIFO: dropping an
                // old show (joining its decode threads, freeing its pools) must not run at
                // the render thread's priority, beside it on a 2-core unit. Ordinary
                // priority is enough: nothing waits for it.
                if let Err(e) = crate::sys::sched::set_normal() {
                    tracing::debug!("pfx-retire stays on the render thread's policy: {e}");
                }
                // Each value is dropped as it arrives; the loop ends when the render
                // thread drops its sender.
                for retired in rx {
                    drop(retired);
                }
            });
        match thread {
            Ok(t) => Retirer {
                tx: Some(tx),
                thread: Some(t),
            },
            Err(e) => {
                tracing::warn!("no thread to drop old shows on ({e}); a reload may cost a frame");
                Retirer {
                    tx: None,
                    thread: None,
                }
            }
        }
    }

    /// Hands `value` to the drop thread; never blocks.
    pub fn retire<T: Send + 'static>(&self, value: T) {
        let Some(tx) = &self.tx else {
            return drop(value);
        };
        match tx.try_send(Box::new(value)) {
            Ok(()) => {}
            Err(TrySendError::Full(v)) => {
                tracing::warn!(
                    "the drop thread is behind; dropping an old show on the render thread"
                );
                drop(v);
            }
            Err(TrySendError::Disconnected(v)) => drop(v),
        }
    }
}

impl Retirer {
    /// `retire` for what may be nothing (a pending show replaced or cancelled).
    pub fn retire_some<T: Send + 'static>(&self, value: Option<T>) {
        if let Some(v) = value {
            self.retire(v);
        }
    }
}

impl Default for Retirer {
    fn default() -> Self {
        Retirer::new()
    }
}

impl Drop for Retirer {
    fn drop(&mut self) {
        // Close the channel, then wait for what is queued to be dropped: the loop's exit
        // (a stop, the end of the show) must leave no decode thread behind it.
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    struct Slow(Arc<AtomicUsize>);
    impl Drop for Slow {
        fn drop(&mut self) {
            std::thread::sleep(Duration::from_millis(50));
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Records the scheduling policy of the thread that drops it.
    struct Policy(Arc<std::sync::atomic::AtomicI32>);
    impl Drop for Policy {
        fn drop(&mut self) {
            // SAFETY: sched_getscheduler on the calling thread; no pointers.
            let p = unsafe { libc::sched_getscheduler(0) };
            self.0.store(p, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_retirer_made_on_a_real_time_thread_drops_at_ordinary_priority() {
        let seen = Arc::new(std::sync::atomic::AtomicI32::new(-1));
        let s2 = seen.clone();
        let raised = std::thread::spawn(move || {
            // As the render thread is: SCHED_FIFO, then it makes its retirer.
            if crate::sys::sched::set_fifo(crate::sys::sched::FIFO_PRIORITY).is_err() {
                return false;
            }
            let r = Retirer::new();
            r.retire(Policy(s2));
            drop(r);
            true
        })
        .join()
        .unwrap();
        if !raised {
            eprintln!("skipped: needs root (CAP_SYS_NICE for SCHED_FIFO)");
            return;
        }
        assert_eq!(
            seen.load(Ordering::SeqCst),
            libc::SCHED_OTHER,
            "the retire thread kept the render thread's SCHED_FIFO"
        );
    }

    #[test]
    fn a_slow_drop_happens_elsewhere_and_is_done_when_the_retirer_goes() {
        let dropped = Arc::new(AtomicUsize::new(0));
        let r = Retirer::new();
        let t = Instant::now();
        r.retire(Slow(dropped.clone()));
        r.retire(Slow(dropped.clone()));
        assert!(
            t.elapsed() < Duration::from_millis(40),
            "retire waited for the drop"
        );
        drop(r);
        assert_eq!(
            dropped.load(Ordering::SeqCst),
            2,
            "every retired value was dropped"
        );
    }

    #[test]
    fn a_full_queue_drops_inline_rather_than_wait_or_grow() {
        let dropped = Arc::new(AtomicUsize::new(0));
        let r = Retirer::new();
        for _ in 0..(DEPTH + 3) {
            r.retire(Slow(dropped.clone()));
        }
        drop(r);
        assert_eq!(dropped.load(Ordering::SeqCst), DEPTH + 3);
    }
}
