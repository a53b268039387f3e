//! The show store on a unit's data partition (docs/show-store.md).
//!
//! ```text
//! <root>/.pfx-data              marker: the image writes it when it makes the file system
//! <root>/store/sha256/<hex>     sequences (and any other show file), by content hash
//! <root>/shows/<id>/            one show: show.yaml, manifest.json, and its files by name
//!                               (hard links to store/sha256/<hex>)
//! <root>/active                 symlink to shows/<id>, replaced by rename(2)
//! <root>/staging/<key>.part     a transfer or upload in progress (resumable)
//! <root>/staging/*.tmp          half-made files and show directories (never resumed)
//! <root>/control/held.json      a live override kept across restarts (a blackout; `held`)
//! ```
//!
//! Every write goes to a temporary name, is fsynced, renamed into place, and the directory
//! is fsynced. A show directory is complete before it gets its name under `shows/`, and
//! `active` names a complete show or the one before it, so a power cut at any moment
//! leaves the old show or the new one, whole.

mod hash;
pub mod held;

pub use hash::{BadHash, BadShowId, Hash, ShowId};

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The marker file at the root of the data file system.
pub const MARKER: &str = ".pfx-data";
/// Where the image mounts the data partition.
pub const DEFAULT_ROOT: &str = "/var/lib/pfx";
/// The least the store leaves free on the partition.
pub const MIN_RESERVE: u64 = 64 << 20;
/// The default reserve's ceiling: 5 % of a large partition (or of the disk a test's
/// temporary store sits on) is far more than a full ext4 needs to keep working.
pub const MAX_DEFAULT_RESERVE: u64 = 1 << 30;
/// The longest a `run --check` may take.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(60);
/// Names inside a show that are the store's own.
const RESERVED: [&str; 2] = ["show.yaml", "manifest.json"];
/// Unreferenced blobs younger than this are kept: a push may be about to name them.
const GC_GRACE: Duration = Duration::from_secs(3600);
/// Shows made this recently are kept by `gc`: a push under way (its check takes up to
/// [`CHECK_TIMEOUT`]) may be about to activate it.
pub const SHOW_GRACE: Duration = Duration::from_secs(600);
/// Quarantined files are kept this long for a look, then removed by `gc`.
pub const QUARANTINE_KEEP: Duration = Duration::from_secs(7 * 24 * 3600);
/// Where stored files that do not match their names go.
pub const QUARANTINE: &str = "quarantine";
/// The record of stored files already hashed (see `Seen`).
const CHECKED: &str = "store/checked";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "the data partition is not mounted at {} (its marker file {MARKER} is missing); the unit plays its built-in show until it is",
        root.display()
    )]
    NotMounted { root: PathBuf },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "not enough room on the data partition: {needed} bytes needed, {free} free above the reserve of {reserve} bytes; remove old shows or push a smaller one"
    )]
    NoRoom {
        needed: u64,
        free: u64,
        reserve: u64,
    },
    #[error("staging key {0:?}: use 1 to 128 of A-Z a-z 0-9 . _ - (not starting with .)")]
    BadKey(String),
    #[error("file name {name:?} in the show: {why}")]
    BadName { name: String, why: &'static str },
    #[error("show name {0:?}: use 1 to 128 printable characters")]
    BadShowName(String),
    #[error("{key}: {have} of {want} bytes staged; send the rest (resume at offset {have})")]
    Incomplete { key: String, have: u64, want: u64 },
    #[error(
        "{key}: {have} bytes staged but the file is only {want}; the staged copy was dropped, send it again from 0"
    )]
    TooLong { key: String, have: u64, want: u64 },
    #[error(
        "{key}: content hashes to {got}, expected {want}; the staged copy was dropped, send it again"
    )]
    HashMismatch { key: String, got: Hash, want: Hash },
    #[error(
        "{key}: another transfer of this file is under way on the unit ({} is locked by its writer); let it finish (or end it), then ask `show missing` again and send from where it stands",
        path.display()
    )]
    Busy { key: String, path: PathBuf },
    #[error(
        "{key}: the unit holds {have} bytes of it, not {offset}: ask `show missing` again and send from there"
    )]
    WrongOffset { key: String, have: u64, offset: u64 },
    #[error(
        "{}: stored as {want} but its content hashes to {got}; quarantined (moved to {}) so that no show uses it; push the show again to resend it",
        path.display(), to.display()
    )]
    Quarantined {
        path: PathBuf,
        want: Hash,
        got: String,
        to: PathBuf,
    },
    #[error("{name}: sequence {hash} is not in the store; send it first")]
    MissingBlob { name: String, hash: Hash },
    #[error("show {0} is not in the store")]
    NoSuchShow(ShowId),
    #[error("no active show in the store at {}", root.display())]
    NoActive { root: PathBuf },
    #[error("show {id} failed the player's check ({player} run --check): {output}")]
    CheckFailed {
        id: ShowId,
        player: String,
        output: String,
    },
    #[error("{}: {why}", path.display())]
    Corrupt { path: PathBuf, why: String },
    /// Test builds only: the simulated power cut.
    #[error("simulated crash at step {0}")]
    Crash(u64),
}

type Result<T> = std::result::Result<T, StoreError>;

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One show as its manifest records it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ShowManifest {
    pub id: ShowId,
    pub name: String,
    /// Name (relative path inside the show) → content hash.
    pub files: BTreeMap<String, Hash>,
    /// Each file's size in bytes.
    #[serde(default)]
    pub sizes: BTreeMap<String, u64>,
    pub made_unix_ms: u64,
}

/// The active show.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ActiveShow {
    pub id: ShowId,
    pub name: String,
    pub files: BTreeMap<String, Hash>,
    /// When it became active (the `active` link's time).
    pub since_unix_ms: u64,
    /// Its show.yaml, for `pfx-player run --config`.
    pub show_yaml: PathBuf,
}

/// A file the caller wants and the store lacks: how much of it is staged already.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Missing {
    pub hash: Hash,
    pub size: u64,
    /// Bytes already in staging: send from here.
    pub offset: u64,
}

