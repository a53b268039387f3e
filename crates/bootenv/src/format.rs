//! One copy's bytes: U-Boot's binary environment with an external CRC.
//!
//! Decoding mirrors, rule for rule, what U-Boot 2023.01 does with
//! `env import -d -c ADDR 0x4000 PFX_SEQ BOOT_ORDER BOOT_A_LEFT BOOT_B_LEFT` (cmd/nvedit.c
//! `do_env_import`, lib/hashtable.c `himport_r`), because the boot script reads the copies
//! that way and the two must agree on every blob, including hostile ones that happen to
//! carry a right CRC. What the script then does with the four strings is the second half
//! ([`EnvCopy`]'s rules), also mirrored here.

use crate::{BootState, Slot};

/// Size of each copy in bytes, `0x4000`: the `-s` of `env export` and the size of
/// `env import -c`.
pub const ENV_SIZE: usize = 16384;
/// The bytes after the CRC, which the CRC covers.
pub const DATA_SIZE: usize = ENV_SIZE - 4;

pub const PFX_SEQ: &str = "PFX_SEQ";
pub const BOOT_ORDER: &str = "BOOT_ORDER";
pub const BOOT_A_LEFT: &str = "BOOT_A_LEFT";
pub const BOOT_B_LEFT: &str = "BOOT_B_LEFT";

/// The four variables as U-Boot's import leaves them: `None` when absent (never there,
/// or deleted by a `NAME` or `NAME=` entry). Bytes, not text: a hostile copy may hold
/// anything but NUL.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RawVars {
    pub pfx_seq: Option<Vec<u8>>,
    pub boot_order: Option<Vec<u8>>,
    pub boot_a_left: Option<Vec<u8>>,
    pub boot_b_left: Option<Vec<u8>>,
}

impl RawVars {
    fn slot(&mut self, name: &[u8]) -> Option<&mut Option<Vec<u8>>> {
        match name {
            b"PFX_SEQ" => Some(&mut self.pfx_seq),
            b"BOOT_ORDER" => Some(&mut self.boot_order),
            b"BOOT_A_LEFT" => Some(&mut self.boot_a_left),
            b"BOOT_B_LEFT" => Some(&mut self.boot_b_left),
            _ => None,
        }
    }
}

/// A valid copy: its sequence number and the state it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnvCopy {
    pub seq: u32,
    pub state: BootState,
    /// The variables as found, before the rules made a [`BootState`] of them.
    pub raw: RawVars,
}

/// Why a copy is not valid. Every reason is one the boot script also refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    #[error(
        "{len} bytes, not {ENV_SIZE} (the copies are never resized; run `pfx-agent bootenv init --force` to make both again)"
    )]
    WrongSize { len: usize },
    #[error(
        "bad CRC: stored {stored:#010x}, computed {computed:#010x} (a torn or interrupted write, or never written)"
    )]
    BadCrc { stored: u32, computed: u32 },
    #[error("U-Boot refuses the import: an entry with a value but no name at byte {offset}")]
    EmptyName { offset: usize },
    #[error("no PFX_SEQ")]
    NoSeq,
    #[error("PFX_SEQ {value:?} is not 1 to 10 decimal digits of at most 4294967295")]
    BadSeq { value: String },
}

/// CRC32 (IEEE, as zlib and U-Boot compute it).
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(bytes);
    h.finalize()
}

/// The bytes of a copy holding `state` with `PFX_SEQ=seq`, exactly as U-Boot's
/// `env export -c -s 0x4000 ADDR BOOT_A_LEFT BOOT_B_LEFT BOOT_ORDER PFX_SEQ` writes them:
/// the entries sorted by name (U-Boot sorts), so the two writers' copies of one state are
/// byte for byte the same and a test can compare them.
pub fn encode(seq: u32, state: &BootState) -> Vec<u8> {
    let mut out = vec![0u8; ENV_SIZE];
    let entries = [
        (BOOT_A_LEFT, state.left(Slot::A).to_string()),
        (BOOT_B_LEFT, state.left(Slot::B).to_string()),
        (BOOT_ORDER, state.boot_order().to_string()),
        (PFX_SEQ, seq.to_string()),
    ];
    let mut p = 4;
    for (name, value) in entries {
        for b in name.bytes().chain([b'=']).chain(value.bytes()).chain([0]) {
            out[p] = b;
            p += 1;
        }
    }
    // out[p] is already the terminating NUL, and the rest the zero padding.
    let crc = crc32(&out[4..]);
    out[..4].copy_from_slice(&crc.to_le_bytes());
    out
}

