//! Sends one large frame from two threads. On a 2-vCPU VM, 1,000 sACN datagrams took
//! 1.6-1.9 ms of wall time from one thread and ~1.1 ms from two sending 500 each; the frame
//! budget is 16.7 ms and a host that slows the guest 6-9x turns those into the difference
//! between a frame on time and a missed one. The helper only shortens the wall time the
//! frame spends in the kernel: `send` returns after both halves are handed over, so the
//! loop's `wire_send` stage still measures the whole frame.

use std::ops::Range;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use super::send::{SendOutcome, Sender};
use crate::sys::time::thread_cpu_ns;
use crate::wire::Datagrams;

/// Frames with at least this many datagrams get a helper. The handoff costs a wake-up on
/// each side, a few to tens of µs on a VM, while half of 128 datagrams is ~115 µs of
/// kernel time at ~1.8 µs each; below that the thread saves too little to pay for itself,
/// and ordinary poles (a few universes, one bigPacket) never get a thread at all.
pub const SPLIT_MIN_DATAGRAMS: usize = 128;

struct Job {
    fd: RawFd,
    batch: *const Datagrams,
    range: Range<usize>,
    dontwait: bool,
}

// SAFETY: `batch` is only dereferenced by the helper between receiving the job and sending
// its reply, and `Splitter::send` keeps the `&Datagrams` it came from borrowed (and so
// unmodified and alive) until it has that reply or knows the helper is gone; see there.
unsafe impl Send for Job {}

/// A per-output helper thread with its own `sendmmsg` arrays.
pub struct Splitter {
    jobs: Option<SyncSender<Job>>,
    done: Receiver<SendOutcome>,
    thread: Option<JoinHandle<()>>,
    cpu_ns: Arc<AtomicU64>,
}

impl Splitter {
    /// Starts the helper for an output whose frames have up to `capacity` datagrams.
    pub fn spawn(capacity: usize) -> std::io::Result<Splitter> {
        let (jobs, job_rx) = sync_channel::<Job>(1);
        let (done_tx, done) = sync_channel(1);
        let cpu_ns = Arc::new(AtomicU64::new(0));
        let cpu = cpu_ns.clone();
        let thread = std::thread::Builder::new()
            // Not the output's name: a config string with a NUL would make spawn panic.
            .name("pfx-send".into())
            .stack_size(64 * 1024)
            .spawn(move || {
                crate::sys::sched::raise_priority("send helper");
                let mut sender = Sender::new(capacity);
                while let Ok(job) = job_rx.recv() {
                    // SAFETY: see `Job`: the batch outlives this use and nobody writes it
                    // until the reply below has been received.
                    let batch = unsafe { &*job.batch };
                    let out = sender.send_range(job.fd, batch, job.range, job.dontwait);
                    cpu.store(thread_cpu_ns(), Ordering::Relaxed);
                    if done_tx.send(out).is_err() {
                        break;
                    }
                }
            })?;
        Ok(Splitter {
            jobs: Some(jobs),
            done,
            thread: Some(thread),
            cpu_ns,
        })
    }

    /// The helper thread's CPU time so far, updated after each job; with the caller's own
    /// thread time it gives the frame's whole send cost.
    pub fn cpu_ns(&self) -> u64 {
        self.cpu_ns.load(Ordering::Relaxed)
    }

    /// Sends the batch's first half on the calling thread with `local` and the second half
    /// on the helper, concurrently, and returns once both are in the kernel. If the helper
    /// is gone, the caller sends its half too, so a frame is never silently short.
    pub fn send(
        &mut self,
        fd: RawFd,
        batch: &Datagrams,
        local: &mut Sender,
        dontwait: bool,
    ) -> SendOutcome {
        let n = batch.len();
        let mid = n / 2;
        let job = Job {
            fd,
            batch: batch as *const Datagrams,
            range: mid..n,
            dontwait,
        };
        let posted = self.jobs.as_ref().is_some_and(|j| j.send(job).is_ok());
        if !posted {
            return local.send(fd, batch, dontwait);
        }
        // SAFETY (the invariant `Job` relies on): from here until the guard has the reply
        // or sees the channel closed, `batch` stays borrowed by this call, so the caller
        // can neither modify nor free it; the guard waits in `Drop` too, so an unwind out
        // of the local send cannot end the borrow early. Both threads only read it.
        let mut wait = Wait {
            done: &self.done,
            got: None,
        };
        let first = local.send_range(fd, batch, 0..mid, dontwait);
        match wait.reply() {
            Some(second) => first.merge(second),
            None => {
                // The helper died (it panicked): it no longer reads the batch, so send its
                // half here and stop using it.
                self.jobs = None;
                first.merge(local.send_range(fd, batch, mid..n, dontwait))
            }
        }
    }
}

struct Wait<'a> {
    done: &'a Receiver<SendOutcome>,
    got: Option<Option<SendOutcome>>,
}

impl Wait<'_> {
    fn reply(&mut self) -> Option<SendOutcome> {
        *self.got.get_or_insert_with(|| self.done.recv().ok())
    }
}

impl Drop for Wait<'_> {
    fn drop(&mut self) {
        self.reply();
    }
}

impl Drop for Splitter {
    fn drop(&mut self) {
        // Closing the job channel ends the helper's loop; it is idle here because `send`
        // never returns before its reply, so the join does not wait on the network.
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
