//! Bytes as the two boot environment copies (`pfx_bootenv`): what a power cut, a bad SD
//! card or a careless hand leaves in pfxenv.a and pfxenv.b. The first byte picks the
//! split and whether each copy gets a right CRC (without one, nearly every input stops at
//! the CRC check); the rest becomes the copies' entries. A panic in `check_pair` is a bug.
//!
//!   cargo +nightly fuzz run bootenv -- -max_total_time=120
#![no_main]

use pfx_bootenv::{DATA_SIZE, ENV_SIZE, crc32, fuzz::check_pair};

fn copy(body: &[u8], right_crc: bool) -> Vec<u8> {
    let mut out = vec![0u8; ENV_SIZE];
    let n = body.len().min(DATA_SIZE);
    out[4..4 + n].copy_from_slice(&body[..n]);
    let crc = crc32(&out[4..]);
    out[..4].copy_from_slice(&(if right_crc { crc } else { !crc }).to_le_bytes());
    out
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&ctl, rest)) = data.split_first() else {
        return;
    };
    let cut = rest.len() * usize::from(ctl >> 2) / 63;
    let (a, b) = rest.split_at(cut.min(rest.len()));
    check_pair(&copy(a, ctl & 1 == 0), &copy(b, ctl & 2 == 0));
    // And as raw files of any size.
    check_pair(a, b);
});
