//! Host tools the build needs, and the Debian packages that provide them.

use std::path::Path;

use crate::config::Target;

/// The Debian architecture of the machine this runs on.
pub fn host_arch() -> &'static str {
    match std::env::consts::ARCH {
        "aarch64" => "arm64",
        "x86_64" => "amd64",
        other => other,
    }
}

/// (command, Debian package). `a|b` means either command will do. The tools' own needs
/// count: mmdebstrap refuses a root of a foreign architecture without arch-test.
pub fn required(target: Target, building_player: bool) -> Vec<(&'static str, &'static str)> {
    let mut t = vec![
        ("mmdebstrap", "mmdebstrap"),
        ("mke2fs", "e2fsprogs"),
        ("debugfs", "e2fsprogs"),
        ("mkfs.vfat", "dosfstools"),
        ("mcopy", "mtools"),
        ("mdir", "mtools"),
        ("mtype", "mtools"),
        ("sfdisk", "fdisk"),
        // The A/B boot script (boot.scr) is compiled by U-Boot's mkimage.
        ("mkimage", "u-boot-tools"),
        ("zstd", "zstd"),
        ("xz", "xz-utils"),
        ("gzip", "gzip"),
        ("systemctl", "systemd"),
        ("systemd-analyze", "systemd"),
        ("unshare", "util-linux"),
        ("chroot", "coreutils"),
        ("dd", "coreutils"),
        // The image's packages: scripts/build-deb, then dpkg in the root; verify's MD5s.
        ("bash", "bash"),
        ("dpkg-deb", "dpkg"),
        ("readelf", "binutils"),
        ("md5sum", "coreutils"),
    ];
    t.push((
        strip_tool(target.arch()),
        if target.arch() == "arm64" {
            "binutils-aarch64-linux-gnu"
        } else {
            "binutils"
        },
    ));
    if target.arch() != host_arch() {
        t.push(("arch-test", "arch-test"));
    }
    if target.uses_raspi_firmware() {
        // The overlay that takes U-Boot's boot delay away on a Pi (update.rs).
        t.push(("dtc", "device-tree-compiler"));
    }
    if target.arch() == "arm64" {
        t.push(("qemu-aarch64-static|qemu-aarch64", "qemu-user-static"));
        // The initramfs's module part is resolved and indexed natively, with the host's kmod
        // reading the target root (build/initramfs.rs).
        t.push(("modprobe", "kmod"));
        t.push(("modinfo", "kmod"));
        t.push(("depmod", "kmod"));
        if building_player {
            t.push((
                "aarch64-linux-gnu-gcc",
                "gcc-aarch64-linux-gnu libc6-dev-arm64-cross",
            ));
        }
    }
    if building_player {
        t.push(("cargo", "(rustup: https://rustup.rs)"));
    }
    t
}

/// `strip` for binaries of the target architecture.
pub fn strip_tool(arch: &str) -> &'static str {
    if arch == "arm64" {
        "aarch64-linux-gnu-strip"
    } else {
        "strip"
    }
}

pub fn on_path(cmd: &str, path_var: &str) -> bool {
    cmd.split('|').any(|c| {
        path_var
            .split(':')
            .chain(["/usr/sbin", "/sbin"])
            .any(|d| Path::new(d).join(c).is_file())
    })
}

/// One error naming every missing tool and the packages to install.
pub fn missing_message(missing: &[(&str, &str)]) -> Option<String> {
    if missing.is_empty() {
        return None;
    }
    let mut pkgs: Vec<&str> = missing
        .iter()
        .flat_map(|(_, p)| p.split(' '))
        .filter(|p| !p.starts_with('(') && !p.starts_with("https"))
        .collect();
    pkgs.sort();
    pkgs.dedup();
    let cmds: Vec<&str> = missing.iter().map(|(c, _)| *c).collect();
    let mut msg = format!("missing host tools: {}", cmds.join(", "));
    if !pkgs.is_empty() {
        msg.push_str(&format!(
            "\ninstall them with: apt-get install {}",
            pkgs.join(" ")
        ));
    }
    if missing.iter().any(|(c, _)| *c == "cargo") {
        msg.push_str("\ncargo: install Rust with rustup, or pass --player with a prebuilt binary");
    }
    Some(msg)
}

pub fn check(target: Target, building_player: bool) -> Result<(), String> {
    let path = std::env::var("PATH").unwrap_or_default();
    let missing: Vec<_> = required(target, building_player)
        .into_iter()
        .filter(|(c, _)| !on_path(c, &path))
        .collect();
    match missing_message(&missing) {
        Some(m) => Err(m),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_foreign_root_needs_arch_test() {
        let has = |t: Target| required(t, false).iter().any(|(c, _)| *c == "arch-test");
        // The build machines are amd64: an arm64 root is foreign there.
        assert_eq!(has(Target::Rpi4Arm64), host_arch() != "arm64");
        assert_eq!(has(Target::VmAmd64), host_arch() != "amd64");
    }

    #[test]
    fn one_message_lists_packages_once() {
        let m = missing_message(&[("mcopy", "mtools"), ("mdir", "mtools"), ("sfdisk", "fdisk")])
            .unwrap();
        assert!(m.contains("mcopy, mdir, sfdisk"), "{m}");
        assert!(m.contains("apt-get install fdisk mtools"), "{m}");
        assert_eq!(missing_message(&[]), None);
    }

    #[test]
    fn finds_sh_not_nonsense() {
        assert!(on_path("sh", "/bin:/usr/bin"));
        assert!(!on_path("no-such-tool-pfx", "/bin:/usr/bin"));
        assert!(on_path("no-such-tool-pfx|sh", "/bin:/usr/bin"));
    }
}
