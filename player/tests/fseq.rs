//! FSEQ reader: round trips through the test writer, the generated corpus (the shapes of
//! real xLights exports and the other layouts the format allows), and re-encodings of the
//! corpus frames as v1 / zlib / sparse / multi-frame zstd. Tests named `real_exports_*` are
//! `#[ignore]`d: they read real xLights files and run from `scripts/tests.d/21-fseq-real.sh`.

#[path = "common/fseq_writer.rs"]
mod fseq_writer;
#[path = "common/wait.rs"]
mod wait;

use std::path::PathBuf;
use std::time::Duration;

use fseq_writer::{Spec, corpus, frames, real_exports_dir, write};
use pfx_player::source::fseq::{self, Compression, FseqError, FseqFile, Prefetcher};

fn open(bytes: Vec<u8>) -> FseqFile {
    FseqFile::open_bytes("test.fseq", bytes).unwrap()
}

fn read_all(f: &mut FseqFile) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for n in 0..f.frames() {
        let mut b = vec![0xa5; f.frame_len()];
        f.read_frame(n, &mut b).unwrap();
        out.push(b);
    }
    out
}

/// The real exports' `.fseq` files, sorted; a missing or empty folder is a failure (these
/// tests only run when the suite found the folder).
fn real_export_files() -> Vec<PathBuf> {
    let dir = real_exports_dir();
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "fseq"))
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no .fseq files in {}", dir.display());
    v
}

#[test]
fn round_trip_every_layout() {
    let fr = frames(53, 37);
    let cases = [
        (
            "v1",
            Spec {
                major: 1,
                compression: 0,
                ..Spec::default()
            },
        ),
        (
            "v2 none",
            Spec {
                compression: 0,
                ..Spec::default()
            },
        ),
        ("v2 zstd", Spec::default()),
        (
            "v2 zlib",
            Spec {
                compression: 2,
                ..Spec::default()
            },
        ),
        (
            "v2 zstd 4 frames/block",
            Spec {
                zstd_frames_per_block: 4,
                ..Spec::default()
            },
        ),
        (
            "v2 zstd no reserved",
            Spec {
                reserved_blocks: 0,
                ..Spec::default()
            },
        ),
        (
            "v2.1 zstd 300 blocks",
            Spec {
                minor: 1,
                first_block_frames: 1,
                frames_per_block: 1,
                ..Spec::default()
            },
        ),
    ];
    for (name, spec) in cases {
        // 300 blocks needs more frames than 53: use 300 one-frame blocks.
        let fr = if spec.frames_per_block == 1 {
            frames(300, 5)
        } else {
            fr.clone()
        };
        let mut f = open(write(&spec, &fr));
        assert_eq!(f.frames() as usize, fr.len(), "{name}");
        assert_eq!(read_all(&mut f), fr, "{name}");
        assert_eq!(
            f.header().media_file().as_deref(),
            Some("song.mp3"),
            "{name}"
        );
        assert_eq!(
            f.header().producer().as_deref(),
            Some("pfx test writer"),
            "{name}"
        );
        assert_eq!(
            f.duration(),
            Duration::from_millis(fr.len() as u64 * 25),
            "{name}"
        );
    }
}

#[test]
fn block_count_uses_upper_nibble() {
    let spec = Spec {
        minor: 1,
        first_block_frames: 1,
        frames_per_block: 1,
        reserved_blocks: 10,
        ..Spec::default()
    };
    let f = open(write(&spec, &frames(300, 3)));
    assert_eq!(f.header().block_table_len, 310);
    assert_eq!(f.header().blocks.len(), 300);
}

#[test]
fn sequential_reads_decode_each_block_once() {
    let spec = Spec {
        first_block_frames: 10,
        frames_per_block: 16,
        ..Spec::default()
    };
    let mut f = open(write(&spec, &frames(58, 20)));
    read_all(&mut f);
    // 10 + 16 + 16 + 16 = 58 frames in 4 blocks.
    assert_eq!(f.header().blocks.len(), 4);
    assert_eq!(f.blocks_decoded(), 4);
}

