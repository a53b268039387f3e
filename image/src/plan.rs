//! What goes into an image, computed from the config alone (no I/O): packages, the base-root
//! cache key, the files laid over the root, the units to enable, the expected command line.

use sha2::{Digest, Sha256};

use crate::config::{ImageConfig, Resolved, Target};

/// Label of the root file system; `root=LABEL=...` on the command line and in fstab.
pub const ROOT_LABEL: &str = "RASPIROOT";
/// Label of the FAT boot partition (the Pi firmware's partition, /boot/firmware).
pub const BOOT_LABEL: &str = "RASPIFIRM";
/// The data partition: ext4, the last partition, everything a unit keeps (the show store).
pub const DATA_LABEL: &str = "pfx-data";
pub const DATA_MOUNT: &str = "/var/lib/pfx";
/// In the data file system's root: the player reads it to know the partition is mounted
/// (the mount point on the read-only root is an empty directory).
pub const DATA_MARKER: &str = ".pfx-data";
/// The data file system's root: set-gid, group-writable for the fleet account's group (the
/// player's supplementary group; the agent writes as root).
pub const DATA_ROOT_MODE: u32 = 0o2775;
pub const DATA_MARKER_TEXT: &str = "pfx data partition (LABEL=pfx-data, mounted at /var/lib/pfx); see /usr/share/doc/pfx/image.md\n";
/// The mount's options. nofail: a unit whose data partition is missing or broken still
/// boots (and plays its built-in show). The device timeout is only a backstop: a slow boot
/// may take longer than any short one to show the device (the boot test saw 54 s under
/// load), so pfx-data-grow waits for udev instead and cancels the mount when the partition
/// is not there. x-systemd.growfs: the file system follows the partition it grew.
pub const DATA_MOUNT_OPTIONS: &str =
    "noatime,nodev,nosuid,nofail,x-systemd.device-timeout=90s,x-systemd.growfs";
/// Logs stay in RAM (/run/log/journal), bounded: the root is read-only and the data
/// partition holds shows, not logs. The base root ships /var/log/journal, so without this
/// journald would keep a "persistent" journal in the overlay's tmpfs, capped only at 10%
/// of it.
pub const JOURNALD_DROPIN: &str = "/etc/systemd/journald.conf.d/50-pfx.conf";
/// The hardware watchdog, armed by systemd from its first moment: a trial boot that hangs
/// (kernel or systemd) is reset, its one attempt is spent, and the other slot boots. On a
/// Pi it is the bcm2835 watchdog, in the VM an i6300esb.
pub const WATCHDOG_DROPIN: &str = "/etc/systemd/system.conf.d/50-pfx-watchdog.conf";
pub const WATCHDOG_TEXT: &str = "# pfx: a hang resets the unit (docs/update.md, \"Trial boot\").\n[Manager]\nRuntimeWatchdogSec=30s\nRebootWatchdogSec=2min\n";
/// RAUC's D-Bus service does the install (the agent only asks it to): at idle I/O and CPU
/// priority, so writing a slot costs a playing show no frame.
pub const RAUC_DROPIN: &str = "/etc/systemd/system/rauc.service.d/50-pfx-idle.conf";
pub const RAUC_DROPIN_TEXT: &str = "# pfx: the show comes first (docs/update.md).\n[Service]\nIOSchedulingClass=idle\nCPUSchedulingPolicy=idle\nNice=19\n";
pub const JOURNALD_TEXT: &str = "# pfx: the journal lives in RAM only, and is bounded.\n[Journal]\nStorage=volatile\nRuntimeMaxUse=32M\nRuntimeMaxFileSize=4M\n";

/// The fstab the image ships. overlayroot rewrites it into the overlay at boot; with
/// `recurse=0` (extra_cmdline) it keeps every line but the root's as written.
/// The FAT boot partition is an automount: the show never reads it, so its check (about
/// 3 s of CPU under the boot test's emulation) and mount happen on first access (a kernel
/// or firmware upgrade), not beside the player's start.
pub fn fstab_text() -> String {
    format!(
        "# <file system> <mount point> <type> <options> <dump> <pass>\n\
         LABEL={ROOT_LABEL} / ext4 defaults,noatime 0 1\n\
         LABEL={BOOT_LABEL} /boot/firmware vfat defaults,noatime,nofail,x-systemd.automount,x-systemd.device-timeout=30s 0 2\n\
         LABEL={DATA_LABEL} {DATA_MOUNT} ext4 {DATA_MOUNT_OPTIONS} 0 2\n"
    )
}