/// What `gc` removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct GcReport {
    pub shows: usize,
    pub blobs: usize,
    pub bytes: u64,
}

/// Throttles I/O to a byte rate, so a transfer leaves the disk to the show: the store's
/// staged writes, and the update agent's reads of a bundle (one rate cap, one way to keep it).
#[derive(Debug)]
pub struct ByteRate {
    rate: Option<u64>,
    start: Instant,
    bytes: u64,
}

impl ByteRate {
    /// `None` or `Some(0)`: no cap.
    pub fn new(rate: Option<u64>) -> ByteRate {
        ByteRate {
            rate,
            start: Instant::now(),
            bytes: 0,
        }
    }
    /// `n` more bytes moved: sleeps until the total is due at the rate.
    pub fn account(&mut self, n: usize) {
        self.bytes += n as u64;
        if let Some(r) = self.rate.filter(|r| *r > 0) {
            let due = Duration::from_secs_f64(self.bytes as f64 / r as f64);
            let el = self.start.elapsed();
            if due > el {
                std::thread::sleep(due - el);
            }
        }
    }
}

/// An open store on a data partition. Cheap to open; several processes (the player's
/// upload handler, the agent) may hold one at once.
#[derive(Debug)]
pub struct Store {
    root: PathBuf,
    reserve: Option<u64>,
    rate: Option<u64>,
    tmp_seq: AtomicU64,
    /// Test builds: fail the Nth durable step, as a power cut there would.
    crash_at: AtomicU64,
    steps: AtomicU64,
}

/// A staged file being written, held by this writer alone: its `.part` is locked
/// (`flock`) from `begin` until the `Staged` is dropped or finished, so two transfers of the
/// same file never append to it at once. Dropping it leaves what was written in staging
/// for a later resume.
#[derive(Debug)]
pub struct Staged {
    key: String,
    path: PathBuf,
    file: File,
    len: u64,
    total: u64,
    pacer: ByteRate,
}

impl Staged {
    /// Bytes staged so far: where the next write lands.
    pub fn offset(&self) -> u64 {
        self.len
    }
    /// The size the finished file will have.
    pub fn total(&self) -> u64 {
        self.total
    }
    pub fn key(&self) -> &str {
        &self.key
    }
}

fn fsync_dir(d: &Path) -> Result<()> {
    File::open(d).and_then(|f| f.sync_all()).map_err(io(d))
}

fn valid_key(key: &str) -> bool {
    (1..=128).contains(&key.len())
        && !key.starts_with('.')
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// A file name inside a show: a relative path of plain components. Pure.
pub fn check_name(name: &str) -> std::result::Result<(), &'static str> {
    if name.is_empty() || name.len() > 1024 {
        return Err("must be 1 to 1024 bytes");
    }
    if name.starts_with('/') {
        return Err("must be relative to the show");
    }
    if name.bytes().any(|b| b == 0 || b == b'\\' || b < 0x20) {
        return Err("contains NUL, a backslash or a control character");
    }
    for c in name.split('/') {
        if c.is_empty() || c == "." || c == ".." {
            return Err("has an empty, `.` or `..` component");
        }
        if c.starts_with('.') {
            return Err("has a component starting with `.`");
        }
        if c.len() > 255 {
            return Err("has a component over 255 bytes");
        }
    }
    if RESERVED.contains(&name) {
        return Err("is the store's own (show.yaml and manifest.json are reserved)");
    }
    Ok(())
}

fn now_unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn pid_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    pid > 0
        && (unsafe { libc::kill(pid, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH))
}

impl Store {
    /// The store at `root` when its marker is there; nothing made, nothing cleaned.
    fn at(root: &Path) -> Result<Store> {
        if !root.join(MARKER).is_file() {
            return Err(StoreError::NotMounted {
                root: root.to_path_buf(),
            });
        }
        Ok(Store {
            root: root.to_path_buf(),
            reserve: None,
            rate: None,
            tmp_seq: AtomicU64::new(0),
            crash_at: AtomicU64::new(0),
            steps: AtomicU64::new(0),
        })
    }

    /// Opens the store at `root` (the data partition's mount point), making its
    /// directories when they are missing. Fails with [`StoreError::NotMounted`] when the
    /// marker file is not there. Removes the leftovers of writers that died.
    pub fn open(root: &Path) -> Result<Store> {
        let s = Store::at(root)?;
        for d in ["store", "store/sha256", "shows", "staging"] {
            let p = root.join(d);
            if !p.is_dir() {
                fs::create_dir(&p).map_err(io(&p))?;
                fsync_dir(p.parent().unwrap_or(root))?;
            }
        }
        s.clean_dead_tmp()?;
        // A check that cannot finish (a file it may not move: the player's FPP Connect
        // opens the store as another user) must not keep the store from opening; what it
        // could not quarantine, `verify` and `verify_show` still refuse.
        let _ = s.check_stored(false);
        Ok(s)
    }

    /// Keeps this many bytes free on the partition (default: 5 % of it, at least
    /// [`MIN_RESERVE`], at most [`MAX_DEFAULT_RESERVE`]).
    pub fn with_reserve(mut self, bytes: u64) -> Store {
        self.reserve = Some(bytes);
        self
    }

    /// Paces staged writes (and the re-hash of a resumed file) to this many bytes per
    /// second; None: as fast as the disk goes.
    pub fn with_rate(mut self, bytes_per_s: Option<u64>) -> Store {
        self.rate = bytes_per_s;
        self
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn statvfs(&self) -> Result<(u64, u64)> {
        let c = std::ffi::CString::new(self.root.as_os_str().as_encoded_bytes()).map_err(|_| {
            StoreError::Corrupt {
                path: self.root.clone(),
                why: "path contains NUL".into(),
            }
        })?;
        // SAFETY: statvfs writes into the zeroed struct we own; `c` is NUL-terminated.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
            return Err(io(&self.root)(std::io::Error::last_os_error()));
        }
        let f = st.f_frsize as u64;
        Ok((st.f_bavail as u64 * f, st.f_blocks as u64 * f))
    }

