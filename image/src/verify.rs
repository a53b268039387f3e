//! Pure checks on what was read back from the image file: partition table, kernel command
//! line, initramfs contents, ELF machine, enabled units, dpkg status, Pi firmware files, the
//! masked generators and units and the update stamps.
//! The I/O that reads the image lives in `artifact.rs`.

use serde::Serialize;

pub mod data;

/// One MBR partition entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Partition {
    pub index: u8,
    pub kind: u8,
    pub bootable: bool,
    pub start_sector: u64,
    pub sectors: u64,
}

impl Partition {
    pub fn offset(&self) -> u64 {
        self.start_sector * 512
    }
}

/// Parses the MBR in the first 512 bytes of the image.
pub fn parse_mbr(sector0: &[u8]) -> Result<Vec<Partition>, String> {
    if sector0.len() < 512 || sector0[510] != 0x55 || sector0[511] != 0xAA {
        return Err("no MBR signature (0x55AA) in the first sector".into());
    }
    let mut parts = Vec::new();
    for i in 0..4 {
        let e = &sector0[446 + i * 16..446 + (i + 1) * 16];
        let kind = e[4];
        let start = u32::from_le_bytes([e[8], e[9], e[10], e[11]]) as u64;
        let sectors = u32::from_le_bytes([e[12], e[13], e[14], e[15]]) as u64;
        if kind == 0 || sectors == 0 {
            continue;
        }
        parts.push(Partition {
            index: i as u8 + 1,
            kind,
            bootable: e[0] == 0x80,
            start_sector: start,
            sectors,
        });
    }
    Ok(parts)
}

/// The kernel command line, checked for the two ways overlayroot fails silently here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CmdlineCheck {
    pub cmdline: String,
    pub overlayroot: Option<String>,
    pub root: Option<String>,
}

pub fn check_cmdline(text: &str, want_overlay: bool) -> Result<CmdlineCheck, String> {
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
        Err(errors.join("; "))
    }
}

/// Pi 4 specifics of the command line: a `cma=` makes a Pi 4 unbootable (raspi-firmware's
/// hook drops it only when run on a Pi 4 itself, not in a build chroot).
pub fn check_pi4_cmdline(cmdline: &str) -> Result<(), String> {
    match cmdline.split_whitespace().find(|w| w.starts_with("cma=")) {
        Some(w) => Err(format!(
            "`{w}` on a Pi 4 command line renders it unbootable"
        )),
        None => Ok(()),
    }
}

/// Names in a sequence of concatenated newc cpio archives. Returns the names and the offset
/// where the uncompressed archives end (a compressed archive may follow, as in Debian's
/// initramfs with early microcode).
pub fn cpio_names(data: &[u8]) -> Result<(Vec<String>, usize), String> {
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
        let field = |i: usize| -> Result<usize, String> {
            let s = std::str::from_utf8(&data[pos + 6 + i * 8..pos + 14 + i * 8])
                .map_err(|e| e.to_string())?;
            usize::from_str_radix(s, 16).map_err(|e| format!("cpio header at {pos}: {e}"))
        };
        let filesize = field(6)?;
        let namesize = field(11)?;
        let name_start = pos + 110;
        let name_end = name_start + namesize;
        if name_end > data.len() || namesize == 0 {
            return Err(format!("cpio entry at {pos} runs past the end"));
        }
        let name = String::from_utf8_lossy(&data[name_start..name_end - 1]).into_owned();
        let data_start = (name_end + 3) & !3;
        let next = (data_start + filesize + 3) & !3;
        if data_start + filesize > data.len() {
            return Err(format!("cpio entry {name} runs past the end"));
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
pub fn check_initramfs(names: &[String]) -> Result<InitramfsCheck, String> {
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
        _ => Err(errors.join("; ")),
    }
}

/// The ELF header's machine field, named.
pub fn elf_machine(head: &[u8]) -> Result<&'static str, String> {
    if head.len() < 20 || &head[..4] != b"\x7fELF" {
        return Err("not an ELF file".into());
    }
    let little = head[5] == 1;
    let m = if little {
        u16::from_le_bytes([head[18], head[19]])
    } else {
        u16::from_be_bytes([head[18], head[19]])
    };
    Ok(match m {
        0xB7 => "aarch64",
        0x3E => "x86_64",
        0x28 => "arm",
        0x03 => "x86",
        _ => "other",
    })
}

pub fn expected_machine(arch: &str) -> &'static str {
    match arch {
        "arm64" => "aarch64",
        "amd64" => "x86_64",
        _ => "other",
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Package {
    pub name: String,
    pub version: String,
    pub arch: String,
}

/// Whether a Debian version of OpenSSH (`[epoch:]upstream[-revision]`, e.g.
/// `1:10.0p1-7~bpo12+1`) is 9.9 or later, the first with the mlkem768x25519-sha256 key
/// exchange that the fleet relies on to stay post-quantum at a low CPU cost per unit.
pub fn openssh_has_mlkem(version: &str) -> bool {
    let upstream = version.split_once(':').map_or(version, |(_, v)| v);
    let mut parts = upstream.split(|c: char| !c.is_ascii_digit());
    let major = parts.next().and_then(|m| m.parse::<u32>().ok());
    let minor = parts.next().and_then(|m| m.parse::<u32>().ok());
    match (major, minor) {
        (Some(ma), Some(mi)) => (ma, mi) >= (9, 9),
        (Some(ma), None) => ma >= 10,
        _ => false,
    }
}

/// Installed packages from /var/lib/dpkg/status.
pub fn parse_dpkg_status(text: &str) -> Vec<Package> {
    let mut out = Vec::new();
    for stanza in text.split("\n\n") {
        let (mut name, mut version, mut arch, mut installed) = (None, None, String::new(), false);
        for line in stanza.lines() {
            if let Some(v) = line.strip_prefix("Package: ") {
                name = Some(v.trim().to_string());
            } else if let Some(v) = line.strip_prefix("Version: ") {
                version = Some(v.trim().to_string());
            } else if let Some(v) = line.strip_prefix("Architecture: ") {
                arch = v.trim().to_string();
            } else if let Some(v) = line.strip_prefix("Status: ") {
                installed = v.trim().ends_with(" installed");
            }
        }
        if let (Some(name), Some(version), true) = (name, version, installed) {
            out.push(Package {
                name,
                version,
                arch,
            });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// One of the workspace's packages as the image's dpkg database has it, its files checked
/// against its md5sums.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PfxPackage {
    pub name: String,
    pub version: String,
    pub arch: String,
    /// Files compared with the package's md5sums (its conffiles are the image's to set).
    pub files_checked: usize,
}

/// The stanza of package `name` in a dpkg status file: (Status, Version, Architecture,
/// conffile paths).
fn status_stanza(status: &str, name: &str) -> Option<(String, String, String, Vec<String>)> {
    status.split("\n\n").find_map(|stanza| {
        let mut lines = stanza.lines().peekable();
        let (mut pkg, mut st, mut ver, mut arch, mut conf) = (
            None,
            String::new(),
            String::new(),
            String::new(),
            Vec::new(),
        );
        while let Some(line) = lines.next() {
            if let Some(v) = line.strip_prefix("Package: ") {
                pkg = Some(v.trim());
            } else if let Some(v) = line.strip_prefix("Status: ") {
                st = v.trim().to_string();
            } else if let Some(v) = line.strip_prefix("Version: ") {
                ver = v.trim().to_string();
            } else if let Some(v) = line.strip_prefix("Architecture: ") {
                arch = v.trim().to_string();
            } else if line.starts_with("Conffiles:") {
                while let Some(c) = lines.next_if(|l| l.starts_with(' ')) {
                    if let Some(path) = c.split_whitespace().next() {
                        conf.push(path.to_string());
                    }
                }
            }
        }
        (pkg == Some(name)).then_some((st, ver, arch, conf))
    })
}

/// (md5, path) from a dpkg md5sums file; paths as dpkg writes them (relative to /).
pub fn parse_md5sums(text: &str) -> Result<Vec<(String, String)>, String> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (sum, path) = l
                .split_once("  ")
                .ok_or_else(|| format!("md5sums line {l:?} is not `MD5  PATH`"))?;
            if sum.len() != 32 || !sum.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(format!("md5sums line {l:?}: {sum:?} is not an MD5"));
            }
            Ok((
                sum.to_ascii_lowercase(),
                format!("/{}", path.trim_start_matches('/')),
            ))
        })
        .collect()
}

