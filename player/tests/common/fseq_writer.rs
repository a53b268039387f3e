//! Test-only FSEQ writer: v1, and v2 with none/zstd/zlib, sparse ranges, several zstd
//! frames per block, reserved empty block entries, variable headers and `ED` data.
//! Written from shared/notes/formats.md; used to round-trip the reader.
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

/// The real xLights files: `$PFX_FSEQ_FIXTURES`, else `shared/fixtures/fseq` beside the
/// checkout (CI) or beside the directory holding it (worktrees). `None` (and a loud
/// message) when absent.
pub fn fixtures_dir() -> Option<std::path::PathBuf> {
    use std::path::PathBuf;
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let candidates: Vec<PathBuf> = match std::env::var_os("PFX_FSEQ_FIXTURES") {
        Some(d) => vec![PathBuf::from(d)],
        None => vec![
            manifest.join("../../shared/fixtures/fseq"),
            manifest.join("../../../shared/fixtures/fseq"),
        ],
    };
    let found = candidates.iter().find(|d| d.is_dir()).cloned();
    if found.is_none() {
        eprintln!("SKIPPED: FSEQ fixtures not found in {candidates:?} (set PFX_FSEQ_FIXTURES)");
    }
    found
}