    /// The reserve in bytes on this partition.
    pub fn reserve(&self) -> Result<u64> {
        match self.reserve {
            Some(r) => Ok(r),
            None => Ok((self.statvfs()?.1 / 20).clamp(MIN_RESERVE, MAX_DEFAULT_RESERVE)),
        }
    }

    /// Bytes that may still be written: free space minus the reserve.
    pub fn free_bytes(&self) -> Result<u64> {
        let avail = self.statvfs()?.0;
        Ok(avail.saturating_sub(self.reserve()?))
    }

    fn room_for(&self, needed: u64) -> Result<()> {
        let free = self.free_bytes()?;
        if needed > free {
            return Err(StoreError::NoRoom {
                needed,
                free,
                reserve: self.reserve()?,
            });
        }
        Ok(())
    }

    /// One durable step; test builds can make the Nth one the moment the power goes.
    fn step(&self) -> Result<()> {
        let n = self.steps.fetch_add(1, Ordering::SeqCst) + 1;
        if cfg!(test) && self.crash_at.load(Ordering::SeqCst) == n {
            return Err(StoreError::Crash(n));
        }
        Ok(())
    }

    fn tmp_name(&self, what: &str) -> PathBuf {
        let n = self.tmp_seq.fetch_add(1, Ordering::SeqCst);
        self.root
            .join("staging")
            .join(format!("{}.{n}.{what}.tmp", std::process::id()))
    }