/// The binary each package must carry (and its md5sums must list).
pub fn pfx_package_binary(name: &str) -> String {
    format!("/usr/bin/{name}")
}

/// The workspace's packages in the image: each `install ok installed` at the build's version
/// and the target's architecture, and every file its md5sums lists (but its conffiles) with
/// those bytes in the image. `md5sums` is (package, its md5sums text); `actual` gives the
/// MD5 of a path as read back from the image (None: not there).
pub fn check_pfx_packages(
    status: &str,
    names: &[&str],
    want_version: &str,
    want_arch: &str,
    md5sums: &[(String, String)],
    actual: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<PfxPackage>, String> {
    let mut errors = Vec::new();
    let mut out = Vec::new();
    for &name in names {
        let Some((st, version, arch, conffiles)) = status_stanza(status, name) else {
            errors.push(format!("package {name} is not in the image's dpkg status"));
            continue;
        };
        if st != "install ok installed" {
            errors.push(format!(
                "package {name} is {st:?} in dpkg's status, not \"install ok installed\""
            ));
        }
        if version != want_version {
            errors.push(format!(
                "package {name} is version {version:?}, the build's is {want_version:?}"
            ));
        }
        if arch != want_arch {
            errors.push(format!(
                "package {name} is for {arch:?}, the image is {want_arch:?}"
            ));
        }
        let Some((_, text)) = md5sums.iter().find(|(p, _)| p == name) else {
            errors.push(format!(
                "package {name} has no md5sums in /var/lib/dpkg/info"
            ));
            continue;
        };
        let sums = match parse_md5sums(text) {
            Ok(s) => s,
            Err(e) => {
                errors.push(format!("{name}.md5sums: {e}"));
                continue;
            }
        };
        let bin = pfx_package_binary(name);
        if !sums.iter().any(|(_, p)| crate::plan::merged_usr(p) == bin) {
            errors.push(format!("{name}.md5sums does not list {bin}"));
        }
        let mut checked = 0;
        for (sum, path) in &sums {
            if conffiles
                .iter()
                .any(|c| crate::plan::merged_usr(c) == crate::plan::merged_usr(path))
            {
                continue;
            }
            match actual(path) {
                Some(got) if got == *sum => checked += 1,
                Some(got) => errors.push(format!(
                    "{path} in the image has MD5 {got}, package {name} installed {sum}"
                )),
                None => errors.push(format!(
                    "{path} of package {name} is missing from the image"
                )),
            }
        }
        out.push(PfxPackage {
            name: name.to_string(),
            version,
            arch,
            files_checked: checked,
        });
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors.join("; "))
    }
}

/// `kernel=` and `initramfs` from the Pi's config.txt (the last one wins, as in the firmware).
pub fn config_txt_boot_files(text: &str) -> (Option<String>, Option<String>) {
    let mut kernel = None;
    let mut initramfs = None;
    for line in text.lines().map(str::trim) {
        if line.starts_with('#') {
            continue;
        }
        if let Some(v) = line.strip_prefix("kernel=") {
            kernel = Some(v.trim().to_string());
        } else if let Some(v) = line.strip_prefix("initramfs ") {
            initramfs = v.split_whitespace().next().map(str::to_string);
        }
    }
    (kernel, initramfs)
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FirmwareCheck {
    pub kernel: String,
    pub initramfs: String,
    pub dtbs: Vec<String>,
    pub blobs: Vec<String>,
}

/// The Pi 4 boots only if the FAT partition has the GPU firmware, its DTB, and a config.txt
/// that starts U-Boot (`kernel=u-boot.bin`, present there), which runs the A/B boot script.
/// A config.txt that still starts the kernel itself would boot slot A for ever: no trial
/// boot, no rollback, and an update that never runs.
pub fn check_pi_firmware(fat_files: &[String], config_txt: &str) -> Result<FirmwareCheck, String> {
    let has = |n: &str| fat_files.iter().any(|f| f.eq_ignore_ascii_case(n));
    let mut errors = Vec::new();
    let blobs = ["start4.elf", "fixup4.dat"];
    for b in blobs {
        if !has(b) {
            errors.push(format!("{b} missing on the boot partition"));
        }
    }
    if !has("bcm2711-rpi-4-b.dtb") {
        errors.push("bcm2711-rpi-4-b.dtb missing on the boot partition".into());
    }
    if !config_txt.lines().any(|l| l.trim() == "arm_64bit=1") {
        errors.push("config.txt has no arm_64bit=1".into());
    }
    let (kernel, initramfs) = config_txt_boot_files(config_txt);
    match &kernel {
        Some(k) if k == "u-boot.bin" && has(k) => {}
        Some(k) if k == "u-boot.bin" => {
            errors.push("config.txt kernel=u-boot.bin, but u-boot.bin is not on the boot partition".into())
        }
        Some(k) => errors.push(format!(
            "config.txt kernel={k}: the firmware must start U-Boot (kernel=u-boot.bin), or the unit never takes an update nor rolls one back"
        )),
        None => errors.push("config.txt has no kernel= line (expected kernel=u-boot.bin)".into()),
    }
    if let Some(i) = &initramfs {
        errors.push(format!(
            "config.txt loads initramfs {i}: U-Boot loads the slot's own; the firmware's copy only costs boot time"
        ));
    }
    if !config_txt
        .lines()
        .any(|l| l.trim() == crate::update::BOOTDELAY_OVERLAY_LINE)
    {
        errors.push(format!(
            "config.txt has no {}: U-Boot waits its 2 s boot delay at every boot",
            crate::update::BOOTDELAY_OVERLAY_LINE
        ));
    }
    if !errors.is_empty() {
        return Err(errors.join("; "));
    }
    let dtbs = fat_files
        .iter()
        .filter(|f| f.ends_with(".dtb"))
        .cloned()
        .collect();
    Ok(FirmwareCheck {
        kernel: kernel.unwrap_or_default(),
        initramfs: initramfs.unwrap_or_default(),
        dtbs,
        blobs: blobs.iter().map(|s| s.to_string()).collect(),
    })
}

/// Parses `debugfs -R 'ls -p DIR'` output into names (without . and ..).
pub fn parse_debugfs_ls(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('/').collect();
            // "/ino/mode/uid/gid/name/size/"
            (f.len() >= 7).then(|| f[5].to_string())
        })
        .filter(|n| n != "." && n != ".." && !n.is_empty())
        .collect()
}