/// The image-only units from `systemd/`, compiled into the builder. The player's own units
/// (pfx-player.service, pfx-eth-no-pause@.service, the store drop-in) come with the
/// pfx-player package, which the build installs with dpkg (PFX_PACKAGES).
pub const UNIT_FILES: &[(&str, &str)] = &[
    (
        "pfx-hostname.service",
        include_str!("../../systemd/pfx-hostname.service"),
    ),
    (
        "pfx-ssh-hostkeys.service",
        include_str!("../../systemd/pfx-ssh-hostkeys.service"),
    ),
    (
        "pfx-data-grow.service",
        include_str!("../../systemd/pfx-data-grow.service"),
    ),
    (
        "pfx-data-absent.service",
        include_str!("../../systemd/pfx-data-absent.service"),
    ),
    (
        "pfx-update-health.service",
        include_str!("../../systemd/pfx-update-health.service"),
    ),
];
pub const SCRIPTS: &[(&str, &str)] = &[
    ("pfx-hostname", include_str!("../../systemd/pfx-hostname")),
    (
        "pfx-ssh-hostkeys",
        include_str!("../../systemd/pfx-ssh-hostkeys"),
    ),
    ("pfx-data-grow", include_str!("../../systemd/pfx-data-grow")),
    (
        "pfx-slot-carry",
        include_str!("../../systemd/pfx-slot-carry"),
    ),
    // RAUC's custom boot backend (update::system_conf_text names it).
    ("rauc-bootenv", include_str!("../../systemd/rauc-bootenv")),
];
const CMDLINE_HOOK: &str = include_str!("../../systemd/z51-pfx-cmdline");
/// The packages every image gets from the workspace, made by scripts/build-deb (the same
/// packaging as for a unit already running) and installed with dpkg in the customisation
/// stage: pfx-agent depends on the same version of pfx-player.
pub const PFX_PACKAGES: &[&str] = &["pfx-player", "pfx-agent"];
/// Their version: the workspace's, which is also the builder's.
pub const PFX_VERSION: &str = env!("CARGO_PKG_VERSION");
/// A drop-in for systemd-udev-trigger: the coldplug after local-fs.target, network
/// devices first.
pub const UDEV_TRIGGER_DROPIN: (&str, &str) = (
    "/etc/systemd/system/systemd-udev-trigger.service.d/pfx-coldplug.conf",
    include_str!("../../systemd/udev-trigger.conf"),
);
const DOC: &str = include_str!("../../docs/image.md");
const UPDATE_DOC: &str = include_str!("../../docs/update.md");
/// An initramfs-tools hook, in the root before its one initramfs run: the initramfs' udev
/// tags block and network devices for systemd, which then knows them from its start
/// instead of after the whole coldplug (the data partition's mount and the player wait for
/// them). Its text is part of the base root's cache key.
pub const INITRAMFS_HOOK: (&str, &str) = (
    "etc/initramfs-tools/hooks/pfx-systemd-tags",
    include_str!("../../systemd/initramfs-systemd-tags"),
);
/// The hardware watchdogs' drivers the hook has the initramfs load (the VM's, the Pi's), so
/// systemd finds the device when it starts and arms it (`WATCHDOG_TEXT`). `pfx-image
/// verify` looks for them in the initramfs.
pub const WATCHDOG_MODULES: &[&str] = &["i6300esb", "bcm2835_wdt"];
/// The rule the hook puts into the initramfs (`pfx-image verify` looks for it).
pub const INITRAMFS_TAGS_RULE: &str = "usr/lib/udev/rules.d/99-pfx-systemd-tags.rules";
/// systemd generators for what a unit does not have, masked (a link to /dev/null in
/// /etc/systemd/system-generators): each is a process start before systemd loads a single
/// unit, on every boot. Encrypted, integrity and verity volumes, GPT auto-discovery (the
/// card is MBR), hibernation, SysV init scripts (every service the image runs has a
/// unit), rc.local and offline updates. Kept: fstab, getty, and the debug and run
/// generators (`systemd.debug_shell`, `systemd.mask=`, `systemd.run=` on the kernel
/// command line are how a unit that does not boot is rescued).
pub const MASKED_GENERATORS: &[&str] = &[
    "systemd-cryptsetup-generator",
    "systemd-gpt-auto-generator",
    "systemd-hibernate-resume-generator",
    "systemd-integritysetup-generator",
    "systemd-veritysetup-generator",
    "systemd-sysv-generator",
    "systemd-rc-local-generator",
    "systemd-system-update-generator",
];

/// Units enabled in every image (instance names where templated).
pub const ENABLED_UNITS: &[&str] = &[
    "pfx-player.service",
    "pfx-eth-no-pause@eth0.service",
    "pfx-hostname.service",
    "pfx-ssh-hostkeys.service",
    "pfx-data-grow.service",
    "pfx-data-absent.service",
    "pfx-update-health.service",
    "systemd-networkd.service",
    "ssh.service",
];

