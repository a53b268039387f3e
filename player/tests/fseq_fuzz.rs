//! Runs the `cargo fuzz` target's body on stable Rust: the small files of the generated
//! corpus, files from the test writer, and a few thousand deterministic mutations of them.
//! Any panic fails. `real_exports_survive_mutations` (ignored; run by
//! `scripts/tests.d/21-fseq-real.sh`) does the same with real xLights exports.

#[path = "common/fseq_writer.rs"]
mod fseq_writer;

use fseq_writer::{Spec, corpus_file, frames, real_exports_dir, write};
use pfx_player::source::fseq::fuzz::fuzz_one;

#[path = "../../fuzz/rng.rs"]
#[allow(dead_code)] // each test uses what it needs of it
mod rng;
use rng::Rng;

fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut v = Vec::new();
    // The xLights-shaped corpus files that stay small (the fuzz body reads every frame).
    for name in [
        "xl-all-off.fseq",
        "zstd-unknown-headers-ed.fseq",
        "zlib-sparse.fseq",
    ] {
        v.push((name.to_string(), corpus_file(name).bytes()));
    }
    let fr = frames(40, 24);
    let specs = [
        (
            "v1",
            Spec {
                major: 1,
                compression: 0,
                ..Spec::default()
            },
        ),
        (
            "zlib",
            Spec {
                compression: 2,
                ..Spec::default()
            },
        ),
        (
            "zstd-multi",
            Spec {
                zstd_frames_per_block: 3,
                ..Spec::default()
            },
        ),
        (
            "sparse",
            Spec {
                sparse_ranges: vec![(500, 10), (3, 14)],
                ..Spec::default()
            },
        ),
        (
            "ed",
            Spec {
                extended: vec![(*b"XS", vec![7; 30])],
                ..Spec::default()
            },
        ),
    ];
    for (name, s) in specs {
        v.push((name.to_string(), write(&s, &fr)));
    }
    v
}

fn mutate(rng: &mut Rng, src: &[u8]) -> Vec<u8> {
    let mut b = src.to_vec();
    // Most mutations land in the header, where the parser's decisions are.
    let data_offset = u16::from_le_bytes([b[4], b[5]]) as usize;
    for _ in 0..1 + rng.below(4) {
        let hot = data_offset.clamp(1, b.len());
        let at = if rng.below(4) == 0 {
            rng.below(b.len())
        } else {
            rng.below(hot)
        };
        match rng.below(6) {
            0 => b[at] ^= 1 << rng.below(8),
            1 => b[at] = rng.next() as u8,
            2 => b[at] = [0, 0xff, 0x7f, 0x80, 1][rng.below(5)],
            3 => b.truncate(rng.below(b.len()).max(1)),
            4 => {
                let w =
                    [0u32, 1, 0xffff_ffff, 0x8000_0000, 0x00ff_ffff][rng.below(5)].to_le_bytes();
                for (i, x) in w.iter().enumerate() {
                    if let Some(y) = b.get_mut(at + i) {
                        *y = *x;
                    }
                }
            }
            _ => {
                let n = rng.below(16);
                let fill = rng.next() as u8;
                b.splice(at..at, std::iter::repeat_n(fill, n));
            }
        }
        if b.is_empty() {
            b.push(0);
        }
    }
    b
}

#[test]
fn fuzz_target_survives_seeds_and_mutations() {
    survive(&seeds());
}

#[test]
#[ignore = "needs real xLights exports: scripts/tests.d/21-fseq-real.sh"]
fn real_exports_survive_mutations() {
    let dir = real_exports_dir();
    let mut seeds = Vec::new();
    for name in [
        "test.fseq",
        "all_off.fseq",
        "polyline_test.fseq",
        "dusk-to-dawn.fseq",
    ] {
        let path = dir.join(name);
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        seeds.push((name.to_string(), bytes));
    }
    survive(&seeds);
}

fn survive(seeds: &[(String, Vec<u8>)]) {
    let mut read = 0u64;
    for (name, s) in seeds {
        let n = fuzz_one(s);
        assert!(n > 0, "{name}: a valid seed should read frames");
        read += n as u64;
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let per_seed = 4000 / seeds.len();
    for (name, s) in seeds {
        for i in 0..per_seed {
            let m = mutate(&mut rng, s);
            let r = std::panic::catch_unwind(|| fuzz_one(&m));
            match r {
                Ok(n) => read += n as u64,
                Err(_) => {
                    let out = std::env::temp_dir().join(format!("fseq-crash-{name}-{i}.fseq"));
                    let _ = std::fs::write(&out, &m);
                    panic!(
                        "{name} mutation {i} panicked; input saved to {}",
                        out.display()
                    );
                }
            }
        }
    }
    eprintln!(
        "{} seeds, {} mutations, {read} frames read",
        seeds.len(),
        per_seed * seeds.len()
    );
}

#[test]
fn fuzz_target_handles_degenerate_inputs() {
    for b in [
        &b""[..],
        b"P",
        b"PSEQ",
        b"PSEQ\xff\xff\x00\x02",
        &[0u8; 64],
        &[0xffu8; 64],
    ] {
        assert_eq!(fuzz_one(b), 0);
    }
}