/// Reads one copy. `Err` says why the boot script would not use it either.
pub fn decode(blob: &[u8]) -> Result<EnvCopy, Invalid> {
    if blob.len() != ENV_SIZE {
        return Err(Invalid::WrongSize { len: blob.len() });
    }
    let stored = u32::from_le_bytes([blob[0], blob[1], blob[2], blob[3]]);
    let computed = crc32(&blob[4..]);
    if stored != computed {
        return Err(Invalid::BadCrc { stored, computed });
    }
    let raw = import(&blob[4..]).map_err(|at| Invalid::EmptyName { offset: at + 4 })?;
    let seq = match &raw.pfx_seq {
        None => return Err(Invalid::NoSeq),
        Some(v) => parse_seq(v).ok_or_else(|| Invalid::BadSeq {
            value: String::from_utf8_lossy(v).into_owned(),
        })?,
    };
    let state = state_of(&raw);
    Ok(EnvCopy { seq, state, raw })
}

/// The boot script's rules for the three state variables (image/uboot/boot.cmd):
/// `BOOT_ORDER` exactly `B A` puts B first, anything else (absent, `A B`, garbage) reads
/// as `A B`; a count is its value when it is one decimal digit, else 0 (absent, `10`, `x`).
fn state_of(raw: &RawVars) -> BootState {
    let primary = match raw.boot_order.as_deref() {
        Some(b"B A") => Slot::B,
        _ => Slot::A,
    };
    BootState::new(
        primary,
        parse_left(raw.boot_a_left.as_deref()),
        parse_left(raw.boot_b_left.as_deref()),
    )
}

fn parse_left(v: Option<&[u8]>) -> u8 {
    match v {
        Some([d]) if d.is_ascii_digit() => d - b'0',
        _ => 0,
    }
}

/// 1 to 10 ASCII digits (leading zeros allowed: the script compares the numbers, not the
/// strings) of at most `u32::MAX`. The script checks the same with the regular expression
/// `^[0-9][0-9]?...$` and `test 0x$PFX_SEQ -le 0x4294967295`.
fn parse_seq(v: &[u8]) -> Option<u32> {
    if v.is_empty() || v.len() > 10 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = v.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
    u32::try_from(n).ok()
}

/// The four variables as U-Boot's `env import -d -c ... PFX_SEQ BOOT_ORDER BOOT_A_LEFT
/// BOOT_B_LEFT` finds them in `data` (the bytes after the CRC; the CRC is not checked
/// here). `Err(offset in data)`: an entry with a value and an empty name, which makes
/// U-Boot fail the whole import (and the script then refuses the copy).
///
/// - Each entry may start with blanks (space, tab), skipped. An entry starting with `#` is
///   a comment, up to its NUL.
/// - `NAME` (no `=`) and `NAME=` (empty value) delete NAME.
/// - In a value, a backslash before a non-NUL byte is dropped and that byte kept.
/// - A listed name is taken from its *first* entry, set or delete; later entries of the same
///   name are skipped (U-Boot strikes a name from the list when it meets it).
/// - Parsing stops at an empty entry (the `\0\0` end) or at the end of the data, which
///   reads as if a NUL followed it. The first entry is parsed even when empty: data that
///   starts with a NUL goes on with the entry after it (U-Boot's loop tests at its end).
pub fn import_vars(data: &[u8]) -> Result<RawVars, usize> {
    import(data)
}