/// Units of the base packages a unit has no use for, masked: on a read-only root with a
/// tmpfs overlay, apt's download/upgrade timers, man-db's and dpkg's database jobs only
/// spend CPU and RAM (into the tmpfs) during a show, and e2scrub is for LVM snapshots.
/// e2scrub_reap runs on every boot.
///
/// And four that each start a `modprobe` at every boot, beside the data partition's check
/// and the player's start, for what a unit does not use: systemd-repart (GPT only; the
/// card is MBR) pulls in dm_mod and loop, systemd-pstore (no persistent-store backend on
/// a Pi) efi_pstore, and the configfs and FUSE control mounts their modules. Masked, the
/// modules still load on demand if anything ever asks.
pub const MASKED_UNITS: &[&str] = &[
    "e2scrub_reap.service",
    "e2scrub_all.timer",
    "apt-daily.timer",
    "apt-daily-upgrade.timer",
    "man-db.timer",
    "dpkg-db-backup.timer",
    "systemd-repart.service",
    "systemd-pstore.service",
    "sys-kernel-config.mount",
    "sys-fs-fuse-connections.mount",
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
            "local-fs.target.wants".into(),
            "pfx-data-grow.service".into(),
        ),
        (
            "local-fs.target.wants".into(),
            "pfx-data-absent.service".into(),
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
    // The fleet account reaches the agent through one exact sudoers line.
    "sudo",
    // A/B updates (docs/update.md): RAUC and its D-Bus service, and unsquashfs, which
    // `rauc info` runs to read a plain bundle's manifest (rauc only recommends it, and a
    // unit without it refuses every good bundle).
    "rauc",
    "rauc-service",
    "squashfs-tools",
];

/// The fleet account: the only login on a unit. No password, no shell for its keys (their
/// forced command is the agent's dispatcher), no groups.
pub const FLEET_USER: &str = "pfx";
pub const FLEET_HOME: &str = "/var/lib/pfx";
/// sshd's forced command for every fleet key; the sudoers line below allows exactly it.
pub const FORCED_COMMAND: &str = "/usr/bin/sudo -n /usr/bin/pfx-agent dispatch";
/// Key files live under /etc, root-owned: the account cannot change its own options, and
/// root's ~/.ssh is never consulted.
pub const AUTHORIZED_KEYS_DIR: &str = "/etc/ssh/authorized_keys.d";
pub const SSHD_DROPIN: &str = "/etc/ssh/sshd_config.d/pfx.conf";
pub const SUDOERS_FILE: &str = "/etc/sudoers.d/pfx-agent";
/// The one privilege the fleet account has, argument-exact (sudo refuses any other
/// arguments, so no option can be added from the remote side).
pub const SUDOERS_GRANT: &str = "pfx ALL=(root) NOPASSWD: /usr/bin/pfx-agent dispatch";
/// sudo drops the environment; the dispatcher needs the remote command (and, for its log,
/// the client address). Nothing else is kept.
pub const SUDOERS_ENV: &str =
    "Defaults!/usr/bin/pfx-agent env_keep = \"SSH_ORIGINAL_COMMAND SSH_CLIENT\"";
pub const AGENT_CONFIG_FILE: &str = "/etc/pfx/agent.yaml";

/// The sshd settings every unit gets. The key options already forbid all of the
/// forwarding/pty/rc, these say it once more for the whole daemon.
pub fn sshd_dropin() -> String {
    format!(
        "# pfx units: the fleet account only, keys only, no root, no forwarding.\n\
         PasswordAuthentication no\n\
         KbdInteractiveAuthentication no\n\
         PermitRootLogin no\n\
         AllowUsers {FLEET_USER}\n\
         AuthorizedKeysFile {AUTHORIZED_KEYS_DIR}/%u\n\
         DisableForwarding yes\n\
         PermitTTY no\n\
         PermitUserRC no\n\
         PermitTunnel no\n\
         PermitUserEnvironment no\n\
         # One host key, made on the first boot by pfx-ssh-hostkeys (no RSA: slow to make).\n\
         HostKey /etc/ssh/ssh_host_ed25519_key\n"
    )
}

/// `restrict` (no pty, forwarding, agent, X11, ~/.ssh/rc) and the forced command.
pub fn key_options() -> String {
    format!("restrict,command=\"{FORCED_COMMAND}\"")
}

pub fn authorized_keys_text(keys: &[String]) -> String {
    keys.iter()
        .map(|k| format!("{} {}\n", key_options(), k.trim()))
        .collect()
}

pub fn sudoers_text() -> String {
    format!(
        "# pfx: the fleet account may run the agent's dispatcher as root, nothing else.\n{SUDOERS_ENV}\n{SUDOERS_GRANT}\n"
    )
}

/// The agent's settings on every unit (the dispatcher takes none from the remote side).
pub fn agent_config_text() -> String {
    "# pfx-agent (the fleet's forced command) reads this; root-owned, not writable by others.\n\
     iface: eth0\n\
     lower: /media/root-ro\n\
     player: /usr/bin/pfx-player\n\
     nic_backend: player\n"
        .into()
}

