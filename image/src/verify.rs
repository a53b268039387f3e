//! Pure checks on what was read back from the image file: partition table, kernel command
//! line, initramfs contents, ELF machine, enabled units, dpkg status, Pi firmware files, the
//! masked generators and units and the update stamps.
//! The I/O that reads the image lives in `artifact.rs`.

mod access;
mod boot_speed;
mod cmdline;
pub mod data;
mod debugfs;
mod elf;
mod error;
mod firmware;
mod initramfs;
mod mbr;
mod packages;

pub use access::*;
pub use boot_speed::*;
pub use cmdline::*;
pub use debugfs::*;
pub use elf::*;
pub use firmware::*;
pub use initramfs::*;
pub use mbr::*;
pub use packages::*;

/// The stock Debian account files the plan's tests add the fleet account to.
#[cfg(test)]
pub(crate) use access::tests as access_fixtures;
