//! RAUC's custom bootloader backend (`bootloader=custom`,
//! `[handlers] bootloader-custom-backend=`), as RAUC 1.8 calls it (src/bootchooser.c
//! `custom_backend_get`/`custom_backend_set`, docs/integration.rst): the handler runs with
//! exactly one of
//!
//! - `get-primary`: print the primary slot's bootname;
//! - `get-state BOOTNAME`: print `good` or `bad`;
//! - `set-primary BOOTNAME`;
//! - `set-state BOOTNAME good|bad`;
//!
//! and exits 0 on success, non-zero on failure. RAUC strips white space around what a
//! `get-` prints. `rauc status` asks get-primary and get-state for every slot; `rauc
//! install` marks its target slot bad before writing it; `rauc status mark-active` is
//! set-primary, `mark-good`/`mark-bad` are set-state. Nothing else is ever called.

use crate::{BootState, Slot};

/// One call of the handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RaucOp {
    GetPrimary,
    GetState(Slot),
    SetPrimary(Slot),
    SetState(Slot, bool),
}

/// A call that is not one of the four, or a `get-primary` with no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RaucError {
    #[error(
        "expected one of: get-primary | get-state BOOTNAME | set-primary BOOTNAME | set-state BOOTNAME good|bad (RAUC's custom bootloader backend calls), got {0:?}"
    )]
    Usage(Vec<String>),
    #[error(transparent)]
    Slot(#[from] crate::BadSlot),
    #[error("state {0:?} is not good or bad")]
    State(String),
    #[error(
        "no primary slot: neither A nor B has boot attempts left (the boot script resets both to 3 on the next boot)"
    )]
    NoPrimary,
}

/// What a call answers: a line to print, and the state to write when it changed one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RaucOutcome {
    pub print: Option<&'static str>,
    /// `Some` only when the state differs from the one given: an unchanged state is not
    /// written again (no needless write to the SD card, no needless torn-write window).
    pub write: Option<BootState>,
}

impl RaucOp {
    /// Parses the handler's arguments (after the program name) exactly as RAUC passes them.
    pub fn parse<S: AsRef<str>>(args: &[S]) -> Result<RaucOp, RaucError> {
        let a: Vec<&str> = args.iter().map(AsRef::as_ref).collect();
        let usage = || RaucError::Usage(a.iter().map(|s| s.to_string()).collect());
        match a.as_slice() {
            ["get-primary"] => Ok(RaucOp::GetPrimary),
            ["get-state", slot] => Ok(RaucOp::GetState(slot.parse()?)),
            ["set-primary", slot] => Ok(RaucOp::SetPrimary(slot.parse()?)),
            ["set-state", slot, state] => {
                let slot = slot.parse()?;
                match *state {
                    "good" => Ok(RaucOp::SetState(slot, true)),
                    "bad" => Ok(RaucOp::SetState(slot, false)),
                    other => Err(RaucError::State(other.to_string())),
                }
            }
            _ => Err(usage()),
        }
    }

