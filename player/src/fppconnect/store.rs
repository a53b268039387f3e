//! Where uploads go and how a new show becomes active: the small interface FPP Connect
//! needs (`ShowStore`), and `PfxStore`, that interface on the unit's show store
//! (`pfx-store`, docs/show-store.md).
//!
//! FPP Connect's own files under the store root:
//! - `staging/fpp-connect/<name>.part`: chunks being received (same file system as the
//!   store, so a finished file moves in by rename);
//! - `fpp-connect/names.json`: which content each uploaded sequence name holds now;
//! - `fpp-connect/playlist.json`: the last playlist posted.
//!
//! A finished upload becomes `store/sha256/<hex>` like any pushed file; a posted playlist
//! becomes a store show (`make_show`), checked by the unit's own `run --check` and
//! activated by the store's atomic link switch.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use std::collections::BTreeMap;
use std::sync::Mutex;

use pfx_store::{Hash, Store};

use crate::config::show::ShowConfig;

pub trait ShowStore: Send + Sync + 'static {
    /// Where chunks are staged; on the same file system as the store.
    fn staging_dir(&self) -> PathBuf;
    /// (bytes an upload may still use: free space minus the reserve, total bytes).
    fn room(&self) -> io::Result<(u64, u64)>;
    /// Moves a finished, flushed file with this sha256 into the store under `name`.
    fn commit_sequence(&self, name: &str, staged: &Path, sha256: &[u8; 32]) -> Result<(), String>;
    /// The stored file `name` holds now.
    fn sequence(&self, name: &str) -> Option<PathBuf>;
    /// Keeps a finished media upload (`fpp-connect/media/<dir>/<name>`): pfx plays no
    /// audio, but xLights' next push finds it there and does not send it again.
    fn commit_media(&self, dir: super::names::Dir, name: &str, staged: &Path)
    -> Result<(), String>;
    /// A kept media file called `name` (music first, then videos).
    fn media(&self, name: &str) -> Option<PathBuf>;
    /// Where xLights' posted output table (`POST /api/channel/output/universeOutputs`) is
    /// kept: beside the show, never applied.
    fn universe_outputs_file(&self) -> PathBuf;
    /// How a show config names the stored sequence `name`.
    fn sequence_ref(&self, name: &str) -> PathBuf;
    /// Makes a show called `show_name` from `config` and the stored sequences it names.
    /// When that is the active show already (same name, config and file contents: the
    /// store's show id), nothing happens and the answer is `Unchanged`. Otherwise it checks
    /// it with the unit's own `pfx-player run --check`, makes it the active show
    /// atomically and has the player switch to it, when the item playing now ends unless
    /// `now`. On error nothing changed.
    fn activate(
        &self,
        show_name: &str,
        config: &ShowConfig,
        sequences: &[String],
        now: bool,
    ) -> Result<Activated, String>;
    /// The show config the player plays now, the directory its relative paths are taken
    /// from, and whether that is a store show (whose files come along by name).
    fn active_config(&self) -> Result<(ShowConfig, PathBuf, bool), String>;
}

/// What a posted playlist did to the unit's show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activated {
    /// It is the show that is active already: nothing was checked, switched or restarted.
    Unchanged,
    /// A new show is active; the player switches to it (at the item's end unless now).
    Switched,
}

/// Writes `path` whole or not at all: temp file, fsync, rename, fsync of the directory.
pub fn write_atomic(path: &Path, data: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.tmp",
        path.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
    ));
    {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    fs::File::open(dir)?.sync_all()
}

/// `fpp-connect/media` under the store root: media xLights uploaded, kept, never played.
pub fn media_dir(root: &Path) -> PathBuf {
    root.join("fpp-connect/media")
}

/// `fpp-connect/universeOutputs.json` under the store root: xLights' output table as it
/// last posted it (`docs/fpp-connect.md` 2.7).
pub fn universe_outputs_path(root: &Path) -> PathBuf {
    root.join("fpp-connect/universeOutputs.json")
}

/// The media files kept under `root`, sorted (`music/…`, `videos/…`).
pub fn kept_media(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for d in ["music", "videos"] {
        if let Ok(rd) = fs::read_dir(media_dir(root).join(d)) {
            for e in rd.flatten() {
                if e.path().is_file() {
                    out.push(format!("{d}/{}", e.file_name().to_string_lossy()));
                }
            }
        }
    }
    out.sort();
    out
}

fn note_media(root: &Path) {
    crate::http::set_media_kept(kept_media(root));
}

/// A line for `/health` and `doctor` when FPP Connect kept media: pfx plays no audio.
pub fn media_line(kept: &[String]) -> String {
    crate::http::media_line(kept)
}