#[test]
fn sparse_ranges_expand_to_absolute_channels() {
    // Stored order differs from channel order; a gap between the ranges stays zero.
    let ranges = vec![(100u32, 4u32), (10, 3)];
    let stored = vec![vec![1, 2, 3, 4, 5, 6, 7], vec![9, 9, 9, 9, 8, 8, 8]];
    for compression in [0u8, 1, 2] {
        let spec = Spec {
            compression,
            sparse_ranges: ranges.clone(),
            ..Spec::default()
        };
        let mut f = open(write(&spec, &stored));
        assert_eq!(f.frame_len(), 104);
        let all = read_all(&mut f);
        let mut want = vec![0u8; 104];
        want[100..104].copy_from_slice(&[1, 2, 3, 4]);
        want[10..13].copy_from_slice(&[5, 6, 7]);
        assert_eq!(all[0], want, "compression {compression}");
        assert_eq!(&all[1][100..104], &[9, 9, 9, 9]);
        assert_eq!(&all[1][10..13], &[8, 8, 8]);
        assert_eq!(all[1].iter().filter(|&&b| b != 0).count(), 7);
    }
}

#[test]
fn unknown_and_extended_headers() {
    let spec = Spec {
        var_headers: vec![
            (*b"ZZ", vec![1, 2, 3]),
            (*b"mf", b"a.wav\0".to_vec()),
            (*b"QQ", vec![]),
        ],
        extended: vec![(*b"XS", b"<xml/>".to_vec())],
        ..Spec::default()
    };
    let fr = frames(12, 9);
    let mut f = open(write(&spec, &fr));
    let h = f.header().clone();
    let codes: Vec<_> = h.variable_headers.iter().map(|v| v.code_str()).collect();
    assert_eq!(codes, ["ZZ", "mf", "QQ", "ED"]);
    assert_eq!(h.media_file().as_deref(), Some("a.wav"));
    assert_eq!(h.producer(), None);
    let x = h.extended().next().unwrap();
    assert_eq!(&x.code, b"XS");
    assert_eq!(f.read_extended(&x).unwrap(), b"<xml/>");
    assert_eq!(read_all(&mut f), fr);
}

#[test]
fn errors_name_file_field_and_range() {
    let fr = frames(20, 8);
    let mut bytes = write(&Spec::default(), &fr);
    let mut f = open(bytes.clone());
    let mut buf = vec![0; 8];
    let e = f.read_frame(20, &mut buf).unwrap_err();
    assert!(matches!(e, FseqError::FrameOutOfRange { .. }));
    assert_eq!(
        e.to_string(),
        "test.fseq: frame 20 is out of range: the sequence has frames 0..=19"
    );
    let e = f.read_frame(0, &mut [0u8; 7]).unwrap_err();
    assert!(e.to_string().contains("7 bytes but a frame is 8"), "{e}");

    // Truncated: the last block runs past the end.
    bytes.truncate(bytes.len() - 1);
    let e = FseqFile::open_bytes("cut.fseq", bytes)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("cut.fseq: not a valid FSEQ file: block table at byte "),
        "{e}"
    );
    assert!(
        e.contains("runs past the end of the file") && e.contains("truncated"),
        "{e}"
    );

    let e = FseqFile::open_bytes("x.fseq", b"GIF89a........................".to_vec())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("magic at byte 0") && e.contains("not an FSEQ file"),
        "{e}"
    );

    let e = fseq::open(std::path::Path::new("/nonexistent/show.fseq"))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("/nonexistent/show.fseq: error opening the file"),
        "{e}"
    );
}

#[test]
fn corrupt_block_is_an_error_at_read() {
    let fr = frames(30, 16);
    let mut bytes = write(
        &Spec {
            reserved_blocks: 0,
            ..Spec::default()
        },
        &fr,
    );
    let f = open(bytes.clone());
    let b = f.header().blocks[1];
    // Scribble over the second block's compressed bytes (keep its zstd magic).
    for i in 4..b.len as usize {
        bytes[b.offset as usize + i] ^= 0x5a;
    }
    let mut f = open(bytes);
    let mut buf = vec![0; 16];
    f.read_frame(0, &mut buf).unwrap();
    let e = f
        .read_frame(b.first_frame, &mut buf)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(&format!(
            "test.fseq: block 1 (at byte {}, frames from 10)",
            b.offset
        )),
        "{e}"
    );
}