/// The gid of group `name` in an /etc/group text.
pub fn group_gid(group: &str, name: &str) -> Option<u32> {
    group.lines().find_map(|l| {
        let mut f = l.split(':');
        (f.next() == Some(name)).then(|| f.nth(1)?.parse().ok())?
    })
}

/// The account files with the fleet account added (a system uid/gid, the lowest free from
/// 100; `*`: no password, yet not "locked", which sshd without PAM would refuse). Pure.
/// Returns (passwd, group, shadow, gshadow); an existing `pfx` entry is an error (the base
/// root must not have one we did not make).
pub fn add_fleet_account(
    passwd: &str,
    group: &str,
    shadow: &str,
    gshadow: Option<&str>,
) -> Result<(String, String, String, Option<String>), String> {
    let ids = |text: &str| -> Vec<u32> {
        text.lines()
            .filter_map(|l| l.split(':').nth(2)?.parse().ok())
            .collect()
    };
    let named = |text: &str| {
        text.lines()
            .any(|l| l.split(':').next() == Some(FLEET_USER))
    };
    if named(passwd) || named(group) || named(shadow) {
        return Err(format!(
            "the base root already has a {FLEET_USER:?} account or group"
        ));
    }
    let (used_u, used_g) = (ids(passwd), ids(group));
    let id = (100..1000u32)
        .find(|i| !used_u.contains(i) && !used_g.contains(i))
        .ok_or("no free system uid/gid in 100..999")?;
    let add = |text: &str, line: String| {
        let mut t = text.to_string();
        if !t.is_empty() && !t.ends_with('\n') {
            t.push('\n');
        }
        t + &line + "\n"
    };
    Ok((
        add(
            passwd,
            format!("{FLEET_USER}:x:{id}:{id}:pfx fleet agent:{FLEET_HOME}:/bin/sh"),
        ),
        add(group, format!("{FLEET_USER}:x:{id}:")),
        add(shadow, format!("{FLEET_USER}:*:19000:0:99999:7:::")),
        gshadow.map(|g| add(g, format!("{FLEET_USER}:!::"))),
    ))
}

/// Bump when the base-root recipe (mmdebstrap call, initramfs step) changes: it is part of
/// the cache key.
const BASE_RECIPE_VERSION: u32 = 3;

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
    /// The config's `packages:` beyond the target's own set, sorted; empty for most images.
    pub extra_packages: Vec<String>,
    /// The key of the target's own root (its packages without the extras). A root with
    /// extras is that root plus an `apt-get install` layer, so changing `packages:` reuses
    /// the cached core instead of a fresh mmdebstrap. Equal to `base_key` without extras.
    pub core_key: String,
    pub files: Vec<FileSpec>,
    /// The command line the boot partition must end up with (for the VM, what we write).
    pub extra_cmdline: String,
    pub overlay: bool,
    pub hostname_prefix: String,
    pub image_size_mib: u64,
    pub boot_size_mib: u64,
    pub data_size_mib: u64,
}

/// Packages taken from `<suite>-backports`, all binary packages of one source together (apt
/// would otherwise pair a backported server with the stable client and find no solution).
/// bookworm's OpenSSH 9.2 offers post-quantum key exchange only as sntrup761x25519, which
/// costs the fleet operator about five times the CPU per unit of 10.0's default,
/// mlkem768x25519 (docs/perf/fleet.md); later suites have OpenSSH 10 of their own.
pub fn backported(suite: &str) -> &'static [&'static str] {
    match suite {
        "bookworm" => &["openssh-server", "openssh-client", "openssh-sftp-server"],
        _ => &[],
    }
}

/// The suite a package name asks for with apt's `NAME/SUITE`, if any.
pub fn package_suite(p: &str) -> Option<&str> {
    p.split_once('/').map(|(_, s)| s)
}

