//! What the checks return when an image is wrong. A parser says what it could not read; a
//! check names itself and lists every problem it found (in its own words, so an operator
//! reads the same sentences as before), so a caller can tell one check's failure from
//! another's without matching on text.

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
}
