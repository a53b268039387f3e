//! The error and exit-status convention of the four binaries (`pfx-player`, `pfx-fleet`,
//! `pfx-agent`, `pfx-image`), so a script, systemd or `pfx-fleet` reading an agent treats
//! each of them the same way.
//!
//! An error goes to stderr as `NAME: error: what failed: why: the cause`, the whole
//! context chain joined by ": " (anyhow's `{:#}`), so nothing an operator needs is cut off.
//!
//! The exit status says which kind of outcome it was, in the spirit of `grep` and `diff`:
//! 1 is a clean "no" from a command that ran to its end, 2 is trouble. clap's own usage
//! errors already exit 2, so a mistyped flag and a bad config file look alike to a caller.

use std::error::Error;
use std::process::ExitCode;

/// The command did what was asked.
pub const SUCCESS: u8 = 0;
/// The command ran to its end and the answer is no: findings, a unit pending or failed,
/// a readback that did not verify, a gate closed.
pub const NO: u8 = 1;
/// An error stopped the command: bad usage, a bad config or input, or something that
/// could not be read, reached or measured.
pub const ERROR: u8 = 2;
/// Stopped by signal N: 128 + N, as a shell reports a process killed by N.
pub const SIGNAL_BASE: u8 = 128;

/// The exit status for "stopped by signal `sig`" (saturating: signal numbers are small).
pub fn signal(sig: usize) -> u8 {
    u8::try_from(usize::from(SIGNAL_BASE).saturating_add(sig)).unwrap_or(u8::MAX)
}

/// `NAME: error: a: b: c`, the error and every cause under it.
pub fn message(bin: &str, err: &(dyn Error + 'static)) -> String {
    let mut s = format!("{bin}: error: {err}");
    let mut cause = err.source();
    while let Some(c) = cause {
        let text = c.to_string();
        // Some errors repeat their source in their own text; print each piece once.
        if !s.ends_with(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        cause = c.source();
    }
    s
}

/// Prints `message` on stderr and gives the status for an error that stopped the command.
pub fn report(bin: &str, err: &(dyn Error + 'static)) -> ExitCode {
    eprintln!("{}", message(bin, err));
    ExitCode::from(ERROR)
}

/// The `Exit status:` block of a binary's `--help`: `no` says what 1 means for this binary,
/// `extra` adds its own codes (code, meaning).
pub fn help(no: &str, extra: &[(&str, &str)]) -> String {
    let mut s = String::from("Exit status:\n");
    let mut row = |code: &str, what: &str| s.push_str(&format!("  {code:<6}{what}\n"));
    row("0", "success");
    row("1", no);
    row(
        "2",
        "error: bad usage, a bad config or input, or something could not be read, reached or measured",
    );
    for (code, what) in extra {
        row(code, what);
    }
    s.push_str(
        "Errors go to stderr as NAME: error: what failed: why (a config error adds its lines).",
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt;

    #[derive(Debug)]
    struct E(&'static str, Option<Box<E>>);
    impl fmt::Display for E {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }
    impl Error for E {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.1.as_deref().map(|e| e as &(dyn Error + 'static))
        }
    }

    #[test]
    fn message_keeps_the_whole_chain() {
        let e = E(
            "loading /etc/pfx/show.yaml",
            Some(Box::new(E(
                "line 3",
                Some(Box::new(E("no such file", None))),
            ))),
        );
        assert_eq!(
            message("pfx-x", &e),
            "pfx-x: error: loading /etc/pfx/show.yaml: line 3: no such file"
        );
    }

    #[test]
    fn message_does_not_repeat_a_cause_already_in_the_text() {
        let e = E("read failed: gone", Some(Box::new(E("gone", None))));
        assert_eq!(message("p", &e), "p: error: read failed: gone");
    }

    #[test]
    fn codes_and_help() {
        assert_eq!((SUCCESS, NO, ERROR), (0, 1, 2));
        assert_eq!(signal(15), 143);
        assert_eq!(signal(1000), 255);
        let h = help("findings", &[("3", "refused")]);
        assert!(h.contains("  1     findings\n"), "{h}");
        assert!(h.contains("  3     refused\n"), "{h}");
        assert!(h.contains("  2     error: bad usage"), "{h}");
    }
}
