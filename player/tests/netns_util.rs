//! Shared helpers for root-only tests in network namespaces the test itself creates.
//! Each namespace is named with the pid and a counter, and deleted by a Drop guard (so
//! also when the test panics). Interfaces inside a namespace go with it.

#![allow(dead_code)]

use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Returns false (and says so loudly) when not root.
pub fn need_root(test: &str) -> bool {
    if is_root() {
        return true;
    }
    eprintln!("skipped: needs root ({test})");
    false
}

pub fn sh(args: &[&str]) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("running {args:?}: {e}"));
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub struct Netns {
    pub name: String,
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

impl Netns {
    pub fn new(tag: &str) -> Netns {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let name = format!("pfx{tag}-{}-{n}", std::process::id());
        sh(&["ip", "netns", "add", &name]);
        let ns = Netns { name };
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    /// `ip -n NS ARGS...`
    pub fn ip(&self, args: &[&str]) {
        let mut v = vec!["ip", "-n", self.name.as_str()];
        v.extend_from_slice(args);
        sh(&v);
    }

    /// Run a command inside the namespace (`ip netns exec`, which also gives it the
    /// namespace's own /sys).
    pub fn exec(&self, args: &[&str]) {
        let mut v = vec!["ip", "netns", "exec", self.name.as_str()];
        v.extend_from_slice(args);
        sh(&v);
    }

    /// Re-run this test binary inside the namespace, running only `child_test` (an
    /// `#[ignore]`d trampoline), with
    /// `PFX_CHILD_ARGS` set to the JSON array `args`. The child exits with its own code.
    pub fn run_child(&self, child_test: &str, args: &[&str]) -> Output {
        let exe = std::env::current_exe().expect("current_exe");
        Command::new("ip")
            .args(["netns", "exec", &self.name])
            .arg(exe)
            // The trampolines are #[ignore]d, so a normal run lists them as ignored rather
            // than as passes that tested nothing; the child runs that one alone.
            .args([
                "--ignored",
                "--exact",
                child_test,
                "--nocapture",
                "--test-threads=1",
            ])
            .env("PFX_CHILD_ARGS", serde_json::to_string(args).expect("json"))
            .output()
            .expect("running child in netns")
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// In a child run: the arguments the parent passed, or None in a normal test run.
pub fn child_args() -> Option<Vec<String>> {
    let s = std::env::var("PFX_CHILD_ARGS").ok()?;
    serde_json::from_str(&s).ok()
}

/// The stdout of a child run without libtest's own lines ("running 1 test", ...).
pub fn child_stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| match (l.starts_with("test "), l.find(" ... ")) {
            // libtest prints "test NAME ... " with no newline before the test's output.
            (true, Some(i)) => &l[i + 5..],
            _ => l,
        })
        .filter(|l| !l.starts_with("running ") && !l.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}
