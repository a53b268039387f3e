//! Fuzzes the boot environment on stable Rust, with deterministic seeds so a failure
//! reproduces (the failing input is printed):
//!
//! - hostile copies: seeds (what both writers write, and the odd shapes U-Boot's import
//!   accepts), then mutations of their entries from an alphabet of `=`, NUL, digits, blanks,
//!   `#`, `\`, the slot letters and the variable names; the CRC made right for most (so the
//!   parser runs) and left wrong, cut or grown for the rest;
//! - pairs of them through [`pfx_bootenv::fuzz::check_pair`]: the write rule, a torn write,
//!   the boot choice and RAUC's calls (see there);
//! - U-Boot's import rules, checked against a second reading of the same rules written
//!   differently (split at the NULs, not walked byte by byte), on every mutated copy.
//!
//! 30 000 copies and 15 000 pairs; the tests demand floors of valid copies and of each kind
//! of boot choice, so the properties of accepted input are exercised. About 2 s in a debug
//! build.

use pfx_bootenv::{
    BootChoice, BootState, DATA_SIZE, ENV_SIZE, Env, RawVars, Slot, crc32, encode, fuzz,
    import_vars,
};

#[path = "../../../fuzz/rng.rs"]
#[allow(dead_code)] // each test uses what it needs of it
mod rng;
use rng::Rng;

/// Bytes mutations insert: the format's delimiters, digits, and the words it is made of.
const PIECES: &[&[u8]] = &[
    b"=",
    b"\0",
    b"\0\0",
    b"0",
    b"1",
    b"2",
    b"3",
    b"9",
    b" ",
    b"\t",
    b"#",
    b"\\",
    b"A",
    b"B",
    b"A B",
    b"B A",
    b"PFX_SEQ",
    b"PFX_SEQ=",
    b"BOOT_ORDER=",
    b"BOOT_A_LEFT=",
    b"BOOT_B_LEFT=",
    b"BOOT_ORDER",
    b"4294967295",
    b"4294967296",
    b"0000000000",
    b"\xff",
];

/// Entry bodies (without the final NUL) both writers make, and shapes U-Boot reads.
fn seed_bodies() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for seq in [0u32, 1, 2, 9, 10, 99, 4_294_967_294, 4_294_967_295] {
        for s in [
            BootState::initial(),
            BootState::fallback(),
            BootState::new(Slot::B, 2, 1),
            BootState::new(Slot::B, 0, 0),
            BootState::new(Slot::A, 0, 3),
        ] {
            let b = encode(seq, &s);
            let end = b[4..].windows(2).position(|w| w == b"\0\0").unwrap_or(0);
            v.push(b[4..4 + end].to_vec());
        }
    }
    for odd in [
        &b" \tPFX_SEQ=0000000007\0#PFX_SEQ=99\0BOOT_ORDER=B A\0BOOT_ORDER=A B\0BOOT_A_LEFT=10\0BOOT_B_LEFT=2"[..],
        b"PFX_SEQ=9\0=junk\0BOOT_ORDER=A B",
        b"PFX_SEQ=1\\2\0BOOT_ORDER=B\0BOOT_A_LEFT\0BOOT_A_LEFT=3\0BOOT_B_LEFT=\\3",
        b"\0PFX_SEQ=3\0BOOT_B_LEFT=1\0BOOT_ORDER=B A",
        b"=\0 \0PFX_SEQ=5\0PFX_SEQ=6\0BOOT_A_LEFT=",
        b"PFX_SEQ=12\\",
        b"",
    ] {
        v.push(odd.to_vec());
    }
    v
}

fn with_crc(body: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; ENV_SIZE];
    let n = body.len().min(DATA_SIZE);
    out[4..4 + n].copy_from_slice(&body[..n]);
    let crc = crc32(&out[4..]);
    out[..4].copy_from_slice(&crc.to_le_bytes());
    out
}

fn mutate(rng: &mut Rng, body: &[u8]) -> Vec<u8> {
    let mut b = body.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(b.len() + 1);
        match rng.below(5) {
            0 | 1 => {
                let p = PIECES[rng.below(PIECES.len())];
                b.splice(at..at, p.iter().copied());
            }
            2 if at < b.len() => {
                let p = PIECES[rng.below(PIECES.len())];
                b[at] = p[0];
            }
            3 if at < b.len() => {
                let n = (1 + rng.below(8)).min(b.len() - at);
                b.drain(at..at + n);
            }
            _ => {
                // The body of another entry spliced in: first-wins and deletes meet.
                let p = PIECES[16 + rng.below(4)];
                b.splice(at..at, p.iter().copied().chain(*b"1\0"));
            }
        }
    }
    b
}

