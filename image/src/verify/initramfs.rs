//! The initramfs: its cpio archives (concatenated, the tail compressed) and what must be in them.

use super::error::{Check, CheckFailed, CpioError};
use serde::Serialize;

/// Names in a sequence of concatenated newc cpio archives. Returns the names and the offset
/// where the uncompressed archives end (a compressed archive may follow, as in Debian's
/// initramfs with early microcode).
pub fn cpio_names(data: &[u8]) -> Result<(Vec<String>, usize), CpioError> {
    let mut names = Vec::new();
    let mut pos = 0usize;
    loop {
        // Skip the zero padding between concatenated archives.
        while pos < data.len() && data[pos] == 0 {
            pos += 1;
        }
        if pos + 110 > data.len()
            || &data[pos..pos + 6] != b"070701" && &data[pos..pos + 6] != b"070702"
        {
            return Ok((names, pos));
        }
        let field = |i: usize| -> Result<usize, CpioError> {
            let detail = |e: &dyn std::fmt::Display| CpioError::Header {
                pos,
                detail: e.to_string(),
            };
            let s = std::str::from_utf8(&data[pos + 6 + i * 8..pos + 14 + i * 8])
                .map_err(|e| detail(&e))?;
            usize::from_str_radix(s, 16).map_err(|e| detail(&e))
        };
        let filesize = field(6)?;
        let namesize = field(11)?;
        let name_start = pos + 110;
        let name_end = name_start + namesize;
        if name_end > data.len() || namesize == 0 {
            return Err(CpioError::NamePastEnd { pos });
        }
        let name = String::from_utf8_lossy(&data[name_start..name_end - 1]).into_owned();
        let data_start = (name_end + 3) & !3;
        let next = (data_start + filesize + 3) & !3;
        if data_start + filesize > data.len() {
            return Err(CpioError::DataPastEnd { name });
        }
        pos = next;
        if name == "TRAILER!!!" {
            continue;
        }
        names.push(name.trim_start_matches("./").to_string());
    }
}