pub fn packages(target: Target, suite: &str, extra: &[String]) -> Vec<String> {
    let mut p: Vec<String> = BASE_PACKAGES.iter().map(|s| s.to_string()).collect();
    p.extend(backported(suite).iter().map(|s| s.to_string()));
    match target {
        // Both arm64 targets: one root, so the VM boots what the Pi boots.
        Target::Rpi4Arm64 | Target::VmArm64 => {
            // u-boot-rpi: the Pi's firmware starts U-Boot, which picks the root slot.
            p.extend(["linux-image-arm64", "raspi-firmware", "u-boot-rpi"].map(String::from));
        }
        Target::VmAmd64 => p.push("linux-image-amd64".into()),
    }
    p.extend(extra.iter().cloned());
    let bp = backported(suite);
    for x in p.iter_mut() {
        if bp.contains(&x.as_str()) {
            *x = format!("{x}/{suite}-backports");
        }
    }
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
        "v{BASE_RECIPE_VERSION}\narch={arch}\nsuite={suite}\nmirror={mirror}\ncomponents={}\npackages={}\ninitramfs-hook={}\n",
        components.join(","),
        packages.join(","),
        hex(&Sha256::digest(INITRAMFS_HOOK.1.as_bytes()))
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

/// The overlay's setting: a tmpfs over the root only. overlayroot's default (`recurse=1`)
/// also puts a tmpfs over every other ext4 mount in fstab, so the data partition would
/// look mounted, marker and all, while every write to it went to RAM.
pub const OVERLAYROOT: &str = "tmpfs:recurse=0";

/// The extra kernel command line: `quiet`, the overlay, and nothing that makes the lower
/// root writable.
///
/// `quiet`: the kernel prints warnings and errors only, and systemd its status lines only
/// for a unit that is slow or fails. Both write to the console synchronously, and a Pi's
/// console is a 115200-baud UART: about 11 KB/s, so a full boot log is seconds during which
/// the printing CPU (for systemd's lines: PID 1, dispatching no job) waits. Everything is
/// still in `dmesg` and the journal. Remove the word from cmdline.txt on the FAT partition
/// to see it all on the console again.
pub fn extra_cmdline(overlay: bool) -> String {
    if overlay {
        format!("quiet overlayroot={OVERLAYROOT}")
    } else {
        "quiet".into()
    }
}

/// A path as it lands on a merged-/usr root: /lib, /bin and /sbin are links into /usr.
pub fn merged_usr(path: &str) -> String {
    let p = format!("/{}", path.trim_start_matches("./").trim_start_matches('/'));
    for dir in ["/lib/", "/bin/", "/sbin/"] {
        if let Some(rest) = p.strip_prefix(dir) {
            return format!("/usr{dir}{rest}");
        }
    }
    p
}

/// One way onto a unit: no file the image writes may also be a file of a package it
/// installs. The one exception is a package's conffile, which the image sets after dpkg
/// installed it, as an operator edits theirs (the config's show is /etc/pfx/show.yaml).
/// `packaged` holds (package, its non-directory paths), `conffiles` their conffiles.
pub fn check_no_overlap(
    image_paths: &[String],
    packaged: &[(String, Vec<String>)],
    conffiles: &[String],
) -> Result<(), String> {
    let conf: Vec<String> = conffiles.iter().map(|c| merged_usr(c)).collect();
    let mut both = Vec::new();
    for ip in image_paths {
        let ip = merged_usr(ip);
        for (pkg, files) in packaged {
            if files.iter().any(|f| merged_usr(f) == ip) && !conf.contains(&ip) {
                both.push(format!("{ip} (also in {pkg})"));
            }
        }
    }
    if both.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "files both copied by the image and installed by a package: {}; a file comes one way only (drop it from plan.rs or from scripts/build-deb)",
            both.join(", ")
        ))
    }
}

/// Builds the plan. `show`/`profiles` are (file name, contents) already read.
pub fn plan(r: &Resolved, show: Vec<u8>, profiles: Vec<(String, Vec<u8>)>) -> Plan {
    let c = &r.config;
    let target = c.target;
    let packages = packages(target, &c.suite, &c.packages);
    let core_packages = self::packages(target, &c.suite, &[]);
    let extra_packages: Vec<String> = packages
        .iter()
        .filter(|p| !core_packages.contains(p))
        .cloned()
        .collect();
    let components = components(target);
    let key = base_key(target.arch(), &c.suite, &r.mirror, &components, &packages);
    let core_key = base_key(
        target.arch(),
        &c.suite,
        &r.mirror,
        &components,
        &core_packages,
    );
    let extra = extra_cmdline(c.overlay);
    // The order is the order the build writes them in; keep it.
    let mut files = system_files(r, show);
    files.extend(boot_config_files(c, &extra));
    files.extend(shipped_files(r, profiles));
    Plan {
        target,
        arch: target.arch(),
        suite: c.suite.clone(),
        mirror: r.mirror.clone(),
        components,
        packages,
        base_key: key,
        extra_packages,
        core_key,
        files,
        extra_cmdline: extra,
        overlay: c.overlay,
        hostname_prefix: c.hostname_prefix.clone(),
        image_size_mib: c.image_size_mib,
        boot_size_mib: c.boot_size_mib,
        data_size_mib: c.data_size_mib,
    }
}