/// `(mode, uid)` from `debugfs -R 'stat PATH'` output (mode without the file type bits).
pub fn parse_debugfs_stat(text: &str) -> Option<(u32, u32)> {
    let after = |key: &str| {
        let w: Vec<&str> = text.split_whitespace().collect();
        w.iter()
            .position(|x| *x == key)
            .and_then(|i| w.get(i + 1).copied())
    };
    let mode = u32::from_str_radix(after("Mode:")?, 8).ok()?;
    let uid = after("User:")?.parse().ok()?;
    Some((mode & 0o7777, uid))
}

/// Splits an authorized_keys line into its options and the key. Options are the first
/// field when it does not start with a key type; commas inside double quotes do not split.
pub fn key_line_options(line: &str) -> Result<(Vec<String>, String), String> {
    let line = line.trim();
    let is_type =
        |w: &str| w.starts_with("ssh-") || w.starts_with("ecdsa-") || w.starts_with("sk-");
    if is_type(line) {
        return Ok((Vec::new(), line.to_string()));
    }
    let (mut opts, mut cur, mut quoted) = (Vec::new(), String::new(), false);
    let mut rest = None;
    let mut chars = line.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' if quoted => {
                cur.push(c);
                if let Some((_, n)) = chars.next() {
                    cur.push(n);
                }
            }
            '"' => {
                quoted = !quoted;
                cur.push(c);
            }
            ',' if !quoted => opts.push(std::mem::take(&mut cur)),
            ' ' | '\t' if !quoted => {
                rest = Some(line[i..].trim().to_string());
                break;
            }
            _ => cur.push(c),
        }
    }
    opts.push(cur);
    match rest {
        Some(k) if !quoted && is_type(&k) => Ok((opts, k)),
        _ => Err(format!(
            "not an authorized_keys line: {:?}",
            line.chars().take(60).collect::<String>()
        )),
    }
}

/// `(mode, uid)` of a file read back from the image.
pub type Stat = Option<(u32, u32)>;

/// What the image's access files say, read back from the image (see manifest.rs).
#[derive(Debug, Clone, Default)]
pub struct AccessFiles {
    /// sshd's files in the order sshd reads them: the drop-ins (sorted), then sshd_config.
    pub sshd_configs: Vec<(String, String)>,
    pub passwd: String,
    pub group: String,
    pub shadow: String,
    /// (file name = user, text) of every file in the authorized keys directory.
    pub key_files: Vec<(String, String)>,
    /// Paths of root's own key files that exist (must be none).
    pub root_key_files: Vec<String>,
    pub sudoers: String,
    /// (name, text, (mode, uid)) of every file in /etc/sudoers.d.
    pub sudoers_d: Vec<(String, String, Stat)>,
    pub agent_config: Option<(String, Stat)>,
    /// The agent binary carries the test-backends marker (a debug build).
    pub agent_test_build: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FleetAccount {
    pub name: String,
    pub uid: u32,
    pub home: String,
    pub shell: String,
    pub password: String,
    pub groups: Vec<String>,
}

/// Who may log in and what the fleet key can do, as read back from the image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AccessCheck {
    pub login_users: Vec<String>,
    pub permit_root_login: String,
    pub authorized_keys_file: String,
    pub sshd: Vec<(String, String)>,
    pub fleet_account: FleetAccount,
    pub fleet_keys: usize,
    pub key_options: Vec<String>,
    pub forced_command: String,
    pub root_authorized_keys: String,
    pub sudoers_file: String,
    pub sudoers_lines: Vec<String>,
    /// `visudo -c -f` on the file read back (filled by the I/O side).
    pub visudo: String,
    pub agent_config: String,
}

fn config_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
}

