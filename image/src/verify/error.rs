//! What the checks return when an image is wrong. A parser says what it could not read; a
//! check names itself and lists every problem it found (in its own words, so an operator
//! reads the same sentences as before), so a caller can tell one check's failure from
//! another's without matching on text.

use crate::plan::DATA_MOUNT;

/// The check that found the problems of a [`CheckFailed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// The kernel command line (`check_cmdline`).
    Cmdline,
    /// What a Pi 4's command line must not say (`check_pi4_cmdline`).
    Pi4Cmdline,
    /// The initramfs's contents (`check_initramfs`).
    Initramfs,
    /// The pfx packages in dpkg's status (`check_pfx_packages`).
    PfxPackages,
    /// A Pi's firmware files (`check_pi_firmware`).
    PiFirmware,
    /// Logins, keys and sudo (`check_access`).
    Access,
    /// The masked generators and units and the update stamps (`check_boot_speed`).
    BootSpeed,
}

/// A check's problems, each a sentence; shown joined by "; " as they always were.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", problems.join("; "))]
pub struct CheckFailed {
    pub check: Check,
    pub problems: Vec<String>,
}

impl CheckFailed {
    pub fn new(check: Check, problems: Vec<String>) -> Self {
        CheckFailed { check, problems }
    }
    pub fn one(check: Check, problem: String) -> Self {
        CheckFailed {
            check,
            problems: vec![problem],
        }
    }
}

/// What is wrong with the data partition or what mounts it (`verify::data`). Each check
/// lists every problem it found, shown joined by "; " after the part it is about, as the
/// checks always printed them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DataError {
    /// The table is not FAT boot, root slot A, root slot B, data, in that order.
    #[error(
        "expected partitions 1 FAT (0x0c, bootable), 2 root slot A (0x83), 3 root slot B (0x83), 4 Linux data (0x83); found (index, type) {found:x?}; an image of the single-root layout cannot take updates: rebuild it"
    )]
    PartitionShape {
        /// `(index, type)` of each partition found.
        found: Vec<(u8, u8)>,
    },
    /// The four partitions are there but misplaced (slot sizes, overlaps, the data's end
    /// or alignment).
    #[error("{}", problems.join("; "))]
    PartitionTable { problems: Vec<String> },
    /// The data file system's header, root directory or marker.
    #[error("data file system: {}", problems.join("; "))]
    FileSystem { problems: Vec<String> },
    /// No fstab line mounts the data partition.
    #[error("/etc/fstab has no line for {}", DATA_MOUNT)]
    NoFstabLine,
    /// More than one fstab line mounts it.
    #[error("/etc/fstab has {lines} lines for {}", DATA_MOUNT)]
    FstabLines { lines: usize },
    /// The one fstab line's fields or options.
    #[error("/etc/fstab line for {}: {}", DATA_MOUNT, problems.join("; "))]
    FstabLine { problems: Vec<String> },
    /// overlayroot would lay a tmpfs over the data mount too.
    #[error(
        "overlayroot={overlayroot} lacks recurse=0: overlayroot would lay a tmpfs over {} and every write to the data partition would be lost at reboot",
        DATA_MOUNT
    )]
    OverlayRecurses { overlayroot: String },
    /// journald's effective settings.
    #[error("journald: {}", problems.join("; "))]
    Journald { problems: Vec<String> },
    /// The player's ordering after (and independence of) the data mount.
    #[error("pfx-player.service: {}", problems.join("; "))]
    PlayerUnit { problems: Vec<String> },
}

/// Sector 0 could not be read as an MBR.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MbrError {
    #[error("no MBR signature (0x55AA) in the first sector")]
    NoSignature,
}

/// A binary's header is not ELF.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ElfError {
    #[error("not an ELF file")]
    NotElf,
}

/// An initramfs's cpio archive could not be walked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpioError {
    /// A header field is not hexadecimal ASCII.
    #[error("cpio header at {pos}: {detail}")]
    Header { pos: usize, detail: String },
    /// An entry's name runs past the archive's end.
    #[error("cpio entry at {pos} runs past the end")]
    NamePastEnd { pos: usize },
    /// An entry's data runs past the archive's end.
    #[error("cpio entry {name} runs past the end")]
    DataPastEnd { name: String },
}

/// A package's md5sums file has a line that is not "MD5  path".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Md5sumsError {
    #[error("md5sums line {line:?} is not `MD5  PATH`")]
    NoPath { line: String },
    #[error("md5sums line {line:?}: {sum:?} is not an MD5")]
    NotMd5 { line: String, sum: String },
}

