//! A Pi's firmware files on the boot partition against config.txt.

use super::error::{Check, CheckFailed};
use serde::Serialize;

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
pub fn check_pi_firmware(
    fat_files: &[String],
    config_txt: &str,
) -> Result<FirmwareCheck, CheckFailed> {
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
        return Err(CheckFailed::new(Check::PiFirmware, errors));
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let e = check_pi_firmware(&files[1..], cfg).unwrap_err().to_string();
        assert!(
            e.contains("start4.elf") && e.contains("u-boot.bin is not"),
            "{e}"
        );
        let direct =
            "arm_64bit=1\nkernel=vmlinuz-6.1.0-50-arm64\ninitramfs initrd.img-6.1.0-50-arm64\n";
        let e = check_pi_firmware(&with_uboot, direct)
            .unwrap_err()
            .to_string();
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
}