/// Refuses an image whose fleet key could reach anything but the agent's dispatcher: a
/// shell, a pty, forwarding, another account, root, or a wider sudo. Pure.
pub fn check_access(f: &AccessFiles) -> Result<AccessCheck, String> {
    use crate::plan::{
        AUTHORIZED_KEYS_DIR, FLEET_USER, FORCED_COMMAND, SUDOERS_ENV, SUDOERS_FILE, SUDOERS_GRANT,
    };
    let mut errors: Vec<String> = Vec::new();

    // sshd: the first value of a keyword wins, across the files in reading order.
    let mut sshd: Vec<(String, String)> = Vec::new();
    for (path, text) in &f.sshd_configs {
        for line in config_lines(text) {
            let (k, v) = line
                .split_once(|c: char| c.is_whitespace() || c == '=')
                .map(|(k, v)| (k, v.trim_start_matches([' ', '\t', '=']).trim()))
                .unwrap_or((line, ""));
            let k = k.to_ascii_lowercase();
            if k == "include" {
                continue;
            }
            if k == "match" {
                errors.push(format!(
                    "{path}: a Match block ({line:?}) could override the fleet account's settings"
                ));
                continue;
            }
            if !sshd.iter().any(|(have, _)| *have == k) {
                sshd.push((k, v.to_string()));
            }
        }
    }
    let get = |k: &str| sshd.iter().find(|(h, _)| h == k).map(|(_, v)| v.as_str());
    let want_keys_file = format!("{AUTHORIZED_KEYS_DIR}/%u");
    for (k, want) in [
        ("permitrootlogin", "no"),
        ("passwordauthentication", "no"),
        ("kbdinteractiveauthentication", "no"),
        ("allowusers", FLEET_USER),
        ("authorizedkeysfile", want_keys_file.as_str()),
        ("disableforwarding", "yes"),
        ("permittty", "no"),
        ("permituserrc", "no"),
    ] {
        match get(k) {
            Some(v) if v == want => {}
            v => errors.push(format!("sshd: {k} is {v:?}, must be {want:?}")),
        }
    }
    for k in [
        "authorizedkeyscommand",
        "authorizedprincipalsfile",
        "authorizedprincipalscommand",
        "trustedusercakeys",
        "forcecommand",
        "allowgroups",
    ] {
        if let Some(v) = get(k).filter(|v| !v.eq_ignore_ascii_case("none")) {
            errors.push(format!(
                "sshd: {k} {v:?} opens a way in beside the fleet keys"
            ));
        }
    }
    if get("permituserenvironment").is_some_and(|v| v != "no") {
        errors.push("sshd: permituserenvironment must be no".into());
    }

    // The account: present, not root, no password, in no group.
    let pw: Vec<Vec<&str>> = f.passwd.lines().map(|l| l.split(':').collect()).collect();
    for e in pw
        .iter()
        .filter(|e| e.len() > 2 && e[2] == "0" && e[0] != "root")
    {
        errors.push(format!("/etc/passwd: {} has uid 0", e[0]));
    }
    let account = match pw
        .iter()
        .find(|e| e.first() == Some(&FLEET_USER) && e.len() >= 7)
    {
        None => {
            errors.push(format!("/etc/passwd has no {FLEET_USER} account"));
            None
        }
        Some(e) => {
            let uid: u32 = e[2].parse().unwrap_or(0);
            let gid = e[3];
            if uid == 0 || gid == "0" {
                errors.push(format!(
                    "{FLEET_USER} has uid {} gid {gid}: it must not be root",
                    e[2]
                ));
            }
            let password = f
                .shadow
                .lines()
                .map(|l| l.split(':').collect::<Vec<_>>())
                .find(|s| s.first() == Some(&FLEET_USER))
                .and_then(|s| s.get(1).map(|p| p.to_string()));
            match password.as_deref() {
                Some(p) if p.starts_with('*') || p.starts_with('!') => {}
                p => errors.push(format!(
                    "/etc/shadow: {FLEET_USER}'s password field is {:?}: it must have no password (* or !)",
                    p.map(|p| if p.is_empty() { "" } else { "(a hash)" })
                )),
            }
            let groups: Vec<String> = f
                .group
                .lines()
                .map(|l| l.split(':').collect::<Vec<_>>())
                .filter(|g| g.len() >= 4 && g[3].split(',').any(|m| m == FLEET_USER))
                .map(|g| g[0].to_string())
                .collect();
            if !groups.is_empty() {
                errors.push(format!(
                    "{FLEET_USER} is a member of {groups:?}: it must be in no group"
                ));
            }
            Some(FleetAccount {
                name: FLEET_USER.into(),
                uid,
                home: e[5].into(),
                shell: e[6].into(),
                password: password.unwrap_or_default(),
                groups,
            })
        }
    };

    // The keys: only the fleet account has any, every one restricted to the dispatcher.
    let mut fleet_keys = 0;
    let mut key_options: Vec<String> = Vec::new();
    const ALLOWED: &[&str] = &[
        "restrict",
        "no-port-forwarding",
        "no-agent-forwarding",
        "no-x11-forwarding",
        "no-pty",
        "no-user-rc",
    ];
    for (user, text) in &f.key_files {
        if user != FLEET_USER {
            errors.push(format!(
                "{AUTHORIZED_KEYS_DIR}/{user}: only {FLEET_USER} may have keys"
            ));
            continue;
        }
        for line in config_lines(text) {
            let opts = match key_line_options(line) {
                Ok((o, _)) => o,
                Err(e) => {
                    errors.push(format!("{AUTHORIZED_KEYS_DIR}/{user}: {e}"));
                    continue;
                }
            };
            fleet_keys += 1;
            let want_cmd = format!("command=\"{FORCED_COMMAND}\"");
            if !opts.iter().any(|o| o == "restrict") {
                errors.push(format!("{AUTHORIZED_KEYS_DIR}/{user}: key {fleet_keys} lacks `restrict` (pty, forwarding, agent, ~/.ssh/rc would be open)"));
            }
            if opts
                .iter()
                .filter(|o| o.to_ascii_lowercase().starts_with("command="))
                .count()
                != 1
                || !opts.contains(&want_cmd)
            {
                errors.push(format!("{AUTHORIZED_KEYS_DIR}/{user}: key {fleet_keys} must force exactly {want_cmd} (got {opts:?})"));
            }
            for o in &opts {
                let lower = o.to_ascii_lowercase();
                let fine = ALLOWED.contains(&lower.as_str())
                    || *o == want_cmd
                    || lower.starts_with("from=")
                    || lower.starts_with("expiry-time=");
                if !fine {
                    errors.push(format!(
                        "{AUTHORIZED_KEYS_DIR}/{user}: key option {o:?} widens what the key can do"
                    ));
                }
                if !key_options.contains(o) {
                    key_options.push(o.clone());
                }
            }
        }
    }
    for p in &f.root_key_files {
        errors.push(format!("{p} exists: root must have no authorized keys"));
    }

    // sudo: exactly the one grant, in exactly one file.
    for line in config_lines(&f.sudoers) {
        if line
            .split(|c: char| !c.is_ascii_alphanumeric() && c != '-' && c != '_')
            .any(|w| w == FLEET_USER)
        {
            errors.push(format!("/etc/sudoers mentions {FLEET_USER}: {line:?}"));
        }
    }
    let name = SUDOERS_FILE.rsplit('/').next().unwrap_or(SUDOERS_FILE);
    let mut sudoers_lines = Vec::new();
    for (n, text, stat) in &f.sudoers_d {
        if n == "README" {
            continue;
        }
        if n != name {
            errors.push(format!(
                "/etc/sudoers.d/{n}: only {SUDOERS_FILE} may be there"
            ));
            continue;
        }
        match stat {
            Some((0o440, 0)) => {}
            s => errors.push(format!("{SUDOERS_FILE}: mode/uid {s:?}, must be 0440 root")),
        }
        sudoers_lines = config_lines(text).map(str::to_string).collect();
        if sudoers_lines != [SUDOERS_ENV, SUDOERS_GRANT] {
            errors.push(format!("{SUDOERS_FILE} must hold exactly {SUDOERS_ENV:?} and {SUDOERS_GRANT:?}, holds {sudoers_lines:?}"));
        }
    }
    if sudoers_lines.is_empty() && !f.sudoers_d.iter().any(|(n, ..)| n == name) {
        errors.push(format!(
            "{SUDOERS_FILE} missing: the dispatcher could not run as root"
        ));
    }

    // The agent's own settings: root's, and never the test backends.
    let agent_config = match &f.agent_config {
        None => {
            errors.push("/etc/pfx/agent.yaml missing".into());
            String::new()
        }
        Some((text, stat)) => {
            if !matches!(stat, Some((m, 0)) if m & 0o022 == 0) {
                errors.push(format!(
                    "/etc/pfx/agent.yaml: mode/uid {stat:?}: must be root's, not writable by others"
                ));
            }
            for line in config_lines(text) {
                let k = line.split(':').next().unwrap_or("").trim();
                if k.starts_with("test_")
                    || k == "mock_nic_dir"
                    || (k == "nic_backend" && !line.ends_with("player"))
                {
                    errors.push(format!(
                        "/etc/pfx/agent.yaml: {line:?} is for the test suite only"
                    ));
                }
            }
            text.clone()
        }
    };
    if f.agent_test_build {
        errors.push(
            "/usr/bin/pfx-agent is a test (debug) build: it could use the mock NIC backend".into(),
        );
    }

    match account {
        Some(fleet_account) if errors.is_empty() => Ok(AccessCheck {
            login_users: get("allowusers")
                .unwrap_or("")
                .split_whitespace()
                .map(str::to_string)
                .collect(),
            permit_root_login: get("permitrootlogin").unwrap_or("").into(),
            authorized_keys_file: get("authorizedkeysfile").unwrap_or("").into(),
            sshd: sshd.clone(),
            fleet_account,
            fleet_keys,
            key_options,
            forced_command: FORCED_COMMAND.into(),
            root_authorized_keys: "absent".into(),
            sudoers_file: SUDOERS_FILE.into(),
            sudoers_lines,
            visudo: String::new(),
            agent_config,
        }),
        _ => Err(errors.join("; ")),
    }
}

/// A modification time as ext4 keeps it: seconds and nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Mtime {
    pub sec: i64,
    pub nsec: u32,
}

/// A file of the root as `debugfs -R 'stat PATH'` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inode {
    /// debugfs's word for the type: `regular`, `directory`, `symlink`, ...
    pub kind: String,
    pub mtime: Mtime,
    /// A symlink's target: debugfs prints a fast link's; the I/O side reads a slow one's.
    pub link: Option<String>,
}

