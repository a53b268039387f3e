//! A large output's frame on two threads. On a 2-vCPU VM, 1,000 sACN datagrams took
//! 1.6-1.9 ms of wall time from one thread and ~1.1 ms from two sending 500 each; at 5,000
//! universes the pattern (1.5 ms) and geometry (1.0 ms) joined the send on the critical
//! path. The frame budget is 16.7 ms, and a host that slows the guest 6-9x turns those
//! into the difference between a frame on time and a missed one.
//!
//! `Worker` is the output's helper thread: `join` runs one closure on it and one on the
//! caller, and returns when both are done, so whatever the closures borrow stays borrowed
//! (unmodified and alive) for the whole time the helper may touch it. `Splitter` uses it
//! to send the second half of a batch; `halves` uses it for a sACN output's whole frame
//! (source, geometry, encoding and send of its second half of the universes).

use std::os::fd::RawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use super::admit::Rotation;
use super::send::{SendOutcome, Sender};
use crate::sys::time::thread_cpu_ns;
use crate::wire::Datagrams;

/// Frames with at least this many datagrams get a helper. The handoff costs a wake-up on
/// each side, a few to tens of µs on a VM, while half of 128 datagrams is ~115 µs of
/// kernel time at ~1.8 µs each; below that the thread saves too little to pay for itself,
/// and ordinary poles (a few universes, one bigPacket) never get a thread at all.
pub const SPLIT_MIN_DATAGRAMS: usize = 128;

/// The helper thread's name. It kept the name it had when it only sent (tools and tests
/// look for it); the allocation test tells it and the render thread apart by name.
pub const WORKER_THREAD: &str = "pfx-send";

