//! Partition layout of the image (pure) and the commands that make it, without loop mounts.

/// 1 MiB in 512-byte sectors.
const MIB_SECTORS: u64 = 2048;
/// The boot partition starts at 4 MiB (erase-block aligned on SD cards).
pub const BOOT_START_MIB: u64 = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub total_bytes: u64,
    pub boot_start: u64,
    pub boot_sectors: u64,
    pub root_start: u64,
    pub root_sectors: u64,
}

impl Layout {
    pub fn new(image_mib: u64, boot_mib: u64) -> Result<Layout, String> {
        let boot_start = BOOT_START_MIB * MIB_SECTORS;
        let boot_sectors = boot_mib * MIB_SECTORS;
        let root_start = boot_start + boot_sectors;
        let total_sectors = image_mib * MIB_SECTORS;
        if root_start + 256 * MIB_SECTORS > total_sectors {
            return Err(format!(
                "image of {image_mib} MiB leaves no room for a root after a {boot_mib} MiB boot partition"
            ));
        }
        Ok(Layout {
            total_bytes: total_sectors * 512,
            boot_start,
            boot_sectors,
            root_start,
            root_sectors: total_sectors - root_start,
        })
    }

    /// Input for `sfdisk` on the image file: MBR (what the Pi firmware reads), FAT32 LBA boot
    /// partition marked bootable, Linux root.
    pub fn sfdisk_script(&self) -> String {
        format!(
            "label: dos\nunit: sectors\n\nstart={}, size={}, type=c, bootable\nstart={}, size={}, type=83\n",
            self.boot_start, self.boot_sectors, self.root_start, self.root_sectors
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_fills_image() {
        let l = Layout::new(2048, 256).unwrap();
        assert_eq!(l.boot_start, 8192);
        assert_eq!(l.root_start, 8192 + 256 * 2048);
        assert_eq!((l.root_start + l.root_sectors) * 512, l.total_bytes);
        assert!(l.sfdisk_script().contains("type=c, bootable"));
        assert!(Layout::new(300, 256).is_err());
    }
}
