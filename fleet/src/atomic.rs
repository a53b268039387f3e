//! Crash-safe file replacement: the target is either the old file or the complete new
//! one, never a torn mix, whatever kills the writer (SIGKILL, power loss after fsync).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum AtomicError {
    #[error("{path}: has no parent directory or file name; pass a full file path")]
    BadPath { path: PathBuf },
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("write of {path} interrupted before the rename: {reason} (the old file is untouched)")]
    Interrupted { path: PathBuf, reason: String },
}

fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> AtomicError + 'a {
    move |source| AtomicError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

/// Prefix of the temporary files, so a later run can remove what a killed run left.
pub fn temp_prefix(target: &Path) -> String {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!(".{name}.tmp.")
}

/// Writes `contents` to `target` atomically: temp file in the same directory, fsync,
/// rename over the target, fsync the directory. `midway` runs after half of the bytes
/// are in the temp file; it lets the caller abort (signals) and lets tests stop a
/// writer at the worst moment. An error from `midway` removes the temp file.
pub fn write_atomic_with(
    target: &Path,
    contents: &[u8],
    mut midway: impl FnMut() -> Result<(), String>,
) -> Result<(), AtomicError> {
    let (dir, _) = match (target.parent(), target.file_name()) {
        (Some(d), Some(n)) => (d, n),
        _ => {
            return Err(AtomicError::BadPath {
                path: target.to_path_buf(),
            });
        }
    };
    fs::create_dir_all(dir).map_err(io("create directory", dir))?;
    let tmp = dir.join(format!("{}{}", temp_prefix(target), std::process::id()));
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .map_err(io("create temp file", &tmp))?;
    let half = contents.len() / 2;
    f.write_all(&contents[..half])
        .map_err(io("write temp file", &tmp))?;
    if let Err(reason) = midway() {
        drop(f);
        let _ = fs::remove_file(&tmp);
        return Err(AtomicError::Interrupted {
            path: target.to_path_buf(),
            reason,
        });
    }
    f.write_all(&contents[half..])
        .map_err(io("write temp file", &tmp))?;
    f.sync_all().map_err(io("fsync temp file", &tmp))?;
    drop(f);
    fs::rename(&tmp, target).map_err(io("rename temp file over", target))?;
    let d = File::open(dir).map_err(io("open directory", dir))?;
    d.sync_all().map_err(io("fsync directory", dir))?;
    Ok(())
}

pub fn write_atomic(target: &Path, contents: &[u8]) -> Result<(), AtomicError> {
    write_atomic_with(target, contents, || Ok(()))
}

/// Removes temp files that a killed writer left next to `target`. Returns how many.
pub fn remove_stale_temps(target: &Path) -> usize {
    let (Some(dir), prefix) = (target.parent(), temp_prefix(target)) else {
        return 0;
    };
    let Ok(rd) = fs::read_dir(dir) else { return 0 };
    let mut n = 0;
    for e in rd.flatten() {
        if e.file_name().to_string_lossy().starts_with(&prefix) && fs::remove_file(e.path()).is_ok()
        {
            n += 1;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_new_file_and_replaces_old() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a/b/eth0.yaml");
        write_atomic(&p, b"one\n").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"one\n");
        write_atomic(&p, b"two two\n").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two two\n");
        assert_eq!(fs::read_dir(p.parent().unwrap()).unwrap().count(), 1);
    }

    #[test]
    fn interrupted_write_leaves_old_file_whole_and_no_temp() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("eth0.yaml");
        write_atomic(&p, b"old contents\n").unwrap();
        let mut saw_partial_temp = false;
        let r = write_atomic_with(&p, b"new contents that are longer\n", || {
            // At this moment the temp file holds half the bytes and the target is old.
            let tmp = d
                .path()
                .join(format!("{}{}", temp_prefix(&p), std::process::id()));
            saw_partial_temp = fs::read(&tmp).map(|b| b.len()).unwrap_or(0) > 0;
            assert_eq!(fs::read(&p).unwrap(), b"old contents\n");
            Err("SIGTERM".into())
        });
        assert!(saw_partial_temp);
        assert!(matches!(r, Err(AtomicError::Interrupted { .. })));
        assert_eq!(fs::read(&p).unwrap(), b"old contents\n");
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn stale_temps_from_a_killed_writer_are_removed() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("eth0.yaml");
        fs::write(d.path().join(format!("{}999", temp_prefix(&p))), b"torn").unwrap();
        fs::write(d.path().join("other"), b"keep").unwrap();
        assert_eq!(remove_stale_temps(&p), 1);
        assert!(d.path().join("other").exists());
    }
}
