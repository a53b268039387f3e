//! The remount-rw window over the read-only lower root (overlayroot's /media/root-ro).
//!
//! The lower root is writable only inside an [`RwWindow`]; every way out of the window
//! makes it read-only again: `close()`, `Drop` (errors, panics, signal-driven early
//! returns), and a guardian process for the deaths no code in this process survives
//! (SIGKILL, OOM): the guardian holds the read end of a pipe and, when the pipe closes
//! because we are gone, remounts the lower read-only.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

#[derive(Debug, thiserror::Error)]
pub enum MountError {
    #[error(
        "{path} is not a mount point in /proc/self/mountinfo; --lower must name the read-only lower root (e.g. /media/root-ro)"
    )]
    NotMounted { path: PathBuf },
    #[error("reading /proc/self/mountinfo: {0}")]
    MountInfo(std::io::Error),
    #[error("`mount -o remount,{mode} {path}` failed: {detail}")]
    Remount {
        mode: &'static str,
        path: PathBuf,
        detail: String,
    },
    #[error("starting the read-only guardian ({exe}): {detail}")]
    Guardian { exe: PathBuf, detail: String },
}

/// Unescapes the octal escapes (`\040` for a space) the kernel uses in mountinfo.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether the mount at exactly `mount_point` is read-only, from mountinfo text. The
/// last entry wins (it is the one on top). None when nothing is mounted there.
pub fn mount_is_readonly(mountinfo: &str, mount_point: &Path) -> Option<bool> {
    let want = mount_point.to_string_lossy();
    let mut found = None;
    for line in mountinfo.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        if f.len() < 6 {
            continue;
        }
        if unescape(f[4]) == want {
            found = Some(f[5].split(',').any(|o| o == "ro"));
        }
    }
    found
}

pub fn is_readonly(mount_point: &Path) -> Result<bool, MountError> {
    let mi = std::fs::read_to_string("/proc/self/mountinfo").map_err(MountError::MountInfo)?;
    let canon = mount_point
        .canonicalize()
        .unwrap_or_else(|_| mount_point.to_path_buf());
    mount_is_readonly(&mi, &canon).ok_or(MountError::NotMounted { path: canon })
}

pub fn remount(path: &Path, mode: &'static str) -> Result<(), MountError> {
    let out = Command::new("mount")
        .arg("-o")
        .arg(format!("remount,{mode}"))
        .arg(path)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| MountError::Remount {
            mode,
            path: path.to_path_buf(),
            detail: e.to_string(),
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(MountError::Remount {
            mode,
            path: path.to_path_buf(),
            detail: format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        })
    }
}

/// The lower root mounted read-write, for as long as this value lives.
pub struct RwWindow {
    lower: PathBuf,
    guardian: Option<Child>,
    closed: bool,
}

impl RwWindow {
    /// Starts the guardian (`guardian_exe guard-ro --lower LOWER`), waits until it is
    /// ready, then remounts the lower read-write.
    pub fn open(lower: &Path, guardian_exe: &Path) -> Result<Self, MountError> {
        let gerr = |detail: String| MountError::Guardian {
            exe: guardian_exe.to_path_buf(),
            detail,
        };
        let mut child = {
            use std::os::unix::process::CommandExt;
            Command::new(guardian_exe)
                .arg("guard-ro")
                .arg("--lower")
                .arg(lower)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                // Own process group: a signal to our group (Ctrl-C, sshd hangup) must
                // not take the guardian with us.
                .process_group(0)
                .spawn()
                .map_err(|e| gerr(e.to_string()))?
        };
        let mut line = String::new();
        if let Some(out) = child.stdout.take() {
            let _ = BufReader::new(out).read_line(&mut line);
        }
        if line.trim() != "ready" {
            let _ = child.kill();
            let _ = child.wait();
            return Err(gerr(format!(
                "did not report ready (said {:?})",
                line.trim()
            )));
        }
        let mut w = RwWindow {
            lower: lower.to_path_buf(),
            guardian: Some(child),
            closed: false,
        };
        // If this fails, Drop still remounts ro (harmless when already ro).
        remount(lower, "rw")?;
        if !is_readonly(lower)? {
            return Ok(w);
        }
        w.closed = true;
        Err(MountError::Remount {
            mode: "rw",
            path: lower.to_path_buf(),
            detail: "mount succeeded but the lower still reads back read-only".into(),
        })
    }

    /// Syncs, remounts read-only and checks the readback.
    pub fn close(mut self) -> Result<(), MountError> {
        self.closed = true;
        self.finish()
    }

    fn finish(&mut self) -> Result<(), MountError> {
        // SAFETY: sync(2) takes no arguments and cannot fail.
        unsafe { libc::sync() };
        let r = remount(&self.lower, "ro").and_then(|_| {
            if is_readonly(&self.lower)? {
                Ok(())
            } else {
                Err(MountError::Remount {
                    mode: "ro",
                    path: self.lower.clone(),
                    detail: "mount succeeded but the lower still reads back read-write".into(),
                })
            }
        });
        if let Some(mut g) = self.guardian.take() {
            // Closing its stdin tells the guardian we are done; it re-checks and exits.
            drop(g.stdin.take());
            let _ = g.wait();
        }
        r
    }
}

impl Drop for RwWindow {
    fn drop(&mut self) {
        if !self.closed || self.guardian.is_some() {
            let _ = self.finish();
        }
    }
}

/// The guardian's body: ignore the signals that would kill it with its parent, wait for
/// stdin to close, then make sure the lower is read-only.
pub fn run_guardian(lower: &Path) -> i32 {
    for sig in [libc::SIGHUP, libc::SIGINT, libc::SIGTERM, libc::SIGPIPE] {
        // SAFETY: setting a signal's disposition to SIG_IGN is async-signal-safe and
        // happens before any other thread exists.
        unsafe { libc::signal(sig, libc::SIG_IGN) };
    }
    println!("ready");
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    match is_readonly(lower) {
        Ok(true) => 0,
        _ => {
            // Retry: the dying parent's open files are released asynchronously.
            for _ in 0..50 {
                if remount(lower, "ro").is_ok() {
                    return 0;
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MI: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
40 22 0:35 / /media/root-ro ro,relatime shared:2 - ext4 /dev/mmcblk0p2 ro
41 22 0:36 / /media/root-rw rw,relatime shared:3 - tmpfs tmpfs-root rw
50 22 0:40 / /tmp/with\\040space rw shared:4 - tmpfs tmpfs rw
51 40 0:41 / /media/root-ro rw,relatime shared:5 - tmpfs tmpfs rw
";

    #[test]
    fn readonly_flag_from_mountinfo_topmost_wins() {
        let first: String = MI.lines().take(3).collect::<Vec<_>>().join("\n");
        assert_eq!(
            mount_is_readonly(&first, Path::new("/media/root-ro")),
            Some(true)
        );
        assert_eq!(
            mount_is_readonly(MI, Path::new("/media/root-ro")),
            Some(false)
        );
        assert_eq!(mount_is_readonly(MI, Path::new("/")), Some(false));
        assert_eq!(mount_is_readonly(MI, Path::new("/media")), None);
    }

    #[test]
    fn escaped_mount_points() {
        assert_eq!(unescape("/tmp/with\\040space"), "/tmp/with space");
        assert_eq!(
            mount_is_readonly(MI, Path::new("/tmp/with space")),
            Some(false)
        );
    }
}
