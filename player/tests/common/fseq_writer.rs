//! Test-only FSEQ writer: v1, and v2 with none/zstd/zlib, sparse ranges, several zstd
//! frames per block, reserved empty block entries, variable headers and `ED` data.
//! Written from the format as docs/formats.md describes it; used to round-trip the reader
//! and to make the generated corpus (`corpus()`) the tests and scripts run on.
#![allow(dead_code)]

use std::io::Write;

#[derive(Clone, Debug)]
pub struct Spec {
    /// 1 or 2.
    pub major: u8,
    pub minor: u8,
    /// 0 none, 1 zstd, 2 zlib (v2 only).
    pub compression: u8,
    pub step_ms: u8,
    /// Frames in the first block (xLights writes 10), then `frames_per_block`.
    pub first_block_frames: usize,
    pub frames_per_block: usize,
    /// zstd frames each block is split into (xLights: 1).
    pub zstd_frames_per_block: usize,
    /// Zero-length table entries after the used ones.
    pub reserved_blocks: usize,
    pub sparse_ranges: Vec<(u32, u32)>,
    pub var_headers: Vec<([u8; 2], Vec<u8>)>,
    /// Extended data: (real code, bytes) written after the channel data, pointed to by `ED`.
    pub extended: Vec<([u8; 2], Vec<u8>)>,
}

impl Default for Spec {
    fn default() -> Self {
        Spec {
            major: 2,
            minor: 0,
            compression: 1,
            step_ms: 25,
            first_block_frames: 10,
            frames_per_block: 16,
            zstd_frames_per_block: 1,
            reserved_blocks: 3,
            sparse_ranges: Vec::new(),
            var_headers: vec![
                (*b"mf", b"song.mp3\0".to_vec()),
                (*b"sp", b"pfx test writer\0".to_vec()),
            ],
            extended: Vec::new(),
        }
    }
}

fn var(code: [u8; 2], data: &[u8]) -> Vec<u8> {
    let mut v = ((4 + data.len()) as u16).to_le_bytes().to_vec();
    v.extend_from_slice(&code);
    v.extend_from_slice(data);
    v
}

fn compress(spec: &Spec, frames: &[Vec<u8>]) -> Vec<u8> {
    let raw: Vec<u8> = frames.concat();
    match spec.compression {
        1 => {
            let per = frames
                .len()
                .div_ceil(spec.zstd_frames_per_block.max(1))
                .max(1);
            let mut out = Vec::new();
            for chunk in frames.chunks(per) {
                // Streaming encoder without a pledged size, as xLights writes.
                let mut e = zstd::stream::Encoder::new(Vec::new(), 2).unwrap();
                e.include_contentsize(false).unwrap();
                e.write_all(&chunk.concat()).unwrap();
                out.extend(e.finish().unwrap());
            }
            out
        }
        2 => {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(3));
            e.write_all(&raw).unwrap();
            e.finish().unwrap()
        }
        _ => raw,
    }
}

