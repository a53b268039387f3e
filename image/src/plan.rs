//! What goes into an image, computed from the config alone (no I/O): packages, the base-root
//! cache key, the files laid over the root, the units to enable, the expected command line.

use sha2::{Digest, Sha256};

use crate::config::{Resolved, Target};

/// Label of the root file system; `root=LABEL=...` on the command line and in fstab.
pub const ROOT_LABEL: &str = "RASPIROOT";
/// Label of the FAT boot partition (the Pi firmware's partition, /boot/firmware).
pub const BOOT_LABEL: &str = "RASPIFIRM";

/// Units shipped from `systemd/`, compiled into the builder so it is self-contained.
pub const UNIT_FILES: &[(&str, &str)] = &[
    (
        "pfx-player.service",
        include_str!("../../systemd/pfx-player.service"),
    ),
    (
        "pfx-eth-no-pause@.service",
        include_str!("../../systemd/pfx-eth-no-pause@.service"),
    ),
    (
        "pfx-hostname.service",
        include_str!("../../systemd/pfx-hostname.service"),
    ),
    (
        "pfx-ssh-hostkeys.service",
        include_str!("../../systemd/pfx-ssh-hostkeys.service"),
    ),
];
pub const SCRIPTS: &[(&str, &str)] = &[
    ("pfx-hostname", include_str!("../../systemd/pfx-hostname")),
    (
        "pfx-ssh-hostkeys",
        include_str!("../../systemd/pfx-ssh-hostkeys"),
    ),
];
const CMDLINE_HOOK: &str = include_str!("../../systemd/z51-pfx-cmdline");
const DOC: &str = include_str!("../../docs/image.md");

/// Units enabled in every image (instance names where templated).
pub const ENABLED_UNITS: &[&str] = &[
    "pfx-player.service",
    "pfx-eth-no-pause@eth0.service",
    "pfx-hostname.service",
    "pfx-ssh-hostkeys.service",
    "systemd-networkd.service",
    "ssh.service",
];

/// Units of the base packages a unit has no use for, masked: on a read-only root with a
/// tmpfs overlay, apt's download/upgrade timers, man-db's and dpkg's database jobs only
/// spend CPU and RAM (into the tmpfs) during a show, and e2scrub is for LVM snapshots.
/// e2scrub_reap runs on every boot.
pub const MASKED_UNITS: &[&str] = &[
    "e2scrub_reap.service",
    "e2scrub_all.timer",
    "apt-daily.timer",
    "apt-daily-upgrade.timer",
    "man-db.timer",
    "dpkg-db-backup.timer",
];

/// Where each enabled unit's symlink must be, relative to /etc/systemd/system.
pub fn expected_enable_links() -> Vec<(String, String)> {
    vec![
        (
            "multi-user.target.wants".into(),
            "pfx-player.service".into(),
        ),
        (
            "sys-subsystem-net-devices-eth0.device.wants".into(),
            "pfx-eth-no-pause@eth0.service".into(),
        ),
        (
            "multi-user.target.wants".into(),
            "pfx-hostname.service".into(),
        ),
        (
            "multi-user.target.wants".into(),
            "pfx-ssh-hostkeys.service".into(),
        ),
        (
            "multi-user.target.wants".into(),
            "systemd-networkd.service".into(),
        ),
        ("multi-user.target.wants".into(), "ssh.service".into()),
    ]
}

/// Packages every unit gets. busybox is not optional: without it overlayroot's initramfs
/// script finds no `grep` and silently boots a writable root (the verifier checks for it).
const BASE_PACKAGES: &[&str] = &[
    "systemd-sysv",
    "udev",
    "kmod",
    "dbus",
    "initramfs-tools",
    "busybox",
    "overlayroot",
    "openssh-server",
    "ethtool",
    "iproute2",
    "systemd-timesyncd",
];

/// Bump when the base-root recipe (mmdebstrap call, initramfs step) changes: it is part of
/// the cache key.
const BASE_RECIPE_VERSION: u32 = 2;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSpec {
    /// Absolute path inside the image root.
    pub path: String,
    pub mode: u32,
    pub contents: Vec<u8>,
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub target: Target,
    pub arch: &'static str,
    pub suite: String,
    pub mirror: String,
    pub components: Vec<&'static str>,
    pub packages: Vec<String>,
    /// Hex sha256 of everything the base root depends on.
    pub base_key: String,
    pub files: Vec<FileSpec>,
    /// The command line the boot partition must end up with (for the VM, what we write).
    pub extra_cmdline: String,
    pub overlay: bool,
    pub hostname_prefix: String,
    pub image_size_mib: u64,
    pub boot_size_mib: u64,
}