/// The unit's own settings: its name, mounts, journal, watchdog, RAUC, version, network,
/// logins and sudo, the agent's config, the show and the docs.
fn system_files(r: &Resolved, show: Vec<u8>) -> Vec<FileSpec> {
    let c = &r.config;
    vec![
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
        file("/etc/fstab", 0o644, fstab_text()),
        file(JOURNALD_DROPIN, 0o644, JOURNALD_TEXT),
        file(WATCHDOG_DROPIN, 0o644, WATCHDOG_TEXT),
        file(RAUC_DROPIN, 0o644, RAUC_DROPIN_TEXT),
        file(
            crate::update::VERSION_FILE,
            0o644,
            format!("{}\n", r.version),
        ),
        file(
            crate::update::SYSTEM_CONF,
            0o644,
            crate::update::system_conf_text(c.target),
        ),
        // Empty: systemd makes a machine id at boot (transient on the overlay).
        file("/etc/machine-id", 0o444, ""),
        file(
            "/etc/systemd/network/20-eth0.network",
            0o644,
            "[Match]\nName=eth0\n\n[Network]\nDHCP=yes\n# The unit's own name (pfx-hostname) goes to the DHCP server.\n",
        ),
        file(SSHD_DROPIN, 0o644, sshd_dropin()),
        file(SUDOERS_FILE, 0o440, sudoers_text()),
        file(AGENT_CONFIG_FILE, 0o644, agent_config_text()),
        file("/etc/pfx/show.yaml", 0o644, show),
        file("/usr/share/doc/pfx/image.md", 0o644, DOC),
        file("/usr/share/doc/pfx/update.md", 0o644, UPDATE_DOC),
        file(UDEV_TRIGGER_DROPIN.0, 0o644, UDEV_TRIGGER_DROPIN.1),
    ]
}

/// What decides the kernel command line and config.txt: raspi-firmware's settings, the
/// hooks that drop its `rw`, and overlayroot's own config.
fn boot_config_files(c: &ImageConfig, extra: &str) -> Vec<FileSpec> {
    vec![
        // raspi-firmware's kernel hook generates config.txt and cmdline.txt from these.
        file(
            "/etc/default/raspi-firmware",
            0o644,
            format!(
                "# pfx: read by /etc/kernel/postinst.d/z50-raspi-firmware (config.txt, cmdline.txt).\n\
             # Set explicitly: detection from inside the build chroot sees the build host.\n\
             # CMA=0: no cma= at all. The hook drops its 64M default only when it runs ON a Pi 4,\n\
             # and a cma= renders a Pi 4 unbootable (the hook's own comment).\nCMA=0\nKERNEL=auto\nINITRAMFS=auto\nROOTPART=LABEL={ROOT_LABEL}\nCONSOLES=\"{}\"\n",
                consoles(c.target)
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
                if c.overlay { OVERLAYROOT } else { "" }
            ),
        ),
    ]
}