    /// Does the call on a state.
    ///
    /// - get-primary: the first slot of `BOOT_ORDER` with attempts left (what the boot
    ///   script boots next); an error when neither has any.
    /// - get-state X: `good` when X has attempts left, else `bad`. (During a trial boot the
    ///   booted slot reads `bad`: its one attempt is spent until the health check marks it
    ///   good.)
    /// - set-primary X: `BOOT_ORDER` = X first, X's count = 1, the one trial boot.
    /// - set-state X good: X's count = 3; bad: 0, and X no longer first in `BOOT_ORDER`.
    pub fn apply(self, state: &BootState) -> Result<RaucOutcome, RaucError> {
        let mut next = *state;
        let print = match self {
            RaucOp::GetPrimary => Some(state.bootable().ok_or(RaucError::NoPrimary)?.name()),
            RaucOp::GetState(s) => Some(if state.left(s) > 0 { "good" } else { "bad" }),
            RaucOp::SetPrimary(s) => {
                next.set_primary(s);
                next.set_left(s, BootState::TRIAL_LEFT);
                None
            }
            RaucOp::SetState(s, good) => {
                next.set_left(s, if good { BootState::GOOD_LEFT } else { 0 });
                // A bad slot also leaves the head of the order: when the good slot's count
                // runs out too (power cuts before its health commit), the script gives both
                // 3 attempts again, and the first of the order must then be the good one,
                // not a slot whose write was cut short.
                if !good && next.primary() == s {
                    next.set_primary(s.other());
                }
                None
            }
        };
        Ok(RaucOutcome {
            print,
            write: (next != *state).then_some(next),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_marked_bad_leaves_the_head_of_the_order() {
        // The trial slot B first with its one attempt; RAUC marks it bad (a failed health
        // check, or an install writing it): A first, so a reset of both counts boots A.
        let st = BootState::new(Slot::B, 0, 1);
        let out = RaucOp::SetState(Slot::B, false).apply(&st).unwrap();
        let w = out.write.unwrap();
        assert_eq!(
            (w.primary(), w.left(Slot::B), w.left(Slot::A)),
            (Slot::A, 0, 0)
        );
        // Marking the slot that is not first bad keeps the order.
        let st = BootState::new(Slot::A, 2, 3);
        let w = RaucOp::SetState(Slot::B, false)
            .apply(&st)
            .unwrap()
            .write
            .unwrap();
        assert_eq!((w.primary(), w.left(Slot::B)), (Slot::A, 0));
    }

    #[test]
    fn parses_exactly_what_rauc_calls() {
        assert_eq!(RaucOp::parse(&["get-primary"]), Ok(RaucOp::GetPrimary));
        assert_eq!(
            RaucOp::parse(&["get-state", "B"]),
            Ok(RaucOp::GetState(Slot::B))
        );
        assert_eq!(
            RaucOp::parse(&["set-primary", "A"]),
            Ok(RaucOp::SetPrimary(Slot::A))
        );
        assert_eq!(
            RaucOp::parse(&["set-state", "B", "good"]),
            Ok(RaucOp::SetState(Slot::B, true))
        );
        assert_eq!(
            RaucOp::parse(&["set-state", "A", "bad"]),
            Ok(RaucOp::SetState(Slot::A, false))
        );
        for bad in [
            &[][..],
            &["get-primary", "A"][..],
            &["get-state"][..],
            &["set-state", "A"][..],
            &["set-state", "A", "good", "x"][..],
            &["mark-good"][..],
        ] {
            assert!(
                matches!(RaucOp::parse(bad), Err(RaucError::Usage(_))),
                "{bad:?}"
            );
        }
        assert!(matches!(
            RaucOp::parse(&["get-state", "a"]),
            Err(RaucError::Slot(_))
        ));
        assert!(matches!(
            RaucOp::parse(&["set-state", "A", "Good"]),
            Err(RaucError::State(_))
        ));
    }

    #[test]
    fn operations() {
        let s = BootState::new(Slot::A, 2, 0);
        let get = |op: RaucOp, s: &BootState| op.apply(s).unwrap().print.unwrap();
        assert_eq!(get(RaucOp::GetPrimary, &s), "A");
        assert_eq!(get(RaucOp::GetState(Slot::A), &s), "good");
        assert_eq!(get(RaucOp::GetState(Slot::B), &s), "bad");
        let b = RaucOp::SetPrimary(Slot::B)
            .apply(&s)
            .unwrap()
            .write
            .unwrap();
        assert_eq!(b, BootState::new(Slot::B, 2, 1));
        assert_eq!(get(RaucOp::GetPrimary, &b), "B");
        let good = RaucOp::SetState(Slot::B, true)
            .apply(&b)
            .unwrap()
            .write
            .unwrap();
        assert_eq!(good, BootState::new(Slot::B, 2, 3));
        let bad = RaucOp::SetState(Slot::B, false)
            .apply(&good)
            .unwrap()
            .write
            .unwrap();
        assert_eq!(bad, BootState::new(Slot::A, 2, 0));
        assert_eq!(get(RaucOp::GetPrimary, &bad), "A");
        // Unchanged: nothing to write.
        assert_eq!(
            RaucOp::SetState(Slot::B, false)
                .apply(&BootState::new(Slot::A, 3, 0))
                .unwrap()
                .write,
            None
        );
        assert_eq!(
            RaucOp::GetPrimary.apply(&BootState::new(Slot::B, 0, 0)),
            Err(RaucError::NoPrimary)
        );
    }
}