pub fn packages(target: Target, extra: &[String]) -> Vec<String> {
    let mut p: Vec<String> = BASE_PACKAGES.iter().map(|s| s.to_string()).collect();
    match target {
        // Both arm64 targets: one root, so the VM boots what the Pi boots.
        Target::Rpi4Arm64 | Target::VmArm64 => {
            p.extend(["linux-image-arm64", "raspi-firmware"].map(String::from));
        }
        Target::VmAmd64 => p.push("linux-image-amd64".into()),
    }
    p.extend(extra.iter().cloned());
    p.sort();
    p.dedup();
    p
}

pub fn components(target: Target) -> Vec<&'static str> {
    if target.uses_raspi_firmware() {
        vec!["main", "non-free-firmware"]
    } else {
        vec!["main"]
    }
}

/// Consoles for raspi-firmware's cmdline.txt. Pi 4 with the mainline kernel: the GPIO UART
/// is ttyS1. In `qemu -M virt` it is the PL011, ttyAMA0 (listed last = /dev/console).
pub fn consoles(target: Target) -> &'static str {
    match target {
        Target::Rpi4Arm64 => "ttyS1,115200 tty0",
        Target::VmArm64 => "tty0 ttyAMA0,115200",
        Target::VmAmd64 => "tty0 ttyS0,115200",
    }
}

