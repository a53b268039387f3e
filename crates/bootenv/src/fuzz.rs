//! The properties the fuzz tests check on any two copies (the stable test
//! `tests/bootenv_fuzz.rs` and the cargo-fuzz target `fuzz/fuzz_targets/bootenv.rs` both
//! call [`check_pair`]). A panic here is a bug: of the decoder (it must take any bytes),
//! of the write rule, or of the boot choice.

use crate::{BootChoice, BootState, Env, EnvFile, RaucOp, Slot, decode, encode};

/// Any two copies, any bytes.
///
/// - Decoding never panics; a valid copy written again with its own sequence number and
///   state decodes to the same.
/// - The write the boot script makes goes to the copy that is not the newest valid one
///   (pfxenv.a when neither is valid); afterwards that copy is the newest and holds the
///   state written, with the next number.
/// - The same write torn (one bit of it wrong) leaves the state as it was.
/// - The boot choice boots the first slot of the order with attempts left and takes one
///   of them, the trial being its last; with none left, both go to 3 and the order stays.
/// - Every RAUC call on the state in force does what it says.
pub fn check_pair(a: &[u8], b: &[u8]) {
    let env = Env::read(a, b);
    for f in EnvFile::BOTH {
        if let Ok(c) = env.copy(f) {
            let again = decode(&encode(c.seq, &c.state));
            assert!(
                matches!(&again, Ok(d) if d.seq == c.seq && d.state == c.state),
                "{f:?}: {c:?} re-encoded decodes to {again:?}"
            );
        }
    }
    let before = env.current();
    let (choice, w) = env.boot();
    match env.newest() {
        Some(n) => assert_eq!(w.file, n.other(), "the write must go to the other copy"),
        None => assert_eq!((w.file, w.seq), (EnvFile::A, 1)),
    }
    let put = |bytes: &[u8]| match w.file {
        EnvFile::A => Env::read(bytes, b),
        EnvFile::B => Env::read(a, bytes),
    };
    let after = put(&w.bytes).current();
    assert_eq!(
        after.from,
        Some(w.file),
        "the written copy must be the newest"
    );
    assert_eq!(after.seq, Some(w.seq));
    assert_eq!(after.state, choice.after());
    let mut torn = w.bytes.clone();
    // A bit of the entries wrong: the CRC catches every single-bit error.
    torn[8] ^= 0x04;
    assert_eq!(
        put(&torn).current(),
        before,
        "a torn write must leave the state"
    );

    let s = before.state;
    match choice {
        BootChoice::Boot {
            slot,
            left_before,
            trial,
            after,
        } => {
            assert!(left_before > 0);
            assert_eq!(Some(slot), s.bootable());
            assert_eq!(after.left(slot), left_before - 1);
            assert_eq!(after.left(slot.other()), s.left(slot.other()));
            assert_eq!(after.primary(), s.primary());
            assert_eq!(trial, left_before == 1);
        }
        BootChoice::ResetBoth { after } => {
            assert_eq!((s.left(Slot::A), s.left(Slot::B)), (0, 0));
            assert_eq!(
                after,
                BootState::new(s.primary(), BootState::GOOD_LEFT, BootState::GOOD_LEFT)
            );
        }
    }
    for x in Slot::BOTH {
        let get = |op: RaucOp, st: &BootState| op.apply(st).ok().and_then(|o| o.print);
        let good = |st: &BootState| get(RaucOp::GetState(x), st);
        let set = |op: RaucOp| match op.apply(&s) {
            Ok(o) => o.write.unwrap_or(s),
            Err(e) => panic!("{op:?} on {s:?}: {e}"),
        };
        let p = set(RaucOp::SetPrimary(x));
        assert_eq!(get(RaucOp::GetPrimary, &p), Some(x.name()));
        assert_eq!(p.left(x.other()), s.left(x.other()));
        assert_eq!(good(&set(RaucOp::SetState(x, true))), Some("good"));
        let bad = set(RaucOp::SetState(x, false));
        assert_eq!(good(&bad), Some("bad"));
        assert_ne!(get(RaucOp::GetPrimary, &bad), Some(x.name()));
    }
}