/// `himport_r(data, DATA_SIZE, '\0', flag 0, nvars 4, the four names)`, rule for rule
/// (lib/hashtable.c in U-Boot 2023.01), walking the bytes as it does.
fn import(data: &[u8]) -> Result<RawVars, usize> {
    let size = data.len();
    let at = |i: usize| -> u8 { data.get(i).copied().unwrap_or(0) };
    let mut vars = RawVars::default();
    let mut seen = [false; 4];
    let index = |name: &[u8]| match name {
        b"PFX_SEQ" => Some(0),
        b"BOOT_ORDER" => Some(1),
        b"BOOT_A_LEFT" => Some(2),
        b"BOOT_B_LEFT" => Some(3),
        _ => None,
    };
    let mut dp = 0usize;
    loop {
        while at(dp) == b' ' || at(dp) == b'\t' {
            dp += 1;
        }
        if at(dp) == b'#' {
            while at(dp) != 0 {
                dp += 1;
            }
            dp += 1;
        } else {
            let name_start = dp;
            while at(dp) != b'=' && at(dp) != 0 {
                dp += 1;
            }
            let name = &data[name_start.min(size)..dp.min(size)];
            if at(dp) == 0 || at(dp + 1) == 0 {
                // "NAME" or "NAME=": delete.
                if at(dp) == b'=' {
                    dp += 1;
                }
                dp += 1;
                if let Some(i) = index(name).filter(|i| !seen[*i]) {
                    seen[i] = true;
                    if let Some(v) = vars.slot(name) {
                        *v = None;
                    }
                }
            } else {
                dp += 1; // the '='
                let mut value = Vec::new();
                while at(dp) != 0 {
                    if at(dp) == b'\\' && at(dp + 1) != 0 {
                        dp += 1;
                    }
                    value.push(at(dp));
                    dp += 1;
                }
                dp += 1;
                if name.is_empty() {
                    return Err(name_start);
                }
                if let Some(i) = index(name).filter(|i| !seen[*i]) {
                    seen[i] = true;
                    if let Some(v) = vars.slot(name) {
                        *v = Some(value);
                    }
                }
            }
        }
        if !(dp < size && at(dp) != 0) {
            break;
        }
    }
    Ok(vars)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A copy with `body` (entries without the final terminator) and a right CRC.
    fn blob(body: &[u8]) -> Vec<u8> {
        let mut out = vec![0u8; ENV_SIZE];
        out[4..4 + body.len()].copy_from_slice(body);
        let crc = crc32(&out[4..]);
        out[..4].copy_from_slice(&crc.to_le_bytes());
        out
    }

    #[test]
    fn encode_is_what_uboot_exports() {
        let b = encode(7, &BootState::new(Slot::B, 1, 3));
        assert_eq!(b.len(), ENV_SIZE);
        let body = b"BOOT_A_LEFT=1\0BOOT_B_LEFT=3\0BOOT_ORDER=B A\0PFX_SEQ=7\0\0";
        assert_eq!(&b[4..4 + body.len()], body);
        assert!(b[4 + body.len()..].iter().all(|x| *x == 0));
        assert_eq!(b, blob(&body[..body.len() - 1]));
        // The CRC, little-endian, of the 16380 bytes after it (checked against zlib's
        // crc32 in the QEMU suite, where U-Boot's own export is compared with this).
        let crc = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        assert_eq!(crc, crc32(&b[4..]));
    }

    #[test]
    fn crc32_is_ieee() {
        // The check value of CRC-32/ISO-HDLC (zlib's crc32).
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
    }

    #[test]
    fn roundtrip() {
        for seq in [0, 1, 9, 10, 4_294_967_295] {
            for s in [
                BootState::initial(),
                BootState::fallback(),
                BootState::new(Slot::B, 0, 9),
            ] {
                let c = decode(&encode(seq, &s)).unwrap();
                assert_eq!((c.seq, c.state), (seq, s));
            }
        }
    }

    #[test]
    fn invalid_copies_say_why() {
        assert_eq!(decode(&[0u8; 100]), Err(Invalid::WrongSize { len: 100 }));
        let zero = vec![0u8; ENV_SIZE];
        assert!(matches!(decode(&zero), Err(Invalid::BadCrc { .. })));
        let mut flipped = encode(3, &BootState::initial());
        flipped[20] ^= 1;
        assert!(matches!(decode(&flipped), Err(Invalid::BadCrc { .. })));
        // An all-zero body with a right CRC: U-Boot imports nothing, so no PFX_SEQ.
        assert_eq!(decode(&blob(b"")), Err(Invalid::NoSeq));
        assert_eq!(
            decode(&blob(b"BOOT_ORDER=A B\0=5\0PFX_SEQ=1")),
            Err(Invalid::EmptyName { offset: 4 + 15 })
        );
        for bad in [
            &b"12a"[..],
            b"-1",
            b"+1",
            b" 1",
            b"0x10",
            b"4294967296",
            b"00000000001",
        ] {
            let mut body = b"PFX_SEQ=".to_vec();
            body.extend_from_slice(bad);
            assert!(
                matches!(decode(&blob(&body)), Err(Invalid::BadSeq { .. })),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn import_follows_uboot() {
        let seq = |body: &[u8]| decode(&blob(body)).map(|c| c.seq);
        // The first entry of a name wins; later ones are skipped.
        assert_eq!(seq(b"PFX_SEQ=5\0PFX_SEQ=9"), Ok(5));
        // A delete entry counts as the first: the later value is skipped.
        assert_eq!(seq(b"PFX_SEQ\0PFX_SEQ=9"), Err(Invalid::NoSeq));
        assert_eq!(seq(b"PFX_SEQ=\0PFX_SEQ=9"), Err(Invalid::NoSeq));
        // Leading blanks are skipped; a comment entry is skipped whole.
        assert_eq!(seq(b" \t PFX_SEQ=4"), Ok(4));
        assert_eq!(seq(b"#PFX_SEQ=1\0PFX_SEQ=2"), Ok(2));
        // A backslash before a byte is dropped.
        assert_eq!(seq(b"PFX_SEQ=1\\2"), Ok(12));
        // A trailing backslash (before the NUL) stays, and makes the value bad.
        assert!(matches!(seq(b"PFX_SEQ=12\\"), Err(Invalid::BadSeq { .. })));
        // Parsing stops at the first empty entry.
        assert_eq!(seq(b"X=1\0\0PFX_SEQ=2"), Err(Invalid::NoSeq));
        // An empty name with no value is a delete of nothing, not an error.
        assert_eq!(seq(b"=\0PFX_SEQ=3"), Ok(3));
        // A NUL first is an empty first entry, which does not end the parse.
        assert_eq!(seq(b"\0PFX_SEQ=3"), Ok(3));
        assert_eq!(seq(b"\0\0PFX_SEQ=3"), Err(Invalid::NoSeq));
        // A blank-only entry is not empty.
        assert_eq!(seq(b"X=1\0 \0PFX_SEQ=3"), Ok(3));
        // Other names, even odd ones, are ignored.
        assert_eq!(seq(b"PFX_SEQ =1\0pfx_seq=2\0PFX_SEQ=6"), Ok(6));
        // Leading zeros are the same number.
        assert_eq!(seq(b"PFX_SEQ=0000000012"), Ok(12));
        // An entry running to the very end of the data, with no NUL after it.
        let mut full = b"PFX_SEQ=8\0X=".to_vec();
        full.resize(DATA_SIZE, b'y');
        assert_eq!(seq(&full), Ok(8));
        // A comment running to the very end of the data.
        let mut tail = b"PFX_SEQ=1\0".to_vec();
        tail.resize(DATA_SIZE, b'#');
        assert_eq!(seq(&tail), Ok(1));
    }

    #[test]
    fn state_rules() {
        let st = |body: &[u8]| decode(&blob(body)).map(|c| c.state);
        assert_eq!(
            st(b"PFX_SEQ=1\0BOOT_ORDER=B A\0BOOT_A_LEFT=2\0BOOT_B_LEFT=1"),
            Ok(BootState::new(Slot::B, 2, 1))
        );
        for order in [&b"A B"[..], b"B  A", b"B", b"b a", b"B A ", b"A"] {
            let mut body = b"PFX_SEQ=1\0BOOT_ORDER=".to_vec();
            body.extend_from_slice(order);
            assert_eq!(st(&body).map(|s| s.primary()), Ok(Slot::A), "{order:?}");
        }
        assert_eq!(
            st(b"PFX_SEQ=1\0BOOT_A_LEFT=10\0BOOT_B_LEFT=x"),
            Ok(BootState::new(Slot::A, 0, 0))
        );
        assert_eq!(st(b"PFX_SEQ=1"), Ok(BootState::new(Slot::A, 0, 0)));
    }
}
