//! Where uploads go and how a new show becomes active: the small interface FPP Connect
//! needs (`ShowStore`), and `DirStore`, a plain implementation on the data directory.
//!
//! Layout under the data directory:
//! - `staging/`: chunks being received;
//! - `sequences/by-hash/<sha256>.fseq`: each sequence once, by content;
//! - `sequences/by-name/<name>`: a symlink to the content the name holds now;
//! - `shows/<id>/show.yaml`: a show, naming its sequences by content path;
//! - `active`: a symlink to the active show's directory.
//!
//! Every switch is a symlink renamed over the old one after the target is on disk, so a
//! power cut leaves the old or the new state, whole.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

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
    /// Checks `config` with the unit's own `pfx-player run --check`, makes it the active
    /// show atomically and has the player switch to it. On error nothing changed.
    fn activate(&self, config: &ShowConfig) -> Result<(), String>;
    /// The show config the player plays now, and the directory its relative paths are
    /// taken from.
    fn active_config(&self) -> Result<(ShowConfig, PathBuf), String>;
}

pub struct DirStore {
    pub root: PathBuf,
    pub reserve: u64,
    /// The config path the running player reloads on SIGHUP.
    pub running_config: Option<PathBuf>,
    /// The binary whose `run --check` decides (this one).
    pub player_exe: PathBuf,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
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

/// Points the symlink `link` at `target`, replacing what it pointed at in one rename.
fn swap_link(link: &Path, target: &Path) -> io::Result<()> {
    let dir = link.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.new",
        link.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
    ));
    let _ = fs::remove_file(&tmp);
    std::os::unix::fs::symlink(target, &tmp)?;
    fs::rename(&tmp, link)?;
    fs::File::open(dir)?.sync_all()
}

impl DirStore {
    pub fn open(
        root: &Path,
        reserve: u64,
        running_config: Option<PathBuf>,
    ) -> io::Result<DirStore> {
        for d in ["staging", "sequences/by-hash", "sequences/by-name", "shows"] {
            fs::create_dir_all(root.join(d))?;
        }
        let player_exe = std::env::current_exe()?;
        Ok(DirStore {
            root: root.to_path_buf(),
            reserve,
            running_config,
            player_exe,
        })
    }

    pub fn active_link(&self) -> PathBuf {
        self.root.join("active")
    }

    /// The config path a player must run for FPP Connect to switch its show.
    pub fn active_config_path(&self) -> PathBuf {
        self.active_link().join("show.yaml")
    }
}

impl ShowStore for DirStore {
    fn staging_dir(&self) -> PathBuf {
        self.root.join("staging")
    }

    fn room(&self) -> io::Result<(u64, u64)> {
        let (free, total) = crate::sys::disk::space(&self.root)?;
        Ok((free.saturating_sub(self.reserve), total))
    }

    fn commit_sequence(&self, name: &str, staged: &Path, sha256: &[u8; 32]) -> Result<(), String> {
        let by_hash = self
            .root
            .join("sequences/by-hash")
            .join(format!("{}.fseq", hex(sha256)));
        let io = |what: &str, e: io::Error| format!("{what}: {e}");
        if by_hash.exists() {
            let _ = fs::remove_file(staged);
        } else {
            fs::rename(staged, &by_hash).map_err(|e| io("moving the upload into the store", e))?;
            if let Some(d) = by_hash.parent() {
                fs::File::open(d)
                    .and_then(|f| f.sync_all())
                    .map_err(|e| io("syncing the store", e))?;
            }
        }
        swap_link(&self.root.join("sequences/by-name").join(name), &by_hash)
            .map_err(|e| io("naming the sequence", e))
    }

    fn sequence(&self, name: &str) -> Option<PathBuf> {
        let p = fs::canonicalize(self.root.join("sequences/by-name").join(name)).ok()?;
        p.is_file().then_some(p)
    }

    fn activate(&self, config: &ShowConfig) -> Result<(), String> {
        let active = self.active_config_path();
        let running = self.running_config.as_ref().and_then(|p| {
            let abs = if p.is_absolute() {
                p.clone()
            } else {
                std::env::current_dir().ok()?.join(p)
            };
            Some(abs)
        });
        if running.as_deref() != Some(active.as_path()) {
            return Err(format!(
                "the player does not play the store's active show, so it cannot switch to an uploaded one; run it with --config {}",
                active.display()
            ));
        }
        let text = serde_json::to_string_pretty(config)
            .map_err(|e| format!("cannot write the new show: {e}"))?;
        let id = hex(&Sha256::digest(text.as_bytes())[..8]);
        let dir = self.root.join("shows").join(&id);
        fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let yaml = dir.join("show.yaml");
        write_atomic(&yaml, text.as_bytes()).map_err(|e| format!("{}: {e}", yaml.display()))?;
        let out = Command::new(&self.player_exe)
            .args(["run", "--check", "--no-mdns", "--config"])
            .arg(&yaml)
            .output()
            .map_err(|e| format!("cannot run `pfx-player run --check`: {e}"))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
            let _ = fs::remove_dir_all(&dir);
            return Err(format!(
                "the new show failed `pfx-player run --check`: {err}"
            ));
        }
        swap_link(&self.active_link(), Path::new("shows").join(&id).as_path())
            .map_err(|e| format!("cannot make the new show active: {e}"))?;
        crate::sys::host::request_reload()
            .map_err(|e| format!("cannot ask the player to switch: {e}"))
    }

    fn active_config(&self) -> Result<(ShowConfig, PathBuf), String> {
        let p = self
            .running_config
            .clone()
            .unwrap_or_else(|| self.active_config_path());
        let cfg = crate::config::from_yaml_file::<ShowConfig>(&p).map_err(|e| e.to_string())?;
        let dir = p.parent().unwrap_or(Path::new("."));
        let base = fs::canonicalize(if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        })
        .map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok((cfg, base))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_names_content_and_swaps_atomically() {
        let d = tempfile::tempdir().expect("tmp");
        let s = DirStore::open(d.path(), 0, None).expect("open");
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
        assert_eq!(
            fs::read(&p1).expect("old content stays for a show that names it"),
            b"one"
        );
        assert_eq!(fs::read(&p2).expect("read"), b"two");
        assert!(s.sequence("B.fseq").is_none());
    }

    #[test]
    fn activate_refuses_when_the_player_runs_another_config() {
        let d = tempfile::tempdir().expect("tmp");
        let s =
            DirStore::open(d.path(), 0, Some(PathBuf::from("/etc/pfx/show.yaml"))).expect("open");
        let cfg: ShowConfig = serde_json::from_value(serde_json::json!({
            "interface": "lo", "outputs": [], "content": {"playlist": []}
        }))
        .expect("cfg");
        let e = s.activate(&cfg).expect_err("refused");
        assert!(e.contains("--config"), "{e}");
        assert!(!s.active_link().exists());
    }
}
