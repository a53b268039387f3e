//! The A/B update parts of an image, pure: versions, the RAUC system config a unit runs
//! with, the bundle manifest, the initial boot environment, and the checks `verify` runs
//! on what it reads back (docs/update.md).

use crate::config::Target;
use crate::disk::{PART_ROOT_A, PART_ROOT_B, partuuid};

/// Where the unit keeps the operator's update CA certificate (RAUC's keyring).
pub const KEYRING: &str = "/etc/rauc/keyring.pem";
pub const SYSTEM_CONF: &str = "/etc/rauc/system.conf";
/// The unit's software version, as the agent and the fleet read it.
/// What a unit runs to take a bundle: RAUC itself, unsquashfs, with which `rauc info`
/// reads a plain bundle's manifest, and the two handlers system.conf names (without the
/// boot backend RAUC cannot mark a slot, so every install fails after its signature check).
pub const UNIT_TOOLS: [&str; 4] = [
    "/usr/bin/rauc",
    "/usr/bin/unsquashfs",
    "/usr/lib/pfx/rauc-bootenv",
    "/usr/lib/pfx/pfx-slot-carry",
];
/// On a Pi, the device tree overlay that takes U-Boot's 2 s boot delay away, on the FAT.
/// U-Boot on a Pi uses the firmware's device tree as its own, and reads `/config/bootdelay`
/// from it before its environment's default; the firmware applies the overlays that
/// config.txt names before it starts U-Boot. No saved U-Boot environment is needed.
pub const BOOTDELAY_OVERLAY: &str = "overlays/pfx-uboot.dtbo";
/// config.txt's line for it.
pub const BOOTDELAY_OVERLAY_LINE: &str = "dtoverlay=pfx-uboot";
/// Its source, compiled by `dtc -@` at build time.
pub const BOOTDELAY_OVERLAY_DTS: &str = "/dts-v1/;\n/plugin/;\n\n/ {\n\tcompatible = \"brcm,bcm2711\";\n\tfragment@0 {\n\t\ttarget-path = \"/\";\n\t\t__overlay__ {\n\t\t\tconfig {\n\t\t\t\tbootdelay = <0>;\n\t\t\t};\n\t\t};\n\t};\n};\n";

/// The compiled overlay from the image: a flattened device tree (magic 0xd00dfeed) that
/// names `bootdelay`. Pure; reads only the bytes it is given.
pub fn check_bootdelay_overlay(dtbo: &[u8]) -> Result<(), String> {
    if dtbo.get(..4) != Some(&[0xd0, 0x0d, 0xfe, 0xed][..]) {
        return Err(format!(
            "{BOOTDELAY_OVERLAY} is not a compiled device tree: U-Boot would wait its 2 s boot delay"
        ));
    }
    if !dtbo.windows(10).any(|w| w == b"bootdelay\0") {
        return Err(format!(
            "{BOOTDELAY_OVERLAY} does not set bootdelay: U-Boot would wait its 2 s boot delay"
        ));
    }
    Ok(())
}

pub const VERSION_FILE: &str = "/etc/pfx/image-version";
/// The slot's own kernel, initramfs and command line, which the boot script loads from
/// the slot it boots: an update brings its own kernel.
pub const SLOT_KERNEL: &str = "/boot/vmlinuz";
pub const SLOT_INITRD: &str = "/boot/initrd.img";
pub const SLOT_CMDLINE: &str = "/boot/pfx-cmdline.txt";
/// The boot script on the FAT partition (mkimage's legacy script image).
pub const BOOT_SCRIPT: &str = "boot.scr";
/// The two copies of the boot environment on the FAT partition.
pub const ENV_FILES: [&str; 2] = ["pfxenv.a", "pfxenv.b"];
/// Where RAUC keeps its status (slot versions, install times): the data partition, so it
/// survives a switch of slots.
pub const RAUC_DATA_DIR: &str = "/var/lib/pfx/rauc";

/// RAUC's `compatible` of a target: a bundle for another target is refused by RAUC itself.
pub fn compatible(target: Target) -> String {
    format!("pfx-{}", target.name())
}

pub use crate::release::{check_cert_pem, parse_version};