    /// Removes `staging/*.tmp` whose writer process is gone.
    fn clean_dead_tmp(&self) -> Result<()> {
        let dir = self.root.join("staging");
        let rd = fs::read_dir(&dir).map_err(io(&dir))?;
        let mut removed = false;
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.ends_with(".tmp") {
                continue;
            }
            let pid: i32 = name
                .split('.')
                .next()
                .and_then(|p| p.parse().ok())
                .unwrap_or(0);
            if pid_alive(pid) && pid as u32 != std::process::id() {
                continue;
            }
            let p = e.path();
            let r = if p.is_dir() && !p.is_symlink() {
                fs::remove_dir_all(&p)
            } else {
                fs::remove_file(&p)
            };
            r.map_err(io(&p))?;
            removed = true;
        }
        if removed {
            fsync_dir(&dir)?;
        }
        Ok(())
    }

    /// Where a content hash lives.
    pub fn blob_path(&self, h: &Hash) -> PathBuf {
        self.root.join("store/sha256").join(h.to_string())
    }

    pub fn has(&self, h: &Hash) -> bool {
        self.blob_path(h).is_file()
    }

    fn part_path(&self, key: &str) -> PathBuf {
        self.root.join("staging").join(format!("{key}.part"))
    }

    /// Bytes already staged under `key` (0 when nothing is).
    pub fn staged_len(&self, key: &str) -> Result<u64> {
        if !valid_key(key) {
            return Err(StoreError::BadKey(key.into()));
        }
        match fs::metadata(self.part_path(key)) {
            Ok(m) => Ok(m.len()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
            Err(e) => Err(io(&self.part_path(key))(e)),
        }
    }

    /// Of the wanted `(hash, size)` pairs, those the store lacks, with what is staged of
    /// each under its hash's hex as the key.
    pub fn missing(&self, wanted: &[(Hash, u64)]) -> Result<Vec<Missing>> {
        let mut out = Vec::new();
        for (h, size) in wanted {
            if self.has(h) || out.iter().any(|m: &Missing| m.hash == *h) {
                continue;
            }
            let offset = self.staged_len(&h.to_string())?.min(*size);
            out.push(Missing {
                hash: *h,
                size: *size,
                offset,
            });
        }
        Ok(out)
    }

    /// Begins, or resumes, the staged file `key` that will be `total` bytes long. What is
    /// staged already is kept and [`Staged::offset`] says where to go on. Refuses before
    /// writing anything when the rest does not fit above the reserve, and with
    /// [`StoreError::Busy`] while another writer holds the file.
    pub fn begin(&self, key: &str, total: u64) -> Result<Staged> {
        self.begin_at(key, total, None)
    }

    /// Like [`Store::begin`], for a writer that sends from `offset`: refused with
    /// [`StoreError::WrongOffset`] unless exactly `offset` bytes are staged. A refused
    /// resume makes no file (nothing staged and `offset` > 0 leaves staging as it was).
    pub fn resume(&self, key: &str, total: u64, offset: u64) -> Result<Staged> {
        self.begin_at(key, total, Some(offset))
    }

    fn begin_at(&self, key: &str, total: u64, offset: Option<u64>) -> Result<Staged> {
        if !valid_key(key) {
            return Err(StoreError::BadKey(key.into()));
        }
        let path = self.part_path(key);
        // Before a byte is written (or a file made): the rest must fit above the reserve.
        // (Checked again on the locked file below; this one keeps a refusal from making
        // an empty file.)
        let staged = self.staged_len(key)?;
        if staged <= total {
            self.room_for(total - staged)?;
        }
        // Only a transfer that starts at 0 makes the file.
        let Some(file) = self.lock_part(key, offset.is_none_or(|o| o == 0))? else {
            return Err(StoreError::WrongOffset {
                key: key.into(),
                have: 0,
                offset: offset.unwrap_or(0),
            });
        };
        // The length under the lock is the truth: another writer may have added to the
        // file between the look above and the lock.
        let have = file.metadata().map_err(io(&path))?.len();
        if have > total {
            fs::remove_file(&path).map_err(io(&path))?;
            fsync_dir(&self.root.join("staging"))?;
            return Err(StoreError::TooLong {
                key: key.into(),
                have,
                want: total,
            });
        }
        if let Some(o) = offset
            && o != have
        {
            return Err(StoreError::WrongOffset {
                key: key.into(),
                have,
                offset: o,
            });
        }
        self.room_for(total - have)?;
        Ok(Staged {
            key: key.into(),
            path,
            file,
            len: have,
            total,
            pacer: ByteRate::new(self.rate),
        })
    }

    /// Opens `staging/<key>.part` (making it when `create`) and takes its lock without
    /// waiting. None: there is no such file and `create` is false. The lock is on the
    /// file, so the path must still name the locked file afterwards: a writer that
    /// finished meanwhile has moved its file into the store (or removed it), and locking
    /// that one would let this writer append to a stored file.
    fn lock_part(&self, key: &str, create: bool) -> Result<Option<File>> {
        let path = self.part_path(key);
        for _ in 0..8 {
            let file = match OpenOptions::new()
                .read(true)
                .append(true)
                .create(create)
                .open(&path)
            {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && !create => {
                    return Ok(None);
                }
                Err(e) => return Err(io(&path)(e)),
            };
            // SAFETY: flock(2) on a descriptor this function owns.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                    return Err(StoreError::Busy {
                        key: key.into(),
                        path,
                    });
                }
                return Err(io(&path)(e));
            }
            let held = file.metadata().map_err(io(&path))?;
            match fs::metadata(&path) {
                Ok(now) if now.ino() == held.ino() && now.dev() == held.dev() => {
                    return Ok(Some(file));
                }
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    if !create {
                        return Ok(None);
                    }
                }
                Err(e) => return Err(io(&path)(e)),
            }
        }
        Err(StoreError::Busy {
            key: key.into(),
            path,
        })
    }

    /// Appends to a staged file, keeping the reserve.
    pub fn write(&self, s: &mut Staged, buf: &[u8]) -> Result<()> {
        if s.len + buf.len() as u64 > s.total {
            return Err(StoreError::TooLong {
                key: s.key.clone(),
                have: s.len + buf.len() as u64,
                want: s.total,
            });
        }
        self.room_for(buf.len() as u64)?;
        s.file.write_all(buf).map_err(io(&s.path))?;
        s.len += buf.len() as u64;
        s.pacer.account(buf.len());
        Ok(())
    }

    /// Makes what was written so far durable (a later resume starts after it).
    pub fn sync(&self, s: &mut Staged) -> Result<()> {
        s.file.sync_data().map_err(io(&s.path))
    }

    /// Finishes a staged file: it must be complete; its hash must be `expect` when given.
    /// Moves it into the store and returns its hash. The hash is of the whole file as it
    /// is on disk, read back through the locked file, so the store holds a file under a
    /// name only when its content has that sha256, whoever wrote it. A file whose hash
    /// does not match is dropped.
    pub fn finish(&self, s: Staged, expect: Option<&Hash>) -> Result<Hash> {
        let on_disk = s.file.metadata().map_err(io(&s.path))?.len();
        if on_disk != s.total {
            return Err(StoreError::Incomplete {
                key: s.key,
                have: on_disk,
                want: s.total,
            });
        }
        s.file.sync_all().map_err(io(&s.path))?;
        self.step()?;
        let got = hash_open_file(&s.file, &s.path)?;
        let staging = self.root.join("staging");
        if let Some(want) = expect
            && *want != got
        {
            fs::remove_file(&s.path).map_err(io(&s.path))?;
            fsync_dir(&staging)?;
            return Err(StoreError::HashMismatch {
                key: s.key,
                got,
                want: *want,
            });
        }
        let dest = self.blob_path(&got);
        if dest.is_file() {
            fs::remove_file(&s.path).map_err(io(&s.path))?;
        } else {
            fs::rename(&s.path, &dest).map_err(io(&dest))?;
            self.step()?;
            fsync_dir(&self.root.join("store/sha256"))?;
            // Hashed just now: later opens need not read it again.
            if let Ok(m) = s.file.metadata() {
                self.note_checked(&[(got, Seen::of(&m))], &[]);
            }
        }
        self.step()?;
        fsync_dir(&staging)?;
        Ok(got)
    }

    /// Stores a small file in one go (tests, show files the caller holds in memory).
    pub fn put_bytes(&self, key: &str, bytes: &[u8]) -> Result<Hash> {
        let mut s = self.begin(key, bytes.len() as u64)?;
        if s.offset() > 0 {
            drop(s);
            let p = self.part_path(key);
            fs::remove_file(&p).map_err(io(&p))?;
            s = self.begin(key, bytes.len() as u64)?;
        }
        self.write(&mut s, bytes)?;
        self.finish(s, None)
    }

    fn write_durable(&self, path: &Path, bytes: &[u8]) -> Result<()> {
        let mut f = File::create(path).map_err(io(path))?;
        f.write_all(bytes).map_err(io(path))?;
        f.sync_all().map_err(io(path))?;
        self.step()
    }

    /// Makes a show from its show.yaml and its files (name → hash; every hash must be in
    /// the store). The show's directory is built in staging and renamed into `shows/`
    /// whole. The same content made twice is the same show (its id is returned again).
    pub fn make_show(
        &self,
        name: &str,
        show_yaml: &[u8],
        files: &BTreeMap<String, Hash>,
    ) -> Result<ShowId> {
        if name.is_empty() || name.chars().count() > 128 || name.chars().any(char::is_control) {
            return Err(StoreError::BadShowName(name.into()));
        }
        for (n, h) in files {
            check_name(n).map_err(|why| StoreError::BadName {
                name: n.clone(),
                why,
            })?;
            if !self.has(h) {
                return Err(StoreError::MissingBlob {
                    name: n.clone(),
                    hash: *h,
                });
            }
            // A name may not be both a file and a directory of another.
            if files.keys().any(|o| o.starts_with(&format!("{n}/"))) {
                return Err(StoreError::BadName {
                    name: n.clone(),
                    why: "is also a directory of another file",
                });
            }
        }
        let id = ShowId::of(show_yaml, files);
        let dest = self.root.join("shows").join(id.as_str());
        if dest.join("manifest.json").is_file() {
            self.relink_show(&id, files)?;
            // Made again: young again, so that another push's clean-up keeps it while
            // this push checks and activates it.
            if let Ok(d) = File::open(&dest) {
                let _ = d.set_modified(std::time::SystemTime::now());
            }
            return Ok(id);
        }
        self.room_for(show_yaml.len() as u64 + 64 * 1024)?;
        let tmp = self.tmp_name("show");
        fs::create_dir(&tmp).map_err(io(&tmp))?;
        self.write_durable(&tmp.join("show.yaml"), show_yaml)?;
        let mut sizes = BTreeMap::new();
        let mut dirs = vec![tmp.clone()];
        for (n, h) in files {
            let p = tmp.join(n);
            if let Some(parent) = p.parent()
                && !parent.is_dir()
            {
                fs::create_dir_all(parent).map_err(io(parent))?;
                let mut d = parent.to_path_buf();
                while d != tmp {
                    dirs.push(d.clone());
                    if !d.pop() {
                        break;
                    }
                }
            }
            let blob = self.blob_path(h);
            fs::hard_link(&blob, &p).map_err(io(&p))?;
            sizes.insert(n.clone(), fs::metadata(&p).map_err(io(&p))?.len());
            self.step()?;
        }
        let m = ShowManifest {
            id: id.clone(),
            name: name.into(),
            files: files.clone(),
            sizes,
            made_unix_ms: now_unix_ms(),
        };
        let text = serde_json::to_vec_pretty(&m).map_err(|e| StoreError::Corrupt {
            path: tmp.join("manifest.json"),
            why: e.to_string(),
        })?;
        self.write_durable(&tmp.join("manifest.json"), &text)?;
        dirs.sort();
        dirs.dedup();
        for d in dirs.iter().rev() {
            fsync_dir(d)?;
        }
        self.step()?;
        match fs::rename(&tmp, &dest) {
            Ok(()) => {}
            // Another writer made the same show meanwhile: theirs is as good.
            Err(_) if dest.join("manifest.json").is_file() => {
                fs::remove_dir_all(&tmp).map_err(io(&tmp))?;
                return Ok(id);
            }
            Err(e) => return Err(io(&dest)(e)),
        }
        self.step()?;
        fsync_dir(&self.root.join("shows"))?;
        fsync_dir(&self.root.join("staging"))?;
        Ok(id)
    }

    /// A show's directory.
    pub fn show_dir(&self, id: &ShowId) -> PathBuf {
        self.root.join("shows").join(id.as_str())
    }

    /// A show's manifest.
    pub fn manifest(&self, id: &ShowId) -> Result<ShowManifest> {
        let m = read_manifest(&self.show_dir(id)).map_err(|e| match e {
            StoreError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                StoreError::NoSuchShow(id.clone())
            }
            e => e,
        })?;
        if m.id != *id {
            return Err(StoreError::Corrupt {
                path: self.show_dir(id).join("manifest.json"),
                why: format!("says it is show {}", m.id),
            });
        }
        Ok(m)
    }

    /// Runs `PLAYER run --check --config shows/<id>/show.yaml`; Ok is its output, a
    /// refusal is [`StoreError::CheckFailed`] with what the player said.
    pub fn check_show(&self, id: &ShowId, player: &Path) -> Result<String> {
        self.check_show_as(id, player, false)
    }

    /// [`Store::check_show`] for a show that came over the network (`pfx-fleet push
    /// show`): `PLAYER run --check --pushed`, which refuses any path in it that leaves the
    /// show (docs/show-store.md, "A pushed show is closed").
    pub fn check_pushed_show(&self, id: &ShowId, player: &Path) -> Result<String> {
        self.check_show_as(id, player, true)
    }

    fn check_show_as(&self, id: &ShowId, player: &Path, pushed: bool) -> Result<String> {
        self.manifest(id)?;
        let cfg = self.show_dir(id).join("show.yaml");
        let mut child = Command::new(player)
            .args(["run", "--check"])
            .args(pushed.then_some("--pushed"))
            .arg("--config")
            .arg(&cfg)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(io(player))?;
        let mut pipes = (child.stdout.take(), child.stderr.take());
        let reader = |p: Option<Box<dyn Read + Send>>| {
            std::thread::spawn(move || {
                let mut s = Vec::new();
                if let Some(mut p) = p {
                    let _ = p.read_to_end(&mut s);
                }
                String::from_utf8_lossy(&s).into_owned()
            })
        };
        let out = reader(pipes.0.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
        let err = reader(pipes.1.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
        let deadline = Instant::now() + CHECK_TIMEOUT;
        let status = loop {
            match child.try_wait().map_err(io(player))? {
                Some(s) => break Some(s),
                None if Instant::now() >= deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
                None => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        let text = format!(
            "{}{}",
            out.join().unwrap_or_default(),
            err.join().unwrap_or_default()
        )
        .trim()
        .to_string();
        match status {
            Some(s) if s.success() => Ok(text),
            other => Err(StoreError::CheckFailed {
                id: id.clone(),
                player: player.display().to_string(),
                output: match other {
                    None => format!("no answer within {}s", CHECK_TIMEOUT.as_secs()),
                    Some(_) if text.is_empty() => format!("exit {other:?}, no output"),
                    Some(_) => text,
                },
            }),
        }
    }

    /// Makes `id` the active show: a new `active` link renamed over the old one. The show
    /// it replaces is recorded first as `previous`, so that a clean-up after an
    /// interrupted and resumed activation still knows which show was the one before
    /// (by then `active` already names the new one). One activation at a time.
    pub fn activate(&self, id: &ShowId) -> Result<()> {
        let _one = self.lock_root()?;
        // Under the lock: another push's clean-up cannot remove the show between this
        // look and the switch (which would leave `active` naming no show).
        self.manifest(id)?;
        // A corrupt `active` is no show to keep.
        if let Some(cur) = self.active_id().ok().flatten().filter(|c| c != id) {
            self.set_link("previous", &cur)?;
        }
        self.set_link("active", id)
    }

    /// `<root>/NAME` -> `shows/<id>`, replaced atomically (rename(2) over the old link).
    fn set_link(&self, name: &str, id: &ShowId) -> Result<()> {
        let tmp = self.tmp_name(name);
        let target = Path::new("shows").join(id.as_str());
        std::os::unix::fs::symlink(&target, &tmp).map_err(io(&tmp))?;
        self.step()?;
        fsync_dir(&self.root.join("staging"))?;
        let link = self.root.join(name);
        fs::rename(&tmp, &link).map_err(io(&link))?;
        self.step()?;
        fsync_dir(&self.root)?;
        self.step()
    }

    /// An exclusive lock on the store's root directory: activations and clean-ups of
    /// several processes (two pushes, FPP Connect) take turns.
    fn lock_root(&self) -> Result<File> {
        let f = File::open(&self.root).map_err(io(&self.root))?;
        // SAFETY: flock(2) on a descriptor we own; blocks until the other holder is done.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(io(&self.root)(std::io::Error::last_os_error()));
        }
        Ok(f)
    }

    /// The show that was active before the last switch to another show, if recorded.
    pub fn previous_id(&self) -> Result<Option<ShowId>> {
        self.link_id("previous")
    }

    /// The active show's id, if there is one.
    pub fn active_id(&self) -> Result<Option<ShowId>> {
        self.link_id("active")
    }

    fn link_id(&self, name: &str) -> Result<Option<ShowId>> {
        let active = self.root.join(name);
        let target = match fs::read_link(&active) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(&active)(e)),
        };
        let id = target
            .strip_prefix("shows")
            .ok()
            .and_then(|t| t.to_str())
            .and_then(|t| t.parse::<ShowId>().ok())
            .ok_or_else(|| StoreError::Corrupt {
                path: active.clone(),
                why: format!("points at {}, not shows/<id>", target.display()),
            })?;
        Ok(Some(id))
    }

    /// The active show: its id, name, files and since when.
    pub fn active(&self) -> Result<Option<ActiveShow>> {
        let Some(id) = self.active_id()? else {
            return Ok(None);
        };
        let m = self.manifest(&id)?;
        let active = self.root.join("active");
        let meta = fs::symlink_metadata(&active).map_err(io(&active))?;
        let since =
            (meta.mtime().max(0) as u64) * 1000 + (meta.mtime_nsec().max(0) as u64) / 1_000_000;
        Ok(Some(ActiveShow {
            show_yaml: self.show_dir(&id).join("show.yaml"),
            id,
            name: m.name,
            files: m.files,
            since_unix_ms: since,
        }))
    }

    /// Reads every file of a show back and checks its hash (slow: it reads everything).
    /// A show file that is the stored file itself (the same inode) and does not hash to
    /// its name means the stored file is bad: it is quarantined, so that `missing` asks
    /// for it again and the next push repairs the show.
    pub fn verify_show(&self, id: &ShowId) -> Result<()> {
        let m = self.manifest(id)?;
        let dir = self.show_dir(id);
        if !dir.join("show.yaml").is_file() {
            return Err(StoreError::Corrupt {
                path: dir.join("show.yaml"),
                why: "missing".into(),
            });
        }
        for (n, h) in &m.files {
            let p = dir.join(n);
            let meta = fs::symlink_metadata(&p).map_err(io(&p))?;
            if !meta.is_file() {
                return Err(StoreError::Corrupt {
                    path: p,
                    why: "not a regular file; push the show again".into(),
                });
            }
            let got = hash_file(&p)?;
            if got != *h {
                let blob = self.blob_path(h);
                let same = fs::symlink_metadata(&blob)
                    .is_ok_and(|b| b.ino() == meta.ino() && b.dev() == meta.dev());
                if same {
                    return Err(self.quarantine(h, &got.to_string())?);
                }
                return Err(StoreError::Corrupt {
                    path: p,
                    why: format!("hashes to {got}, the manifest says {h}; push the show again"),
                });
            }
        }
        Ok(())
    }

    /// Removes every show but the active one, the one before it (`previous`), `keep`, and
    /// those made in the last [`SHOW_GRACE`] (a push under way may be about to activate
    /// it), then the sequences no show names (older than an hour, so a push under way
    /// keeps what it sent), and quarantined files older than [`QUARANTINE_KEEP`].
    pub fn gc(&self, keep: &[ShowId]) -> Result<GcReport> {
        let mut r = GcReport::default();
        let _one = self.lock_root()?;
        let active = self.active_id()?;
        // A `previous` that does not read as a show keeps every show: it may have named
        // any of them.
        let previous = self.previous_id();
        let shows = self.root.join("shows");
        for e in fs::read_dir(&shows).map_err(io(&shows))?.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Ok(id) = name.parse::<ShowId>() else {
                continue;
            };
            let young = e
                .metadata()
                .ok()
                .and_then(|m| m.modified().ok())
                .and_then(|t| t.elapsed().ok())
                .is_none_or(|a| a < SHOW_GRACE);
            let kept = match &previous {
                Ok(p) => p.as_ref() == Some(&id),
                Err(_) => true,
            };
            if active.as_ref() == Some(&id) || keep.contains(&id) || kept || young {
                continue;
            }
            // Out of shows/ in one rename first, so shows/ never holds a half-removed show.
            let tmp = self.tmp_name("gc");
            fs::rename(e.path(), &tmp).map_err(io(&tmp))?;
            fsync_dir(&shows)?;
            fs::remove_dir_all(&tmp).map_err(io(&tmp))?;
            r.shows += 1;
        }
        let blobs = self.root.join("store/sha256");
        for e in fs::read_dir(&blobs).map_err(io(&blobs))?.flatten() {
            let Ok(m) = e.metadata() else { continue };
            let old = m
                .modified()
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|a| a > GC_GRACE);
            if m.nlink() == 1 && old {
                fs::remove_file(e.path()).map_err(io(&e.path()))?;
                r.blobs += 1;
                r.bytes += m.len();
            }
        }
        fsync_dir(&blobs)?;
        let q = self.root.join(QUARANTINE);
        if let Ok(rd) = fs::read_dir(&q) {
            for e in rd.flatten() {
                let Ok(m) = e.metadata() else { continue };
                let old = m
                    .modified()
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|a| a > QUARANTINE_KEEP);
                if old && m.is_file() {
                    fs::remove_file(e.path()).map_err(io(&e.path()))?;
                    r.bytes += m.len();
                }
            }
        }
        Ok(r)
    }

    /// Gives a show that already exists the stored files it names: a file of it that was
    /// quarantined and sent again is a new stored file, and the show's link to the old
    /// one is replaced (per file: a link made in staging, renamed over it). Its manifest's
    /// sizes follow.
    fn relink_show(&self, id: &ShowId, files: &BTreeMap<String, Hash>) -> Result<()> {
        let dir = self.show_dir(id);
        let mut changed = false;
        for (n, h) in files {
            let blob = self.blob_path(h);
            let b = fs::metadata(&blob).map_err(io(&blob))?;
            let link = dir.join(n);
            if fs::symlink_metadata(&link).is_ok_and(|l| l.ino() == b.ino() && l.dev() == b.dev()) {
                continue;
            }
            let parent = link.parent().unwrap_or(&dir).to_path_buf();
            if !parent.is_dir() {
                fs::create_dir_all(&parent).map_err(io(&parent))?;
            }
            let tmp = self.tmp_name("relink");
            fs::hard_link(&blob, &tmp).map_err(io(&tmp))?;
            self.step()?;
            fs::rename(&tmp, &link).map_err(io(&link))?;
            self.step()?;
            fsync_dir(&parent)?;
            changed = true;
        }
        if !changed {
            return Ok(());
        }
        let mut m = self.manifest(id)?;
        let mut sizes = BTreeMap::new();
        for n in m.files.keys() {
            let p = dir.join(n);
            sizes.insert(n.clone(), fs::metadata(&p).map_err(io(&p))?.len());
        }
        if sizes != m.sizes {
            m.sizes = sizes;
            let p = dir.join("manifest.json");
            let text = serde_json::to_vec_pretty(&m).map_err(|e| StoreError::Corrupt {
                path: p.clone(),
                why: e.to_string(),
            })?;
            let tmp = self.tmp_name("manifest");
            self.write_durable(&tmp, &text)?;
            fs::rename(&tmp, &p).map_err(io(&p))?;
            self.step()?;
            fsync_dir(&dir)?;
        }
        Ok(())
    }

    /// Moves the stored file `h`, whose content hashes to `got` (or could not be read: the
    /// reason), out of the store into `quarantine/<hex>.<unix ms>`, with a `.why` file
    /// beside it. No show can be made with it and `missing` asks for it again. Shows that
    /// already hold it keep their link to it until a push sends it again
    /// ([`Store::make_show`] relinks them) and `verify_show` refuses them meanwhile.
    /// Returns the finding as an error to report.
    pub fn quarantine(&self, h: &Hash, got: &str) -> Result<StoreError> {
        let q = self.root.join(QUARANTINE);
        if !q.is_dir() {
            match fs::create_dir(&q) {
                Ok(()) => fsync_dir(&self.root)?,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io(&q)(e)),
            }
        }
        let ms = now_unix_ms();
        let mut to = q.join(format!("{h}.{ms}"));
        let mut n = 0;
        while to.exists() || to.is_symlink() {
            n += 1;
            to = q.join(format!("{h}.{ms}.{n}"));
        }
        let blob = self.blob_path(h);
        fs::rename(&blob, &to).map_err(io(&blob))?;
        fsync_dir(&self.root.join("store/sha256"))?;
        let why = format!(
            "stored as {h}; its content hashes to {got}; quarantined at unix ms {ms} by pid {}\n",
            std::process::id()
        );
        let mut why_path = to.clone().into_os_string();
        why_path.push(".why");
        let why_path = PathBuf::from(why_path);
        self.write_durable(&why_path, why.as_bytes())?;
        fsync_dir(&q)?;
        self.note_checked(&[], &[*h]);
        Ok(StoreError::Quarantined {
            path: blob,
            want: *h,
            got: got.to_string(),
            to,
        })
    }

    /// Hashes the stored files that were not hashed since they last changed (`full`:
    /// every one) and quarantines each whose content does not match its name, or that is
    /// not a regular file. Returns what it found.
    fn check_stored(&self, full: bool) -> Result<VerifyReport> {
        let mut r = VerifyReport::default();
        let dir = self.root.join("store/sha256");
        let seen = self.read_checked();
        let mut add = Vec::new();
        let mut present = std::collections::BTreeSet::new();
        for e in fs::read_dir(&dir).map_err(io(&dir))?.flatten() {
            let Ok(h) = e.file_name().to_string_lossy().parse::<Hash>() else {
                continue;
            };
            present.insert(h);
            let Ok(meta) = e.path().symlink_metadata() else {
                continue;
            };
            if !meta.is_file() {
                r.quarantined.push(
                    self.quarantine(&h, "nothing: it is not a regular file")?
                        .to_string(),
                );
                continue;
            }
            if !full && seen.get(&h) == Some(&Seen::of(&meta)) {
                continue;
            }
            r.files += 1;
            r.bytes += meta.len();
            match hash_file(&e.path()) {
                Ok(got) if got == h => add.push((h, Seen::of(&meta))),
                Ok(got) => r
                    .quarantined
                    .push(self.quarantine(&h, &got.to_string())?.to_string()),
                Err(err) => r.quarantined.push(
                    self.quarantine(&h, &format!("nothing: it cannot be read: {err}"))?
                        .to_string(),
                ),
            }
        }
        let gone: Vec<Hash> = seen
            .keys()
            .filter(|h| !present.contains(h))
            .copied()
            .collect();
        if !add.is_empty() || !gone.is_empty() {
            self.note_checked(&add, &gone);
        }
        Ok(r)
    }

    /// Reads every stored file back and quarantines each whose content does not match
    /// its name (slow: it reads everything). `open` does the same for the files that
    /// changed since they were last hashed.
    pub fn verify(&self) -> Result<VerifyReport> {
        self.check_stored(true)
    }

    fn read_checked(&self) -> BTreeMap<Hash, Seen> {
        fs::read_to_string(self.root.join(CHECKED))
            .map(|t| parse_checked(&t))
            .unwrap_or_default()
    }

    /// Records stored files as hashed (`add`) or gone (`remove`). Only a cache: a failed
    /// write costs a second hashing, never a wrong answer, so errors are not reported.
    fn note_checked(&self, add: &[(Hash, Seen)], remove: &[Hash]) {
        let dir = self.root.join("store");
        let Ok(lock) = File::open(&dir) else { return };
        // SAFETY: flock(2) on a descriptor we own; held until `lock` is dropped.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return;
        }
        let mut m = self.read_checked();
        for (h, s) in add {
            m.insert(*h, *s);
        }
        for h in remove {
            m.remove(h);
        }
        let tmp = self.tmp_name("checked");
        let dest = self.root.join(CHECKED);
        let ok = (|| -> std::io::Result<()> {
            let mut f = File::create(&tmp)?;
            f.write_all(render_checked(&m).as_bytes())?;
            f.sync_all()?;
            fs::rename(&tmp, &dest)?;
            File::open(&dir)?.sync_all()
        })();
        if ok.is_err() {
            let _ = fs::remove_file(&tmp);
        }
    }
}

