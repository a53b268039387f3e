//! Chunked uploads (`PATCH /api/file/sequences`, docs/fpp-connect.md 2.4): the checks made
//! before a byte is written, staging, hashing as the bytes come, and the hand-over of a
//! finished file to the store. Runs on blocking threads at background priority.

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::PathBuf;

use sha2::{Digest, Sha256};

pub use super::names::Dir;
use super::store::ShowStore;

/// One chunk carries at most this many bytes (xLights sends 16 MiB).
pub const MAX_CHUNK: u64 = 16 * 1024 * 1024 + 64 * 1024;
/// Unfinished uploads at once.
pub const MAX_PARTIALS: usize = 4;
/// An unfinished upload untouched this long is dropped.
pub const STALE_MS: u64 = 10 * 60_000;
/// Bytes written between two rate checks.
const PIECE: usize = 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// 400
    Bad(String),
    /// 409
    Conflict(String),
    /// 413
    TooLarge(String),
    /// 503
    Busy(String),
    /// 507
    NoRoom(String),
    /// 500
    Internal(String),
}

struct Partial {
    length: u64,
    written: u64,
    hasher: Sha256,
    touched_ms: u64,
}

/// What a chunk did.
#[derive(Debug, PartialEq, Eq)]
pub enum Done {
    /// More chunks to come; this many bytes staged so far.
    Partial(u64),
    /// The file is whole and in the store.
    Stored { size: u64, sha256: [u8; 32] },
}

pub struct Uploads {
    dir: PathBuf,
    partials: HashMap<String, Partial>,
    /// Bytes per second the card is written at, at most.
    rate: u64,
}

impl Uploads {
    /// Staging starts empty: what a crash left there is never finished.
    pub fn new(dir: PathBuf, rate_bytes_s: u64) -> Uploads {
        if let Ok(rd) = fs::read_dir(&dir) {
            for e in rd.flatten() {
                let _ = fs::remove_file(e.path());
            }
        }
        Uploads {
            dir,
            partials: HashMap::new(),
            rate: rate_bytes_s.max(1),
        }
    }

    fn staged(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.part"))
    }

    fn drop_partial(&mut self, name: &str) {
        self.partials.remove(name);
        let _ = fs::remove_file(self.staged(name));
    }

    /// The checks before a byte of the chunk is written (pure but for dropping stale
    /// staged files). `room` is what the store lets an upload use now.
    /// `file`: where the upload goes and its name.
    pub fn check(
        &mut self,
        file: (Dir, &str),
        offset: u64,
        length: u64,
        chunk: u64,
        room: u64,
        now_ms: u64,
    ) -> Result<(), Refusal> {
        let key = file.0.key(file.1);
        let name = key.as_str();
        let stale: Vec<String> = self
            .partials
            .iter()
            .filter(|(_, p)| now_ms.saturating_sub(p.touched_ms) > STALE_MS)
            .map(|(n, _)| n.clone())
            .collect();
        for n in stale {
            self.drop_partial(&n);
        }
        if chunk > MAX_CHUNK {
            return Err(Refusal::TooLarge(format!(
                "a chunk of {chunk} bytes; send at most {MAX_CHUNK}"
            )));
        }
        if offset.checked_add(chunk).is_none_or(|end| end > length) {
            return Err(Refusal::Bad(format!(
                "Upload-Offset {offset} + {chunk} bytes runs past Upload-Length {length}"
            )));
        }
        if offset == 0 {
            self.drop_partial(name);
            if self.partials.len() >= MAX_PARTIALS {
                return Err(Refusal::Busy(format!(
                    "{MAX_PARTIALS} uploads are already under way; finish one first"
                )));
            }
            let pending: u64 = self.partials.values().map(|p| p.length - p.written).sum();
            let free = room.saturating_sub(pending);
            if length > free {
                return Err(Refusal::NoRoom(format!(
                    "{name} is {length} bytes but only {free} bytes may be used (free space minus the reserve kept for the active show)"
                )));
            }
            self.partials.insert(
                name.to_string(),
                Partial {
                    length,
                    written: 0,
                    hasher: Sha256::new(),
                    touched_ms: now_ms,
                },
            );
            return Ok(());
        }
        match self.partials.get(name) {
            None => Err(Refusal::Conflict(format!(
                "no upload of {name} is under way; start at Upload-Offset 0"
            ))),
            Some(p) if p.length != length => Err(Refusal::Conflict(format!(
                "Upload-Length {length} differs from the {} this upload started with; start again at 0",
                p.length
            ))),
            Some(p) if p.written != offset => Err(Refusal::Conflict(format!(
                "Upload-Offset {offset}, but {} bytes of {name} are staged; start again at 0",
                p.written
            ))),
            Some(_) => Ok(()),
        }
    }