/// The unit's `/etc/rauc/system.conf`.
///
/// - `bootloader=custom`: the boot environment is pfx's two-copy file pair on the FAT
///   partition, through `pfx-agent bootenv` (why: docs/update.md, "The boot environment").
/// - `activate-installed=false`: an install never changes what boots next; only
///   `update switch` does, at the time the operator chose.
/// - `bundle-formats=plain`: RAUC checks the signature over the whole payload before it
///   picks or writes a slot, so a tampered payload is refused before a byte is written.
///   (A verity bundle is checked block by block as it is copied.)
/// - the `post-install` handler carries the unit's identity into the new slot.
pub fn system_conf_text(target: Target) -> String {
    format!(
        "# pfx: written by pfx-image; see /usr/share/doc/pfx/update.md\n\
         [system]\n\
         compatible={}\n\
         bootloader=custom\n\
         activate-installed=false\n\
         bundle-formats=plain\n\
         data-directory={RAUC_DATA_DIR}\n\
         \n\
         [keyring]\n\
         path={KEYRING}\n\
         \n\
         [handlers]\n\
         bootloader-custom-backend=/usr/lib/pfx/rauc-bootenv\n\
         post-install=/usr/lib/pfx/pfx-slot-carry\n\
         \n\
         [slot.rootfs.0]\n\
         device=/dev/disk/by-partuuid/{}\n\
         type=ext4\n\
         bootname=A\n\
         \n\
         [slot.rootfs.1]\n\
         device=/dev/disk/by-partuuid/{}\n\
         type=ext4\n\
         bootname=B\n",
        compatible(target),
        partuuid(PART_ROOT_A),
        partuuid(PART_ROOT_B),
    )
}

/// The bundle's `manifest.raucm`.
pub fn bundle_manifest_text(target: Target, version: &str, build: &str) -> String {
    format!(
        "[update]\ncompatible={}\nversion={version}\nbuild={build}\ndescription=pfx unit root for {}\n\n[bundle]\nformat=plain\n\n[image.rootfs]\nfilename=root.ext4\n",
        compatible(target),
        target.name()
    )
}

/// The two copies a fresh image ships (pfx-bootenv's rule): slot A first with its full
/// attempts, slot B empty; both valid, copy A the newer.
pub fn initial_env() -> [Vec<u8>; 2] {
    let [(_, a), (_, b)] = pfx_bootenv::initial_copies();
    [a, b]
}

/// What verify needs of the pair: both valid (as U-Boot's `env import -c` and the boot
/// script take them), and what the next boot will do.
pub fn check_env_pair(a: &[u8], b: &[u8]) -> Result<String, String> {
    let mut said = Vec::new();
    for (name, blob) in ENV_FILES.iter().zip([a, b]) {
        let c = pfx_bootenv::decode(blob).map_err(|e| format!("{name}: {e}"))?;
        let s = &c.state;
        said.push(format!(
            "{name}: seq {} order {:?} A {} B {}",
            c.seq,
            s.order().map(|x| x.to_string()).join(" "),
            s.left(pfx_bootenv::Slot::A),
            s.left(pfx_bootenv::Slot::B)
        ));
    }
    Ok(said.join("; "))
}

/// The boot script: a U-Boot legacy image (magic 27051956) of type script (6), whose
/// header CRC holds, with the given script text inside.
pub fn check_boot_script(scr: &[u8]) -> Result<String, String> {
    if scr.len() < 64 + 8 {
        return Err(format!("{BOOT_SCRIPT}: {} bytes, too short", scr.len()));
    }
    let be = |i: usize| u32::from_be_bytes([scr[i], scr[i + 1], scr[i + 2], scr[i + 3]]);
    if be(0) != 0x2705_1956 {
        return Err(format!(
            "{BOOT_SCRIPT}: not a U-Boot image (magic {:08x})",
            be(0)
        ));
    }
    let mut header = scr[..64].to_vec();
    header[4..8].fill(0);
    if crc32(&header) != be(4) {
        return Err(format!("{BOOT_SCRIPT}: header CRC mismatch"));
    }
    if scr[30] != 6 {
        return Err(format!(
            "{BOOT_SCRIPT}: image type {} is not a script (6)",
            scr[30]
        ));
    }
    let size = be(12) as usize;
    if 64 + size > scr.len() || crc32(&scr[64..64 + size]) != be(24) {
        return Err(format!("{BOOT_SCRIPT}: payload size or CRC mismatch"));
    }
    let text = String::from_utf8_lossy(&scr[64 + 8..64 + size]);
    for needle in ["BOOT_ORDER", "rauc.slot=", "fatwrite", "env import"] {
        if !text.contains(needle) {
            return Err(format!(
                "{BOOT_SCRIPT}: the script never mentions {needle:?}: not pfx's A/B boot script"
            ));
        }
    }
    Ok(format!("{} bytes of script", size - 8))
}

