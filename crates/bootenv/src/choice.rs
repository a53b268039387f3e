//! Two copies: which one is the state, where the next write goes, and what the boot
//! script does with it.

use crate::format::{EnvCopy, Invalid, decode, encode};
use crate::{BootState, Slot};

/// One of the two files on the FAT boot partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EnvFile {
    A,
    B,
}

impl EnvFile {
    pub const BOTH: [EnvFile; 2] = [EnvFile::A, EnvFile::B];

    pub fn other(self) -> EnvFile {
        match self {
            EnvFile::A => EnvFile::B,
            EnvFile::B => EnvFile::A,
        }
    }

    /// `pfxenv.a` or `pfxenv.b`.
    pub fn file_name(self) -> &'static str {
        match self {
            EnvFile::A => "pfxenv.a",
            EnvFile::B => "pfxenv.b",
        }
    }
}

/// Of two valid copies with these sequence numbers, the newer. A copy whose number is the
/// other's plus one (modulo 2^32) is newer; otherwise the higher number; a tie goes to `a`.
///
/// Every writer writes the newest number plus one, so the two copies' numbers differ by
/// one after the first write (and the image's initial pair is 1 and 0): the first rule
/// decides every reachable case, and it is the highest-wins rule of the design except at
/// the wrap from 4294967295 to 0, where highest-wins would pin the state forever.
pub fn newer(seq_a: u32, seq_b: u32) -> EnvFile {
    if seq_b == seq_a.wrapping_add(1) {
        EnvFile::B
    } else if seq_a == seq_b.wrapping_add(1) || seq_a >= seq_b {
        EnvFile::A
    } else {
        EnvFile::B
    }
}

/// Both copies, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Env {
    pub a: Result<EnvCopy, Invalid>,
    pub b: Result<EnvCopy, Invalid>,
}

/// The state in force: from the newest valid copy, or the documented fallback when
/// neither is valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Current {
    /// The copy it came from; None: neither copy is valid, and `state` is
    /// [`BootState::fallback`].
    pub from: Option<EnvFile>,
    /// That copy's `PFX_SEQ`; None with `from`.
    pub seq: Option<u32>,
    pub state: BootState,
}

/// A write to make: these bytes into this file, in place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    pub file: EnvFile,
    pub seq: u32,
    pub state: BootState,
    pub bytes: Vec<u8>,
}

/// What the boot script does with a state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BootChoice {
    /// Boot `slot`, the first of `BOOT_ORDER` with attempts left, after writing `after`
    /// (its count one lower). `trial`: the count was 1, so this is its last attempt: the
    /// kernel command line gets `pfx.trial=1`.
    Boot {
        slot: Slot,
        left_before: u8,
        trial: bool,
        after: BootState,
    },
    /// Neither slot has attempts left: write `after` (both 3, the order kept) and reset.
    /// Documented: a retried boot is better than a unit that never boots again.
    ResetBoth { after: BootState },
}

impl BootChoice {
    pub fn after(&self) -> BootState {
        match self {
            BootChoice::Boot { after, .. } | BootChoice::ResetBoth { after } => *after,
        }
    }
}

/// The boot script's decision for a state.
pub fn boot_choice(state: &BootState) -> BootChoice {
    match state.bootable() {
        Some(slot) => {
            let left_before = state.left(slot);
            let mut after = *state;
            after.set_left(slot, left_before - 1);
            BootChoice::Boot {
                slot,
                left_before,
                trial: left_before == 1,
                after,
            }
        }
        None => {
            let mut after = *state;
            for s in Slot::BOTH {
                after.set_left(s, BootState::GOOD_LEFT);
            }
            BootChoice::ResetBoth { after }
        }
    }
}