/// `frames` are stored frames (sparse-packed when `sparse_ranges` is set), all the same length.
pub fn write(spec: &Spec, frames: &[Vec<u8>]) -> Vec<u8> {
    let cc = frames.first().map_or(0, |f| f.len()) as u32;
    let n = frames.len() as u32;
    // Blocks: (first frame, bytes).
    let mut blocks: Vec<(u32, Vec<u8>)> = Vec::new();
    if spec.major == 2 && spec.compression != 0 {
        let mut at = 0usize;
        let mut size = spec.first_block_frames.max(1);
        while at < frames.len() {
            let end = (at + size).min(frames.len());
            blocks.push((at as u32, compress(spec, &frames[at..end])));
            at = end;
            size = spec.frames_per_block.max(1);
        }
    }
    let mut vars: Vec<u8> = spec
        .var_headers
        .iter()
        .flat_map(|(c, d)| var(*c, d))
        .collect();
    let ed_count = spec.extended.len();
    let vars_len = vars.len() + 18 * ed_count;

    let mut head = Vec::new();
    head.extend_from_slice(b"PSEQ");
    let (fixed, tables) = if spec.major == 1 {
        (28usize, Vec::new())
    } else {
        let mut t = Vec::new();
        for (first, data) in &blocks {
            t.extend_from_slice(&first.to_le_bytes());
            t.extend_from_slice(&(data.len() as u32).to_le_bytes());
        }
        t.extend(std::iter::repeat_n(0u8, 8 * spec.reserved_blocks));
        for &(s, c) in &spec.sparse_ranges {
            t.extend_from_slice(&s.to_le_bytes()[..3]);
            t.extend_from_slice(&c.to_le_bytes()[..3]);
        }
        (32usize, t)
    };
    let hdr_len = fixed + tables.len();
    let data_offset = (hdr_len + vars_len).div_ceil(4) * 4;
    head.extend_from_slice(&(data_offset as u16).to_le_bytes());
    head.push(spec.minor);
    head.push(spec.major);
    head.extend_from_slice(&(if spec.major == 1 { 28 } else { hdr_len as u16 }).to_le_bytes());
    head.extend_from_slice(&cc.to_le_bytes());
    head.extend_from_slice(&n.to_le_bytes());
    head.push(spec.step_ms);
    head.push(0);
    if spec.major == 1 {
        head.extend_from_slice(&[0, 0, 0, 0, 1, 2, 0, 0]);
    } else {
        let nb = blocks.len() + spec.reserved_blocks;
        head.push(spec.compression | (((nb >> 8) as u8) << 4));
        head.push(nb as u8);
        head.push(spec.sparse_ranges.len() as u8);
        head.push(0);
        head.extend_from_slice(&0x0005_92b1_0d18_3bcb_u64.to_le_bytes());
    }
    head.extend(tables);
    let data: Vec<u8> = if blocks.is_empty() {
        frames.concat()
    } else {
        blocks.iter().flat_map(|(_, d)| d.clone()).collect()
    };
    // ED headers point past the channel data.
    let mut ext_at = (data_offset + data.len()) as u64;
    for (code, bytes) in &spec.extended {
        let mut d = code.to_vec();
        d.extend_from_slice(&ext_at.to_le_bytes());
        d.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        vars.extend(var(*b"ED", &d));
        ext_at += bytes.len() as u64;
    }
    head.extend(vars);
    head.resize(data_offset, 0);
    head.extend(data);
    for (_, bytes) in &spec.extended {
        head.extend_from_slice(bytes);
    }
    head
}

/// Deterministic test frames: each byte depends on frame and channel.
pub fn frames(count: usize, channels: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|f| {
            (0..channels)
                .map(|c| ((f * 7 + c * 13 + (f * c) % 5) % 251) as u8)
                .collect()
        })
        .collect()
}

/// Frames that look like a light show rather than noise, so blocks compress the way real
/// exports do: a dim red fade over every pixel (its level changes every frame for 200
/// frames, so any slice of a frame names the frame), a green bar that runs along the
/// pixels, and a sparse blue sparkle. `channels` need not be a multiple of 3.
pub fn show(count: usize, channels: usize) -> Vec<Vec<u8>> {
    let pixels = channels.div_ceil(3).max(1);
    (0..count)
        .map(|f| {
            let fade = 1 + ((f * 3) % 200) as u8;
            let bar = (f * 4) % pixels;
            (0..channels)
                .map(|c| {
                    let p = c / 3;
                    match c % 3 {
                        0 => fade,
                        1 if (p + pixels - bar) % pixels < 8 => 255,
                        2 if (p * 31 + f * 17) % 97 == 0 => 180,
                        _ => 0,
                    }
                })
                .collect()
        })
        .collect()
}