/// Type, mtime and fast link target from `debugfs -R 'stat PATH'` output. The mtime is
/// `0xSECONDS:0xEXTRA` on large inodes (EXTRA: nanoseconds << 2 | the seconds' epoch bits
/// 32-33), `0xSECONDS` alone on 128-byte ones.
pub fn parse_debugfs_inode(text: &str) -> Option<Inode> {
    let kind = text
        .split_once("Type: ")
        .and_then(|(_, rest)| rest.split("Mode:").next())
        .map(|k| k.trim().to_string())
        .filter(|k| !k.is_empty())?;
    let value = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("mtime:"))?
        .split_whitespace()
        .next()?;
    let (lo, extra) = match value.split_once(':') {
        Some((lo, extra)) => (lo, Some(extra)),
        None => (value, None),
    };
    let hex = |h: &str| u32::from_str_radix(h.trim_start_matches("0x"), 16).ok();
    let lo = hex(lo)?;
    let extra = match extra {
        Some(e) => hex(e)?,
        None => 0,
    };
    let mtime = Mtime {
        sec: i64::from(lo as i32) + (i64::from(extra & 3) << 32),
        nsec: extra >> 2,
    };
    let link = text.lines().find_map(|l| {
        l.trim()
            .strip_prefix("Fast link dest: ")
            .map(|d| d.trim_matches('"').to_string())
    });
    Some(Inode { kind, mtime, link })
}

/// What `systemd`'s `ConditionNeedsUpdate=` decides for a directory whose `.updated` stamp
/// has `stamp` as its mtime and `stamp_text` as its contents, with `/usr` at `usr`: an
/// update is needed when /usr is newer. As systemd's condition.c compares: seconds first;
/// then nanoseconds, unless /usr has some and the stamp none (a file system without
/// nanoseconds), where the stamp's `TIMESTAMP_NSEC=` is taken instead (none or unreadable:
/// an update is needed).
pub fn needs_update(usr: Mtime, stamp: Mtime, stamp_text: &str) -> bool {
    if usr.sec != stamp.sec {
        return usr.sec > stamp.sec;
    }
    if usr.nsec == 0 || stamp.nsec > 0 {
        return usr.nsec > stamp.nsec;
    }
    let written = stamp_text
        .lines()
        .find_map(|l| l.trim().strip_prefix("TIMESTAMP_NSEC="))
        .and_then(|v| v.trim().trim_matches('"').parse::<u64>().ok());
    match written {
        Some(ns) => {
            let usr_ns = i128::from(usr.sec) * 1_000_000_000 + i128::from(usr.nsec);
            usr_ns > i128::from(ns)
        }
        None => true,
    }
}

/// Where a masked generator's or unit's link to /dev/null must be.
pub fn generator_mask_path(name: &str) -> String {
    format!("/etc/systemd/system-generators/{name}")
}

pub fn unit_mask_path(name: &str) -> String {
    format!("/etc/systemd/system/{name}")
}

/// What the boot-speed checks read from the root: each path with its inode (None:
/// missing), and the update stamps' text.
#[derive(Debug, Clone, Default)]
pub struct BootSpeedFiles {
    /// (generator name, the inode at generator_mask_path).
    pub generators: Vec<(String, Option<Inode>)>,
    /// (unit name, the inode at unit_mask_path).
    pub units: Vec<(String, Option<Inode>)>,
    pub usr: Option<Inode>,
    /// (path of the stamp, its inode, its text).
    pub stamps: Vec<(String, Option<Inode>, String)>,
}

/// One update stamp as read back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UpdateStamp {
    pub path: String,
    pub mtime: Mtime,
    /// The stamp's `TIMESTAMP_NSEC=`, systemd's fallback where mtimes have no nanoseconds.
    pub timestamp_nsec: Option<u64>,
}

/// What the build does for boot speed, as read back from the image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BootSpeedCheck {
    /// plan::MASKED_GENERATORS, each a link to /dev/null in /etc/systemd/system-generators.
    pub masked_generators: Vec<String>,
    /// plan::MASKED_UNITS, each a link to /dev/null in /etc/systemd/system.
    pub masked_units: Vec<String>,
    pub usr_mtime: Mtime,
    /// /etc/.updated and /var/.updated, none older than /usr by systemd's rule.
    pub update_stamps: Vec<UpdateStamp>,
}

/// The stamps systemd looks for: ConditionNeedsUpdate=/etc and =/var.
pub const UPDATE_STAMPS: &[&str] = &["/etc/.updated", "/var/.updated"];

/// Each name's link to /dev/null, from `found`; an error per name that has none, saying
/// what it costs (`why`).
fn check_masks(
    names: &[&str],
    found: &[(String, Option<Inode>)],
    path: fn(&str) -> String,
    why: &dyn Fn(&str) -> String,
    errors: &mut Vec<String>,
) -> Vec<String> {
    let mut ok = Vec::new();
    for &name in names {
        let p = path(name);
        let inode = found
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, i)| i.as_ref());
        let fault = match inode {
            None => format!("the image has no {p} link to /dev/null"),
            Some(i) if i.kind != "symlink" => {
                format!("{p} is a {} file, not a link to /dev/null", i.kind)
            }
            Some(Inode { link: Some(t), .. }) if t == "/dev/null" => {
                ok.push(name.to_string());
                continue;
            }
            Some(Inode { link: Some(t), .. }) => format!("{p} links to {t:?}, not /dev/null"),
            Some(_) => format!("{p} is a link whose target could not be read"),
        };
        errors.push(format!(
            "{fault}: {}; rebuild the image with this pfx-image",
            why(name)
        ));
    }
    ok
}

