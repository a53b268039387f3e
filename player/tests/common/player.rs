//! Runs the real `pfx-player` binary on a config written to a temp dir.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

pub struct Player {
    pub child: Child,
    pub dir: tempfile::TempDir,
}

impl Player {
    /// Writes `show` (YAML) and any `profiles` (name, YAML) into a temp dir and starts
    /// `pfx-player run --config` on it with `extra` arguments.
    pub fn start(show: &str, profiles: &[(&str, &str)], extra: &[&str]) -> Player {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("profiles")).expect("profiles dir");
        for (name, text) in profiles {
            std::fs::write(
                dir.path().join("profiles").join(format!("{name}.yaml")),
                text,
            )
            .expect("write profile");
        }
        let cfg = dir.path().join("show.yaml");
        std::fs::write(&cfg, show).expect("write show");
        let child = Command::new(env!("CARGO_BIN_EXE_pfx-player"))
            .arg("run")
            .arg("--config")
            .arg(&cfg)
            .args(["--no-mdns"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn pfx-player");
        Player { child, dir }
    }

    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("show.yaml")
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: plain kill(2) on our own child.
        unsafe { libc::kill(self.child.id() as i32, sig) };
    }

    /// Waits for exit; returns (success, stderr).
    pub fn wait(mut self) -> (bool, String) {
        let out = std::mem::replace(&mut self.child, Command::new("true").spawn().expect("true"))
            .wait_with_output()
            .expect("wait");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

impl Drop for Player {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free-ish HTTP port per test process, so parallel tests don't collide.
pub fn http_port(offset: u16) -> u16 {
    20000 + (std::process::id() % 20000) as u16 + offset
}