/// pfx's units and scripts, the config's profiles, and the operator's update CA and fleet
/// keys when the config has them.
fn shipped_files(r: &Resolved, profiles: Vec<(String, Vec<u8>)>) -> Vec<FileSpec> {
    let mut files = Vec::new();
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
    // The operator's update CA: the only thing of the signing chain a unit holds.
    if let Some(cert) = &r.update_cert {
        files.push(file(
            crate::update::KEYRING,
            0o644,
            cert.as_bytes().to_vec(),
        ));
    }
    // The fleet keys go to the fleet account only, each restricted to the dispatcher;
    // root gets none (and sshd would not let root in anyway).
    if !r.authorized_keys.is_empty() {
        files.push(file(
            &format!("{AUTHORIZED_KEYS_DIR}/{FLEET_USER}"),
            0o644,
            authorized_keys_text(&r.authorized_keys),
        ));
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `cmd` and fails the test with its stderr unless it succeeded.
    fn ran(cmd: &mut std::process::Command, what: &str) -> std::process::Output {
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{what}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// The hook writes exactly the rule `verify` looks for, and the rule tags block and
    /// network devices (run with `sh`, as mkinitramfs runs it, into a scratch DESTDIR).
    #[test]
    fn initramfs_hook_writes_the_rule_verify_looks_for() {
        let dest = tempfile::tempdir().unwrap();
        // initramfs-tools' hook-functions, as far as the hook uses them: record each module
        // asked for, as the builder's recorder does.
        let funcs = dest.path().join("hook-functions");
        let asked = dest.path().join("asked");
        std::fs::write(
            &funcs,
            format!(
                "manual_add_modules() {{ echo \"$@\" >> '{}'; }}\n",
                asked.display()
            ),
        )
        .unwrap();
        let hook = |args: &[&str]| {
            let mut cmd = std::process::Command::new("sh");
            cmd.arg("-c").arg(INITRAMFS_HOOK.1).arg("hook").args(args);
            cmd.env("DESTDIR", dest.path())
                .env("PFX_HOOK_FUNCTIONS", &funcs);
            ran(&mut cmd, "the initramfs hook")
        };
        hook(&[]);
        let rule = std::fs::read_to_string(dest.path().join(INITRAMFS_TAGS_RULE)).unwrap();
        assert!(rule.contains(r#"SUBSYSTEM=="block""#) && rule.contains(r#"SUBSYSTEM=="net""#));
        assert!(
            rule.contains(r#"TAG+="systemd""#) && rule.contains("/sys/subsystem/net/devices/$name")
        );
        // The watchdog's drivers: copied in, and loaded by the initramfs (conf/modules).
        let asked = std::fs::read_to_string(&asked).unwrap();
        let loaded = std::fs::read_to_string(dest.path().join("conf/modules")).unwrap();
        for m in WATCHDOG_MODULES {
            assert!(asked.lines().any(|l| l == *m), "{m} not asked for: {asked}");
            assert!(
                loaded.lines().any(|l| l == *m),
                "{m} not in conf/modules: {loaded}"
            );
        }
        assert!(hook(&["prereqs"]).stdout.is_empty());
    }

    #[test]
    fn arm64_targets_share_one_base_root() {
        let m = "http://deb.debian.org/debian";
        let key = |t: Target| {
            base_key(
                t.arch(),
                "bookworm",
                m,
                &components(t),
                &packages(t, "bookworm", &[]),
            )
        };
        assert_eq!(key(Target::Rpi4Arm64), key(Target::VmArm64));
        assert_ne!(key(Target::Rpi4Arm64), key(Target::VmAmd64));
        let extra = vec!["htop".to_string()];
        let k2 = base_key(
            "arm64",
            "bookworm",
            m,
            &components(Target::Rpi4Arm64),
            &packages(Target::Rpi4Arm64, "bookworm", &extra),
        );
        assert_ne!(key(Target::Rpi4Arm64), k2);
    }

    #[test]
    fn merged_usr_maps_the_root_links() {
        assert_eq!(
            merged_usr("./lib/systemd/system/x.service"),
            "/usr/lib/systemd/system/x.service"
        );
        assert_eq!(merged_usr("/bin/sh"), "/usr/bin/sh");
        assert_eq!(merged_usr("usr/bin/pfx-player"), "/usr/bin/pfx-player");
        assert_eq!(merged_usr("/etc/pfx/show.yaml"), "/etc/pfx/show.yaml");
        assert_eq!(merged_usr("/library/x"), "/library/x");
    }

    #[test]
    fn a_file_both_copied_and_packaged_is_refused() {
        let pkg = vec![(
            "pfx-player".to_string(),
            vec![
                "/lib/systemd/system/pfx-player.service".to_string(),
                "/etc/pfx/show.yaml".to_string(),
            ],
        )];
        let conf = vec!["/etc/pfx/show.yaml".to_string()];
        // The conffile is the image's to set; the unit file is the package's alone.
        check_no_overlap(&["/etc/pfx/show.yaml".into()], &pkg, &conf).unwrap();
        let e = check_no_overlap(
            &["/usr/lib/systemd/system/pfx-player.service".into()],
            &pkg,
            &conf,
        )
        .unwrap_err();
        assert!(e.contains("pfx-player.service (also in pfx-player)"), "{e}");
        assert!(check_no_overlap(&["/etc/pfx/show.yaml".into()], &pkg, &[]).is_err());
    }

    /// The real packaging (scripts/build-deb, with /bin/true standing in for the binaries:
    /// only the file list matters) against the real plan: no file comes both ways.
    #[test]
    fn the_image_copies_no_file_its_packages_install() {
        let have = |c: &str| {
            std::process::Command::new("sh")
                .args(["-c", &format!("command -v {c}")])
                .output()
                .is_ok_and(|o| o.status.success())
        };
        if !(cfg!(target_arch = "x86_64") && have("dpkg-deb") && have("readelf") && have("strip")) {
            eprintln!("skipped: needs an amd64 host with dpkg-deb, readelf and strip");
            return;
        }
        let ws = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let d = tempfile::tempdir().unwrap();
        let bin = d.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        for b in PFX_PACKAGES {
            std::fs::copy("/bin/true", bin.join(b)).unwrap();
        }
        ran(
            std::process::Command::new("bash")
                .arg(ws.join("scripts/build-deb"))
                .args(["--arch", "amd64", "--version", PFX_VERSION, "--bin-dir"])
                .arg(&bin)
                .arg("--out")
                .arg(d.path())
                .args(["--packages", &PFX_PACKAGES.join(",")])
                .current_dir(&ws),
            "build-deb",
        );
        let mut packaged = Vec::new();
        let mut conffiles = Vec::new();
        for p in PFX_PACKAGES {
            let deb = d.path().join(format!("{p}_{PFX_VERSION}_amd64.deb"));
            let list = std::process::Command::new("dpkg-deb")
                .arg("--contents")
                .arg(&deb)
                .output()
                .unwrap();
            let files = crate::build::deb_listing_files(&String::from_utf8_lossy(&list.stdout));
            assert!(files.contains(&format!("/usr/bin/{p}")), "{files:?}");
            packaged.push((p.to_string(), files));
            if let Ok(o) = std::process::Command::new("dpkg-deb")
                .arg("--info")
                .arg(&deb)
                .arg("conffiles")
                .output()
            {
                conffiles.extend(String::from_utf8_lossy(&o.stdout).lines().map(String::from));
            }
        }
        let p = planned(&[KEY]);
        let paths: Vec<String> = p.files.iter().map(|f| f.path.clone()).collect();
        check_no_overlap(&paths, &packaged, &conffiles).unwrap();
        // The units, the store drop-in and the binaries are the package's; the show is a
        // conffile the image sets.
        let player = &packaged[0].1;
        for f in [
            "/usr/lib/systemd/system/pfx-player.service",
            "/usr/lib/systemd/system/pfx-eth-no-pause@.service",
            "/usr/lib/systemd/system/pfx-player.service.d/store.conf",
        ] {
            assert!(player.contains(&f.to_string()), "{f} not in {player:?}");
        }
        assert_eq!(conffiles, ["/etc/pfx/show.yaml"]);
        assert!(paths.contains(&"/etc/pfx/show.yaml".to_string()));
        // Falsified: the player's unit copied by the image again is refused.
        let mut again = paths.clone();
        again.push("/usr/lib/systemd/system/pfx-player.service".into());
        assert!(check_no_overlap(&again, &packaged, &conffiles).is_err());
    }

    #[test]
    fn group_gid_reads_the_named_group() {
        let g = "root:x:0:\npfxx:x:7:\npfx:x:101:\nbad:x:zz:\n";
        assert_eq!(group_gid(g, "pfx"), Some(101));
        assert_eq!(group_gid(g, "root"), Some(0));
        assert_eq!(group_gid(g, "bad"), None);
        assert_eq!(group_gid(g, "nope"), None);
    }

    #[test]
    fn extra_packages_are_a_layer_over_the_targets_own_root() {
        let d = tempfile::tempdir().unwrap();
        let write = |extra: &str| {
            let p = d.path().join("image.yaml");
            std::fs::write(d.path().join("show.yaml"), "x").unwrap();
            std::fs::write(
                &p,
                format!("target: rpi4-arm64\nshow: show.yaml\npackages: [{extra}]\n"),
            )
            .unwrap();
            let r = crate::config::load(&p).unwrap();
            plan(&r, Vec::new(), Vec::new())
        };
        let plain = write("");
        assert!(plain.extra_packages.is_empty());
        assert_eq!(plain.core_key, plain.base_key);
        // A package the target already has is no extra.
        let htop = write("htop, busybox");
        assert_eq!(htop.extra_packages, ["htop"]);
        assert_eq!(htop.core_key, plain.base_key);
        assert_ne!(htop.base_key, plain.base_key);
        assert_ne!(write("zstd").base_key, htop.base_key);
    }

    #[test]
    fn every_image_has_busybox_and_overlayroot() {
        for t in [Target::Rpi4Arm64, Target::VmArm64, Target::VmAmd64] {
            let p = packages(t, "bookworm", &[]);
            assert!(p.iter().any(|x| x == "busybox"));
            assert!(p.iter().any(|x| x == "overlayroot"));
        }
        assert!(
            packages(Target::Rpi4Arm64, "bookworm", &[])
                .iter()
                .any(|x| x == "raspi-firmware")
        );
    }

    #[test]
    fn bookworm_takes_all_of_openssh_from_backports_and_only_it() {
        let p = packages(Target::Rpi4Arm64, "bookworm", &["openssh-client".into()]);
        for n in ["openssh-server", "openssh-client", "openssh-sftp-server"] {
            assert!(p.contains(&format!("{n}/bookworm-backports")), "{n}: {p:?}");
            assert!(!p.iter().any(|x| x == n), "{n} twice: {p:?}");
        }
        let from: Vec<_> = p.iter().filter_map(|x| package_suite(x)).collect();
        assert_eq!(from, ["bookworm-backports"; 3]);
        let t = packages(Target::Rpi4Arm64, "trixie", &[]);
        assert!(t.iter().any(|x| x == "openssh-server"));
        assert!(t.iter().all(|x| package_suite(x).is_none()));
    }

    #[test]
    fn extra_cmdline_has_no_rw() {
        assert_eq!(extra_cmdline(true), "quiet overlayroot=tmpfs:recurse=0");
        assert!(!extra_cmdline(true).split_whitespace().any(|w| w == "rw"));
    }

    // The stock Debian files the fleet account is added to: verify::access's fixtures.
    use crate::verify::access_fixtures::{GROUP, KEY, PASSWD, SHADOW, planned};

    #[test]
    fn fleet_account_takes_a_free_system_id_once() {
        let (p, g, s, gs) = add_fleet_account(PASSWD, GROUP, SHADOW, Some("root:*::\n")).unwrap();
        assert!(
            p.ends_with("pfx:x:101:101:pfx fleet agent:/var/lib/pfx:/bin/sh\n"),
            "{p}"
        );
        assert!(g.ends_with("pfx:x:101:\n") && s.ends_with("pfx:*:19000:0:99999:7:::\n"));
        assert_eq!(gs.as_deref(), Some("root:*::\npfx:!::\n"));
        assert!(add_fleet_account(&p, &g, &s, None).is_err(), "twice");
    }
}
