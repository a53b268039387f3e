//! Verification of a built image from the image file, and the manifest written beside it.

use std::path::Path;
use std::process::Command;

use serde::Serialize;

use crate::artifact::{self, ImageFile};
use crate::config::Target;
use crate::plan;
use crate::update;
use crate::verify::{
    self, AccessCheck, AccessFiles, CmdlineCheck, FirmwareCheck, InitramfsCheck, Package, Partition,
};

/// What the image must show.
#[derive(Debug, Clone)]
pub struct Expect {
    pub target: Target,
    pub overlay: bool,
    pub hostname_prefix: Option<String>,
    /// The version the workspace's packages (plan::PFX_PACKAGES) must be installed at.
    pub pfx_version: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Binary {
    pub path: String,
    pub machine: String,
    pub bytes: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct UnitState {
    pub unit: String,
    pub file: String,
    pub present: bool,
    pub enabled_link: String,
    pub enabled: bool,
}

/// The data partition and everything that mounts it, as read back.
#[derive(Debug, Clone, Serialize)]
pub struct DataCheck {
    pub partition: Partition,
    pub fs: verify::data::DataFs,
    pub fstab: verify::data::FstabEntry,
    /// `overlayroot=` on the command line (recurse=0 checked); empty without the overlay.
    pub overlayroot: String,
    pub journald: Vec<(String, String)>,
    pub grow_script: String,
    pub player_after_mount: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct ImageManifest {
    pub image: String,
    pub sha256: String,
    pub size_bytes: u64,
    pub target: String,
    pub partitions: Vec<Partition>,
    pub kernel_version: String,
    pub boot_files: Vec<String>,
    pub cmdline: CmdlineCheck,
    pub initramfs_file: String,
    pub initramfs: InitramfsCheck,
    pub firmware: Option<FirmwareCheck>,
    pub overlay_configured: bool,
    pub overlayroot_local_conf: String,
    pub hostname: String,
    pub player: Binary,
    pub agent: Option<Binary>,
    pub units: Vec<UnitState>,
    /// Who may log in, what the fleet key runs, the sudoers line (read back, visudo-checked).
    pub access: AccessCheck,
    /// The data partition: table entry, file system, fstab line, overlay, journal.
    pub data: DataCheck,
    pub packages: Vec<Package>,
    /// The workspace's packages as dpkg installed them, files checked against md5sums.
    pub pfx_packages: Vec<verify::PfxPackage>,
    /// The masked generators and units and the update stamps (what only a boot would miss).
    pub boot_speed: verify::BootSpeedCheck,
    /// The A/B parts: slots, boot script, boot environment, RAUC config, certificate, the
    /// slot's kernel, initramfs and command line (docs/update.md).
    pub update: UpdateCheck,
    /// Filled by the builder (not part of what is read back).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub build: Option<serde_json::Value>,
}

fn sha256_file(path: &Path) -> Result<String, String> {
    // sha256sum: native speed on a 2 GiB file whatever the builder's own build profile.
    let out = Command::new("sha256sum")
        .arg(path)
        .output()
        .map_err(|e| format!("cannot run sha256sum: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "sha256sum {}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .map(str::to_string)
        .ok_or_else(|| "sha256sum printed nothing".into())
}

fn binary(img: &ImageFile, path: &str, want: &str, errors: &mut Vec<String>) -> Option<Binary> {
    match img.root_read(path) {
        Ok(bytes) => {
            let machine = verify::elf_machine(&bytes).unwrap_or("not ELF").to_string();
            if machine != want {
                errors.push(format!("{path} is {machine}, expected {want}"));
            }
            Some(Binary {
                path: path.into(),
                machine,
                bytes: bytes.len(),
            })
        }
        Err(e) => {
            errors.push(e.message);
            None
        }
    }
}

/// The marker a test (debug) build of pfx-agent carries (fleet/src/dispatch.rs,
/// TEST_BUILD_MARKER: the same bytes).
const AGENT_TEST_MARKER: &[u8] = b"PFX-AGENT-TEST-BACKENDS-ENABLED";

/// `visudo -c -f` on a copy of the file read back from the image.
fn visudo_check(text: &str, scratch: &Path) -> Result<String, String> {
    use std::os::unix::fs::PermissionsExt;
    let tmp = scratch.join("sudoers.check");
    let _ = std::fs::remove_file(&tmp);
    std::fs::write(&tmp, text).map_err(|e| format!("{}: {e}", tmp.display()))?;
    let _ = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o440));
    let out = Command::new("visudo")
        .arg("-c")
        .arg("-f")
        .arg(&tmp)
        .output()
        .map_err(|e| format!("cannot run visudo (apt-get install sudo): {e}"));
    let _ = std::fs::remove_file(&tmp);
    let out = out?;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
    .replace(&tmp.display().to_string(), plan::SUDOERS_FILE)
    .trim()
    .to_string();
    if out.status.success() {
        Ok(said)
    } else {
        Err(format!("visudo -c refuses {}: {said}", plan::SUDOERS_FILE))
    }
}

/// Everything sshd, the accounts and sudo will go by, read from the image file.
fn access_files(img: &ImageFile, agent: Option<&[u8]>) -> AccessFiles {
    let text = |p: &str| {
        img.root_read(p)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    };
    let read_dir = |dir: &str| -> Vec<(String, String)> {
        let mut names = img.root_ls(dir).unwrap_or_default();
        names.sort();
        names
            .into_iter()
            .map(|n| {
                let t = text(&format!("{dir}/{n}"));
                (n, t)
            })
            .collect()
    };
    let mut sshd_configs: Vec<(String, String)> = read_dir("/etc/ssh/sshd_config.d")
        .into_iter()
        .filter(|(n, _)| n.ends_with(".conf"))
        .map(|(n, t)| (format!("/etc/ssh/sshd_config.d/{n}"), t))
        .collect();
    sshd_configs.push(("/etc/ssh/sshd_config".into(), text("/etc/ssh/sshd_config")));
    let root_key_files = ["/root/.ssh/authorized_keys", "/root/.ssh/authorized_keys2"]
        .into_iter()
        .filter(|p| img.root_read(p).is_ok())
        .map(str::to_string)
        .collect();
    let sudoers_d = read_dir("/etc/sudoers.d")
        .into_iter()
        .map(|(n, t)| {
            let stat = img.root_stat(&format!("/etc/sudoers.d/{n}")).ok().flatten();
            (n, t, stat)
        })
        .collect();
    let agent_config = img.root_read(plan::AGENT_CONFIG_FILE).ok().map(|b| {
        (
            String::from_utf8_lossy(&b).into_owned(),
            img.root_stat(plan::AGENT_CONFIG_FILE).ok().flatten(),
        )
    });
    AccessFiles {
        sshd_configs,
        passwd: text("/etc/passwd"),
        group: text("/etc/group"),
        shadow: text("/etc/shadow"),
        key_files: read_dir(plan::AUTHORIZED_KEYS_DIR),
        root_key_files,
        sudoers: text("/etc/sudoers"),
        sudoers_d,
        agent_config,
        agent_test_build: agent.is_some_and(|b| {
            b.windows(AGENT_TEST_MARKER.len())
                .any(|w| w == AGENT_TEST_MARKER)
        }),
    }
}

/// journald's files in the order it reads them: journald.conf, then the drop-ins of
/// /usr/lib and /etc sorted by name (an /etc file replaces a /usr/lib one of the same name).
fn journald_files(img: &ImageFile) -> Vec<(String, String)> {
    let text = |p: &str| {
        img.root_read(p)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    };
    let mut dropins: Vec<(String, String)> = Vec::new();
    for dir in [
        "/usr/lib/systemd/journald.conf.d",
        "/etc/systemd/journald.conf.d",
    ] {
        for n in img.root_ls(dir).unwrap_or_default() {
            if n.ends_with(".conf") {
                dropins.retain(|(x, _)| *x != n);
                dropins.push((n.clone(), format!("{dir}/{n}")));
            }
        }
    }
    dropins.sort();
    let mut files = vec![(
        "/etc/systemd/journald.conf".to_string(),
        text("/etc/systemd/journald.conf"),
    )];
    files.extend(dropins.into_iter().map(|(_, p)| {
        let t = text(&p);
        (p, t)
    }));
    files
}

/// The data partition from the image file, as strictly as the root: the table, the file
/// system, the fstab line, the overlay's recursion, the journal, the player's ordering.
fn check_data(
    img: &ImageFile,
    cmdline: &CmdlineCheck,
    expect: &Expect,
    errors: &mut Vec<String>,
) -> Option<DataCheck> {
    use verify::data;
    let n = errors.len();
    let text = |p: &str| {
        img.root_read(p)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    };
    let size = std::fs::metadata(&img.path).map(|m| m.len()).unwrap_or(0);
    let partition = data::check_partition_table(&img.partitions, size)
        .map_err(|e| errors.push(format!("partition table: {e}")))
        .ok();
    let fs = img
        .data_files()
        .map_err(|e| e.to_string())
        .and_then(|f| data::check_data_fs(&f).map_err(|e| e.to_string()))
        .map_err(|e| errors.push(e))
        .ok();
    let fstab = text("/etc/fstab")
        .map_err(|e| e.message)
        .and_then(|t| data::check_fstab(&t).map_err(|e| e.to_string()))
        .map_err(|e| errors.push(e))
        .ok();
    let overlayroot = cmdline.overlayroot.clone().unwrap_or_default();
    if expect.overlay
        && let Err(e) = data::check_overlay_recurse(&overlayroot)
    {
        errors.push(format!("cmdline.txt: {e}"));
    }
    let journald = data::check_journald(&journald_files(img))
        .map_err(|e| errors.push(e.to_string()))
        .ok();
    let player_after_mount = text("/usr/lib/systemd/system/pfx-player.service")
        .map_err(|e| e.message)
        .and_then(|t| data::check_player_unit(&t).map_err(|e| e.to_string()))
        .map_err(|e| errors.push(e))
        .is_ok();
    let grow_script = "/usr/lib/pfx/pfx-data-grow";
    match img.root_stat(grow_script) {
        Ok(Some((0o755, 0))) => {}
        Ok(st) => errors.push(format!(
            "{grow_script} is {st:?}, expected mode 0755 owned by root"
        )),
        Err(e) => errors.push(e.message),
    }
    match img.root_stat(plan::DATA_MOUNT) {
        Ok(Some(_)) => {}
        _ => errors.push(format!("the root has no mount point {}", plan::DATA_MOUNT)),
    }
    if errors.len() > n {
        return None;
    }
    Some(DataCheck {
        partition: partition?,
        fs: fs?,
        fstab: fstab?,
        overlayroot,
        journald: journald?,
        grow_script: grow_script.into(),
        player_after_mount,
    })
}

/// What the boot-speed checks need from the root: the masks' links, /usr, the update stamps.
pub(crate) fn boot_speed_files(img: &ImageFile) -> Result<verify::BootSpeedFiles, String> {
    let inodes = |names: &[&str], path: fn(&str) -> String| {
        names
            .iter()
            .map(|n| Ok((n.to_string(), img.root_inode(&path(n))?)))
            .collect::<Result<Vec<_>, artifact::ReadError>>()
    };
    let mut stamps = Vec::new();
    for &p in verify::UPDATE_STAMPS {
        let inode = img.root_inode(p).map_err(|e| e.to_string())?;
        let text = match &inode {
            Some(i) if i.kind == "regular" => img
                .root_read(p)
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .map_err(|e| e.to_string())?,
            _ => String::new(),
        };
        stamps.push((p.to_string(), inode, text));
    }
    Ok(verify::BootSpeedFiles {
        generators: inodes(plan::MASKED_GENERATORS, verify::generator_mask_path)
            .map_err(|e| e.to_string())?,
        units: inodes(plan::MASKED_UNITS, verify::unit_mask_path).map_err(|e| e.to_string())?,
        usr: img.root_inode("/usr").map_err(|e| e.to_string())?,
        stamps,
    })
}

/// MD5 of some bytes, by md5sum (as dpkg's md5sums were made).
#[derive(Debug, Clone, Serialize)]
pub struct UpdateCheck {
    /// RAUC's compatible: a bundle for another target is refused.
    pub compatible: String,
    /// `/etc/pfx/image-version`.
    pub version: String,
    /// Whether the operator's update CA certificate is in the root (RAUC's keyring). Without
    /// it the unit refuses every bundle.
    pub keyring: bool,
    pub slot_a: Partition,
    pub slot_b: Partition,
    pub boot_script: String,
    pub boot_env: String,
    /// The command line the boot script gives slot A.
    pub slot_cmdline: String,
    pub slot_kernel: String,
    pub slot_initrd: String,
    /// u-boot.bin on a Pi's boot partition (bytes).
    pub uboot_bytes: Option<usize>,
}

/// The A/B parts, read back from the image file.
fn check_update(
    img: &ImageFile,
    expect: &Expect,
    kver: &str,
    fat_initrd: &str,
    errors: &mut Vec<String>,
) -> Option<UpdateCheck> {
    let mut bad = |e: String| errors.push(format!("A/B update: {e}"));
    let Some(slot_b) = img.root_b else {
        bad("no root slot B: the image has the single-root layout; rebuild it".into());
        return None;
    };
    let (boot_script, boot_env) = check_boot_script_and_env(img, &mut bad);
    let (keyring, version) = check_rauc_config(img, expect, &mut bad);
    check_unit_tools(img, &mut bad);
    let slot_cmdline = check_slot_cmdline(img, expect, &mut bad);
    let slot_kernel = slot_link(
        img,
        update::SLOT_KERNEL,
        format!("vmlinuz-{kver}"),
        &mut bad,
    );
    let slot_initrd = slot_link(
        img,
        update::SLOT_INITRD,
        format!("initrd.img-{kver}"),
        &mut bad,
    );
    // U-Boot loads the slot's initramfs; the FAT's is the one the initramfs checks read.
    if let (Ok(slot), Ok(fat)) = (
        img.root_read(&format!("/boot/initrd.img-{kver}")),
        img.fat_read(fat_initrd),
    ) && slot != fat
    {
        bad(format!(
            "the slot's /boot/initrd.img-{kver} differs from the boot partition's {fat_initrd}: the checked initramfs is not the one U-Boot boots"
        ));
    }
    let uboot_bytes = if expect.target.uses_raspi_firmware() {
        match img.fat_read("u-boot.bin") {
            Ok(b) => Some(b.len()),
            Err(e) => {
                bad(e.message);
                None
            }
        }
    } else {
        None
    };
    Some(UpdateCheck {
        compatible: update::compatible(expect.target),
        version,
        keyring,
        slot_a: img.root,
        slot_b,
        boot_script,
        boot_env,
        slot_cmdline,
        slot_kernel,
        slot_initrd,
        uboot_bytes,
    })
}

/// Bytes read from the image as text (file contents are shown, never trusted as UTF-8).
fn lossy(b: Vec<u8>) -> String {
    String::from_utf8_lossy(&b).into_owned()
}

/// U-Boot's compiled script and the two copies of its environment on the FAT; empty
/// strings for what failed.
fn check_boot_script_and_env(img: &ImageFile, bad: &mut impl FnMut(String)) -> (String, String) {
    let boot_script = img
        .fat_read(update::BOOT_SCRIPT)
        .map_err(|e| e.message)
        .and_then(|b| update::check_boot_script(&b))
        .map_err(&mut *bad)
        .unwrap_or_default();
    let env = update::ENV_FILES.map(|n| img.fat_read(n).map_err(|e| e.message));
    let boot_env = match env {
        [Ok(a), Ok(b)] => update::check_env_pair(&a, &b)
            .map_err(&mut *bad)
            .unwrap_or_default(),
        [a, b] => {
            for e in [a.err(), b.err()].into_iter().flatten() {
                bad(e);
            }
            String::new()
        }
    };
    (boot_script, boot_env)
}

/// RAUC's system.conf for this target, the update CA (whether there is one) and the
/// image's version.
fn check_rauc_config(
    img: &ImageFile,
    expect: &Expect,
    bad: &mut impl FnMut(String),
) -> (bool, String) {
    match img.root_read(update::SYSTEM_CONF).map(lossy) {
        Ok(t) => {
            if let Err(e) = update::check_system_conf(&t, expect.target) {
                bad(e);
            }
        }
        Err(e) => bad(e.message),
    }
    let keyring = match img.root_read(update::KEYRING) {
        Ok(b) => {
            if let Err(e) = update::check_cert_pem(&lossy(b)) {
                bad(format!("{}: {e}", update::KEYRING));
            }
            true
        }
        Err(_) => false,
    };
    let version = img
        .root_read(update::VERSION_FILE)
        .map(lossy)
        .map_err(|e| e.message)
        .and_then(|v| {
            let v = v.trim().to_string();
            update::parse_version(&v)
                .map(|_| v.clone())
                .map_err(|e| format!("{}: {v:?}: {e}", update::VERSION_FILE))
        })
        .map_err(&mut *bad)
        .unwrap_or_default();
    (keyring, version)
}

/// The tools a unit reads and installs bundles with.
fn check_unit_tools(img: &ImageFile, bad: &mut impl FnMut(String)) {
    for tool in update::UNIT_TOOLS {
        match img.root_stat(tool) {
            Ok(Some(_)) => {}
            Ok(None) => bad(format!(
                "{tool} is missing from the root: the unit could not read or install a bundle (the image's package list lacks it)"
            )),
            Err(e) => bad(e.message),
        }
    }
}

/// The command line the boot script gives slot A, checked as the FAT's is; empty when
/// it cannot be made.
fn check_slot_cmdline(img: &ImageFile, expect: &Expect, bad: &mut impl FnMut(String)) -> String {
    match img.root_read(update::SLOT_CMDLINE).map(lossy) {
        Ok(t) => match update::slot_cmdline(&t, crate::disk::PART_ROOT_A) {
            Ok(line) => {
                if let Err(e) = verify::check_cmdline(&line, expect.overlay) {
                    bad(format!("{}: {e}", update::SLOT_CMDLINE));
                }
                line
            }
            Err(e) => {
                bad(format!("{}: {e}", update::SLOT_CMDLINE));
                String::new()
            }
        },
        Err(e) => {
            bad(e.message);
            String::new()
        }
    }
}

/// The slot's link `path`, which must point at `want` (relative or under /boot); its
/// target, or empty when it does not.
fn slot_link(img: &ImageFile, path: &str, want: String, bad: &mut impl FnMut(String)) -> String {
    match img.root_symlink(path) {
        Ok(Some(t)) if t == want || t == format!("/boot/{want}") => t,
        Ok(other) => {
            bad(format!("{path} is {other:?}, expected a link to {want}"));
            String::new()
        }
        Err(e) => {
            bad(e.to_string());
            String::new()
        }
    }
}

fn md5_hex(bytes: &[u8]) -> Result<String, String> {
    use std::io::Write;
    let mut child = Command::new("md5sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run md5sum: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(bytes)
            .map_err(|e| format!("md5sum input: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("md5sum: {e}"))?;
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .filter(|s| out.status.success() && s.len() == 32)
        .map(str::to_string)
        .ok_or_else(|| "md5sum printed no sum".into())
}

/// pfx-player and pfx-agent as dpkg installed them: status, version, and the installed
/// files (the binaries among them) against the package's md5sums, read from the image.
fn check_pfx_packages(
    img: &ImageFile,
    expect: &Expect,
    errors: &mut Vec<String>,
) -> Vec<verify::PfxPackage> {
    let status = img
        .root_read("/var/lib/dpkg/status")
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let md5sums: Vec<(String, String)> = plan::PFX_PACKAGES
        .iter()
        .filter_map(|p| {
            img.root_read(&format!("/var/lib/dpkg/info/{p}.md5sums"))
                .ok()
                .map(|b| (p.to_string(), String::from_utf8_lossy(&b).into_owned()))
        })
        .collect();
    // The path as it lies on the merged-/usr root, else as dpkg wrote it.
    let actual = |path: &str| -> Option<String> {
        let bytes = img
            .root_read(&plan::merged_usr(path))
            .or_else(|_| img.root_read(path))
            .ok()?;
        md5_hex(&bytes).ok()
    };
    match verify::check_pfx_packages(
        &status,
        plan::PFX_PACKAGES,
        &expect.pfx_version,
        expect.target.arch(),
        &md5sums,
        &actual,
    ) {
        Ok(p) => p,
        Err(e) => {
            errors.push(format!("pfx packages: {e}"));
            Vec::new()
        }
    }
}

/// Reads the image file back and checks everything; one error listing every failure.
pub fn verify_image(path: &Path, expect: &Expect, scratch: &Path) -> Result<ImageManifest, String> {
    let img = ImageFile::open(path).map_err(|e| e.to_string())?;
    let mut errors: Vec<String> = Vec::new();

    let boot_files = img.fat_files().map_err(|e| e.to_string())?;
    let kernel_version = img
        .root_ls("/usr/lib/modules")
        .map_err(|e| e.to_string())?
        .into_iter()
        .max()
        .ok_or("no kernel modules directory in the root (/usr/lib/modules is empty)")?;

    let (cmdline, cmdline_txt) = check_fat_cmdline(&img, expect, &mut errors);
    if expect.target == Target::Rpi4Arm64
        && let Err(e) = verify::check_pi4_cmdline(&cmdline_txt)
    {
        errors.push(format!("cmdline.txt: {e}"));
    }

    // The initramfs the firmware loads: the one config.txt names, else initrd.img (VM).
    // The initramfs checked is the FAT's copy (raspi-firmware's hook puts it there on a Pi;
    // the VM's direct boot reads it), and the slot's own, which U-Boot loads, must be the
    // same bytes (checked with the A/B parts below).
    let initramfs_file = if expect.target.uses_raspi_firmware() {
        format!("initrd.img-{kernel_version}")
    } else {
        "initrd.img".to_string()
    };
    let firmware = if expect.target.uses_raspi_firmware() {
        check_pi_boot_partition(&img, &boot_files, &mut errors)
    } else {
        None
    };
    let initramfs = check_fat_initramfs(&img, &initramfs_file, scratch, &mut errors);

    let local_conf = img
        .root_read("/etc/overlayroot.local.conf")
        .map(lossy)
        .unwrap_or_default();
    let hostname = check_hostname(&img, expect, &mut errors);

    let (player, agent, agent_bytes) = check_binaries(&img, expect, &mut errors);
    let access = check_logins(
        &img,
        agent_bytes.as_deref(),
        agent.is_some(),
        scratch,
        &mut errors,
    );
    let units = check_units(&img, &mut errors)?;

    let update = check_update(&img, expect, &kernel_version, &initramfs_file, &mut errors);
    let data = check_data(&img, &cmdline, expect, &mut errors);
    let boot_speed = boot_speed_files(&img)
        .and_then(|f| verify::check_boot_speed(&f).map_err(|e| e.to_string()))
        .map_err(|e| errors.push(format!("boot speed: {e}")))
        .ok();

    let packages = check_packages(&img, &mut errors);
    let pfx_packages = check_pfx_packages(&img, expect, &mut errors);
    if !errors.is_empty() {
        return Err(format!(
            "{}: verification failed:\n  - {}",
            path.display(),
            errors.join("\n  - ")
        ));
    }
    let size_bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    Ok(ImageManifest {
        image: path.display().to_string(),
        sha256: sha256_file(path)?,
        size_bytes,
        target: expect.target.name().into(),
        partitions: img.partitions.clone(),
        kernel_version,
        boot_files,
        overlay_configured: expect.overlay && cmdline.overlayroot.is_some(),
        cmdline,
        initramfs_file,
        initramfs,
        firmware,
        overlayroot_local_conf: local_conf,
        hostname,
        player: player.ok_or("no player")?,
        agent,
        units,
        access: access.ok_or("no access check")?,
        data: data.ok_or("no data partition check")?,
        packages,
        pfx_packages,
        boot_speed: boot_speed.ok_or("no boot-speed check")?,
        update: update.ok_or("no A/B update check")?,
        build: None,
    })
}

/// /etc/hostname, which must be the expected prefix when one is given.
fn check_hostname(img: &ImageFile, expect: &Expect, errors: &mut Vec<String>) -> String {
    let hostname = img
        .root_read("/etc/hostname")
        .map(lossy)
        .unwrap_or_default()
        .trim()
        .to_string();
    if let Some(p) = &expect.hostname_prefix
        && &hostname != p
    {
        errors.push(format!("/etc/hostname is {hostname:?}, expected {p:?}"));
    }
    hostname
}

/// The player and, when the image has one, the agent, built for the target's machine;
/// and the agent's bytes (the access checks look for a test build's marker in them).
fn check_binaries(
    img: &ImageFile,
    expect: &Expect,
    errors: &mut Vec<String>,
) -> (Option<Binary>, Option<Binary>, Option<Vec<u8>>) {
    let want = verify::expected_machine(expect.target.arch());
    let player = binary(img, "/usr/bin/pfx-player", want, errors);
    let agent_bytes = img.root_read("/usr/bin/pfx-agent").ok();
    let agent = match &agent_bytes {
        Some(_) => binary(img, "/usr/bin/pfx-agent", want, errors),
        None => None,
    };
    (player, agent, agent_bytes)
}

/// The command line the firmware (or the VM launcher) passes: cmdline.txt on the FAT,
/// checked, and its text (for the Pi 4's own check).
fn check_fat_cmdline(
    img: &ImageFile,
    expect: &Expect,
    errors: &mut Vec<String>,
) -> (CmdlineCheck, String) {
    let cmdline_txt = img.fat_read("cmdline.txt").map(lossy).unwrap_or_else(|e| {
        errors.push(e.message);
        String::new()
    });
    let cmdline = match verify::check_cmdline(&cmdline_txt, expect.overlay) {
        Ok(c) => c,
        Err(e) => {
            errors.push(format!("cmdline.txt: {e}"));
            CmdlineCheck {
                cmdline: cmdline_txt.trim().into(),
                overlayroot: None,
                root: None,
            }
        }
    };
    (cmdline, cmdline_txt)
}

/// A Pi's boot partition: the firmware files config.txt needs, and the overlay that
/// drops U-Boot's boot delay.
fn check_pi_boot_partition(
    img: &ImageFile,
    boot_files: &[String],
    errors: &mut Vec<String>,
) -> Option<FirmwareCheck> {
    let mut firmware = None;
    match img.fat_read("config.txt").map(lossy) {
        Ok(cfg) => match verify::check_pi_firmware(boot_files, &cfg) {
            Ok(f) => firmware = Some(f),
            Err(e) => errors.push(format!("boot partition: {e}")),
        },
        Err(e) => errors.push(e.message),
    }
    if let Err(e) = img
        .fat_read(update::BOOTDELAY_OVERLAY)
        .map_err(|e| e.message)
        .and_then(|b| update::check_bootdelay_overlay(&b))
    {
        errors.push(format!("boot partition: {e}"));
    }
    firmware
}

/// The FAT's initramfs `file`, unpacked in `scratch` and checked; an empty check when
/// it fails.
fn check_fat_initramfs(
    img: &ImageFile,
    file: &str,
    scratch: &Path,
    errors: &mut Vec<String>,
) -> InitramfsCheck {
    match img.fat_read(file).map_err(|e| e.message).and_then(|data| {
        let names = artifact::initramfs_names(&data, scratch)?;
        verify::check_initramfs(&names).map_err(|e| e.to_string())
    }) {
        Ok(i) => i,
        Err(e) => {
            errors.push(format!("initramfs {file}: {e}"));
            InitramfsCheck {
                entries: 0,
                busybox: String::new(),
                overlayroot_script: String::new(),
                overlay_module: String::new(),
                systemd_tags_rule: String::new(),
            }
        }
    }
}

/// Who may log in and what the fleet key may run, with the sudoers grant put through
/// visudo; fleet keys need the agent (`has_agent`: its binary is in the image).
fn check_logins(
    img: &ImageFile,
    agent_bytes: Option<&[u8]>,
    has_agent: bool,
    scratch: &Path,
    errors: &mut Vec<String>,
) -> Option<AccessCheck> {
    match verify::check_access(&access_files(img, agent_bytes)) {
        Ok(mut a) => {
            if a.fleet_keys > 0 && !has_agent {
                errors.push("fleet keys are installed but /usr/bin/pfx-agent is missing".into());
            }
            let grant = img
                .root_read(plan::SUDOERS_FILE)
                .map(lossy)
                .unwrap_or_default();
            match visudo_check(&grant, scratch) {
                Ok(said) => a.visudo = said,
                Err(e) => errors.push(e),
            }
            Some(a)
        }
        Err(e) => {
            errors.push(format!("access: {e}"));
            None
        }
    }
}

/// Every unit the plan enables: its file present, its link in place. A link that cannot
/// be read stops the verify.
fn check_units(img: &ImageFile, errors: &mut Vec<String>) -> Result<Vec<UnitState>, String> {
    let mut units = Vec::new();
    for (wants, unit) in plan::expected_enable_links() {
        let file_name = match unit.split_once('@') {
            Some((stem, rest)) => {
                format!("{stem}@{}", &rest[rest.find('.').unwrap_or(rest.len())..])
            }
            None => unit.clone(),
        };
        let file = format!("/usr/lib/systemd/system/{file_name}");
        let present = img.root_read(&file).map(|b| !b.is_empty()).unwrap_or(false);
        let link = format!("/etc/systemd/system/{wants}/{unit}");
        let target = img.root_symlink(&link).map_err(|e| e.to_string())?;
        let enabled = target
            .as_deref()
            .is_some_and(|t| t.ends_with(&format!("/{file_name}")));
        if !present {
            errors.push(format!("unit file {file} missing"));
        }
        if !enabled {
            errors.push(format!("{unit} not enabled: {link} is {target:?}"));
        }
        units.push(UnitState {
            unit,
            file,
            present,
            enabled_link: link,
            enabled,
        });
    }
    Ok(units)
}

/// dpkg's list of installed packages, with the ones a unit cannot do without and an
/// OpenSSH new enough for the fleet's key exchange.
fn check_packages(img: &ImageFile, errors: &mut Vec<String>) -> Vec<Package> {
    let packages = verify::parse_dpkg_status(
        &img.root_read("/var/lib/dpkg/status")
            .map(lossy)
            .unwrap_or_default(),
    );
    for need in [
        "busybox",
        "overlayroot",
        "openssh-server",
        "ethtool",
        "systemd",
        "sudo",
    ] {
        if !packages.iter().any(|p| p.name == need) {
            errors.push(format!("package {need} is not installed in the image"));
        }
    }
    if let Some(ssh) = packages.iter().find(|p| p.name == "openssh-server")
        && !verify::openssh_has_mlkem(&ssh.version)
    {
        errors.push(format!(
            "openssh-server {} predates OpenSSH 9.9: the fleet's post-quantum key exchange would be sntrup761x25519 at about five times the CPU per unit (on bookworm the builder takes OpenSSH from bookworm-backports; rebuild the image)",
            ssh.version
        ));
    }
    packages
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::artifact::tests::ok;

    /// A root as the build's customize step leaves it for the boot-speed checks: the masks
    /// as links to /dev/null, then the stamps with /usr's mtime (as write_update_stamps).
    fn build_like_root(root: &Path) {
        use std::os::unix::fs::symlink;
        let gens = root.join("etc/systemd/system-generators");
        std::fs::create_dir_all(&gens).unwrap();
        std::fs::create_dir_all(root.join("etc/systemd/system")).unwrap();
        std::fs::create_dir_all(root.join("usr/lib/systemd")).unwrap();
        std::fs::create_dir_all(root.join("var")).unwrap();
        for g in plan::MASKED_GENERATORS {
            symlink("/dev/null", gens.join(g)).unwrap();
        }
        for u in plan::MASKED_UNITS {
            symlink("/dev/null", root.join("etc/systemd/system").join(u)).unwrap();
        }
        let mtime = std::fs::metadata(root.join("usr"))
            .unwrap()
            .modified()
            .unwrap();
        for dir in ["etc", "var"] {
            let p = root.join(dir).join(".updated");
            std::fs::write(&p, "TIMESTAMP_NSEC=0\n").unwrap();
            std::fs::File::options()
                .write(true)
                .open(&p)
                .unwrap()
                .set_modified(mtime)
                .unwrap();
        }
    }

    /// The boot-speed checks on a real image file: a root made by mke2fs -d as the build
    /// makes it, read back through debugfs, then each fault put in with debugfs -w.
    #[test]
    fn boot_speed_read_back_from_a_real_image_file() {
        let d = tempfile::tempdir().unwrap();
        let Some((l, img)) = crate::artifact::tests::partitioned_image(d.path()) else {
            return;
        };
        let root = d.path().join("root");
        build_like_root(&root);
        let fs = d.path().join("root.ext4");
        std::fs::File::create(&fs)
            .unwrap()
            .set_len(16 << 20)
            .unwrap();
        ok(Command::new("mke2fs")
            .args(["-q", "-F", "-t", "ext4", "-E", "root_owner=0:0", "-d"])
            .arg(&root)
            .arg(&fs));
        let spec = format!("{}?offset={}", img.display(), l.root_start * 512);
        let write = |fs_cmd: &str| {
            ok(Command::new("dd")
                .arg(format!("if={}", fs.display()))
                .arg(format!("of={}", img.display()))
                .args(["bs=1M", "conv=notrunc,sparse", "status=none"])
                .arg(format!("seek={}", l.root_start * 512))
                .arg("oflag=seek_bytes"));
            if !fs_cmd.is_empty() {
                ok(Command::new("debugfs")
                    .args(["-w", "-f", "-", &spec])
                    .stdin(
                        std::fs::File::open({
                            let p = d.path().join("cmds");
                            std::fs::write(&p, fs_cmd).unwrap();
                            p
                        })
                        .unwrap(),
                    ));
            }
        };
        let check = || {
            let f = ImageFile::open(&img).unwrap();
            boot_speed_files(&f)
                .and_then(|f| verify::check_boot_speed(&f).map_err(|e| e.to_string()))
        };

        write("");
        let c = check().unwrap();
        assert_eq!(c.masked_generators, plan::MASKED_GENERATORS);
        assert_eq!(c.masked_units, plan::MASKED_UNITS);
        assert_eq!(c.update_stamps.len(), 2);
        assert_eq!(c.update_stamps[0].mtime, c.usr_mtime);

        // Each fault on a fresh copy of the good root.
        let gens = "/etc/systemd/system-generators";
        for (cmds, want) in [
            (
                format!("rm {gens}/systemd-sysv-generator\n"),
                "the image has no /etc/systemd/system-generators/systemd-sysv-generator link to /dev/null",
            ),
            (
                format!(
                    "rm {gens}/systemd-rc-local-generator\nsymlink {gens}/systemd-rc-local-generator /usr/lib/systemd/x\n"
                ),
                "systemd-rc-local-generator links to \"/usr/lib/systemd/x\", not /dev/null",
            ),
            (
                format!(
                    "rm {gens}/systemd-gpt-auto-generator\nwrite /dev/null {gens}/systemd-gpt-auto-generator\n"
                ),
                "systemd-gpt-auto-generator is a regular file, not a link to /dev/null",
            ),
            (
                "rm /etc/systemd/system/systemd-repart.service\n".to_string(),
                "no /etc/systemd/system/systemd-repart.service link to /dev/null",
            ),
            (
                "rm /var/.updated\n".to_string(),
                "the image has no /var/.updated",
            ),
            (
                // /usr a second newer than the stamps, as if changed after they were written.
                format!("set_inode_field /usr mtime 0x{:x}\n", c.usr_mtime.sec + 1),
                "/etc/.updated (mtime",
            ),
        ] {
            write(&cmds);
            let e = check().unwrap_err();
            assert!(e.contains(want), "{cmds}: {e}");
        }
        // A slow link (its target in a block, not the inode) read back through `cat`.
        let long = format!("/{}", "x".repeat(80));
        write(&format!(
            "rm {gens}/systemd-sysv-generator\nsymlink {gens}/systemd-sysv-generator {long}\n"
        ));
        let e = check().unwrap_err();
        assert!(e.contains(&format!("links to \"{long}\"")), "{e}");
    }
}
