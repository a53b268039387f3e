//! The kernel command line: the root options, the overlay, what a Pi 4's must not say.

use super::error::{Check, CheckFailed};
use serde::Serialize;

/// The kernel command line, checked for the two ways overlayroot fails silently here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CmdlineCheck {
    pub cmdline: String,
    pub overlayroot: Option<String>,
    pub root: Option<String>,
}

pub fn check_cmdline(text: &str, want_overlay: bool) -> Result<CmdlineCheck, CheckFailed> {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let words: Vec<&str> = line.split(' ').filter(|w| !w.is_empty()).collect();
    let mut errors = Vec::new();
    // The kernel and initramfs-tools honour the last of ro/rw; overlayroot only remounts
    // the lower read-only when it sees `ro`. Any `rw` at all is refused: it is the fault.
    if words.contains(&"rw") {
        errors.push(
            "`rw` on the kernel command line: overlayroot's lower root would be mounted read-write"
                .to_string(),
        );
    }
    let overlayroot = words
        .iter()
        .rev()
        .find_map(|w| w.strip_prefix("overlayroot="))
        .map(str::to_string);
    let root = words
        .iter()
        .rev()
        .find_map(|w| w.strip_prefix("root="))
        .map(str::to_string);
    if root.is_none() {
        errors.push("no root= on the kernel command line".into());
    }
    if want_overlay {
        match overlayroot.as_deref() {
            Some(v) if v == "tmpfs" || v.starts_with("tmpfs:") => {}
            Some(v) => errors.push(format!("overlayroot={v}: expected overlayroot=tmpfs")),
            None => errors.push("no overlayroot=tmpfs on the kernel command line".into()),
        }
    }
    if errors.is_empty() {
        Ok(CmdlineCheck {
            cmdline: line,
            overlayroot,
            root,
        })
    } else {
        Err(CheckFailed::new(Check::Cmdline, errors))
    }
}

/// Pi 4 specifics of the command line: a `cma=` makes a Pi 4 unbootable (raspi-firmware's
/// hook drops it only when run on a Pi 4 itself, not in a build chroot).
pub fn check_pi4_cmdline(cmdline: &str) -> Result<(), CheckFailed> {
    match cmdline.split_whitespace().find(|w| w.starts_with("cma=")) {
        Some(w) => Err(CheckFailed::one(
            Check::Pi4Cmdline,
            format!("`{w}` on a Pi 4 command line renders it unbootable"),
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cmdline_with_rw_fails() {
        let c = "console=tty0 root=LABEL=RASPIROOT rw fsck.repair=yes net.ifnames=0 rootwait overlayroot=tmpfs";
        let e = check_cmdline(c, true).unwrap_err().to_string();
        assert!(e.contains("`rw`"), "{e}");
    }

    #[test]
    fn cmdline_without_rw_passes_and_needs_overlay() {
        let c = "console=tty0 root=LABEL=RASPIROOT fsck.repair=yes net.ifnames=0 rootwait overlayroot=tmpfs\n";
        let ok = check_cmdline(c, true).unwrap();
        assert_eq!(ok.overlayroot.as_deref(), Some("tmpfs"));
        assert_eq!(ok.root.as_deref(), Some("LABEL=RASPIROOT"));
        let e = check_cmdline("root=/dev/vda rootwait", true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("overlayroot"), "{e}");
        assert!(check_cmdline("root=/dev/vda overlayroot=disabled", true).is_err());
        check_cmdline("root=/dev/vda", false).unwrap();
    }

    #[test]
    fn pi4_cmdline_refuses_cma() {
        assert!(check_pi4_cmdline("root=LABEL=RASPIROOT cma=64M rootwait").is_err());
        check_pi4_cmdline("root=LABEL=RASPIROOT rootwait").unwrap();
    }
}