pub struct PfxStore {
    /// This store's kept media is what `/health` reports (the running service's store).
    health: std::sync::atomic::AtomicBool,
    store: Store,
    root: PathBuf,
    /// The `--config` show: what plays while the store has no active show.
    config: Option<PathBuf>,
    /// The binary whose `run --check` decides (this one).
    player_exe: PathBuf,
    names: Mutex<BTreeMap<String, Hash>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl PfxStore {
    /// Opens the store at `root` (it must be the mounted data partition).
    pub fn open(root: &Path, config: Option<PathBuf>) -> Result<PfxStore, String> {
        let store = Store::open(root).map_err(|e| e.to_string())?;
        for d in ["staging/fpp-connect", "fpp-connect"] {
            let p = root.join(d);
            fs::create_dir_all(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        }
        let names = match fs::read(root.join("fpp-connect/names.json")) {
            Ok(t) => serde_json::from_slice(&t).unwrap_or_else(|e| {
                tracing::warn!(
                    "FPP Connect: fpp-connect/names.json unreadable ({e}); uploaded names start afresh"
                );
                BTreeMap::new()
            }),
            Err(_) => BTreeMap::new(),
        };
        Ok(PfxStore {
            health: std::sync::atomic::AtomicBool::new(false),
            store,
            root: root.to_path_buf(),
            config,
            player_exe: std::env::current_exe()
                .map_err(|e| format!("cannot find this binary: {e}"))?,
            names: Mutex::new(names),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Makes this store's kept media what `/health` reports, from now on.
    pub fn publish_to_health(&self) {
        self.health
            .store(true, std::sync::atomic::Ordering::Relaxed);
        note_media(&self.root);
    }

    fn save_names(&self, names: &BTreeMap<String, Hash>) -> Result<(), String> {
        let text = serde_json::to_vec_pretty(names).map_err(|e| e.to_string())?;
        let p = self.root.join("fpp-connect/names.json");
        write_atomic(&p, &text).map_err(|e| format!("{}: {e}", p.display()))
    }
}

impl ShowStore for PfxStore {
    fn staging_dir(&self) -> PathBuf {
        self.root.join("staging/fpp-connect")
    }

    fn room(&self) -> io::Result<(u64, u64)> {
        let free = self
            .store
            .free_bytes()
            .map_err(|e| io::Error::other(e.to_string()))?;
        Ok((free, crate::sys::disk::space(&self.root)?.1))
    }

    fn commit_sequence(&self, name: &str, staged: &Path, sha256: &[u8; 32]) -> Result<(), String> {
        let h = Hash(*sha256);
        let blob = self.store.blob_path(&h);
        let io = |what: &str, e: io::Error| format!("{what}: {e}");
        if self.store.has(&h) {
            let _ = fs::remove_file(staged);
        } else {
            // The move the store's own `finish` makes: named by the hash computed while
            // the bytes came in, on the same file system, then the directory synced.
            fs::rename(staged, &blob).map_err(|e| io("moving the upload into the store", e))?;
            if let Some(d) = blob.parent() {
                fs::File::open(d)
                    .and_then(|f| f.sync_all())
                    .map_err(|e| io("syncing the store", e))?;
            }
        }
        let mut names = lock(&self.names);
        let mut next = names.clone();
        next.insert(name.to_string(), h);
        self.save_names(&next)?;
        *names = next;
        Ok(())
    }

    fn sequence(&self, name: &str) -> Option<PathBuf> {
        let h = *lock(&self.names).get(name)?;
        self.store.has(&h).then(|| self.store.blob_path(&h))
    }

    fn sequence_ref(&self, name: &str) -> PathBuf {
        PathBuf::from(name)
    }

    fn commit_media(
        &self,
        dir: super::names::Dir,
        name: &str,
        staged: &Path,
    ) -> Result<(), String> {
        let d = media_dir(&self.root).join(dir.name());
        fs::create_dir_all(&d).map_err(|e| format!("{}: {e}", d.display()))?;
        let to = d.join(name);
        fs::rename(staged, &to).map_err(|e| format!("keeping {}: {e}", to.display()))?;
        fs::File::open(&d)
            .and_then(|f| f.sync_all())
            .map_err(|e| format!("syncing {}: {e}", d.display()))?;
        if self.health.load(std::sync::atomic::Ordering::Relaxed) {
            note_media(&self.root);
        }
        Ok(())
    }

    fn media(&self, name: &str) -> Option<PathBuf> {
        ["music", "videos"]
            .iter()
            .map(|d| media_dir(&self.root).join(d).join(name))
            .find(|p| p.is_file())
    }

    fn universe_outputs_file(&self) -> PathBuf {
        universe_outputs_path(&self.root)
    }

    fn activate(
        &self,
        show_name: &str,
        config: &ShowConfig,
        sequences: &[String],
        now: bool,
    ) -> Result<Activated, String> {
        // From the active store show: the sequences the new config still names, and every
        // other file (profiles and the like); sequences it no longer plays stay behind.
        let named: std::collections::BTreeSet<PathBuf> = config
            .content
            .playlist
            .iter()
            .chain(config.playlists.values().flatten())
            .filter_map(|i| i.fseq.clone())
            .collect();
        let mut files: BTreeMap<String, Hash> = BTreeMap::new();
        let active = self.store.active().ok().flatten();
        let active_id = active.as_ref().map(|a| a.id.clone());
        if let Some(a) = active {
            files.extend(
                a.files.into_iter().filter(|(n, _)| {
                    !n.ends_with(".fseq") || named.contains(Path::new(n.as_str()))
                }),
            );
        }
        {
            let names = lock(&self.names);
            for q in sequences {
                let h = names
                    .get(q)
                    .ok_or_else(|| format!("{q} is not on this unit; upload it first"))?;
                files.insert(q.clone(), *h);
            }
        }
        let text = serde_json::to_string_pretty(config)
            .map_err(|e| format!("cannot write the new show: {e}"))?;
        let id = self
            .store
            .make_show(show_name, text.as_bytes(), &files)
            .map_err(|e| e.to_string())?;
        // xLights posts the playlist before its uploads and again after them, and an
        // operator may press Upload twice: the same show again must not restart it.
        if active_id.as_ref() == Some(&id) {
            return Ok(Activated::Unchanged);
        }
        self.store
            .check_show(&id, &self.player_exe)
            .map_err(|e| e.to_string())?;
        self.store.activate(&id).map_err(|e| e.to_string())?;
        if now {
            crate::sys::host::request_reload()
        } else {
            crate::sys::host::request_graceful_reload()
        }
        .map_err(|e| format!("cannot ask the player to switch: {e}"))?;
        Ok(Activated::Switched)
    }

    fn active_config(&self) -> Result<(ShowConfig, PathBuf, bool), String> {
        let (path, from_store) = match self.store.active() {
            Ok(Some(a)) => (a.show_yaml, true),
            _ => (
                self.config
                    .clone()
                    .ok_or("the player plays no config file, so there is no show to start from")?,
                false,
            ),
        };
        let cfg = crate::config::from_yaml_file::<ShowConfig>(&path).map_err(|e| e.to_string())?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        let base = fs::canonicalize(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok((cfg, base, from_store))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    fn store() -> (tempfile::TempDir, PfxStore) {
        let d = tempfile::tempdir().expect("tmp");
        fs::write(d.path().join(pfx_store::MARKER), b"").expect("marker");
        let s = PfxStore::open(d.path(), None).expect("open");
        (d, s)
    }

    #[test]
    fn commit_names_content_and_survives_reopen() {
        let (d, s) = store();
        let staged = s.staging_dir().join("a.part");
        fs::write(&staged, b"one").expect("write");
        let h1: [u8; 32] = Sha256::digest(b"one").into();
        s.commit_sequence("A.fseq", &staged, &h1).expect("commit");
        let p1 = s.sequence("A.fseq").expect("stored");
        assert_eq!(fs::read(&p1).expect("read"), b"one");
        fs::write(&staged, b"two").expect("write");
        let h2: [u8; 32] = Sha256::digest(b"two").into();
        s.commit_sequence("A.fseq", &staged, &h2).expect("commit");
        let p2 = s.sequence("A.fseq").expect("stored");
        assert_ne!(p1, p2);
        assert_eq!(fs::read(&p1).expect("old content stays"), b"one");
        assert!(s.sequence("B.fseq").is_none());
        let again = PfxStore::open(d.path(), None).expect("reopen");
        assert_eq!(again.sequence("A.fseq"), Some(p2));
    }

    /// xLights posts the same playlist before and after its uploads, and an operator may
    /// press Upload again: a show the store holds active already is not checked, switched
    /// or restarted. One whose sequence changed is a new show (here it goes on to the
    /// check, which this test binary cannot pass: the point is that it was not skipped).
    #[test]
    fn the_active_show_posted_again_changes_nothing() {
        let (_d, s) = store();
        let staged = s.staging_dir().join("a.part");
        fs::write(&staged, b"one").expect("write");
        let h1: [u8; 32] = Sha256::digest(b"one").into();
        s.commit_sequence("A.fseq", &staged, &h1).expect("commit");
        let cfg: ShowConfig = serde_json::from_value(serde_json::json!({
            "interface": "eth0", "outputs": [],
            "content": {"loop": true, "playlist": [{"fseq": "A.fseq"}]}
        }))
        .expect("cfg");
        let text = serde_json::to_string_pretty(&cfg).expect("json");
        let files = BTreeMap::from([("A.fseq".to_string(), Hash(h1))]);
        let id = s
            .store
            .make_show("Main", text.as_bytes(), &files)
            .expect("show");
        s.store.activate(&id).expect("active");
        let names = ["A.fseq".to_string()];
        assert_eq!(
            s.activate("Main", &cfg, &names, false),
            Ok(Activated::Unchanged)
        );
        assert_eq!(s.store.active().expect("read").map(|a| a.id), Some(id));
        fs::write(&staged, b"two").expect("write");
        let h2: [u8; 32] = Sha256::digest(b"two").into();
        s.commit_sequence("A.fseq", &staged, &h2).expect("commit");
        assert_ne!(
            s.activate("Main", &cfg, &names, false),
            Ok(Activated::Unchanged),
            "new content is a new show"
        );
    }

    #[test]
    fn a_missing_data_partition_is_refused() {
        let d = tempfile::tempdir().expect("tmp");
        assert!(
            PfxStore::open(d.path(), None).is_err(),
            "no marker, no store"
        );
    }
}