#[test]
fn truncation_at_every_offset_is_an_error_not_a_panic() {
    for spec in [
        Spec {
            reserved_blocks: 2,
            zstd_frames_per_block: 2,
            ..Spec::default()
        },
        Spec {
            compression: 2,
            sparse_ranges: vec![(3, 5), (0, 2)],
            ..Spec::default()
        },
        Spec {
            major: 1,
            compression: 0,
            ..Spec::default()
        },
    ] {
        let stored = if spec.sparse_ranges.is_empty() {
            frames(14, 6)
        } else {
            frames(14, 7)
        };
        let bytes = write(&spec, &stored);
        for len in 0..bytes.len() {
            let r = FseqFile::open_bytes("t.fseq", bytes[..len].to_vec()).and_then(|mut f| {
                let mut buf = vec![0; f.frame_len()];
                for n in 0..f.frames() {
                    f.read_frame(n, &mut buf)?;
                }
                Ok(())
            });
            assert!(
                r.is_err(),
                "{spec:?} truncated to {len} of {} bytes read fine",
                bytes.len()
            );
        }
    }
}

/// Re-encodes `want` (expanded frames) as v1, zlib, multi-frame zstd and sparse zstd, and
/// checks the reader returns the same frames (sparse: zero outside the ranges).
fn reencoded_layouts_read_back(label: &str, want: &[Vec<u8>]) {
    for spec in [
        Spec {
            major: 1,
            compression: 0,
            ..Spec::default()
        },
        Spec {
            compression: 2,
            ..Spec::default()
        },
        Spec {
            zstd_frames_per_block: 3,
            frames_per_block: 40,
            ..Spec::default()
        },
    ] {
        let mut g = open(write(&spec, want));
        assert_eq!(read_all(&mut g), want, "{label} as {spec:?}");
    }
    // Sparse: the second half stored first, the first quarter after it.
    let len = want[0].len() as u32;
    let (a, b) = ((0u32, len / 4), (len / 2, len - len / 2));
    let stored: Vec<Vec<u8>> = want
        .iter()
        .map(|fr| [&fr[b.0 as usize..], &fr[..a.1 as usize]].concat())
        .collect();
    let mut g = open(write(
        &Spec {
            sparse_ranges: vec![b, a],
            ..Spec::default()
        },
        &stored,
    ));
    for (n, fr) in read_all(&mut g).iter().enumerate() {
        let mut m = want[n].clone();
        m[a.1 as usize..b.0 as usize].fill(0);
        assert_eq!(fr, &m, "{label} sparse frame {n}");
    }
}

fn first_frames(f: &mut FseqFile, n: u32) -> Vec<Vec<u8>> {
    let mut want = Vec::new();
    let mut buf = vec![0; f.frame_len()];
    for n in 0..f.frames().min(n) {
        f.read_frame(n, &mut buf).unwrap();
        want.push(buf.clone());
    }
    want
}

/// Every frame of every corpus file, and the header facts each was written with.
#[test]
fn corpus_reads_back_every_frame_and_header() {
    for c in corpus() {
        let mut f = FseqFile::open_bytes(c.name, c.bytes()).unwrap();
        let want = c.expected();
        assert_eq!(f.frames() as usize, c.frames, "{}", c.name);
        assert_eq!(f.frame_len(), c.channels, "{}", c.name);
        assert_eq!(read_all(&mut f), want, "{}", c.name);
        let h = f.header();
        assert_eq!(
            (h.major, h.minor, h.step_ms),
            (c.spec.major, c.spec.minor, c.spec.step_ms),
            "{}",
            c.name
        );
        assert_eq!(
            h.sparse_ranges.len(),
            c.spec.sparse_ranges.len(),
            "{}",
            c.name
        );
        if c.spec.major == 2 && c.spec.compression != 0 {
            assert_eq!(
                h.blocks[0].frames as usize, c.spec.first_block_frames,
                "{}: first block",
                c.name
            );
            assert_eq!(
                h.block_table_len as usize,
                h.blocks.len() + c.spec.reserved_blocks,
                "{}: reserved entries",
                c.name
            );
        }
        let text = |code: &[u8; 2]| {
            c.spec
                .var_headers
                .iter()
                .find(|(k, _)| k == code)
                .map(|(_, d)| {
                    String::from_utf8_lossy(d)
                        .trim_end_matches('\0')
                        .to_string()
                })
        };
        assert_eq!(h.media_file(), text(b"mf"), "{}", c.name);
        assert_eq!(h.producer(), text(b"sp"), "{}", c.name);
    }
}

