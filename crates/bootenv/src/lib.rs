//! The pfx boot environment: which root slot U-Boot boots, and how many tries it has left.
//!
//! Two files on the FAT boot partition, `pfxenv.a` and `pfxenv.b`, each exactly
//! [`ENV_SIZE`] bytes in U-Boot's binary environment format (what `env export -c -s 0x4000`
//! writes and `env import -c` checks): a little-endian CRC32 of the other 16 380 bytes,
//! then `name=value\0` entries, one more `\0`, zero padding. Four variables matter:
//! `PFX_SEQ`, `BOOT_ORDER`, `BOOT_A_LEFT`, `BOOT_B_LEFT`.
//!
//! The newest valid copy is the state ([`Env::current`]); every writer writes the *other*
//! copy with the next sequence number ([`Env::write`]), so a write torn by a power cut can
//! only spoil the copy being written, and the other still holds the state before it. Both
//! writers, the boot script (`image/uboot/boot.cmd`) and Linux (`pfx-agent bootenv`, RAUC's
//! custom bootloader backend), follow these rules; this crate is the one statement of them
//! on the Rust side, and it predicts what the boot script does ([`Env::boot`]) so the tests
//! can compare the two.
//!
//! Pure: bytes in, bytes and decisions out. No I/O, no clock. See README.md.

mod choice;
mod format;
pub mod fuzz;
mod rauc;

pub use choice::{BootChoice, Current, Env, EnvFile, Write, boot_choice, bootargs, newer};
pub use format::{
    BOOT_A_LEFT, BOOT_B_LEFT, BOOT_ORDER, DATA_SIZE, ENV_SIZE, EnvCopy, Invalid, PFX_SEQ, RawVars,
    crc32, decode, encode, import_vars,
};
pub use rauc::{RaucError, RaucOp, RaucOutcome};

use std::fmt;
use std::str::FromStr;

/// A root slot, by its RAUC bootname (`bootname=` in system.conf).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Slot {
    /// Root slot A: partition 2, RAUC slot `rootfs.0`.
    A,
    /// Root slot B: partition 3, RAUC slot `rootfs.1`.
    B,
}

impl Slot {
    pub const BOTH: [Slot; 2] = [Slot::A, Slot::B];

    pub fn other(self) -> Slot {
        match self {
            Slot::A => Slot::B,
            Slot::B => Slot::A,
        }
    }

    /// The bootname: `A` or `B`.
    pub fn name(self) -> &'static str {
        match self {
            Slot::A => "A",
            Slot::B => "B",
        }
    }

    /// The slot's partition number on the boot disk (the FAT boot partition is 1).
    pub fn partition(self) -> u8 {
        match self {
            Slot::A => 2,
            Slot::B => 3,
        }
    }

    fn index(self) -> usize {
        match self {
            Slot::A => 0,
            Slot::B => 1,
        }
    }
}

impl fmt::Display for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A bootname other than `A` or `B`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bootname {0:?} is not A or B (the bootname= of the slots in /etc/rauc/system.conf)")]
pub struct BadSlot(pub String);

impl FromStr for Slot {
    type Err = BadSlot;
    fn from_str(s: &str) -> Result<Slot, BadSlot> {
        match s {
            "A" => Ok(Slot::A),
            "B" => Ok(Slot::B),
            _ => Err(BadSlot(s.to_string())),
        }
    }
}

/// What the environment says: which slot comes first in `BOOT_ORDER`, and each slot's boot
/// attempts left. Always well formed: the order names both slots once, and a count is at
/// most [`BootState::MAX_LEFT`] (a single decimal digit, the one form the boot script's
/// hexadecimal `setexpr` decrements correctly).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BootState {
    primary: Slot,
    left: [u8; 2],
}

impl BootState {
    /// The most attempts a count can hold (one decimal digit).
    pub const MAX_LEFT: u8 = 9;
    /// Attempts of a slot marked good (RAUC `set-state X good`), and of both slots after
    /// the boot script found neither bootable.
    pub const GOOD_LEFT: u8 = 3;
    /// Attempts of a slot made primary (RAUC `set-primary X`): the one trial boot.
    pub const TRIAL_LEFT: u8 = 1;

    /// `primary` first in the order; counts above [`BootState::MAX_LEFT`] are clamped.
    pub fn new(primary: Slot, left_a: u8, left_b: u8) -> BootState {
        BootState {
            primary,
            left: [left_a.min(Self::MAX_LEFT), left_b.min(Self::MAX_LEFT)],
        }
    }

    /// What the image build writes: `BOOT_ORDER=A B`, A 3 attempts, B none (B is empty).
    pub fn initial() -> BootState {
        BootState::new(Slot::A, Self::GOOD_LEFT, 0)
    }

    /// The state when neither copy is valid (documented): `A B`, both 3.
    pub fn fallback() -> BootState {
        BootState::new(Slot::A, Self::GOOD_LEFT, Self::GOOD_LEFT)
    }

    pub fn primary(&self) -> Slot {
        self.primary
    }

    /// `BOOT_ORDER` as slots: the primary, then the other.
    pub fn order(&self) -> [Slot; 2] {
        [self.primary, self.primary.other()]
    }

    /// `BOOT_ORDER` as written: `A B` or `B A`.
    pub fn boot_order(&self) -> &'static str {
        match self.primary {
            Slot::A => "A B",
            Slot::B => "B A",
        }
    }

    pub fn left(&self, slot: Slot) -> u8 {
        self.left[slot.index()]
    }

    /// Sets a count, clamped to [`BootState::MAX_LEFT`].
    pub fn set_left(&mut self, slot: Slot, n: u8) {
        self.left[slot.index()] = n.min(Self::MAX_LEFT);
    }

    pub fn set_primary(&mut self, slot: Slot) {
        self.primary = slot;
    }

    /// The first slot of the order with attempts left: what the boot script boots, and
    /// RAUC's `get-primary`. None when neither has any.
    pub fn bootable(&self) -> Option<Slot> {
        self.order().into_iter().find(|s| self.left(*s) > 0)
    }
}

/// The two files as the image build writes them: `pfxenv.a` with [`BootState::initial`]
/// and `PFX_SEQ=1`, `pfxenv.b` with the same state and `PFX_SEQ=0`, both valid.
pub fn initial_copies() -> [(EnvFile, Vec<u8>); 2] {
    let s = BootState::initial();
    [(EnvFile::A, encode(1, &s)), (EnvFile::B, encode(0, &s))]
}