/// An authorized_keys line that does not end in a key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an authorized_keys line: {start:?}")]
pub struct KeyLineError {
    /// The line's first 60 characters.
    pub start: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::{
        check_cmdline, check_initramfs, check_pi4_cmdline, cpio_names, elf_machine,
        key_line_options, parse_mbr, parse_md5sums,
    };

    /// Each failure says which check or parser it came from, as a type, and reads as the
    /// sentences the checks always printed.
    #[test]
    fn failures_are_typed_and_read_as_before() {
        let e = check_cmdline("root=/dev/vda rw", true).unwrap_err();
        assert_eq!(e.check, Check::Cmdline);
        assert_eq!(e.to_string(), e.problems.join("; "));
        assert!(e.problems.len() >= 2, "{e:?}");
        let e = check_pi4_cmdline("cma=64M quiet").unwrap_err();
        assert_eq!(e.check, Check::Pi4Cmdline);
        assert_eq!(
            e.to_string(),
            "`cma=64M` on a Pi 4 command line renders it unbootable"
        );
        assert_eq!(check_initramfs(&[]).unwrap_err().check, Check::Initramfs);
        let e = parse_mbr(&[0; 512]).unwrap_err();
        assert_eq!(e, MbrError::NoSignature);
        assert_eq!(
            e.to_string(),
            "no MBR signature (0x55AA) in the first sector"
        );
        assert_eq!(elf_machine(b"").unwrap_err().to_string(), "not an ELF file");
        let mut bad = b"070701".to_vec();
        bad.extend([b'z'; 104]);
        assert!(matches!(
            cpio_names(&bad),
            Err(CpioError::Header { pos: 0, .. })
        ));
        assert_eq!(
            key_line_options("restrict,command=\"x").unwrap_err(),
            KeyLineError {
                start: "restrict,command=\"x".into()
            }
        );
        assert_eq!(
            parse_md5sums("xyz").unwrap_err().to_string(),
            "md5sums line \"xyz\" is not `MD5  PATH`"
        );
    }

    /// The data partition's checks say which part failed, as a type, in the sentences
    /// they always printed.
    #[test]
    fn data_failures_are_typed_and_read_as_before() {
        use crate::verify::data;
        let e = data::check_partition_table(&[], 0).unwrap_err();
        assert_eq!(e, DataError::PartitionShape { found: vec![] });
        assert!(
            e.to_string().starts_with("expected partitions 1 FAT"),
            "{e}"
        );
        assert!(e.to_string().contains("found (index, type) []; "), "{e}");
        assert_eq!(
            data::check_fstab("").unwrap_err().to_string(),
            "/etc/fstab has no line for /var/lib/pfx"
        );
        let two = "LABEL=pfx-data /var/lib/pfx ext4 defaults 0 2\n".repeat(2);
        assert_eq!(
            data::check_fstab(&two).unwrap_err(),
            DataError::FstabLines { lines: 2 }
        );
        let e = data::check_fstab("/dev/x /var/lib/pfx/ ext4 nodev,nosuid 0 2\n").unwrap_err();
        let DataError::FstabLine { problems } = &e else {
            panic!("{e:?}");
        };
        assert_eq!(
            e.to_string(),
            format!("/etc/fstab line for /var/lib/pfx: {}", problems.join("; "))
        );
        assert_eq!(
            data::check_overlay_recurse("tmpfs")
                .unwrap_err()
                .to_string(),
            "overlayroot=tmpfs lacks recurse=0: overlayroot would lay a tmpfs over /var/lib/pfx and every write to the data partition would be lost at reboot"
        );
        let e = data::check_journald(&[]).unwrap_err();
        assert!(matches!(&e, DataError::Journald { problems } if problems.len() == 2));
        assert!(e.to_string().starts_with("journald: Storage=auto ("), "{e}");
        let e = data::check_player_unit("").unwrap_err();
        assert!(matches!(e, DataError::PlayerUnit { .. }));
        assert_eq!(
            e.to_string(),
            "pfx-player.service: no After=var-lib-pfx.mount: the player could start before its show store is mounted"
        );
        let e = data::check_data_fs(&data::DataFiles::default()).unwrap_err();
        assert!(matches!(e, DataError::FileSystem { .. }));
        assert!(
            e.to_string()
                .starts_with("data file system: not an ext2/3/4"),
            "{e}"
        );
    }
}