/// A hostile copy: mostly a mutated body with a right CRC; sometimes the CRC wrong, the
/// copy cut or grown, or plain noise.
fn hostile(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let pick = rng.below(seeds.len());
    let body = mutate(rng, &seeds[pick]);
    let mut blob = with_crc(&body);
    match rng.below(20) {
        0 => blob[rng.below(4)] ^= 1,
        1 => blob.truncate(rng.below(ENV_SIZE)),
        2 => blob.push(0),
        3 => {
            for x in blob.iter_mut().take(64) {
                *x = rng.next() as u8;
            }
        }
        _ => {}
    }
    blob
}

/// U-Boot's import rules read a second way: the data split at its NULs into entries.
fn import_by_entries(data: &[u8]) -> Result<RawVars, usize> {
    let mut vars = RawVars::default();
    let mut seen: Vec<&[u8]> = Vec::new();
    let mut pos = 0usize;
    let mut first = true;
    loop {
        // Stop at the end, or at an empty entry (not the first).
        if !first && (pos >= data.len() || data[pos] == 0) {
            break;
        }
        first = false;
        let end = data[pos.min(data.len())..]
            .iter()
            .position(|x| *x == 0)
            .map_or(data.len(), |i| pos + i);
        let entry = &data[pos.min(data.len())..end];
        let start = pos
            + entry
                .iter()
                .take_while(|x| **x == b' ' || **x == b'\t')
                .count();
        let text = &data[start.min(end)..end];
        pos = end + 1;
        if text.first() == Some(&b'#') {
            continue;
        }
        let (name, value) = match text.iter().position(|x| *x == b'=') {
            Some(eq) => (&text[..eq], &text[eq + 1..]),
            None => (text, &text[text.len()..]),
        };
        if value.is_empty() {
            // NAME or NAME=: a delete (of nothing, for an empty name).
            if !seen.contains(&name) {
                seen.push(name);
                set(&mut vars, name, None);
            }
            continue;
        }
        if name.is_empty() {
            return Err(start);
        }
        let mut v = Vec::new();
        let mut i = 0;
        while i < value.len() {
            if value[i] == b'\\' && i + 1 < value.len() {
                i += 1;
            }
            v.push(value[i]);
            i += 1;
        }
        if !seen.contains(&name) {
            seen.push(name);
            set(&mut vars, name, Some(v));
        }
    }
    Ok(vars)
}

fn set(vars: &mut RawVars, name: &[u8], v: Option<Vec<u8>>) {
    match name {
        b"PFX_SEQ" => vars.pfx_seq = v,
        b"BOOT_ORDER" => vars.boot_order = v,
        b"BOOT_A_LEFT" => vars.boot_a_left = v,
        b"BOOT_B_LEFT" => vars.boot_b_left = v,
        _ => {}
    }
}

fn show(b: &[u8]) -> String {
    let end = b.len().min(120);
    format!("{:?}", String::from_utf8_lossy(&b[..end]))
}

#[test]
fn hostile_copies_decode_as_uboot_imports_them() {
    let seeds = seed_bodies();
    let mut rng = Rng(0xb007_e4f0_2026_1202);
    let (mut valid, mut imported) = (0, 0);
    for i in 0..30_000 {
        let blob = hostile(&mut rng, &seeds);
        let r = std::panic::catch_unwind(|| pfx_bootenv::decode(&blob));
        let Ok(decoded) = r else {
            panic!("decode panicked on #{i}: {}", show(&blob))
        };
        if blob.len() == ENV_SIZE {
            let a = import_vars(&blob[4..]);
            let b = import_by_entries(&blob[4..]);
            assert_eq!(
                a,
                b,
                "#{i}: the two readings differ on {}",
                show(&blob[4..])
            );
            imported += usize::from(a.is_ok());
        }
        valid += usize::from(decoded.is_ok());
    }
    println!("30000 hostile copies: {imported} imported, {valid} valid");
    assert!(
        valid > 7_000,
        "only {valid} valid copies: the mutations miss the format"
    );
    assert!(imported > 15_000, "only {imported} imports");
}

#[test]
fn pairs_keep_the_write_rule() {
    let seeds = seed_bodies();
    let mut rng = Rng(0x5eed_0020);
    let (mut boots, mut resets, mut trials, mut fallbacks) = (0, 0, 0, 0);
    for i in 0..15_000 {
        let a = hostile(&mut rng, &seeds);
        let b = hostile(&mut rng, &seeds);
        if std::panic::catch_unwind(|| fuzz::check_pair(&a, &b)).is_err() {
            panic!("pair #{i}:\n a = {}\n b = {}", show(&a), show(&b));
        }
        let env = Env::read(&a, &b);
        fallbacks += usize::from(env.newest().is_none());
        match env.boot().0 {
            BootChoice::Boot { trial, .. } => {
                boots += 1;
                trials += usize::from(trial);
            }
            BootChoice::ResetBoth { .. } => resets += 1,
        }
    }
    println!(
        "15000 pairs: {boots} boots ({trials} trials), {resets} resets of both, {fallbacks} with neither copy valid"
    );
    assert!(boots > 5_000 && trials > 500 && resets > 150 && fallbacks > 150);
}