/// Compression of a stream, from its magic.
pub fn compression(data: &[u8]) -> Option<&'static str> {
    let m = |p: &[u8]| data.starts_with(p);
    if m(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Some("zstd")
    } else if m(&[0x1f, 0x8b]) {
        Some("gzip")
    } else if m(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
        Some("xz")
    } else if m(&[0x02, 0x21, 0x4c, 0x18]) || m(&[0x04, 0x22, 0x4d, 0x18]) {
        Some("lz4")
    } else if m(&[0x5d, 0, 0]) {
        Some("lzma")
    } else {
        None
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InitramfsCheck {
    pub entries: usize,
    pub busybox: String,
    pub overlayroot_script: String,
    pub overlay_module: String,
    /// The image's udev rule tagging devices for systemd (plan::INITRAMFS_TAGS_RULE).
    pub systemd_tags_rule: String,
}

/// Without busybox the overlayroot script finds no `grep` and the system boots a plain
/// writable root with no error: the initramfs itself must show busybox, the script and the
/// overlay module.
pub fn check_initramfs(names: &[String]) -> Result<InitramfsCheck, CheckFailed> {
    let find = |pred: &dyn Fn(&str) -> bool| names.iter().find(|n| pred(n)).cloned();
    let busybox = find(&|n| n == "bin/busybox" || n == "usr/bin/busybox");
    let script = find(&|n| n == "scripts/init-bottom/overlayroot");
    let module = find(&|n| {
        n.ends_with("/overlayfs/overlay.ko")
            || n.ends_with("/overlayfs/overlay.ko.xz")
            || n.ends_with("/overlayfs/overlay.ko.zst")
    });
    let tags = find(&|n| n == crate::plan::INITRAMFS_TAGS_RULE);
    let mut errors = Vec::new();
    // The watchdogs' drivers (plan::WATCHDOG_MODULES): without them in the initramfs the
    // device comes with the coldplug, after systemd started, and a trial boot that hangs
    // before that is never reset.
    let watchdog_missing: Vec<&str> = crate::plan::WATCHDOG_MODULES
        .iter()
        .copied()
        .filter(|m| {
            !names.iter().any(|n| {
                let base = n.rsplit('/').next().unwrap_or(n);
                base.strip_prefix(*m)
                    .is_some_and(|rest| rest == ".ko" || rest.starts_with(".ko."))
            })
        })
        .collect();
    let watchdog_error = (!watchdog_missing.is_empty()).then(|| {
        format!(
            "no hardware watchdog driver {} in the initramfs (the hook \
             /etc/initramfs-tools/hooks/pfx-systemd-tags adds them: rebuild the base root \
             with --fresh-root); a trial boot that hangs before the coldplug would never be reset",
            watchdog_missing.join(", ")
        )
    });
    if busybox.is_none() {
        errors
            .push("no busybox in the initramfs (overlayroot would silently boot a writable root)");
    }
    if script.is_none() {
        errors.push("no scripts/init-bottom/overlayroot in the initramfs");
    }
    if module.is_none() {
        errors.push("no overlay kernel module in the initramfs");
    }
    if tags.is_none() {
        // Not a safety matter but the boot's: without it systemd knows no device until its
        // own coldplug is through, and the data partition and the player wait for that.
        errors.push(
            "no usr/lib/udev/rules.d/99-pfx-systemd-tags.rules in the initramfs (the hook \
             /etc/initramfs-tools/hooks/pfx-systemd-tags did not run: rebuild the base root \
             with --fresh-root)",
        );
    }
    let mut errors: Vec<String> = errors.into_iter().map(String::from).collect();
    errors.extend(watchdog_error);
    match (busybox, script, module, tags) {
        (
            Some(busybox),
            Some(overlayroot_script),
            Some(overlay_module),
            Some(systemd_tags_rule),
        ) if errors.is_empty() => Ok(InitramfsCheck {
            entries: names.len(),
            busybox,
            overlayroot_script,
            overlay_module,
            systemd_tags_rule,
        }),
        _ => Err(CheckFailed::new(Check::Initramfs, errors)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The builder's own archive writer: what the verifier reads is what the build makes.
    fn newc(entries: &[(&str, &[u8])]) -> Vec<u8> {
        use crate::build::{Node, cpio_newc};
        let entries: Vec<(String, Node)> = entries
            .iter()
            .map(|(n, b)| {
                let file = Node::File {
                    mode: 0o644,
                    data: b.to_vec(),
                };
                (n.to_string(), file)
            })
            .collect();
        cpio_newc(&entries)
    }

    const GOOD: &[(&str, &[u8])] = &[
        ("usr/bin/busybox", b"\x7fELF"),
        ("scripts/init-bottom/overlayroot", b"#!/bin/sh"),
        (
            "usr/lib/modules/6.1.0-50-arm64/kernel/fs/overlayfs/overlay.ko",
            b"x",
        ),
        (crate::plan::INITRAMFS_TAGS_RULE, b"SUBSYSTEM"),
        (
            "usr/lib/modules/6.1.0-50-arm64/kernel/drivers/watchdog/i6300esb.ko",
            b"x",
        ),
        (
            "usr/lib/modules/6.1.0-50-arm64/kernel/drivers/watchdog/bcm2835_wdt.ko.xz",
            b"x",
        ),
    ];

    #[test]
    fn initramfs_with_busybox_passes() {
        let (names, end) = cpio_names(&newc(GOOD)).unwrap();
        assert_eq!(names.len(), 6);
        assert!(end > 0);
        check_initramfs(&names).unwrap();
    }

    #[test]
    fn initramfs_without_busybox_fails() {
        let (names, _) = cpio_names(&newc(&GOOD[1..])).unwrap();
        let e = check_initramfs(&names).unwrap_err().to_string();
        assert!(e.contains("busybox"), "{e}");
    }

    #[test]
    fn initramfs_without_overlayroot_script_fails() {
        let (names, _) = cpio_names(&newc(&[GOOD[0], GOOD[2], GOOD[3]])).unwrap();
        assert!(
            check_initramfs(&names)
                .unwrap_err()
                .to_string()
                .contains("overlayroot")
        );
    }

    #[test]
    fn initramfs_without_a_watchdog_driver_fails_naming_it() {
        let (names, _) = cpio_names(&newc(&GOOD[..5])).unwrap();
        let e = check_initramfs(&names).unwrap_err().to_string();
        assert!(e.contains("bcm2835_wdt") && !e.contains("i6300esb"), "{e}");
    }

    #[test]
    fn initramfs_without_the_systemd_tags_rule_fails() {
        let (names, _) = cpio_names(&newc(&GOOD[..3])).unwrap();
        let e = check_initramfs(&names).unwrap_err().to_string();
        assert!(e.contains("99-pfx-systemd-tags.rules"), "{e}");
        assert!(!e.contains("busybox"), "{e}");
    }

    #[test]
    fn concatenated_archives_and_compressed_tail() {
        let mut data = newc(&[("kernel/x86/microcode/GenuineIntel.bin", b"abc")]);
        data.extend_from_slice(&[0; 12]);
        let second = newc(&GOOD[..1]);
        data.extend_from_slice(&second);
        let tail_at = data.len();
        data.extend_from_slice(&[0x28, 0xb5, 0x2f, 0xfd, 1, 2]);
        let (names, end) = cpio_names(&data).unwrap();
        assert_eq!(
            names,
            vec!["kernel/x86/microcode/GenuineIntel.bin", "usr/bin/busybox"]
        );
        assert_eq!(end, tail_at);
        assert_eq!(compression(&data[end..]), Some("zstd"));
    }
}
