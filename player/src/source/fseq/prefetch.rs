//! Decode-ahead: a thread decodes frames in order into a fixed pool of buffers, so the
//! render thread only picks up finished frames and never waits on decompression.
//!
//! Buffers circulate: pool → decoder (`free`) → consumer (`ready`) → back to `free`,
//! through two lock-free SPSC rings (`rtrb`) sized to the pool: pushes never fail or
//! block, nothing is allocated per frame, and the render thread makes no syscall (no
//! futex wake per frame). The idle decoder polls every `IDLE` instead of being woken;
//! with frames decoded `ahead` steps early that delay never shows. A seek is one atomic
//! word (generation, target) plus an unpark; frames decoded for an older generation are
//! recycled unseen.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::FseqFile;

use rtrb::{Consumer, Producer, RingBuffer};

/// How long the decoder sleeps when it has nothing to do (pool full, end reached, error)
/// before looking again. Seeks and stop unpark it at once.
const IDLE: Duration = Duration::from_millis(2);

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PrefetchStats {
    /// Frames handed out exactly as requested.
    pub delivered: u64,
    /// Requests whose frame was not decoded yet (an older frame or nothing was returned).
    pub late: u64,
    /// Requests whose frame could not be decoded: the decoder had stopped on an error in
    /// this stretch of the file (an older frame or nothing was returned).
    pub failed: u64,
    /// Decoded frames dropped unseen because the consumer had moved past them.
    pub skipped: u64,
    /// Seeks sent to the decoder (loop restarts, jumps).
    pub seeks: u64,
}

struct Shared {
    /// (generation << 32) | target frame. A new generation means "restart at target".
    seek: AtomicU64,
    stop: AtomicBool,
    error: Mutex<Option<String>>,
    /// Decode errors so far; `error` holds the latest one's message.
    errors: AtomicU64,
    /// The seek generation the decoder stopped on with an error, plus one (0: none). Lets
    /// the consumer tell "not decoded yet" from "will not be decoded".
    failed: AtomicU64,
}

