//! Runs the real `pfx-player` binary on a config written to a temp dir, and waits for
//! what it does (serving /profile, sending frames, a log line, exiting) instead of
//! sleeping for a guess.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use pfx_api::profile::ProfileDoc;

use super::wait::{POLL, wait_for};

/// How long a player gets to start, load its show and answer on HTTP (a debug build on a
/// loaded 2-core test host).
pub const START: Duration = Duration::from_secs(20);

pub struct Player {
    pub child: Child,
    pub dir: tempfile::TempDir,
    /// Everything the player wrote to stderr so far, read on a thread so the pipe never
    /// fills and the log can be waited on while the player runs.
    log: Arc<Mutex<String>>,
    reader: Option<JoinHandle<()>>,
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
        let mut child = Command::new(env!("CARGO_BIN_EXE_pfx-player"))
            .arg("run")
            .arg("--config")
            .arg(&cfg)
            .args(["--no-mdns"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn pfx-player");
        let log = Arc::new(Mutex::new(String::new()));
        let mut stderr = child.stderr.take().expect("piped stderr");
        let reader = {
            let log = log.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = stderr.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let text = String::from_utf8_lossy(&buf[..n]);
                    log.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push_str(&text);
                }
            })
        };
        Player {
            child,
            dir,
            log,
            reader: Some(reader),
        }
    }

    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("show.yaml")
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: plain kill(2) on our own child.
        unsafe { libc::kill(self.child.id() as i32, sig) };
    }

    /// The player's stderr so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Panics, with its log, if the player has exited: a wait on it would only time out.
    fn alive(&mut self, what: &str) {
        if let Ok(Some(st)) = self.child.try_wait() {
            self.join_reader();
            panic!(
                "the player exited ({st}) while the test waited for {what}:\n{}",
                self.log()
            );
        }
    }

    fn join_reader(&mut self) {
        if let Some(h) = self.reader.take() {
            let _ = h.join();
        }
    }

    /// Waits (within `timeout`) until `cond` holds while the player runs; panics with its
    /// log if it exits first.
    #[track_caller]
    pub fn wait_until(&mut self, timeout: Duration, what: &str, mut cond: impl FnMut() -> bool) {
        wait_for(timeout, what, || {
            if cond() {
                return Some(());
            }
            self.alive(what);
            None
        })
    }

    /// Waits until the player has logged a line containing `text` (within `timeout`).
    #[track_caller]
    pub fn wait_log(&mut self, text: &str, timeout: Duration) {
        let log = self.log.clone();
        let has = move || log.lock().unwrap_or_else(|p| p.into_inner()).contains(text);
        self.wait_until(timeout, &format!("the player to log {text:?}"), has)
    }

    /// Waits until `GET /profile` on `http_port` answers with a document for which `cond`
    /// holds, and returns that document.
    #[track_caller]
    pub fn wait_profile(
        &mut self,
        http_port: u16,
        what: &str,
        timeout: Duration,
        mut cond: impl FnMut(&ProfileDoc) -> bool,
    ) -> ProfileDoc {
        let what = format!("{what} (GET /profile on port {http_port})");
        let end = Instant::now() + timeout;
        let mut last = None;
        loop {
            if let Some(d) = profile(http_port) {
                if cond(&d) {
                    return d;
                }
                last = Some(d);
            }
            self.alive(&what);
            assert!(
                Instant::now() < end,
                "timed out after {timeout:?} waiting for {what}; the last /profile: {last:?}"
            );
            std::thread::sleep(POLL);
        }
    }

    /// Waits until the player serves /profile and its render loop has sent a frame.
    #[track_caller]
    pub fn wait_playing(&mut self, http_port: u16) -> ProfileDoc {
        self.wait_frames(http_port, 1)
    }

    /// Waits until the render loop has made at least `n` frames since it started.
    #[track_caller]
    pub fn wait_frames(&mut self, http_port: u16, n: u64) -> ProfileDoc {
        self.wait_profile(http_port, &format!("{n} frames played"), START, |d| {
            d.snapshot.since_start.frames >= n
        })
    }

    /// Waits for the player to exit (within `timeout`); panics, with its log, if it has not.
    #[track_caller]
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let st = wait_for(timeout, "the player to exit", || {
            self.child.try_wait().expect("try_wait")
        });
        self.join_reader();
        st
    }

    /// Waits for exit; returns (success, stderr).
    pub fn wait(mut self) -> (bool, String) {
        let status = self.child.wait().expect("wait");
        self.join_reader();
        (status.success(), self.log())
    }
}

impl Drop for Player {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.join_reader();
    }
}

/// `GET /profile` on 127.0.0.1:`http_port`; None while nothing answers there (yet).
pub fn profile(http_port: u16) -> Option<ProfileDoc> {
    let base = format!("http://127.0.0.1:{http_port}");
    let r =
        pfx_api::http::request_path("GET", &base, "/profile", &[], None, Duration::from_secs(2))
            .ok()?;
    let body = r.ok_body(&base).ok()?;
    serde_json::from_slice(&body).ok()
}

/// A free-ish HTTP port per test process, so parallel tests don't collide.
pub fn http_port(offset: u16) -> u16 {
    20000 + (std::process::id() % 20000) as u16 + offset
}