/// The kernel command line the boot script boots `slot` with: the slot's own
/// `/boot/pfx-cmdline.txt` (its line, without the line end), then `root=PARTUUID=`,
/// `rauc.slot=` and, on a trial, `pfx.trial=1`.
pub fn bootargs(cmdline: &str, partuuid: &str, slot: Slot, trial: bool) -> String {
    let trial = if trial { " pfx.trial=1" } else { "" };
    format!("{cmdline} root=PARTUUID={partuuid} rauc.slot={slot}{trial}")
}

impl Env {
    /// Decodes both copies (each may be any bytes at all).
    pub fn read(a: &[u8], b: &[u8]) -> Env {
        Env {
            a: decode(a),
            b: decode(b),
        }
    }

    pub fn copy(&self, f: EnvFile) -> &Result<EnvCopy, Invalid> {
        match f {
            EnvFile::A => &self.a,
            EnvFile::B => &self.b,
        }
    }

    /// The newest valid copy, if any.
    pub fn newest(&self) -> Option<EnvFile> {
        match (&self.a, &self.b) {
            (Ok(a), Ok(b)) => Some(newer(a.seq, b.seq)),
            (Ok(_), Err(_)) => Some(EnvFile::A),
            (Err(_), Ok(_)) => Some(EnvFile::B),
            (Err(_), Err(_)) => None,
        }
    }

    pub fn current(&self) -> Current {
        match self.newest() {
            Some(f) => match self.copy(f) {
                Ok(c) => Current {
                    from: Some(f),
                    seq: Some(c.seq),
                    state: c.state,
                },
                // newest() names only a valid copy.
                Err(_) => Current::fallback(),
            },
            None => Current::fallback(),
        }
    }

    /// The write that makes `state` the state: into the copy that is not the newest valid
    /// one (pfxenv.a when neither is valid), with the newest `PFX_SEQ` plus one (1 when
    /// neither is valid). A torn write can only spoil that copy; the newest stays.
    pub fn write(&self, state: &BootState) -> Write {
        let cur = self.current();
        let file = cur.from.map_or(EnvFile::A, EnvFile::other);
        let seq = cur.seq.map_or(1, |s| s.wrapping_add(1));
        Write {
            file,
            seq,
            state: *state,
            bytes: encode(seq, state),
        }
    }

    /// What the boot script does on the next boot with these two copies: its choice, and
    /// the write it makes before booting (or resetting).
    pub fn boot(&self) -> (BootChoice, Write) {
        let choice = boot_choice(&self.current().state);
        let write = self.write(&choice.after());
        (choice, write)
    }
}