/// A stored file as the store last hashed it. Every writer of the store replaces a file
/// (rename: a new inode) or appends to it (a new size and modification time), so a file
/// that still has these was not written since; `verify` reads everything regardless.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    ino: u64,
    size: u64,
    mtime_ns: i128,
}

impl Seen {
    fn of(m: &fs::Metadata) -> Seen {
        Seen {
            ino: m.ino(),
            size: m.len(),
            mtime_ns: m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
        }
    }
}

/// `store/checked`: one line `HEX INO SIZE MTIME_NS` per stored file hashed. Pure; a line
/// that does not read is skipped (that file is hashed again).
fn parse_checked(text: &str) -> BTreeMap<Hash, Seen> {
    let mut m = BTreeMap::new();
    for line in text.lines() {
        let w: Vec<&str> = line.split(' ').collect();
        if let [h, ino, size, mt] = w.as_slice()
            && let (Ok(h), Ok(ino), Ok(size), Ok(mtime_ns)) =
                (h.parse::<Hash>(), ino.parse(), size.parse(), mt.parse())
        {
            m.insert(
                h,
                Seen {
                    ino,
                    size,
                    mtime_ns,
                },
            );
        }
    }
    m
}

fn render_checked(m: &BTreeMap<Hash, Seen>) -> String {
    m.iter()
        .map(|(h, s)| format!("{h} {} {} {}\n", s.ino, s.size, s.mtime_ns))
        .collect()
}

