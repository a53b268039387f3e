//! The body of the `cargo fuzz` target `fseq`, here so a stable-Rust test can run it too.

use super::FseqFile;

/// Frames read per input: the first few, the last, and one in the middle.
const FRAMES_TRIED: u32 = 4;

/// Parses `data` as an FSEQ file and reads some frames. Must never panic, whatever the
/// bytes; errors are expected and ignored. Returns how many frames were read.
pub fn fuzz_one(data: &[u8]) -> u32 {
    let Ok(mut f) = FseqFile::open_bytes("fuzz.fseq", data.to_vec()) else {
        return 0;
    };
    let h = f.header().clone();
    let _ = (
        h.media_file(),
        h.producer(),
        h.extended().count(),
        f.duration(),
    );
    // Frames can be large in a valid header; the limits checked at open bound this.
    let mut out = vec![0u8; f.frame_len()];
    let mut ok = 0;
    let frames = h.frames;
    let mut try_frame = |f: &mut FseqFile, n: u32| {
        if f.read_frame(n, &mut out).is_ok() {
            ok += 1;
        }
    };
    for n in 0..frames.min(FRAMES_TRIED) {
        try_frame(&mut f, n);
    }
    try_frame(&mut f, frames / 2);
    try_frame(&mut f, frames.saturating_sub(1));
    try_frame(&mut f, frames);
    if let Some(x) = h.extended().next() {
        let _ = f.read_extended(&x);
    }
    ok
}