pub fn base_key(
    arch: &str,
    suite: &str,
    mirror: &str,
    components: &[&str],
    packages: &[String],
) -> String {
    let recipe = format!(
        "v{BASE_RECIPE_VERSION}\narch={arch}\nsuite={suite}\nmirror={mirror}\ncomponents={}\npackages={}\n",
        components.join(","),
        packages.join(",")
    );
    hex(&Sha256::digest(recipe.as_bytes()))
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn file(path: &str, mode: u32, contents: impl Into<Vec<u8>>) -> FileSpec {
    FileSpec {
        path: path.into(),
        mode,
        contents: contents.into(),
    }
}

/// The extra kernel command line: the overlay, and nothing that makes the lower root writable.
pub fn extra_cmdline(overlay: bool) -> String {
    if overlay {
        "overlayroot=tmpfs".into()
    } else {
        String::new()
    }
}

/// Builds the plan. `show`/`profiles` are (file name, contents) already read.
pub fn plan(r: &Resolved, show: Vec<u8>, profiles: Vec<(String, Vec<u8>)>) -> Plan {
    let c = &r.config;
    let target = c.target;
    let packages = packages(target, &c.packages);
    let components = components(target);
    let key = base_key(target.arch(), &c.suite, &r.mirror, &components, &packages);
    let extra = extra_cmdline(c.overlay);
    let mut files = vec![
        file("/etc/hostname", 0o644, format!("{}\n", c.hostname_prefix)),
        file(
            "/etc/hosts",
            0o644,
            format!(
                "127.0.0.1\tlocalhost\n127.0.1.1\t{}\n::1\tlocalhost ip6-localhost ip6-loopback\n",
                c.hostname_prefix
            ),
        ),
        file(
            "/usr/lib/pfx/hostname-prefix",
            0o644,
            format!("{}\n", c.hostname_prefix),
        ),
        file(
            "/etc/fstab",
            0o644,
            format!(
                "# <file system> <mount point> <type> <options> <dump> <pass>\n\
             LABEL={ROOT_LABEL} / ext4 defaults,noatime 0 1\n\
             LABEL={BOOT_LABEL} /boot/firmware vfat defaults,noatime,nofail,x-systemd.device-timeout=30s 0 2\n"
            ),
        ),
        // Empty: systemd makes a machine id at boot (transient on the overlay).
        file("/etc/machine-id", 0o444, ""),
        file(
            "/etc/systemd/network/20-eth0.network",
            0o644,
            "[Match]\nName=eth0\n\n[Network]\nDHCP=yes\n# The unit's own name (pfx-hostname) goes to the DHCP server.\n",
        ),
        file(
            "/etc/ssh/sshd_config.d/pfx.conf",
            0o644,
            "# pfx units: keys only.\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n\
             # One host key, made on the first boot by pfx-ssh-hostkeys (no RSA: slow to make).\n\
             HostKey /etc/ssh/ssh_host_ed25519_key\n",
        ),
        file("/etc/pfx/show.yaml", 0o644, show),
        file("/usr/share/doc/pfx/image.md", 0o644, DOC),
        // raspi-firmware's kernel hook generates config.txt and cmdline.txt from these.
        file(
            "/etc/default/raspi-firmware",
            0o644,
            format!(
                "# pfx: read by /etc/kernel/postinst.d/z50-raspi-firmware (config.txt, cmdline.txt).\n\
             # Set explicitly: detection from inside the build chroot sees the build host.\n\
             # CMA=0: no cma= at all. The hook drops its 64M default only when it runs ON a Pi 4,\n\
             # and a cma= renders a Pi 4 unbootable (the hook's own comment).\nCMA=0\nKERNEL=auto\nINITRAMFS=auto\nROOTPART=LABEL={ROOT_LABEL}\nCONSOLES=\"{}\"\n",
                consoles(target)
            ),
        ),
        file(
            "/etc/default/raspi-firmware-custom",
            0o644,
            "# pfx: appended to config.txt\n",
        ),
        file(
            "/etc/default/raspi-extra-cmdline",
            0o644,
            format!("{extra}\n"),
        ),
        // The hook hard-codes `rw`, which leaves overlayroot's lower root writable; these
        // run right after it (kernel install and every initramfs update) and drop it.
        file(
            "/etc/kernel/postinst.d/z51-pfx-cmdline",
            0o755,
            CMDLINE_HOOK,
        ),
        file(
            "/etc/initramfs/post-update.d/z51-pfx-cmdline",
            0o755,
            CMDLINE_HOOK,
        ),
        file(
            "/etc/overlayroot.local.conf",
            0o644,
            format!(
                "# pfx: the kernel command line (overlayroot=...) overrides this.\noverlayroot=\"{}\"\n",
                if c.overlay { "tmpfs" } else { "" }
            ),
        ),
    ];
    for (name, text) in UNIT_FILES {
        files.push(file(
            &format!("/usr/lib/systemd/system/{name}"),
            0o644,
            *text,
        ));
    }
    for (name, text) in SCRIPTS {
        files.push(file(&format!("/usr/lib/pfx/{name}"), 0o755, *text));
    }
    for (name, bytes) in profiles {
        files.push(file(&format!("/etc/pfx/profiles/{name}"), 0o644, bytes));
    }
    if !r.authorized_keys.is_empty() {
        let mut keys = r.authorized_keys.join("\n");
        keys.push('\n');
        files.push(file("/root/.ssh/authorized_keys", 0o600, keys));
    }
    Plan {
        target,
        arch: target.arch(),
        suite: c.suite.clone(),
        mirror: r.mirror.clone(),
        components,
        packages,
        base_key: key,
        files,
        extra_cmdline: extra,
        overlay: c.overlay,
        hostname_prefix: c.hostname_prefix.clone(),
        image_size_mib: c.image_size_mib,
        boot_size_mib: c.boot_size_mib,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arm64_targets_share_one_base_root() {
        let m = "http://deb.debian.org/debian";
        let key = |t: Target| base_key(t.arch(), "bookworm", m, &components(t), &packages(t, &[]));
        assert_eq!(key(Target::Rpi4Arm64), key(Target::VmArm64));
        assert_ne!(key(Target::Rpi4Arm64), key(Target::VmAmd64));
        let extra = vec!["htop".to_string()];
        let k2 = base_key(
            "arm64",
            "bookworm",
            m,
            &components(Target::Rpi4Arm64),
            &packages(Target::Rpi4Arm64, &extra),
        );
        assert_ne!(key(Target::Rpi4Arm64), k2);
    }

    #[test]
    fn every_image_has_busybox_and_overlayroot() {
        for t in [Target::Rpi4Arm64, Target::VmArm64, Target::VmAmd64] {
            let p = packages(t, &[]);
            assert!(p.iter().any(|x| x == "busybox"));
            assert!(p.iter().any(|x| x == "overlayroot"));
        }
        assert!(
            packages(Target::Rpi4Arm64, &[])
                .iter()
                .any(|x| x == "raspi-firmware")
        );
    }

    #[test]
    fn extra_cmdline_has_no_rw() {
        assert_eq!(extra_cmdline(true), "overlayroot=tmpfs");
        assert!(!extra_cmdline(true).split_whitespace().any(|w| w == "rw"));
    }
}