/// The boot-speed parts of the image, which only a booted unit would otherwise show
/// missing: the masked generators and units (plan.rs says why each), and update stamps
/// that systemd's ConditionNeedsUpdate= takes as "not older than /usr". Pure.
pub fn check_boot_speed(f: &BootSpeedFiles) -> Result<BootSpeedCheck, String> {
    use crate::plan::{MASKED_GENERATORS, MASKED_UNITS};
    let mut errors = Vec::new();
    let masked_generators = check_masks(
        MASKED_GENERATORS,
        &f.generators,
        generator_mask_path,
        &|g| {
            format!(
                "systemd would run {g} at every boot before it loads a single unit (166-504 ms \
                 each in the VM, docs/perf/image.md)"
            )
        },
        &mut errors,
    );
    let masked_units = check_masks(
        MASKED_UNITS,
        &f.units,
        unit_mask_path,
        &|u| format!("{u} is not masked and would run on the unit (plan::MASKED_UNITS says why)"),
        &mut errors,
    );
    let usr_mtime = match &f.usr {
        Some(i) if i.kind == "directory" => Some(i.mtime),
        Some(i) => {
            errors.push(format!(
                "/usr is a {} file, not a directory: the image's root is broken; rebuild it",
                i.kind
            ));
            None
        }
        None => {
            errors.push("the image has no /usr: its root is broken; rebuild it".into());
            None
        }
    };
    let mut update_stamps = Vec::new();
    for &path in UPDATE_STAMPS {
        let dir = path.trim_end_matches("/.updated");
        let example = if dir == "/etc" {
            "systemd-sysusers among them, 0.6-0.85 s ahead of the data partition's check"
        } else {
            "systemd-journal-catalog-update among them"
        };
        let cost = format!(
            "systemd would count every boot as the first after an update (the overlay forgets \
             the stamp a boot writes) and run the ConditionNeedsUpdate={dir} units ({example}) \
             each time"
        );
        let found = f.stamps.iter().find(|(p, ..)| p == path);
        match found {
            None | Some((_, None, _)) => errors.push(format!(
                "the image has no {path}: {cost}; rebuild the image with this pfx-image"
            )),
            Some((_, Some(i), _)) if i.kind != "regular" => errors.push(format!(
                "{path} is a {} file, not the regular file systemd-update-done writes: {cost}; \
                 rebuild the image with this pfx-image",
                i.kind
            )),
            Some((_, Some(i), text)) => {
                if let Some(usr) = usr_mtime
                    && needs_update(usr, i.mtime, text)
                {
                    errors.push(format!(
                        "{path} (mtime {}.{:09}) is older than /usr (mtime {}.{:09}): {cost}; \
                         something changed /usr after the build wrote the stamps (they must be \
                         the last step of the root's customisation): rebuild the image with \
                         this pfx-image",
                        i.mtime.sec, i.mtime.nsec, usr.sec, usr.nsec
                    ));
                }
                update_stamps.push(UpdateStamp {
                    path: path.to_string(),
                    mtime: i.mtime,
                    timestamp_nsec: text
                        .lines()
                        .find_map(|l| l.trim().strip_prefix("TIMESTAMP_NSEC="))
                        .and_then(|v| v.trim().parse().ok()),
                });
            }
        }
    }
    match usr_mtime {
        Some(usr_mtime) if errors.is_empty() => Ok(BootSpeedCheck {
            masked_generators,
            masked_units,
            usr_mtime,
            update_stamps,
        }),
        _ => Err(errors.join("; ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openssh_versions_with_and_without_mlkem() {
        for v in ["1:10.0p1-7~bpo12+1", "1:9.9p1-1", "10.2p1", "1:11.0p1-1"] {
            assert!(openssh_has_mlkem(v), "{v}");
        }
        for v in [
            "1:9.2p1-2+deb12u10",
            "1:8.4p1-5",
            "9.8p1",
            "",
            "1:",
            "garbage",
        ] {
            assert!(!openssh_has_mlkem(v), "{v}");
        }
    }

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
    ];

    #[test]
    fn initramfs_with_busybox_passes() {
        let (names, end) = cpio_names(&newc(GOOD)).unwrap();
        assert_eq!(names.len(), 4);
        assert!(end > 0);
        check_initramfs(&names).unwrap();
    }

    #[test]
    fn initramfs_without_busybox_fails() {
        let (names, _) = cpio_names(&newc(&GOOD[1..])).unwrap();
        let e = check_initramfs(&names).unwrap_err();
        assert!(e.contains("busybox"), "{e}");
    }

    #[test]
    fn initramfs_without_overlayroot_script_fails() {
        let (names, _) = cpio_names(&newc(&[GOOD[0], GOOD[2], GOOD[3]])).unwrap();
        assert!(check_initramfs(&names).unwrap_err().contains("overlayroot"));
    }

    #[test]
    fn initramfs_without_the_systemd_tags_rule_fails() {
        let (names, _) = cpio_names(&newc(&GOOD[..3])).unwrap();
        let e = check_initramfs(&names).unwrap_err();
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

    #[test]
    fn cmdline_with_rw_fails() {
        let c = "console=tty0 root=LABEL=RASPIROOT rw fsck.repair=yes net.ifnames=0 rootwait overlayroot=tmpfs";
        let e = check_cmdline(c, true).unwrap_err();
        assert!(e.contains("`rw`"), "{e}");
    }

    #[test]
    fn cmdline_without_rw_passes_and_needs_overlay() {
        let c = "console=tty0 root=LABEL=RASPIROOT fsck.repair=yes net.ifnames=0 rootwait overlayroot=tmpfs\n";
        let ok = check_cmdline(c, true).unwrap();
        assert_eq!(ok.overlayroot.as_deref(), Some("tmpfs"));
        assert_eq!(ok.root.as_deref(), Some("LABEL=RASPIROOT"));
        let e = check_cmdline("root=/dev/vda rootwait", true).unwrap_err();
        assert!(e.contains("overlayroot"), "{e}");
        assert!(check_cmdline("root=/dev/vda overlayroot=disabled", true).is_err());
        check_cmdline("root=/dev/vda", false).unwrap();
    }

    #[test]
    fn pi4_cmdline_refuses_cma() {
        assert!(check_pi4_cmdline("root=LABEL=RASPIROOT cma=64M rootwait").is_err());
        check_pi4_cmdline("root=LABEL=RASPIROOT rootwait").unwrap();
    }

    #[test]
    fn elf_machines() {
        let mut h = vec![
            0x7f, b'E', b'L', b'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0xB7, 0,
        ];
        assert_eq!(elf_machine(&h).unwrap(), "aarch64");
        h[18] = 0x3E;
        assert_eq!(elf_machine(&h).unwrap(), "x86_64");
        assert!(elf_machine(b"#!/bin/sh\n").is_err());
    }

    #[test]
    fn dpkg_status_lists_only_installed() {
        let t = "Package: a\nStatus: install ok installed\nArchitecture: arm64\nVersion: 1.0\n\n\
                 Package: b\nStatus: deinstall ok config-files\nVersion: 2\n\n\
                 Package: busybox\nStatus: install ok installed\nVersion: 1:1.35.0-4+b3\nArchitecture: arm64\n";
        let p = parse_dpkg_status(t);
        assert_eq!(p.len(), 2);
        assert_eq!(p[1].name, "busybox");
        assert_eq!(p[1].version, "1:1.35.0-4+b3");
    }

    #[test]
    fn pi_firmware_checks() {
        let files: Vec<String> = [
            "start4.elf",
            "fixup4.dat",
            "bcm2711-rpi-4-b.dtb",
            "vmlinuz-6.1.0-50-arm64",
            "initrd.img-6.1.0-50-arm64",
            "config.txt",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let cfg = "# Do not modify\narm_64bit=1\nenable_uart=1\nupstream_kernel=1\nkernel=u-boot.bin\ndtoverlay=pfx-uboot\n";
        let mut with_uboot = files.clone();
        with_uboot.push("u-boot.bin".into());
        let ok = check_pi_firmware(&with_uboot, cfg).unwrap();
        assert_eq!(ok.kernel, "u-boot.bin");
        assert_eq!(ok.dtbs, vec!["bcm2711-rpi-4-b.dtb"]);
        // u-boot.bin missing, and the firmware starting the kernel itself: both named.
        let e = check_pi_firmware(&files[1..], cfg).unwrap_err();
        assert!(
            e.contains("start4.elf") && e.contains("u-boot.bin is not"),
            "{e}"
        );
        let direct =
            "arm_64bit=1\nkernel=vmlinuz-6.1.0-50-arm64\ninitramfs initrd.img-6.1.0-50-arm64\n";
        let e = check_pi_firmware(&with_uboot, direct).unwrap_err();
        assert!(
            e.contains("must start U-Boot") && e.contains("initramfs"),
            "{e}"
        );
        // What the build writes from raspi-firmware's generated file passes.
        let generated = crate::build::uboot_config_txt(direct);
        assert!(
            check_pi_firmware(&with_uboot, &generated).is_ok(),
            "{generated}"
        );
    }

    #[test]
    fn mbr_entries() {
        let mut s = vec![0u8; 512];
        s[510] = 0x55;
        s[511] = 0xAA;
        s[446] = 0x80;
        s[446 + 4] = 0x0c;
        s[446 + 8..446 + 12].copy_from_slice(&8192u32.to_le_bytes());
        s[446 + 12..446 + 16].copy_from_slice(&524288u32.to_le_bytes());
        let p = parse_mbr(&s).unwrap();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].offset(), 8192 * 512);
        assert!(p[0].bootable);
        assert!(parse_mbr(&[0u8; 512]).is_err());
    }

    #[test]
    fn debugfs_ls() {
        let t = "/12/040755/0/0/.//\n/2/040755/0/0/..//\n/13/120777/0/0/pfx-player.service/10/\n";
        assert_eq!(parse_debugfs_ls(t), vec!["pfx-player.service"]);
    }

    const STATUS: &str = "Package: busybox\nStatus: install ok installed\nVersion: 1:1.35.0-4+b3\nArchitecture: arm64\n\n\
Package: pfx-player\nStatus: install ok installed\nPriority: optional\nArchitecture: arm64\nVersion: 0.1.0\n\
Conffiles:\n /etc/pfx/show.yaml 0123456789abcdef0123456789abcdef\nDescription: LED show player\n more\n\n\
Package: pfx-agent\nStatus: install ok installed\nArchitecture: arm64\nVersion: 0.1.0\n";
    const SUM_BIN: &str = "11111111111111111111111111111111";
    const SUM_UNIT: &str = "22222222222222222222222222222222";
    const SUM_AGENT: &str = "33333333333333333333333333333333";

    fn sums() -> Vec<(String, String)> {
        vec![
            (
                "pfx-player".into(),
                format!(
                    "{SUM_BIN}  usr/bin/pfx-player\n{SUM_UNIT}  lib/systemd/system/pfx-player.service\n\
                     44444444444444444444444444444444  etc/pfx/show.yaml\n"
                ),
            ),
            (
                "pfx-agent".into(),
                format!("{SUM_AGENT}  usr/bin/pfx-agent\n"),
            ),
        ]
    }

    fn image_md5(path: &str) -> Option<String> {
        match crate::plan::merged_usr(path).as_str() {
            "/usr/bin/pfx-player" => Some(SUM_BIN.into()),
            "/usr/lib/systemd/system/pfx-player.service" => Some(SUM_UNIT.into()),
            "/usr/bin/pfx-agent" => Some(SUM_AGENT.into()),
            // The image's own show: not the package's bytes, and not compared.
            "/etc/pfx/show.yaml" => Some("55555555555555555555555555555555".into()),
            _ => None,
        }
    }

    const NAMES: &[&str] = &["pfx-player", "pfx-agent"];

    #[test]
    fn pfx_packages_installed_at_the_build_version_with_their_bytes() {
        let p = check_pfx_packages(STATUS, NAMES, "0.1.0", "arm64", &sums(), &image_md5).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].name.as_str(), p[0].files_checked), ("pfx-player", 2));
        assert_eq!(
            (p[1].name.as_str(), p[1].version.as_str()),
            ("pfx-agent", "0.1.0")
        );
    }

    #[test]
    fn pfx_packages_wrong_or_missing_are_refused() {
        let check =
            |status: &str, sums: Vec<(String, String)>, md5: &dyn Fn(&str) -> Option<String>| {
                check_pfx_packages(status, NAMES, "0.1.0", "arm64", &sums, md5).unwrap_err()
            };
        let e = check(
            &STATUS.replace("Version: 0.1.0\n", "Version: 0.0.9\n"),
            sums(),
            &image_md5,
        );
        assert!(e.contains("the build's is \"0.1.0\""), "{e}");
        let e = check(
            &STATUS.replacen("install ok installed", "deinstall ok config-files", 2),
            sums(),
            &image_md5,
        );
        assert!(e.contains("not \"install ok installed\""), "{e}");
        let e = check(
            STATUS.split("\n\nPackage: pfx-agent").next().unwrap(),
            sums(),
            &image_md5,
        );
        assert!(
            e.contains("pfx-agent is not in the image's dpkg status"),
            "{e}"
        );
        let e = check(
            &STATUS.replace("arm64\nVersion: 0.1.0", "amd64\nVersion: 0.1.0"),
            sums(),
            &image_md5,
        );
        assert!(e.contains("the image is \"arm64\""), "{e}");
        // A binary changed after dpkg installed it.
        let changed = |p: &str| {
            if p.ends_with("pfx-player") {
                Some("66666666666666666666666666666666".into())
            } else {
                image_md5(p)
            }
        };
        let e = check(STATUS, sums(), &changed);
        assert!(
            e.contains("/usr/bin/pfx-player in the image has MD5 6666"),
            "{e}"
        );
        let gone = |p: &str| {
            if p.ends_with("pfx-player.service") {
                None
            } else {
                image_md5(p)
            }
        };
        let e = check(STATUS, sums(), &gone);
        assert!(
            e.contains("pfx-player.service of package pfx-player is missing"),
            "{e}"
        );
        // md5sums that do not name the binary, or no md5sums at all.
        let mut s = sums();
        s[1].1 = format!("{SUM_AGENT}  usr/share/doc/pfx-agent/copyright\n");
        let e = check(STATUS, s, &|p: &str| {
            if p.ends_with("copyright") {
                Some(SUM_AGENT.into())
            } else {
                image_md5(p)
            }
        });
        assert!(
            e.contains("pfx-agent.md5sums does not list /usr/bin/pfx-agent"),
            "{e}"
        );
        let e = check(STATUS, sums()[..1].to_vec(), &image_md5);
        assert!(e.contains("pfx-agent has no md5sums"), "{e}");
        let mut s = sums();
        s[0].1 = "not an md5 line\n".into();
        assert!(check(STATUS, s, &image_md5).contains("is not `MD5  PATH`"));
    }

    fn inode(kind: &str, sec: i64, nsec: u32, link: Option<&str>) -> Option<Inode> {
        Some(Inode {
            kind: kind.into(),
            mtime: Mtime { sec, nsec },
            link: link.map(str::to_string),
        })
    }

    /// A root as the build leaves it: every mask a link to /dev/null, both stamps with
    /// /usr's mtime (seconds only, as mke2fs -d of e2fsprogs 1.47.0 copies them).
    fn good_boot_files() -> BootSpeedFiles {
        let null = |n: &&str| (n.to_string(), inode("symlink", 5, 0, Some("/dev/null")));
        let text = "# This file was created by pfx-image\nTIMESTAMP_NSEC=1000000000123\n";
        BootSpeedFiles {
            generators: crate::plan::MASKED_GENERATORS.iter().map(null).collect(),
            units: crate::plan::MASKED_UNITS.iter().map(null).collect(),
            usr: inode("directory", 1000, 0, None),
            stamps: UPDATE_STAMPS
                .iter()
                .map(|p| (p.to_string(), inode("regular", 1000, 0, None), text.into()))
                .collect(),
        }
    }

    #[test]
    fn boot_speed_as_the_build_leaves_it_passes() {
        let c = check_boot_speed(&good_boot_files()).unwrap();
        assert_eq!(c.masked_generators, crate::plan::MASKED_GENERATORS);
        assert_eq!(c.masked_units, crate::plan::MASKED_UNITS);
        assert_eq!(c.usr_mtime, Mtime { sec: 1000, nsec: 0 });
        assert_eq!(c.update_stamps.len(), 2);
        assert_eq!(c.update_stamps[1].path, "/var/.updated");
        assert_eq!(c.update_stamps[0].timestamp_nsec, Some(1_000_000_000_123));
    }

    #[test]
    fn a_generator_not_masked_is_named() {
        // Missing (the masking loop skipped it).
        let mut f = good_boot_files();
        f.generators.retain(|(n, _)| n != "systemd-sysv-generator");
        let e = check_boot_speed(&f).unwrap_err();
        assert!(
            e.contains(
                "the image has no /etc/systemd/system-generators/systemd-sysv-generator link \
                 to /dev/null: systemd would run systemd-sysv-generator at every boot"
            ) && e.contains("rebuild the image with this pfx-image"),
            "{e}"
        );
        assert_eq!(e.matches("; rebuild").count(), 1, "{e}");
        // Read back as missing.
        let mut f = good_boot_files();
        f.generators[0].1 = None;
        let e = check_boot_speed(&f).unwrap_err();
        assert!(e.contains("no /etc/systemd/system-generators/systemd-cryptsetup-generator link"));
        // A link to somewhere else.
        let mut f = good_boot_files();
        f.generators[1].1 = inode("symlink", 5, 0, Some("/usr/lib/systemd/x"));
        let e = check_boot_speed(&f).unwrap_err();
        assert!(
            e.contains("systemd-gpt-auto-generator links to \"/usr/lib/systemd/x\", not /dev/null"),
            "{e}"
        );
        // A regular file.
        let mut f = good_boot_files();
        f.generators[2].1 = inode("regular", 5, 0, None);
        let e = check_boot_speed(&f).unwrap_err();
        assert!(
            e.contains(
                "systemd-hibernate-resume-generator is a regular file, not a link to /dev/null"
            ),
            "{e}"
        );
        // A link whose target was not read.
        let mut f = good_boot_files();
        f.generators[3].1 = inode("symlink", 5, 0, None);
        assert!(
            check_boot_speed(&f)
                .unwrap_err()
                .contains("could not be read")
        );
    }

    #[test]
    fn a_unit_not_masked_is_named() {
        let mut f = good_boot_files();
        f.units.retain(|(n, _)| n != "systemd-pstore.service");
        let e = check_boot_speed(&f).unwrap_err();
        assert!(
            e.contains("the image has no /etc/systemd/system/systemd-pstore.service link to /dev/null: systemd-pstore.service is not masked"),
            "{e}"
        );
        let mut f = good_boot_files();
        f.units[0].1 = inode(
            "symlink",
            5,
            0,
            Some("/usr/lib/systemd/system/e2scrub_reap.service"),
        );
        let e = check_boot_speed(&f).unwrap_err();
        assert!(
            e.contains("/etc/systemd/system/e2scrub_reap.service links to"),
            "{e}"
        );
    }

    #[test]
    fn update_stamps_missing_or_not_regular_are_named() {
        let mut f = good_boot_files();
        f.stamps.retain(|(p, ..)| p != "/var/.updated");
        let e = check_boot_speed(&f).unwrap_err();
        assert!(
            e.contains("the image has no /var/.updated: systemd would count every boot")
                && e.contains("ConditionNeedsUpdate=/var"),
            "{e}"
        );
        assert!(!e.contains("/etc/.updated"), "{e}");
        let mut f = good_boot_files();
        f.stamps[0].1 = None;
        assert!(
            check_boot_speed(&f)
                .unwrap_err()
                .contains("no /etc/.updated")
        );
        let mut f = good_boot_files();
        f.stamps[0].1 = inode("symlink", 1000, 0, Some("/run/x"));
        let e = check_boot_speed(&f).unwrap_err();
        assert!(
            e.contains("/etc/.updated is a symlink file, not the regular file"),
            "{e}"
        );
        let mut f = good_boot_files();
        f.usr = None;
        assert!(check_boot_speed(&f).unwrap_err().contains("no /usr"));
    }

    #[test]
    fn a_stamp_older_than_usr_is_refused() {
        let mut f = good_boot_files();
        f.usr = inode("directory", 1001, 0, None);
        let e = check_boot_speed(&f).unwrap_err();
        assert!(
            e.contains(
                "/etc/.updated (mtime 1000.000000000) is older than /usr (mtime 1001.000000000)"
            ) && e.contains("/var/.updated (mtime 1000"),
            "{e}"
        );
        // Newer than /usr is fine (systemd asks only whether /usr is newer).
        let mut f = good_boot_files();
        f.usr = inode("directory", 999, 999_999_999, None);
        check_boot_speed(&f).unwrap();
    }

    #[test]
    fn needs_update_follows_systemd() {
        let t = |sec, nsec| Mtime { sec, nsec };
        assert!(!needs_update(t(10, 0), t(10, 0), ""));
        assert!(needs_update(t(11, 0), t(10, 999), ""));
        assert!(!needs_update(t(10, 5), t(11, 0), ""));
        // Both with nanoseconds: those decide.
        assert!(needs_update(t(10, 6), t(10, 5), ""));
        assert!(!needs_update(t(10, 5), t(10, 5), ""));
        // /usr with nanoseconds, the stamp without: its TIMESTAMP_NSEC decides, none is old.
        assert!(!needs_update(
            t(10, 5),
            t(10, 0),
            "TIMESTAMP_NSEC=10000000005\n"
        ));
        assert!(needs_update(
            t(10, 6),
            t(10, 0),
            "TIMESTAMP_NSEC=10000000005\n"
        ));
        assert!(needs_update(t(10, 5), t(10, 0), "# no timestamp\n"));
        assert!(needs_update(t(10, 5), t(10, 0), "TIMESTAMP_NSEC=garbage\n"));
    }

    #[test]
    fn debugfs_inode() {
        let stat = "Inode: 19   Type: directory    Mode:  0755   Flags: 0x80000\n\
                    User:     0   Group:     0   Project:     0   Size: 1024\n \
                    ctime: 0x6b0f4790:00000000 -- Tue Dec  1 22:17:52 2026\n \
                    mtime: 0x6b0d4920:075bcd15 -- Mon Nov 30 10:00:00 2026\n";
        let i = parse_debugfs_inode(stat).unwrap();
        assert_eq!(i.kind, "directory");
        // 0x075bcd15 = 123456789: nanoseconds 30864197, epoch bits 1 (after 2038).
        assert_eq!(
            i.mtime,
            Mtime {
                sec: 0x6b0d4920 + (1 << 32),
                nsec: 0x075bcd15 >> 2
            }
        );
        assert_eq!(i.link, None);
        let link = "Inode: 18   Type: symlink    Mode:  0777   Flags: 0x0\n \
                    mtime: 0x6b0f4790 -- Tue Dec  1 22:17:52 2026\n\
                    Fast link dest: \"/dev/null\"\n";
        let i = parse_debugfs_inode(link).unwrap();
        assert_eq!(
            (i.kind.as_str(), i.link.as_deref()),
            ("symlink", Some("/dev/null"))
        );
        assert_eq!(
            i.mtime,
            Mtime {
                sec: 0x6b0f4790,
                nsec: 0
            }
        );
        assert_eq!(
            parse_debugfs_inode("/x: File not found by ext2_lookup"),
            None
        );
    }
}