/// The unit's RAUC config as read back: the target's compatible, the custom boot backend,
/// installs that do not switch, and both slots at pfx's fixed PARTUUIDs.
pub fn check_system_conf(text: &str, target: Target) -> Result<(), String> {
    let want = system_conf_text(target);
    let norm = |t: &str| {
        t.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let have = norm(text);
    let missing: Vec<String> = norm(&want)
        .into_iter()
        .filter(|l| !have.contains(l))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{SYSTEM_CONF} lacks {}",
            missing
                .iter()
                .map(|l| format!("{l:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }
}

/// The slot's command line as the boot script makes it, for the same checks as any
/// command line: no `rw`, the overlay, and no root= of its own (the script adds the
/// slot's PARTUUID and its bootname). The file is one line of words.
pub fn slot_cmdline(text: &str, slot_part: u32) -> Result<String, String> {
    let line = text.strip_suffix('\n').unwrap_or(text);
    let line = line.strip_suffix('\r').unwrap_or(line);
    if line.contains('\n') || line.trim().is_empty() {
        return Err("must be exactly one non-empty line (the boot script reads one)".into());
    }
    if line
        .split_whitespace()
        .any(|w| w.starts_with("root=") || w.starts_with("rauc.slot="))
    {
        return Err("names root= or rauc.slot= itself; the boot script adds them".into());
    }
    Ok(format!(
        "{} root=PARTUUID={} rauc.slot={}",
        line.trim(),
        partuuid(slot_part),
        if slot_part == PART_ROOT_A { "A" } else { "B" }
    ))
}

/// CRC-32 (IEEE 802.3, as zlib and U-Boot compute it).
pub fn crc32(data: &[u8]) -> u32 {
    pfx_bootenv::crc32(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_initial_env_reads_back_and_a_torn_copy_is_caught() {
        let [a, b] = initial_env();
        assert_eq!(a.len(), pfx_bootenv::ENV_SIZE);
        let said = check_env_pair(&a, &b).unwrap();
        assert!(
            said.contains("pfxenv.a: seq 1 order \"A B\" A 3 B 0"),
            "{said}"
        );
        let mut torn = a.clone();
        torn[100] ^= 1;
        assert!(check_env_pair(&torn, &b).unwrap_err().contains("CRC"));
        let mut zero = b.clone();
        zero.iter_mut().for_each(|x| *x = 0);
        assert!(check_env_pair(&a, &zero).is_err());
        assert!(check_env_pair(&a[..100], &b).is_err());
    }

    #[test]
    fn the_system_conf_names_both_slots_and_the_target() {
        let t = system_conf_text(Target::VmArm64);
        assert!(check_system_conf(&t, Target::VmArm64).is_ok());
        assert!(
            check_system_conf(&t, Target::Rpi4Arm64)
                .unwrap_err()
                .contains("compatible=pfx-rpi4-arm64")
        );
        let switched = t.replace("activate-installed=false", "activate-installed=true");
        assert!(check_system_conf(&switched, Target::VmArm64).is_err());
        assert!(t.contains("device=/dev/disk/by-partuuid/70667801-03"));
    }

    #[test]
    fn the_slot_cmdline_gets_the_slots_root() {
        let c = slot_cmdline("console=ttyAMA0 quiet overlayroot=tmpfs:recurse=0\n", 3).unwrap();
        assert!(c.ends_with("root=PARTUUID=70667801-03 rauc.slot=B"), "{c}");
        assert!(slot_cmdline("console=ttyAMA0\nquiet\n", 2).is_err());
        assert!(slot_cmdline("\n", 2).is_err());
        assert!(slot_cmdline("quiet root=/dev/vda2", 2).is_err());
    }

    #[test]
    fn a_boot_script_is_checked_by_its_header() {
        // A legacy script image, assembled as mkimage does.
        let body = b"echo BOOT_ORDER rauc.slot= fatwrite env import\n";
        let mut payload = Vec::new();
        payload.extend_from_slice(&((body.len() as u32).to_be_bytes()));
        payload.extend_from_slice(&[0; 4]);
        payload.extend_from_slice(body);
        let mut h = vec![0u8; 64];
        h[0..4].copy_from_slice(&0x2705_1956u32.to_be_bytes());
        h[12..16].copy_from_slice(&(payload.len() as u32).to_be_bytes());
        h[24..28].copy_from_slice(&crc32(&payload).to_be_bytes());
        h[30] = 6;
        let hc = crc32(&h);
        h[4..8].copy_from_slice(&hc.to_be_bytes());
        let mut scr = h.clone();
        scr.extend_from_slice(&payload);
        assert!(check_boot_script(&scr).is_ok());
        let mut bad = scr.clone();
        bad[80] ^= 1;
        assert!(check_boot_script(&bad).unwrap_err().contains("CRC"));
        assert!(check_boot_script(&scr[..40]).is_err());
    }

    #[test]
    fn the_bootdelay_overlay_is_checked_from_its_bytes() {
        let mut good = vec![0xd0, 0x0d, 0xfe, 0xed, 0, 0];
        good.extend_from_slice(b"config\0bootdelay\0");
        assert_eq!(check_bootdelay_overlay(&good), Ok(()));
        assert!(check_bootdelay_overlay(&good[..3]).is_err());
        assert!(check_bootdelay_overlay(b"").is_err());
        let mut other = good.clone();
        other.truncate(13);
        assert!(
            check_bootdelay_overlay(&other).is_err_and(|e| e.contains("does not set bootdelay"))
        );
        assert!(BOOTDELAY_OVERLAY_DTS.contains("bootdelay = <0>;"));
    }
}