/// A job for the helper: a closure on the caller's stack, its lifetime erased.
struct Job(*mut (dyn FnMut() + Send + 'static));

// SAFETY: the closure is `Send`, and `Worker::join` keeps it (and everything it borrows)
// alive and untouched by the caller until the helper has replied or is known to be gone.
unsafe impl Send for Job {}

/// A helper thread that runs one borrowed closure at a time for its owner.
pub struct Worker {
    jobs: Option<SyncSender<Job>>,
    done: Receiver<()>,
    thread: Option<JoinHandle<()>>,
    cpu_ns: Arc<AtomicU64>,
}

impl Worker {
    /// Starts the helper (SCHED_FIFO where allowed, like the render thread). Called when
    /// the output is opened, off the render thread.
    pub fn spawn() -> std::io::Result<Worker> {
        let (jobs, job_rx) = sync_channel::<Job>(1);
        let (done_tx, done) = sync_channel(1);
        let cpu_ns = Arc::new(AtomicU64::new(0));
        let cpu = cpu_ns.clone();
        let thread = std::thread::Builder::new()
            // Not the output's name: a config string with a NUL would make spawn panic.
            .name(WORKER_THREAD.into())
            // The encoders' scratch and the packet structs live on it; debug builds
            // take several times what release does.
            .stack_size(512 * 1024)
            .spawn(move || {
                crate::sys::sched::raise_priority("render helper");
                while let Ok(job) = job_rx.recv() {
                    // SAFETY: see `Job`: `join` waits for the reply below before the
                    // closure or anything it borrows can go away or be touched.
                    unsafe { (*job.0)() };
                    cpu.store(thread_cpu_ns(), Ordering::Relaxed);
                    if done_tx.send(()).is_err() {
                        break;
                    }
                }
            })?;
        Ok(Worker {
            jobs: Some(jobs),
            done,
            thread: Some(thread),
            cpu_ns,
        })
    }

    /// The helper thread's CPU time so far, updated after each job.
    pub fn cpu_ns(&self) -> u64 {
        self.cpu_ns.load(Ordering::Relaxed)
    }

    /// Runs `theirs` on the helper and `mine` on the calling thread, concurrently, and
    /// returns both results once both are done. Allocates nothing. If the helper is gone,
    /// `theirs` runs here after `mine`; if it died during the job (a panic), the result is
    /// None and the helper is not used again.
    pub fn join<A, B: Send>(
        &mut self,
        mine: impl FnOnce() -> A,
        theirs: impl FnOnce() -> B + Send,
    ) -> (A, Option<B>) {
        // Declared before `wait`, so they are dropped after it: an unwind out of `mine`
        // waits for the helper before the closure's captures go.
        let mut theirs = Some(theirs);
        let mut result: Option<B> = None;
        let mut job = || {
            if let Some(f) = theirs.take() {
                result = Some(f());
            }
        };
        let ptr: *mut (dyn FnMut() + Send + '_) = &mut job;
        // SAFETY: only the lifetime changes (same fat pointer); the waits below and in
        // `Wait::drop` keep the closure alive for every use the helper makes of it.
        let ptr: *mut (dyn FnMut() + Send + 'static) = unsafe { std::mem::transmute(ptr) };
        let posted = self.jobs.as_ref().is_some_and(|j| j.send(Job(ptr)).is_ok());
        if !posted {
            self.jobs = None;
            let a = mine();
            job();
            return (a, result);
        }
        let mut wait = Wait {
            done: &self.done,
            got: None,
        };
        let a = mine();
        let replied = wait.reply();
        drop(wait);
        if !replied {
            self.jobs = None;
        }
        (a, result)
    }
}

struct Wait<'a> {
    done: &'a Receiver<()>,
    got: Option<bool>,
}

impl Wait<'_> {
    /// True when the helper finished the job; false when it is gone.
    fn reply(&mut self) -> bool {
        *self.got.get_or_insert_with(|| self.done.recv().is_ok())
    }
}

impl Drop for Wait<'_> {
    fn drop(&mut self) {
        self.reply();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Closing the job channel ends the helper's loop; it is idle here because `join`
        // never returns before its reply, so the join does not wait on the network.
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The send-only split: the helper sends the second half of a batch the caller encoded.
/// For large outputs whose rendering does not split (DDP, bigPacket).
pub struct Splitter {
    worker: Worker,
    /// The helper's own `sendmmsg` arrays.
    remote: Sender,
    /// Where each half's next frame starts (after one was cut short).
    rotation: [Rotation; 2],
    /// The last frame's halves as (offset, body, start, sent).
    last: [(usize, usize, usize, usize); 2],
}

impl Splitter {
    /// Starts the helper for an output whose frames have up to `capacity` datagrams.
    pub fn spawn(capacity: usize) -> std::io::Result<Splitter> {
        Ok(Splitter {
            worker: Worker::spawn()?,
            remote: Sender::new(capacity),
            rotation: [Rotation::default(); 2],
            last: [(0, 0, 0, 0); 2],
        })
    }

    pub fn cpu_ns(&self) -> u64 {
        self.worker.cpu_ns()
    }

    /// Sends the batch's first half on the calling thread with `local` and the second half
    /// on the helper, concurrently, and returns once both are in the kernel. If the helper
    /// died, the caller sends its half too, so a frame is never silently short. The last
    /// `tail` datagrams (DDP's PUSH packet) go last in the second half; the rest of each
    /// half starts where that half's previous frame was cut.
    pub fn send(
        &mut self,
        fd: RawFd,
        batch: &Datagrams,
        local: &mut Sender,
        dontwait: bool,
        tail: usize,
    ) -> SendOutcome {
        let n = batch.len();
        let mid = n / 2;
        let bodies = [mid, (n - mid).saturating_sub(tail)];
        let [ra, rb] = self.rotation;
        let remote = &mut self.remote;
        let (first, second) = self.worker.join(
            || local.send_rotated(fd, batch, 0..mid, bodies[0], ra.start, dontwait),
            || remote.send_rotated(fd, batch, mid..n, bodies[1], rb.start, dontwait),
        );
        let second = second.unwrap_or_else(|| {
            local.send_rotated(fd, batch, mid..n, bodies[1], rb.start, dontwait)
        });
        self.last = [
            (0, bodies[0], ra.start, first.sent),
            (mid, bodies[1], rb.start, second.sent),
        ];
        self.rotation[0].after(bodies[0], first.sent);
        self.rotation[1].after(bodies[1], second.sent);
        first.merge(second)
    }

    /// The last frame's halves as (offset, body, start, sent), for the per-datagram count
    /// of a frame sent in part.
    pub fn last_sends(&self) -> [(usize, usize, usize, usize); 2] {
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_runs_both_sides_and_returns_both_results() {
        let mut w = Worker::spawn().expect("helper starts");
        let mut a = vec![0u8; 4];
        let mut b = vec![0u8; 4];
        for round in 1..=50u8 {
            let (x, y) = w.join(
                || {
                    a.fill(round);
                    1
                },
                || {
                    b.fill(round);
                    2
                },
            );
            assert_eq!((x, y), (1, Some(2)));
            assert_eq!(a, [round; 4]);
            assert_eq!(b, [round; 4]);
        }
    }

    #[test]
    fn a_helper_that_died_leaves_the_caller_to_do_its_work_next_time() {
        let mut w = Worker::spawn().expect("helper starts");
        let (_, lost) = w.join(|| (), || -> u8 { panic!("the helper fails (on purpose)") });
        assert_eq!(lost, None, "the result of a job that panicked is None");
        let mut done = false;
        let (_, r) = w.join(
            || (),
            || {
                done = true;
                7
            },
        );
        assert_eq!(r, Some(7));
        assert!(done, "the caller ran the job itself");
    }
}