/// What [`Store::verify`] (or `open`) read and found.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct VerifyReport {
    /// Stored files hashed.
    pub files: usize,
    pub bytes: u64,
    /// Each file quarantined, as a sentence.
    pub quarantined: Vec<String>,
}

/// A stored file found not to match its name, kept in `quarantine/`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Quarantined {
    pub path: PathBuf,
    /// The name it was stored under.
    pub hash: String,
    /// What the store found (the `.why` file), or why that is not known.
    pub why: String,
}

/// The files the store has quarantined, for `/health` and doctor. Reads only.
pub fn quarantined(root: &Path) -> Result<Vec<Quarantined>> {
    let q = root.join(QUARANTINE);
    let rd = match fs::read_dir(&q) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(&q)(e)),
    };
    let mut out = Vec::new();
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.ends_with(".why") || name.ends_with(".tmp") {
            continue;
        }
        let mut why_path = e.path().into_os_string();
        why_path.push(".why");
        let why = fs::read_to_string(&why_path)
            .map(|t| t.trim().chars().take(400).collect())
            .unwrap_or_else(|_| "no record of why".into());
        out.push(Quarantined {
            path: e.path(),
            hash: name.split('.').next().unwrap_or("").to_string(),
            why,
        });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// Reads the manifest of the show in `dir` (`<root>/shows/<id>`): it must parse, be the