/// What [`Prefetcher::fetch`] had for a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fetch<'a> {
    /// The frame asked for.
    Ready(&'a [u8]),
    /// Not decoded yet; the newest earlier frame held, if any.
    Late(Option<&'a [u8]>),
    /// The decoder stopped on an error before this frame ([`Prefetcher::error`] says
    /// which); the newest earlier frame held, if any.
    Failed(Option<&'a [u8]>),
    /// Past the sequence's last frame.
    OutOfRange,
}

impl<'a> Fetch<'a> {
    /// The bytes to show: the frame, or the fallback when it was late or failed.
    pub fn data(self) -> Option<&'a [u8]> {
        match self {
            Fetch::Ready(d) => Some(d),
            Fetch::Late(d) | Fetch::Failed(d) => d,
            Fetch::OutOfRange => None,
        }
    }
}

struct Decoded {
    generation: u32,
    frame: u32,
    buf: Vec<u8>,
}

pub struct Prefetcher {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    ready: Consumer<Decoded>,
    free: Producer<Vec<u8>>,
    /// Decoded frames of the current generation, ascending.
    pending: VecDeque<(u32, Vec<u8>)>,
    /// The frame last returned by `get`; kept so the returned slice stays valid.
    current: Option<(u32, Vec<u8>)>,
    generation: u32,
    /// The next frame the decoder will deliver in this generation, as far as we know.
    decoder_pos: u32,
    ahead: u32,
    frames: u32,
    frame_len: usize,
    stats: PrefetchStats,
    /// The file, for messages (the decoder thread owns the open file).
    path: PathBuf,
}

impl std::fmt::Debug for Prefetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prefetcher")
            .field("frames", &self.frames)
            .field("frame_len", &self.frame_len)
            .field("ahead", &self.ahead)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Prefetcher {
    /// Starts the decoder thread, which keeps up to `ahead_frames` frames decoded
    /// ahead of the consumer, starting at frame 0.
    pub fn spawn(file: FseqFile, ahead_frames: usize) -> Prefetcher {
        let ahead = ahead_frames.clamp(1, 1 << 16);
        // +2: the frame the consumer holds and the one being decoded.
        let pool = ahead + 2;
        let frame_len = file.frame_len();
        let frames = file.frames();
        let path = file.path().to_path_buf();
        let (mut free_tx, free_rx) = RingBuffer::<Vec<u8>>::new(pool);
        let (ready_tx, ready_rx) = RingBuffer::<Decoded>::new(pool);
        for _ in 0..pool {
            // Cannot fail: the ring holds exactly `pool`.
            let _ = free_tx.push(vec![0u8; frame_len]);
        }
        let shared = Arc::new(Shared {
            seek: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            error: Mutex::new(None),
            errors: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        });
        let sh = Arc::clone(&shared);
        let thread = thread::Builder::new()
            .name("fseq-decode".into())
            .spawn(move || decode_loop(file, sh, free_rx, ready_tx));
        let thread = match thread {
            Ok(t) => Some(t),
            Err(e) => {
                set_error(&shared, format!("cannot start the decoder thread: {e}"));
                None
            }
        };
        Prefetcher {
            shared,
            thread,
            ready: ready_rx,
            free: free_tx,
            pending: VecDeque::with_capacity(pool),
            current: None,
            generation: 0,
            decoder_pos: 0,
            ahead: ahead as u32,
            frames,
            frame_len,
            stats: PrefetchStats::default(),
            path,
        }
    }

    /// The sequence file this decodes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn frames(&self) -> u32 {
        self.frames
    }

    pub fn frame_len(&self) -> usize {
        self.frame_len
    }

    pub fn stats(&self) -> PrefetchStats {
        self.stats
    }

    /// The decoder thread's latest error (a corrupt block), if it hit one. It then idles
    /// until the next seek; the message stays until another error replaces it.
    pub fn error(&self) -> Option<String> {
        match self.shared.error.lock() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Frame `n` if it is decoded. Never blocks. Older decoded frames are recycled. If
    /// `n` is not ready, returns the newest earlier frame held (or `None`) and counts a
    /// late (or failed) event. Asking for a frame the decoder has passed, or one far
    /// ahead of it, makes it seek there.
    pub fn get(&mut self, n: u32) -> Option<&[u8]> {
        self.fetch(n).data()
    }

    /// As [`get`](Self::get), and says whether the frame was there, late, or lost to a
    /// decode error. Never blocks, never allocates.
    pub fn fetch(&mut self, n: u32) -> Fetch<'_> {
        if n >= self.frames {
            return Fetch::OutOfRange;
        }
        // Read before draining: every frame the decoder pushed before it stopped on an
        // error is then in the ring, so "failed" below never hides a decoded frame.
        let failed = self.shared.failed.load(Ordering::Acquire) == u64::from(self.generation) + 1;
        self.drain();
        if self.current.as_ref().is_some_and(|(f, _)| *f == n) {
            self.stats.delivered += 1;
            return self.current_ready();
        }
        // Drop frames before n, keeping the newest of them as a fallback.
        let mut older: Option<(u32, Vec<u8>)> = None;
        while self.pending.front().is_some_and(|(f, _)| *f < n) {
            if let Some(x) = self.pending.pop_front()
                && let Some((_, old)) = older.replace(x)
            {
                self.stats.skipped += 1;
                self.recycle(old);
            }
        }
        if self.pending.front().is_some_and(|(f, _)| *f == n) {
            if let Some((_, old)) = older.take() {
                self.stats.skipped += 1;
                self.recycle(old);
            }
            let x = self.pending.pop_front();
            self.set_current(x);
            self.stats.delivered += 1;
            if n + 1 == self.frames {
                // The last frame: decode the start again now, so a looped show (or the
                // item's next turn in the playlist) finds frame 0 ready, not late.
                self.seek(0);
            }
            return self.current_ready();
        }
        if failed {
            self.stats.failed += 1;
        } else {
            self.stats.late += 1;
        }
        // n will not arrive if the decoder is past it, or not soon if it is far ahead, or
        // if the decoder stopped on an error before it: then it retries from n, so the show
        // is back the first frame after a corrupt stretch (a block is a few frames), not
        // `ahead` frames later.
        if n < self.decoder_pos
            || n > self.decoder_pos.saturating_add(self.ahead)
            || (failed && n > self.decoder_pos)
        {
            self.seek(n);
        }
        if older.is_some() {
            self.set_current(older);
        }
        let fallback = match &self.current {
            Some((f, b)) if *f < n => Some(b.as_slice()),
            _ => None,
        };
        if failed {
            Fetch::Failed(fallback)
        } else {
            Fetch::Late(fallback)
        }
    }

    fn current_ready(&self) -> Fetch<'_> {
        match &self.current {
            Some((_, b)) => Fetch::Ready(b.as_slice()),
            None => Fetch::Late(None),
        }
    }

    /// Whether every buffer of the pool holds a decoded frame (the one returned last and
    /// those decoded ahead of it): the decoder then idles until the consumer moves on. Never
    /// blocks and consumes nothing; for start-up and tests, which wait for a sequence to be
    /// decoded ahead before they measure the render loop beside it.
    pub fn is_full(&self) -> bool {
        let held = usize::from(self.current.is_some());
        held + self.pending.len() + self.ready.slots() >= self.ahead as usize + 2
    }

    /// How many decode errors the thread has hit.
    pub fn errors(&self) -> u64 {
        self.shared.errors.load(Ordering::Acquire)
    }

    /// Blocks until frame `n` is decoded (or `timeout`), then returns it as `get` would.
    /// For start-up and tests; the render loop uses `get`.
    pub fn wait_for(&mut self, n: u32, timeout: Duration) -> Option<&[u8]> {
        let deadline = Instant::now() + timeout;
        let errors = self.errors();
        loop {
            let (late, failed) = (self.stats.late, self.stats.failed);
            let have = matches!(self.fetch(n), Fetch::Ready(_));
            // Waiting is not the render loop missing a frame.
            self.stats.late = late;
            self.stats.failed = failed;
            if have {
                return self.current.as_ref().map(|(_, b)| b.as_slice());
            }
            if Instant::now() >= deadline || self.errors() != errors {
                return None;
            }
            thread::sleep(Duration::from_micros(200));
        }
    }

    fn drain(&mut self) {
        loop {
            match self.ready.pop() {
                Ok(d) if d.generation == self.generation => {
                    self.decoder_pos = d.frame.saturating_add(1);
                    self.pending.push_back((d.frame, d.buf));
                }
                Ok(d) => self.recycle(d.buf),
                Err(_) => return,
            }
        }
    }

    fn seek(&mut self, n: u32) {
        self.stats.seeks += 1;
        self.generation = self.generation.wrapping_add(1);
        self.decoder_pos = n;
        while let Some((_, b)) = self.pending.pop_front() {
            self.recycle(b);
        }
        self.shared.seek.store(
            ((self.generation as u64) << 32) | n as u64,
            Ordering::Release,
        );
        if let Some(t) = &self.thread {
            t.thread().unpark();
        }
    }

    fn set_current(&mut self, x: Option<(u32, Vec<u8>)>) {
        if let Some((_, old)) = std::mem::replace(&mut self.current, x) {
            self.recycle(old);
        }
    }

    fn recycle(&mut self, buf: Vec<u8>) {
        // The ring holds the whole pool, so this cannot be full.
        let _ = self.free.push(buf);
    }
}