    /// Writes a checked chunk to staging at the bounded rate, hashing it; when the file
    /// is whole, flushes it, checks it is an FSEQ file and hands it to `store`.
    pub fn write(
        &mut self,
        store: &dyn ShowStore,
        dir: Dir,
        file: &str,
        data: &[u8],
        now_ms: u64,
    ) -> Result<Done, Refusal> {
        let key = dir.key(file);
        let name = key.as_str();
        let path = self.staged(name);
        let internal = |what: &str, e: std::io::Error| {
            Refusal::Internal(format!("{what} {}: {e}", path.display()))
        };
        let rate = self.rate;
        let Some(p) = self.partials.get_mut(name) else {
            return Err(Refusal::Conflict(format!(
                "no upload of {name} is under way"
            )));
        };
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| internal("cannot open", e))?;
        let start = crate::sys::time::mono_ns();
        let mut sent: u64 = 0;
        for piece in data.chunks(PIECE) {
            f.write_all(piece)
                .map_err(|e| internal("cannot write", e))?;
            p.hasher.update(piece);
            sent += piece.len() as u64;
            // Bounded rate: never ahead of `rate` bytes per second since this chunk began.
            let due = start + sent.saturating_mul(1_000_000_000) / rate;
            if due > crate::sys::time::mono_ns() {
                crate::sys::time::sleep_until(due);
            }
        }
        p.written += data.len() as u64;
        p.touched_ms = now_ms;
        if p.written < p.length {
            return Ok(Done::Partial(p.written));
        }
        f.sync_all().map_err(|e| internal("cannot flush", e))?;
        drop(f);
        let size = p.written;
        let sha256: [u8; 32] = p.hasher.clone().finalize().into();
        self.partials.remove(name);
        if dir != Dir::Sequences {
            // Media is kept as it came: pfx never opens it.
            if let Err(e) = store.commit_media(dir, file, &path) {
                let _ = fs::remove_file(&path);
                return Err(Refusal::Internal(e));
            }
            return Ok(Done::Stored { size, sha256 });
        }
        let name = file;
        if let Err(e) = crate::source::fseq::open(&path) {
            let _ = fs::remove_file(&path);
            return Err(Refusal::Bad(format!(
                "{name} is not a sequence pfx can play: {e}"
            )));
        }
        if let Err(e) = store.commit_sequence(name, &path, &sha256) {
            let _ = fs::remove_file(&path);
            return Err(Refusal::Internal(e));
        }
        Ok(Done::Stored { size, sha256 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up() -> (tempfile::TempDir, Uploads) {
        let d = tempfile::tempdir().expect("tmp");
        let u = Uploads::new(d.path().to_path_buf(), 1 << 40);
        (d, u)
    }

    #[test]
    fn too_big_for_the_room_is_refused_before_anything_is_staged() {
        let (d, mut u) = up();
        let e = u
            .check((Dir::Sequences, "a.fseq"), 0, 1000, 100, 999, 0)
            .expect_err("no room");
        assert!(matches!(e, Refusal::NoRoom(_)), "{e:?}");
        assert_eq!(fs::read_dir(d.path()).expect("dir").count(), 0);
        assert!(
            u.check((Dir::Sequences, "a.fseq"), 0, 999, 100, 999, 0)
                .is_ok()
        );
    }

    #[test]
    fn other_unfinished_uploads_count_against_the_room() {
        let (_d, mut u) = up();
        u.check((Dir::Sequences, "a.fseq"), 0, 600, 100, 1000, 0)
            .expect("a");
        let e = u
            .check((Dir::Sequences, "b.fseq"), 0, 500, 100, 1000, 0)
            .expect_err("b");
        assert!(matches!(e, Refusal::NoRoom(_)), "{e:?}");
    }

    #[test]
    fn offsets_must_follow_on() {
        let (_d, mut u) = up();
        assert!(matches!(
            u.check((Dir::Sequences, "a.fseq"), 10, 100, 10, 1000, 0),
            Err(Refusal::Conflict(_))
        ));
        u.check((Dir::Sequences, "a.fseq"), 0, 100, 10, 1000, 0)
            .expect("start");
        assert!(matches!(
            u.check((Dir::Sequences, "a.fseq"), 20, 100, 10, 1000, 0),
            Err(Refusal::Conflict(_))
        ));
        assert!(matches!(
            u.check((Dir::Sequences, "a.fseq"), 0, 100, 200, 1000, 0),
            Err(Refusal::Bad(_))
        ));
        assert!(matches!(
            u.check(
                (Dir::Sequences, "a.fseq"),
                0,
                100,
                MAX_CHUNK + 1,
                u64::MAX,
                0
            ),
            Err(Refusal::TooLarge(_))
        ));
        assert!(matches!(
            u.check((Dir::Sequences, "a.fseq"), u64::MAX, 100, 10, 1000, 0),
            Err(Refusal::Bad(_))
        ));
    }

    #[test]
    fn at_most_four_at_once_and_stale_ones_go() {
        let (_d, mut u) = up();
        for i in 0..MAX_PARTIALS {
            u.check((Dir::Sequences, &format!("{i}.fseq")), 0, 10, 1, 1000, 0)
                .expect("start");
        }
        assert!(matches!(
            u.check((Dir::Sequences, "x.fseq"), 0, 10, 1, 1000, 0),
            Err(Refusal::Busy(_))
        ));
        assert!(
            u.check((Dir::Sequences, "x.fseq"), 0, 10, 1, 1000, STALE_MS + 1)
                .is_ok()
        );
    }
}