/// One file of the generated corpus: the layouts real xLights exports have (checked
/// against them by `scripts/tests.d/21-fseq-real.sh` where they are available), plus the
/// layouts the format allows and xLights writes for other settings.
#[derive(Clone, Debug)]
pub struct CorpusFile {
    pub name: &'static str,
    pub spec: Spec,
    pub frames: usize,
    /// Channels of the expanded frame (the sparse ranges' extent when sparse).
    pub channels: usize,
    /// Every frame zero (an "all off" export: each block compresses to a few bytes).
    pub dark: bool,
}

impl CorpusFile {
    /// Frames as the reader must return them: sparse channels outside every range are 0.
    pub fn expected(&self) -> Vec<Vec<u8>> {
        let full = if self.dark {
            vec![vec![0; self.channels]; self.frames]
        } else {
            show(self.frames, self.channels)
        };
        if self.spec.sparse_ranges.is_empty() {
            return full;
        }
        full.into_iter()
            .map(|f| {
                let mut m = vec![0; f.len()];
                for &(s, c) in &self.spec.sparse_ranges {
                    let r = s as usize..(s + c) as usize;
                    m[r.clone()].copy_from_slice(&f[r]);
                }
                m
            })
            .collect()
    }

    /// Frames as stored: each sparse range's channels, in table order.
    pub fn stored(&self) -> Vec<Vec<u8>> {
        let full = self.expected();
        if self.spec.sparse_ranges.is_empty() {
            return full;
        }
        full.iter()
            .map(|f| {
                self.spec
                    .sparse_ranges
                    .iter()
                    .flat_map(|&(s, c)| f[s as usize..(s + c) as usize].iter().copied())
                    .collect()
            })
            .collect()
    }

    pub fn bytes(&self) -> Vec<u8> {
        write(&self.spec, &self.stored())
    }
}

fn sp(text: &str) -> ([u8; 2], Vec<u8>) {
    (*b"sp", [text.as_bytes(), b"\0"].concat())
}

fn mf(path: &str) -> ([u8; 2], Vec<u8>) {
    (*b"mf", [path.as_bytes(), b"\0"].concat())
}