impl Drop for Prefetcher {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// Records an error of the decoder thread: the message, then the count, so a consumer
/// that sees the count go up finds the message.
fn set_error(shared: &Shared, msg: String) {
    set_message(shared, msg);
    shared.errors.fetch_add(1, Ordering::AcqRel);
}

fn set_message(shared: &Shared, msg: String) {
    match shared.error.lock() {
        Ok(mut g) => *g = Some(msg),
        Err(p) => *p.into_inner() = Some(msg),
    }
}

/// A decode error that stops the seek generation in `word`: the message, the generation's
/// failed mark, and last the count. A consumer that saw the count go up (a test waiting for
/// a retry to fail) then also sees the mark, and its next fetch says `Failed`, not `Late`.
fn set_failed(shared: &Shared, word: u64, msg: String) {
    set_message(shared, msg);
    shared.failed.store((word >> 32) + 1, Ordering::Release);
    shared.errors.fetch_add(1, Ordering::AcqRel);
}

fn decode_loop(
    mut file: FseqFile,
    shared: Arc<Shared>,
    mut free: Consumer<Vec<u8>>,
    mut ready: Producer<Decoded>,
) {
    let frames = file.frames();
    let mut word = 0u64;
    let mut pos = 0u32;
    let mut failed_word: Option<u64> = None;
    let mut spare: Option<Vec<u8>> = None;
    loop {
        if shared.stop.load(Ordering::Acquire) {
            return;
        }
        let w = shared.seek.load(Ordering::Acquire);
        if w != word {
            word = w;
            pos = w as u32;
        }
        if pos >= frames || failed_word == Some(word) {
            thread::park_timeout(IDLE);
            continue;
        }
        let mut buf = match spare.take() {
            Some(b) => b,
            None => match free.pop() {
                Ok(b) => b,
                Err(_) if free.is_abandoned() => return,
                Err(_) => {
                    // Pool full: the consumer is `ahead` frames behind. Poll, don't
                    // make it wake us (that would put a syscall on the render thread).
                    thread::park_timeout(IDLE);
                    continue;
                }
            },
        };
        if shared.seek.load(Ordering::Acquire) != word {
            spare = Some(buf);
            continue;
        }
        let res = catch_unwind(AssertUnwindSafe(|| file.read_frame(pos, &mut buf)));
        match res {
            Ok(Ok(())) => {
                let d = Decoded {
                    generation: (word >> 32) as u32,
                    frame: pos,
                    buf,
                };
                if ready.push(d).is_err() {
                    // Cannot happen (the ring holds the whole pool); stop rather than spin.
                    set_error(&shared, "internal: decoded-frame ring full".into());
                    return;
                }
                pos += 1;
            }
            Ok(Err(e)) => {
                set_failed(&shared, word, e.to_string());
                failed_word = Some(word);
                spare = Some(buf);
            }
            Err(_) => {
                set_failed(
                    &shared,
                    word,
                    format!(
                        "{}: the decoder crashed reading frame {pos} (a bug; please report it with the file)",
                        file.path().display()
                    ),
                );
                failed_word = Some(word);
                spare = Some(buf);
            }
        }
    }
}