/// show of that directory's name, and name only files `make_show` would write.
pub fn read_manifest(dir: &Path) -> Result<ShowManifest> {
    let p = dir.join("manifest.json");
    let text = fs::read(&p).map_err(io(&p))?;
    let m: ShowManifest = serde_json::from_slice(&text).map_err(|e| StoreError::Corrupt {
        path: p.clone(),
        why: format!("not a show manifest: {e}"),
    })?;
    if dir.file_name().and_then(|n| n.to_str()) != Some(m.id.as_str()) {
        return Err(StoreError::Corrupt {
            path: p,
            why: format!("says it is show {}", m.id),
        });
    }
    // `make_show` writes only names `check_name` accepts; any other came from a
    // corrupt or edited file, and joined to the show's directory it could name a file
    // outside the show (`/etc/shadow`, `../../x`) that `verify_show` would then read.
    if let Some((n, why)) = m
        .files
        .keys()
        .find_map(|n| check_name(n).err().map(|why| (n, why)))
    {
        return Err(StoreError::Corrupt {
            path: p.clone(),
            why: format!("names the file {n:?}, which {why}"),
        });
    }
    Ok(m)
}

/// The sha256 of an open file's whole content, read from its start (not from the
/// descriptor's position).
fn hash_open_file(f: &File, p: &Path) -> Result<Hash> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0u64;
    loop {
        let n = f.read_at(&mut buf, at).map_err(io(p))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        at += n as u64;
    }
    Ok(Hash(h.finalize().into()))
}

/// The sha256 of a file's content.
pub fn hash_file(p: &Path) -> Result<Hash> {
    let mut f = File::open(p).map_err(io(p))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(io(p))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(Hash(h.finalize().into()))
}

/// What the player plays from a store root, or why it cannot: for `pfx-player run
/// --store`. Reads only; never makes directories.
pub fn active_show_yaml(root: &Path) -> Result<ActiveShow> {
    let s = Store::at(root)?;
    s.active()?.ok_or_else(|| StoreError::NoActive {
        root: root.to_path_buf(),
    })
}

#[cfg(test)]
mod tests;