/// The corpus holds every shape the reader must handle; a trimmed corpus fails here.
#[test]
fn corpus_covers_what_real_exports_and_the_format_hold() {
    let all = corpus();
    let has = |what: &str, p: &dyn Fn(&fseq_writer::CorpusFile) -> bool| {
        assert!(all.iter().any(p), "the corpus has no {what}");
    };
    has("v1 file", &|c| c.spec.major == 1);
    has("zlib file", &|c| c.spec.compression == 2);
    has("uncompressed v2 file", &|c| {
        c.spec.major == 2 && c.spec.compression == 0
    });
    has("zstd file with 50+ blocks", &|c| {
        c.spec.compression == 1
            && c.frames.saturating_sub(c.spec.first_block_frames) / c.spec.frames_per_block >= 50
    });
    has("block of several zstd frames", &|c| {
        c.spec.compression == 1 && c.spec.zstd_frames_per_block > 1
    });
    has("zstd sparse file", &|c| {
        c.spec.compression == 1 && c.spec.sparse_ranges.len() > 1
    });
    has("zlib sparse file", &|c| {
        c.spec.compression == 2 && !c.spec.sparse_ranges.is_empty()
    });
    has("mf header", &|c| {
        c.spec.var_headers.iter().any(|v| &v.0 == b"mf")
    });
    has("sp header", &|c| {
        c.spec.var_headers.iter().any(|v| &v.0 == b"sp")
    });
    has("unknown header", &|c| {
        c.spec
            .var_headers
            .iter()
            .any(|v| !matches!(&v.0, b"mf" | b"sp"))
    });
    has("ED extended data", &|c| !c.spec.extended.is_empty());
    has("reserved zero-length block entries", &|c| {
        c.spec.compression != 0 && c.spec.reserved_blocks > 0
    });
    has("block table over 255 entries", &|c| {
        c.spec.compression != 0 && c.frames / c.spec.frames_per_block + c.spec.reserved_blocks > 255
    });
    has("last block shorter than the others", &|c| {
        c.spec.compression != 0
            && (c.frames - c.spec.first_block_frames) % c.spec.frames_per_block != 0
    });
}

#[test]
fn corpus_matches_reencoded_layouts() {
    for c in corpus()
        .into_iter()
        .filter(|c| c.spec.compression == 1 && c.spec.sparse_ranges.is_empty())
    {
        let mut f = FseqFile::open_bytes(c.name, c.bytes()).unwrap();
        let want = first_frames(&mut f, 150);
        reencoded_layouts_read_back(c.name, &want);
    }
}

/// Writes the corpus into `$PFX_FSEQ_CORPUS_DIR`, for the independent Python decoder
/// (`scripts/tests.d/20-fseq.sh`) and for trying the player on it by hand.
#[test]
#[ignore = "writes files; run by scripts/tests.d/20-fseq.sh"]
fn write_corpus_to_dir() {
    let dir = std::env::var_os("PFX_FSEQ_CORPUS_DIR").expect("set PFX_FSEQ_CORPUS_DIR");
    let dir = PathBuf::from(dir);
    std::fs::create_dir_all(&dir).unwrap();
    for c in corpus() {
        fseq_writer::write_corpus_file(&dir, c.name);
    }
}