/// The generated corpus. The first four copy the shapes of real xLights 2019-2021
/// exports: FSEQ 2.0, zstd, a short first block of 10 frames, then blocks of a size
/// xLights picks from the channel count, a shorter last block, one to three reserved
/// zero-length table entries, an `sp` header, and `mf` when the show has audio.
pub fn corpus() -> Vec<CorpusFile> {
    let xl = |frames_per_block, reserved_blocks, var_headers| Spec {
        major: 2,
        minor: 0,
        compression: 1,
        step_ms: 50,
        first_block_frames: 10,
        frames_per_block,
        zstd_frames_per_block: 1,
        reserved_blocks,
        sparse_ranges: Vec::new(),
        var_headers,
        extended: Vec::new(),
    };
    let plain = Spec {
        var_headers: vec![sp("pfx corpus")],
        ..Spec::default()
    };
    vec![
        // 600 frames of 8492 channels in 60 blocks of 10 frames, 3 reserved entries.
        CorpusFile {
            name: "xl-8492ch-600f.fseq",
            spec: xl(10, 3, vec![sp("pfx corpus, xLights 2020 layout")]),
            frames: 600,
            channels: 8492,
            dark: false,
        },
        // All off: 60 blocks of a few bytes each.
        CorpusFile {
            name: "xl-all-off.fseq",
            spec: xl(10, 3, vec![sp("pfx corpus, xLights 2020 layout")]),
            frames: 600,
            channels: 6112,
            dark: true,
        },
        // A long show with audio: 25 ms, `mf` before `sp`, 107-frame blocks, a 29-frame
        // last block, one reserved entry.
        CorpusFile {
            name: "xl-mf-1200ch-7850f.fseq",
            spec: Spec {
                step_ms: 25,
                ..xl(
                    107,
                    1,
                    vec![
                        mf("/Users/show/Music/ThisIsHalloween.m4a"),
                        sp("pfx corpus, xLights 2019 layout"),
                    ],
                )
            },
            frames: 7850,
            channels: 1200,
            dark: false,
        },
        // Wide frames: 46712 channels, 15-frame blocks, a 5-frame last block, 2 reserved.
        CorpusFile {
            name: "xl-46712ch-300f.fseq",
            spec: Spec {
                step_ms: 25,
                ..xl(15, 2, vec![sp("pfx corpus, xLights 2019 layout")])
            },
            frames: 300,
            channels: 46712,
            dark: false,
        },
        // Each block split over three zstd frames, as a streaming writer that flushes
        // inside a block produces.
        CorpusFile {
            name: "zstd-3-frames-per-block.fseq",
            spec: Spec {
                frames_per_block: 20,
                zstd_frames_per_block: 3,
                ..plain.clone()
            },
            frames: 200,
            channels: 2048,
            dark: false,
        },
        // Sparse: two ranges stored out of channel order, a gap between them.
        CorpusFile {
            name: "zstd-sparse.fseq",
            spec: Spec {
                sparse_ranges: vec![(3000, 900), (0, 1500)],
                ..plain.clone()
            },
            frames: 300,
            channels: 3900,
            dark: false,
        },
        // Unknown variable headers (one empty), and `ED` extended data after the frames.
        CorpusFile {
            name: "zstd-unknown-headers-ed.fseq",
            spec: Spec {
                var_headers: vec![
                    (*b"ZZ", vec![1, 2, 3]),
                    mf("song.mp3"),
                    (*b"QQ", Vec::new()),
                    sp("pfx corpus"),
                ],
                extended: vec![(*b"XS", b"<xml/>".to_vec())],
                ..Spec::default()
            },
            frames: 120,
            channels: 900,
            dark: false,
        },
        // FSEQ 2.1 with 310 table entries: the count needs the upper nibble of byte 20.
        CorpusFile {
            name: "zstd-v2.1-310-entries.fseq",
            spec: Spec {
                minor: 1,
                first_block_frames: 1,
                frames_per_block: 1,
                reserved_blocks: 10,
                ..plain.clone()
            },
            frames: 300,
            channels: 96,
            dark: false,
        },
        CorpusFile {
            name: "zlib.fseq",
            spec: Spec {
                compression: 2,
                ..plain.clone()
            },
            frames: 240,
            channels: 1536,
            dark: false,
        },
        CorpusFile {
            name: "zlib-sparse.fseq",
            spec: Spec {
                compression: 2,
                sparse_ranges: vec![(600, 120), (30, 300)],
                ..plain.clone()
            },
            frames: 240,
            channels: 720,
            dark: false,
        },
        CorpusFile {
            name: "v2-uncompressed.fseq",
            spec: Spec {
                compression: 0,
                ..plain.clone()
            },
            frames: 150,
            channels: 600,
            dark: false,
        },
        CorpusFile {
            name: "v1.fseq",
            spec: Spec {
                major: 1,
                compression: 0,
                step_ms: 50,
                ..plain
            },
            frames: 150,
            channels: 510,
            dark: false,
        },
    ]
}

/// The corpus file called `name`.
pub fn corpus_file(name: &str) -> CorpusFile {
    corpus()
        .into_iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no corpus file {name}"))
}

/// Writes `name` into `dir` and returns its path.
pub fn write_corpus_file(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, corpus_file(name).bytes())
        .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    path
}

/// The real xLights exports, for the optional suite (`scripts/tests.d/21-fseq-real.sh`
/// sets `PFX_FSEQ_FIXTURES`). Tests that call this are `#[ignore]`d: the repository's own
/// tests never need files from outside it.
pub fn real_exports_dir() -> std::path::PathBuf {
    match std::env::var_os("PFX_FSEQ_FIXTURES") {
        Some(d) => std::path::PathBuf::from(d),
        None => panic!(
            "PFX_FSEQ_FIXTURES is not set: this test reads real xLights exports; run it \
             through scripts/tests.d/21-fseq-real.sh"
        ),
    }
}