impl Current {
    fn fallback() -> Current {
        Current {
            from: None,
            seq: None,
            state: BootState::fallback(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::initial_copies;

    fn env_of(a: &[u8], b: &[u8]) -> Env {
        Env::read(a, b)
    }

    /// Applies a write to the pair.
    fn apply(a: &mut Vec<u8>, b: &mut Vec<u8>, w: &Write) {
        match w.file {
            EnvFile::A => *a = w.bytes.clone(),
            EnvFile::B => *b = w.bytes.clone(),
        }
    }

    #[test]
    fn newer_rule() {
        assert_eq!(newer(1, 0), EnvFile::A);
        assert_eq!(newer(1, 2), EnvFile::B);
        assert_eq!(newer(7, 7), EnvFile::A);
        assert_eq!(newer(3, 10), EnvFile::B);
        assert_eq!(newer(10, 3), EnvFile::A);
        assert_eq!(newer(u32::MAX, 0), EnvFile::B);
        assert_eq!(newer(0, u32::MAX), EnvFile::A);
        assert_eq!(newer(u32::MAX - 1, u32::MAX), EnvFile::B);
    }

    #[test]
    fn fresh_image_boots_a_and_counts_down() {
        let [(_, mut a), (_, mut b)] = initial_copies();
        let env = env_of(&a, &b);
        assert_eq!(env.newest(), Some(EnvFile::A));
        let (choice, w) = env.boot();
        assert_eq!(
            choice,
            BootChoice::Boot {
                slot: Slot::A,
                left_before: 3,
                trial: false,
                after: BootState::new(Slot::A, 2, 0)
            }
        );
        assert_eq!((w.file, w.seq), (EnvFile::B, 2));
        apply(&mut a, &mut b, &w);
        let env = env_of(&a, &b);
        assert_eq!(env.newest(), Some(EnvFile::B));
        assert_eq!(env.current().state, BootState::new(Slot::A, 2, 0));
    }

    #[test]
    fn trial_then_back_by_itself() {
        let [(_, mut a), (_, mut b)] = initial_copies();
        let mut s = env_of(&a, &b).current().state;
        s.set_primary(Slot::B);
        s.set_left(Slot::B, BootState::TRIAL_LEFT);
        let w = env_of(&a, &b).write(&s);
        apply(&mut a, &mut b, &w);
        let (c1, w1) = env_of(&a, &b).boot();
        assert!(matches!(
            c1,
            BootChoice::Boot {
                slot: Slot::B,
                left_before: 1,
                trial: true,
                ..
            }
        ));
        apply(&mut a, &mut b, &w1);
        let (c2, _) = env_of(&a, &b).boot();
        assert!(matches!(
            c2,
            BootChoice::Boot {
                slot: Slot::A,
                left_before: 3,
                trial: false,
                ..
            }
        ));
    }

    #[test]
    fn torn_write_keeps_the_state_before() {
        let [(_, mut a), (_, mut b)] = initial_copies();
        let before = env_of(&a, &b).current();
        let (_, w) = env_of(&a, &b).boot();
        // Torn: the new CRC and first entry, then what the file held before (all the
        // entries sit in its first 512-byte sector, so a real tear cuts inside it only
        // where the medium writes less than a sector at once).
        let old = match w.file {
            EnvFile::A => &a,
            EnvFile::B => &b,
        };
        let mut torn = w.bytes[..16].to_vec();
        torn.extend_from_slice(&old[16..]);
        assert!(decode(&torn).is_err());
        apply(
            &mut a,
            &mut b,
            &Write {
                bytes: torn,
                ..w.clone()
            },
        );
        assert_eq!(env_of(&a, &b).current(), before);
    }

    #[test]
    fn neither_valid_is_the_fallback_and_writes_a() {
        let env = env_of(&[0u8; 3], &vec![0xffu8; crate::ENV_SIZE]);
        let cur = env.current();
        assert_eq!((cur.from, cur.seq), (None, None));
        assert_eq!(cur.state, BootState::fallback());
        let (choice, w) = env.boot();
        assert!(matches!(
            choice,
            BootChoice::Boot {
                slot: Slot::A,
                left_before: 3,
                ..
            }
        ));
        assert_eq!((w.file, w.seq), (EnvFile::A, 1));
    }

    #[test]
    fn nothing_bootable_resets_both_keeping_the_order() {
        let s = BootState::new(Slot::B, 0, 0);
        assert_eq!(
            boot_choice(&s),
            BootChoice::ResetBoth {
                after: BootState::new(Slot::B, 3, 3)
            }
        );
    }

    #[test]
    fn the_write_wraps_and_stays_newest() {
        let s = BootState::initial();
        let a = encode(u32::MAX, &s);
        let b = encode(u32::MAX - 1, &s);
        let w = env_of(&a, &b).write(&BootState::fallback());
        assert_eq!((w.file, w.seq), (EnvFile::B, 0));
        let env = env_of(&a, &w.bytes);
        assert_eq!(env.newest(), Some(EnvFile::B));
        assert_eq!(env.current().state, BootState::fallback());
    }

    #[test]
    fn bootargs_form() {
        assert_eq!(
            bootargs("console=ttyAMA0 quiet", "1234abcd-03", Slot::B, true),
            "console=ttyAMA0 quiet root=PARTUUID=1234abcd-03 rauc.slot=B pfx.trial=1"
        );
        assert_eq!(
            bootargs("", "1234abcd-02", Slot::A, false),
            " root=PARTUUID=1234abcd-02 rauc.slot=A"
        );
    }
}
