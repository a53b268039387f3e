//! The one bounded pool of SSH workers every fleet command uses (`push pause-off`, `push
//! show`, `shows`, `push update`): at most `parallel` units at once, each unit in its own
//! slot of the run's SSH control directory (its commands share one connection, ended as
//! soon as the unit is done with, so at most `parallel` are open), nothing new started
//! once the run is closing (a signal) or told to stop. The workers never touch the state
//! database: they send messages to the main thread, which alone writes it.

use crate::ssh::ControlDir;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// The running workers.
pub struct Workers {
    handles: Vec<JoinHandle<()>>,
}

impl Workers {
    /// Waits for every worker to end.
    pub fn join(self) {
        for h in self.handles {
            let _ = h.join();
        }
    }
}

/// Runs `work(slot, job, socket)` for every job, `parallel` at a time. `slot` is the
/// job's index in `jobs`; `socket` its control socket when the run shares connections.
/// `work` returns false when the run's receiver is gone (the worker then ends). No new
/// job starts once `reuse` is closing or `stop` is set.
pub fn spawn<J, F>(
    jobs: Vec<J>,
    parallel: usize,
    reuse: Option<Arc<ControlDir>>,
    stop: Option<Arc<AtomicBool>>,
    work: F,
) -> Workers
where
    J: Send + 'static,
    F: Fn(usize, J, Option<PathBuf>) -> bool + Send + Sync + 'static,
{
    let n = jobs.len();
    let queue = Arc::new(Mutex::new(
        jobs.into_iter().enumerate().collect::<VecDeque<_>>(),
    ));
    let work = Arc::new(work);
    let mut handles = Vec::new();
    for _ in 0..parallel.max(1).min(n.max(1)) {
        let (queue, work, reuse, stop) = (
            Arc::clone(&queue),
            Arc::clone(&work),
            reuse.clone(),
            stop.clone(),
        );
        handles.push(std::thread::spawn(move || {
            loop {
                if reuse.as_ref().is_some_and(|d| d.closed())
                    || stop.as_ref().is_some_and(|s| s.load(Ordering::SeqCst))
                {
                    break;
                }
                let next = match queue.lock() {
                    Ok(mut q) => q.pop_front(),
                    Err(_) => None,
                };
                let Some((slot, job)) = next else { break };
                let socket = reuse.as_ref().map(|d| d.socket(slot));
                let more = work(slot, job, socket);
                // The unit is done with: end its connection now.
                if let Some(d) = &reuse {
                    d.release(slot);
                }
                if !more {
                    break;
                }
            }
        }));
    }
    Workers { handles }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn every_job_runs_once_at_most_parallel_at_a_time() {
        let (now, peak, done) = (
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicUsize::new(0)),
            Arc::new(Mutex::new(Vec::new())),
        );
        let (n2, p2, d2) = (Arc::clone(&now), Arc::clone(&peak), Arc::clone(&done));
        spawn(
            (0..40).collect(),
            4,
            None,
            None,
            move |slot, j: usize, sock| {
                assert_eq!(slot, j);
                assert!(sock.is_none());
                let c = n2.fetch_add(1, Ordering::SeqCst) + 1;
                p2.fetch_max(c, Ordering::SeqCst);
                std::thread::sleep(std::time::Duration::from_millis(2));
                n2.fetch_sub(1, Ordering::SeqCst);
                d2.lock().unwrap().push(j);
                true
            },
        )
        .join();
        let mut d = done.lock().unwrap().clone();
        d.sort();
        assert_eq!(d, (0..40).collect::<Vec<_>>());
        assert!(peak.load(Ordering::SeqCst) <= 4);
    }

    #[test]
    fn nothing_new_starts_after_stop() {
        let stop = Arc::new(AtomicBool::new(false));
        let ran = Arc::new(AtomicUsize::new(0));
        let (s2, r2) = (Arc::clone(&stop), Arc::clone(&ran));
        spawn(
            (0..50).collect(),
            1,
            None,
            Some(stop),
            move |_, j: usize, _| {
                r2.fetch_add(1, Ordering::SeqCst);
                if j == 2 {
                    s2.store(true, Ordering::SeqCst);
                }
                true
            },
        )
        .join();
        assert_eq!(ran.load(Ordering::SeqCst), 3);
    }
}
