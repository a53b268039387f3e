//! A live override that must survive a restart and a reboot (a blackout): one small file
//! on the data partition, `<root>/control/held.json`, written as every store file is
//! (temporary name, fsync, rename, fsync of the directory), so a power cut leaves the old
//! file or the new one, never a torn one. The bytes are the caller's (the player's
//! `ControlState` as JSON); the store only keeps them.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::{MARKER, StoreError, fsync_dir, io};

/// The directory under the store root.
pub const DIR: &str = "control";
/// The file in it.
pub const FILE: &str = "held.json";
/// The most a held file may be; anything larger is not ours.
pub const MAX_BYTES: u64 = 64 * 1024;

/// Where the held override lives under `root`.
pub fn path(root: &Path) -> PathBuf {
    root.join(DIR).join(FILE)
}

fn mounted(root: &Path) -> Result<(), StoreError> {
    if root.join(MARKER).is_file() {
        Ok(())
    } else {
        Err(StoreError::NotMounted {
            root: root.to_path_buf(),
        })
    }
}

/// Writes `bytes` as the held override, atomically. Refused when the data partition is
/// not mounted at `root` (a file on the root's overlay would vanish at the next boot).
pub fn write(root: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    mounted(root)?;
    let dir = root.join(DIR);
    if !dir.is_dir() {
        fs::create_dir_all(&dir).map_err(io(&dir))?;
        // Group-writable (and set-gid when the store root is): the player (a dynamic
        // user, in the store's group) and the agent (root) both write here, and the next
        // player may run under another uid.
        let setgid = fs::metadata(root).map_or(0, |m| {
            std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o2000
        });
        fs::set_permissions(
            &dir,
            std::os::unix::fs::PermissionsExt::from_mode(0o775 | setgid),
        )
        .map_err(io(&dir))?;
        fsync_dir(root)?;
    }
    let tmp = dir.join(format!(".{FILE}.tmp.{}", std::process::id()));
    let dest = dir.join(FILE);
    let r = (|| {
        let mut f = File::create(&tmp).map_err(io(&tmp))?;
        f.write_all(bytes).map_err(io(&tmp))?;
        f.sync_all().map_err(io(&tmp))?;
        fs::rename(&tmp, &dest).map_err(io(&dest))?;
        fsync_dir(&dir)
    })();
    if r.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    r
}

/// Removes the held override (nothing to do when there is none); the removal is made
/// durable (fsync of the directory) before it returns.
pub fn clear(root: &Path) -> Result<(), StoreError> {
    let dir = root.join(DIR);
    let dest = dir.join(FILE);
    match fs::remove_file(&dest) {
        Ok(()) => fsync_dir(&dir),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io(&dest)(e)),
    }
}

/// The held override's bytes, None when there is none. Temporary files a killed writer
/// left are not read.
pub fn read(root: &Path) -> Result<Option<Vec<u8>>, StoreError> {
    let p = path(root);
    match fs::metadata(&p) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(&p)(e)),
        Ok(m) if !m.is_file() || m.len() > MAX_BYTES => {
            return Err(io(&p)(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("not a held override (a regular file of at most {MAX_BYTES} bytes)"),
            )));
        }
        Ok(_) => {}
    }
    fs::read(&p).map(Some).map_err(io(&p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_atomically_read_back_and_cleared() {
        let d = tempfile::tempdir().unwrap();
        let e = write(d.path(), b"{}").unwrap_err();
        assert!(matches!(e, StoreError::NotMounted { .. }), "{e}");
        fs::write(d.path().join(MARKER), b"").unwrap();
        assert_eq!(read(d.path()).unwrap(), None);
        write(d.path(), b"one").unwrap();
        write(d.path(), b"two").unwrap();
        assert_eq!(read(d.path()).unwrap().as_deref(), Some(&b"two"[..]));
        // No temporary file is left beside it.
        let names: Vec<_> = fs::read_dir(d.path().join(DIR))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [FILE]);
        // A killed writer's temporary file is not the held override.
        fs::write(d.path().join(DIR).join(".held.json.tmp.1"), b"half").unwrap();
        assert_eq!(read(d.path()).unwrap().as_deref(), Some(&b"two"[..]));
        clear(d.path()).unwrap();
        assert_eq!(read(d.path()).unwrap(), None);
        clear(d.path()).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(d.path().join(DIR))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(
            mode & 0o777,
            0o775,
            "the next player (another uid) writes here too"
        );
    }
}
