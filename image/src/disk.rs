//! Partition layout of the image (pure) and the commands that make it, without loop mounts.

/// 1 MiB in 512-byte sectors.
pub const MIB_SECTORS: u64 = 2048;
/// The boot partition starts at 4 MiB (erase-block aligned on SD cards).
pub const BOOT_START_MIB: u64 = 4;
/// The smallest root slot the builder accepts (the base root alone is about 800 MiB).
pub const MIN_ROOT_MIB: u64 = 512;
/// The MBR disk identifier of every pfx image. A partition's PARTUUID is this id and its
/// number (`70667801-02` is root slot A), so the slot devices named in a root's RAUC config
/// (`/dev/disk/by-partuuid/...`) are right on every unit, whichever build flashed it and
/// whichever build's bundle is installed. Fixed, not random per build, for that reason.
pub const DISK_ID: u32 = 0x7066_7801;
/// Partition numbers.
pub const PART_ROOT_A: u32 = 2;
pub const PART_ROOT_B: u32 = 3;

/// `/dev/disk/by-partuuid/` name of partition `n` of a pfx disk.
pub fn partuuid(n: u32) -> String {
    format!("{DISK_ID:08x}-{n:02x}")
}

/// Boot (FAT), root slot A and root slot B (ext4, read-only under the overlay; an update
/// writes the slot that is not running), data (ext4, last, so that it can grow to the end of
/// whatever card the image is written to).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub total_bytes: u64,
    pub boot_start: u64,
    pub boot_sectors: u64,
    pub root_start: u64,
    /// Sectors of each root slot (A and B are the same size: either holds any bundle).
    pub root_sectors: u64,
    pub root_b_start: u64,
    pub data_start: u64,
    pub data_sectors: u64,
}

impl Layout {
    pub fn new(image_mib: u64, boot_mib: u64, data_mib: u64) -> Result<Layout, String> {
        let boot_start = BOOT_START_MIB * MIB_SECTORS;
        let boot_sectors = boot_mib * MIB_SECTORS;
        let root_start = boot_start + boot_sectors;
        let data_sectors = data_mib * MIB_SECTORS;
        let total_sectors = image_mib * MIB_SECTORS;
        if root_start + 2 * MIN_ROOT_MIB * MIB_SECTORS + data_sectors > total_sectors {
            return Err(format!(
                "image of {image_mib} MiB leaves no room for two root slots of {MIN_ROOT_MIB} MiB between a {boot_mib} MiB boot partition and a {data_mib} MiB data partition"
            ));
        }
        let data_start = total_sectors - data_sectors;
        // Each slot a whole number of MiB; a MiB left over stays unused before data.
        let slot_mib = (data_start - root_start) / MIB_SECTORS / 2;
        let root_sectors = slot_mib * MIB_SECTORS;
        Ok(Layout {
            total_bytes: total_sectors * 512,
            boot_start,
            boot_sectors,
            root_start,
            root_sectors,
            root_b_start: root_start + root_sectors,
            data_start,
            data_sectors,
        })
    }

    /// Input for `sfdisk` on the image file: MBR (what the Pi firmware reads) with the fixed
    /// disk id, FAT32 LBA boot partition marked bootable (U-Boot's distro boot looks for its
    /// script on bootable partitions only), root A, root B, data last.
    pub fn sfdisk_script(&self) -> String {
        format!(
            "label: dos\nlabel-id: 0x{DISK_ID:08x}\nunit: sectors\n\nstart={}, size={}, type=c, bootable\nstart={}, size={}, type=83\nstart={}, size={}, type=83\nstart={}, size={}, type=83\n",
            self.boot_start,
            self.boot_sectors,
            self.root_start,
            self.root_sectors,
            self.root_b_start,
            self.root_sectors,
            self.data_start,
            self.data_sectors
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_fills_image() {
        let l = Layout::new(3072, 256, 128).unwrap();
        assert_eq!(l.boot_start, 8192);
        assert_eq!(l.root_start, 8192 + 256 * 2048);
        assert_eq!(l.root_b_start, l.root_start + l.root_sectors);
        assert!(l.root_b_start + l.root_sectors <= l.data_start);
        assert!(l.data_start - (l.root_b_start + l.root_sectors) < 2 * MIB_SECTORS);
        assert_eq!(l.root_sectors % MIB_SECTORS, 0, "slots MiB-aligned");
        assert_eq!(l.data_sectors, 128 * 2048);
        assert_eq!((l.data_start + l.data_sectors) * 512, l.total_bytes);
        assert_eq!(l.data_start % MIB_SECTORS, 0, "data partition MiB-aligned");
        let s = l.sfdisk_script();
        assert!(s.contains("type=c, bootable"));
        assert!(s.contains("label-id: 0x70667801"));
        assert_eq!(s.matches("type=83").count(), 3);
        assert!(Layout::new(300, 256, 64).is_err());
        assert!(Layout::new(4 + 256 + 1024 + 64, 256, 64).is_ok());
        assert!(Layout::new(4 + 256 + 1024 + 63, 256, 64).is_err());
    }

    #[test]
    fn partuuids_are_the_disk_id_and_the_number() {
        assert_eq!(partuuid(PART_ROOT_A), "70667801-02");
        assert_eq!(partuuid(4), "70667801-04");
    }
}
