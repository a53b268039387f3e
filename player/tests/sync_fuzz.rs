//! Runs the `cargo fuzz` MultiSync target's body on stable Rust: valid packets of every
//! type, and many thousand deterministic mutations of them (bytes flipped, cut, grown,
//! the length field lied about). Any panic fails.

use pfx_player::sync::packet::{self, Action, FileType, Ping, Sync, fuzz_one};

#[path = "../../fuzz/rng.rs"]
#[allow(dead_code)] // each test uses what it needs of it
mod rng;
use rng::Rng;

fn seeds() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for (a, name) in [
        (Action::Open, "show.fseq"),
        (Action::Start, "a"),
        (Action::Sync, "Christmas Medley 2026.fseq"),
        (Action::Stop, ""),
    ] {
        let mut buf = [0u8; 128];
        let s = Sync {
            action: a,
            file_type: FileType::Sequence,
            frame: 1234,
            seconds: 30.85,
            name,
        };
        let n = packet::encode_sync(&mut buf, &s).expect("encode");
        v.push(buf[..n].to_vec());
    }
    v.push(packet::encode_blank().to_vec());
    let p = Ping {
        version: 3,
        discover: true,
        system_type: 0xC0,
        major: 9,
        minor: 3,
        mode: 6,
        ipv4: [10, 0, 0, 1].into(),
        hostname: "master".into(),
        version_text: "9.3".into(),
        model: "pfx".into(),
        ranges: "1-512,1000-2000".into(),
    };
    let v3 = packet::encode_ping_v3(&p).to_vec();
    // v1 and v2 shapes: the same fields cut to their lengths, version byte set.
    let mut v1 = v3[..7 + 169].to_vec();
    v1[5..7].copy_from_slice(&169u16.to_le_bytes());
    v1[7] = 1;
    let mut v2 = v3[..7 + 200].to_vec();
    v2[5..7].copy_from_slice(&200u16.to_le_bytes());
    v2[7] = 2;
    v.extend([v3, v1, v2]);
    v
}

#[test]
fn valid_packets_survive_mutation() {
    let mut rng = Rng(0x5eed_1234);
    for seed in seeds() {
        fuzz_one(&seed);
        for _ in 0..4000 {
            let mut d = seed.clone();
            match rng.below(5) {
                0 => {
                    let i = rng.below(d.len());
                    d[i] = rng.next() as u8;
                }
                1 => {
                    // Cut short, and half the time with a header that agrees, so the
                    // body's own checks are reached.
                    d.truncate(rng.below(d.len() + 1));
                    if d.len() >= 7 && rng.below(2) == 0 {
                        let body = (d.len() - 7) as u16;
                        d[5..7].copy_from_slice(&body.to_le_bytes());
                    }
                }
                2 => {
                    for _ in 0..rng.below(40) {
                        d.push(rng.next() as u8);
                    }
                }
                3 => {
                    // The length field says something else; sometimes made to agree.
                    let body = if rng.below(2) == 0 {
                        rng.next() as u16
                    } else {
                        (d.len() - 7) as u16
                    };
                    d[5..7].copy_from_slice(&body.to_le_bytes());
                }
                _ => {
                    if d.len() > 8 {
                        d[7] = rng.next() as u8;
                        d[8] = rng.next() as u8;
                    }
                }
            }
            fuzz_one(&d);
        }
    }
}

#[test]
fn random_bytes_with_the_magic_never_panic() {
    let mut rng = Rng(99);
    for _ in 0..20_000 {
        let len = rng.below(400);
        let mut d: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        if d.len() >= 7 {
            d[..4].copy_from_slice(b"FPPD");
            d[4] = rng.below(8) as u8;
            let body = (d.len() - 7) as u16;
            d[5..7].copy_from_slice(&body.to_le_bytes());
        }
        fuzz_one(&d);
    }
}