#[test]
#[ignore = "needs real xLights exports: scripts/tests.d/21-fseq-real.sh"]
fn real_exports_match_reencoded_layouts() {
    for path in real_export_files() {
        let mut f = fseq::open(&path).unwrap();
        let h = f.header().clone();
        assert_eq!(
            (h.major, h.compression),
            (2, Compression::Zstd),
            "{}",
            path.display()
        );
        let want = first_frames(&mut f, 150);
        reencoded_layouts_read_back(&path.display().to_string(), &want);
    }
}

#[test]
#[ignore = "needs real xLights exports: scripts/tests.d/21-fseq-real.sh"]
fn real_exports_headers() {
    for path in real_export_files() {
        let f = fseq::open(&path).unwrap();
        let h = f.header();
        let name = path.file_name().unwrap().to_str().unwrap();
        let (ch, frames, step) = match name {
            "test.fseq" | "all_off.fseq" => (6112, 600, 50),
            "dusk-to-dawn.fseq" => (8492, 600, 50),
            "polyline_test.fseq" => (7652, 600, 50),
            "playground.fseq" => (1200, 7850, 25),
            "new_years_idle.fseq" => (46712, 3600, 25),
            _ => continue,
        };
        assert_eq!(
            (h.channel_count, h.frames, h.step_ms),
            (ch, frames, step),
            "{name}"
        );
        assert_eq!(h.blocks[0].frames, 10, "{name}: xLights' short first block");
        assert!(
            h.block_table_len as usize > h.blocks.len(),
            "{name}: has reserved entries"
        );
        assert!(h.producer().unwrap().starts_with("xLights"), "{name}");
        assert_eq!(
            h.media_file().is_some(),
            name == "playground.fseq",
            "{name}"
        );
    }
}

#[test]
fn prefetcher_delivers_in_order_and_seeks_back() {
    let fr = frames(200, 11);
    let f = open(write(&Spec::default(), &fr));
    let mut p = Prefetcher::spawn(f, 8);
    for n in 0..200u32 {
        let got = p.wait_for(n, Duration::from_secs(5)).unwrap().to_vec();
        assert_eq!(got, fr[n as usize], "frame {n}");
    }
    // Loop restart: asking for frame 0 again makes the decoder seek.
    let _ = p.get(0);
    assert_eq!(p.wait_for(0, Duration::from_secs(5)).unwrap(), &fr[0][..]);
    // Jump far ahead.
    assert_eq!(
        p.wait_for(150, Duration::from_secs(5)).unwrap(),
        &fr[150][..]
    );
    assert!(p.stats().seeks >= 2, "{:?}", p.stats());
    assert_eq!(p.error(), None);
}

#[test]
fn prefetcher_get_never_returns_a_later_frame_and_counts_late() {
    let fr = frames(100, 4);
    let f = open(write(&Spec::default(), &fr));
    let mut p = Prefetcher::spawn(f, 4);
    // The decoder fills its pool (frames 0..=5; 5 is its last), then ask for frame 50:
    // not ready.
    assert!(p.wait_for(0, Duration::from_secs(5)).is_some());
    assert_eq!(p.wait_for(5, Duration::from_secs(5)), Some(&fr[5][..]));
    let late_before = p.stats().late;
    if let Some(got) = p.get(50) {
        let got = got.to_vec();
        let idx = fr.iter().position(|x| *x == got).unwrap();
        assert!(idx < 50, "returned frame {idx} for a request of 50");
    }
    assert_eq!(p.stats().late, late_before + 1);
    assert_eq!(p.wait_for(50, Duration::from_secs(5)).unwrap(), &fr[50][..]);
    // Skipping ahead by a few frames recycles the ones between.
    assert_eq!(p.wait_for(53, Duration::from_secs(5)).unwrap(), &fr[53][..]);
}

/// `fr` written with no reserved blocks, block `k`'s compressed bytes past its first four
/// overwritten (it no longer decodes), and that block's table entry.
fn with_corrupt_block(fr: &[Vec<u8>], k: usize) -> (Vec<u8>, fseq::Block) {
    let spec = Spec {
        reserved_blocks: 0,
        ..Spec::default()
    };
    let mut bytes = write(&spec, fr);
    let b = open(bytes.clone()).header().blocks[k];
    for i in 4..b.len as usize {
        bytes[b.offset as usize + i] = 0xff;
    }
    (bytes, b)
}

#[test]
fn prefetcher_is_full_once_its_pool_is_decoded_and_never_when_decoding_failed() {
    let fr = frames(100, 4);
    // ahead 4: a pool of 6 buffers, frames 0..=5 before anything is taken.
    let mut p = Prefetcher::spawn(open(write(&Spec::default(), &fr)), 4);
    wait::wait_until(
        Duration::from_secs(5),
        "the pool of 6 frames decoded",
        || p.is_full(),
    );
    assert_eq!(p.get(0), Some(&fr[0][..]));
    assert!(p.is_full(), "the frame taken is still one of the pool's");
    // Moving on frees buffers; the decoder fills them again with what follows.
    assert_eq!(p.wait_for(3, Duration::from_secs(5)), Some(&fr[3][..]));
    wait::wait_until(Duration::from_secs(5), "the pool full again", || {
        p.is_full()
    });
    assert_eq!(
        p.get(8),
        Some(&fr[8][..]),
        "full means frames 3..=8 decoded"
    );

    // A decoder stopped on a corrupt first block decodes nothing: never full.
    let (bytes, _) = with_corrupt_block(&fr, 0);
    let p = Prefetcher::spawn(open(bytes), 4);
    wait::wait_until(Duration::from_secs(5), "the decode error", || {
        p.errors() > 0
    });
    assert!(!p.is_full(), "no frame was decoded");
}

#[test]
fn prefetcher_reports_corrupt_block_without_panicking() {
    let fr = frames(60, 16);
    let (bytes, b) = with_corrupt_block(&fr, 2);
    let mut p = Prefetcher::spawn(open(bytes), 4);
    for n in 0..b.first_frame {
        assert_eq!(
            p.wait_for(n, Duration::from_secs(5)).unwrap(),
            &fr[n as usize][..]
        );
    }
    assert!(
        p.wait_for(b.first_frame, Duration::from_millis(500))
            .is_none()
    );
    let e = p.error().unwrap();
    assert!(e.contains("block 2"), "{e}");
    assert_eq!(p.errors(), 1);
    // Seeking back still works after the error.
    assert_eq!(p.wait_for(0, Duration::from_secs(5)).unwrap(), &fr[0][..]);
}

/// xLights merges a unit's ranges before it writes the sparse file, and its merge joins
/// ranges that are not adjacent (FPP.cpp, `SetNewRanges`): a unit announcing
/// `12070-12969,13270-13869` gets one sparse range, 12070 for 1800 channels, with the
/// gap's channels inside it. pfx reads it back at absolute channels, so each pole finds
/// its own bytes where a full file would have them (docs/fpp-connect.md 2.6).
#[test]
fn a_sparse_range_that_xlights_merged_across_a_gap_plays_each_pole_right() {
    let at = |f: usize, c: usize| ((f * 7 + c * 13) % 251) as u8 + 1;
    let (first, len) = (12_070usize, 1_800usize);
    let stored: Vec<Vec<u8>> = (0..12)
        .map(|f| {
            (first..first + len)
                .map(|c| {
                    if (12_970..13_270).contains(&c) {
                        0
                    } else {
                        at(f, c)
                    }
                })
                .collect()
        })
        .collect();
    let spec = Spec {
        sparse_ranges: vec![(first as u32, len as u32)],
        ..Spec::default()
    };
    let mut f = FseqFile::open_bytes("merged.fseq", write(&spec, &stored)).expect("opens");
    assert_eq!(f.frame_len(), first + len);
    let mut buf = vec![0; f.frame_len()];
    for n in 0..f.frames() {
        f.read_frame(n, &mut buf).expect("frame");
        for (start, count) in [(12_070usize, 900usize), (13_270, 600)] {
            let want: Vec<u8> = (start..start + count).map(|c| at(n as usize, c)).collect();
            assert_eq!(
                &buf[start..start + count],
                &want[..],
                "frame {n}, pole at {start}"
            );
        }
        assert!(
            buf[..first].iter().all(|&b| b == 0),
            "below the range: black"
        );
    }
}
