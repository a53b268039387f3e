//! Decompresses one block into a reusable buffer. The output grows only as data is
//! actually produced, and never beyond the size the block table promises, so a corrupt
//! header cannot make us allocate more than the compressed data really expands to.

use std::io;

use flate2::{Decompress, FlushDecompress, Status};
use zstd::stream::raw::{DParameter, Decoder, InBuffer, Operation, OutBuffer};

use super::header::{Compression, ZSTD_WINDOW_LOG_MAX};

/// Output grows in steps of this much (or less, up to the expected size).
const GROW: usize = 256 * 1024;

/// Reusable decompression state: one zstd context and one zlib stream.
pub struct BlockDecoder {
    zstd: Option<Decoder<'static>>,
    zlib: Decompress,
}

impl std::fmt::Debug for BlockDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BlockDecoder")
    }
}

impl Default for BlockDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl BlockDecoder {
    pub fn new() -> Self {
        BlockDecoder {
            zstd: None,
            zlib: Decompress::new(true),
        }
    }

    /// Decompresses `input` into `out`, which ends up exactly `expected` bytes long.
    /// Errors say what is wrong in words (the caller adds file and block).
    pub fn decode(
        &mut self,
        compression: Compression,
        input: &[u8],
        expected: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        out.clear();
        match compression {
            Compression::None => {
                if input.len() != expected {
                    return Err(format!("holds {} bytes, expected {expected}", input.len()));
                }
                out.extend_from_slice(input);
                Ok(())
            }
            Compression::Zstd => self.zstd(input, expected, out),
            Compression::Zlib => self.zlib(input, expected, out),
        }
    }

    fn zstd_ctx(&mut self) -> Result<&mut Decoder<'static>, String> {
        if self.zstd.is_none() {
            let mut d = Decoder::new().map_err(|e| format!("cannot create zstd decoder: {e}"))?;
            d.set_parameter(DParameter::WindowLogMax(ZSTD_WINDOW_LOG_MAX))
                .map_err(|e| format!("cannot configure zstd decoder: {e}"))?;
            self.zstd = Some(d);
        }
        self.zstd
            .as_mut()
            .ok_or_else(|| "zstd decoder unavailable".to_string())
    }

    /// Streaming decode: a block may hold several zstd frames back to back (FPP re-inits
    /// its stream at each frame end), and xLights' frames carry no content size.
    fn zstd(&mut self, input: &[u8], expected: usize, out: &mut Vec<u8>) -> Result<(), String> {
        let dec = self.zstd_ctx()?;
        dec.reinit().map_err(zstd_err)?;
        let mut inb = InBuffer::around(input);
        let mut pos = 0usize;
        let mut frame_open = false;
        loop {
            if pos == out.len() {
                if out.len() == expected {
                    // Full: anything still coming is too much.
                    if inb.pos() == input.len() && !frame_open {
                        break;
                    }
                    let mut probe = [0u8; 1];
                    let mut pb = OutBuffer::around(&mut probe[..]);
                    let before_in = inb.pos();
                    let hint = dec.run(&mut inb, &mut pb).map_err(zstd_err)?;
                    if pb.pos() > 0 {
                        return Err(format!(
                            "decompresses to more than the {expected} bytes its frames need"
                        ));
                    }
                    if hint == 0 {
                        frame_open = false;
                        if inb.pos() < input.len() {
                            dec.reinit().map_err(zstd_err)?;
                        }
                        continue;
                    }
                    if inb.pos() == input.len() || inb.pos() == before_in {
                        return Err("ends inside a zstd frame (truncated)".into());
                    }
                    continue;
                }
                let grow = (expected - out.len()).min(GROW.max(out.capacity() - out.len()));
                out.resize(out.len() + grow.max(1), 0);
            }
            let before_in = inb.pos();
            let mut outb = OutBuffer::around(&mut out[pos..]);
            let hint = dec.run(&mut inb, &mut outb).map_err(zstd_err)?;
            let wrote = outb.pos();
            pos += wrote;
            frame_open = hint != 0;
            if hint == 0 {
                // One zstd frame finished; more input is another frame.
                if inb.pos() == input.len() {
                    break;
                }
                dec.reinit().map_err(zstd_err)?;
                continue;
            }
            if inb.pos() == before_in && wrote == 0 && inb.pos() == input.len() {
                return Err(format!(
                    "ends inside a zstd frame after {pos} of {expected} bytes (truncated)"
                ));
            }
        }
        out.truncate(pos);
        if pos != expected {
            return Err(format!(
                "decompresses to {pos} bytes but its frames need {expected}"
            ));
        }
        Ok(())
    }

    fn zlib(&mut self, input: &[u8], expected: usize, out: &mut Vec<u8>) -> Result<(), String> {
        let z = &mut self.zlib;
        z.reset(true);
        let mut in_pos = 0usize;
        let mut pos = 0usize;
        loop {
            if pos == out.len() && out.len() < expected {
                let grow = (expected - out.len()).min(GROW.max(out.capacity() - out.len()));
                out.resize(out.len() + grow, 0);
            }
            let (bi, bo) = (z.total_in(), z.total_out());
            let status = z
                .decompress(&input[in_pos..], &mut out[pos..], FlushDecompress::None)
                .map_err(|e| format!("zlib data is corrupt: {e}"))?;
            let read = (z.total_in() - bi) as usize;
            let wrote = (z.total_out() - bo) as usize;
            in_pos += read;
            pos += wrote;
            match status {
                Status::StreamEnd => {
                    // Another zlib stream may follow; trailing bytes after the frames are ignored.
                    if pos < expected && in_pos < input.len() {
                        z.reset(true);
                        continue;
                    }
                    break;
                }
                Status::Ok | Status::BufError => {
                    if read == 0 && wrote == 0 {
                        if pos == expected {
                            return Err(format!(
                                "decompresses to more than the {expected} bytes its frames need"
                            ));
                        }
                        return Err(format!(
                            "ends inside a zlib stream after {pos} of {expected} bytes (truncated)"
                        ));
                    }
                }
            }
        }
        out.truncate(pos);
        if pos != expected {
            return Err(format!(
                "decompresses to {pos} bytes but its frames need {expected}"
            ));
        }
        Ok(())
    }
}

fn zstd_err(e: io::Error) -> String {
    let msg = e.to_string();
    if msg.contains("too much memory") || msg.contains("indowLog") {
        format!(
            "zstd frame needs a window larger than {} MiB (compressed at an extreme level?): {msg}",
            (1u32 << ZSTD_WINDOW_LOG_MAX) >> 20
        )
    } else {
        format!("zstd data is corrupt: {msg}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// One zstd frame without a content size, as xLights' streaming writer makes.
    fn zstd_frame(data: &[u8]) -> Vec<u8> {
        let mut e = zstd::stream::Encoder::new(Vec::new(), 2).unwrap();
        e.include_contentsize(false).unwrap();
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn zlib(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(3));
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn data(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 31 % 253) as u8).collect()
    }

    #[test]
    fn zstd_block_of_several_frames() {
        let d = data(3000);
        let block = [
            zstd_frame(&d[..1000]),
            zstd_frame(&d[1000..1001]),
            zstd_frame(&d[1001..]),
        ]
        .concat();
        let mut out = Vec::new();
        let mut dec = BlockDecoder::new();
        dec.decode(Compression::Zstd, &block, 3000, &mut out)
            .unwrap();
        assert_eq!(out, d);
        // An empty zstd frame between them is fine too.
        let block = [zstd_frame(&d[..10]), zstd_frame(&[]), zstd_frame(&d[10..])].concat();
        dec.decode(Compression::Zstd, &block, 3000, &mut out)
            .unwrap();
        assert_eq!(out, d);
    }

    #[test]
    fn zstd_size_mismatch_and_truncation() {
        let d = data(5000);
        let block = zstd_frame(&d);
        let mut out = Vec::new();
        let mut dec = BlockDecoder::new();
        let e = dec
            .decode(Compression::Zstd, &block, 4999, &mut out)
            .unwrap_err();
        assert!(e.contains("more than the 4999 bytes"), "{e}");
        let e = dec
            .decode(Compression::Zstd, &block, 5001, &mut out)
            .unwrap_err();
        assert!(
            e.contains("decompresses to 5000 bytes but its frames need 5001"),
            "{e}"
        );
        for cut in 0..block.len() {
            let r = dec.decode(Compression::Zstd, &block[..cut], 5000, &mut out);
            assert!(r.is_err(), "cut at {cut}");
        }
        let e = dec
            .decode(
                Compression::Zstd,
                &[0xde, 0xad, 0xbe, 0xef, 0],
                10,
                &mut out,
            )
            .unwrap_err();
        assert!(e.starts_with("zstd data is corrupt"), "{e}");
        // The decoder recovers for the next block.
        dec.decode(Compression::Zstd, &block, 5000, &mut out)
            .unwrap();
        assert_eq!(out, d);
    }

    #[test]
    fn zlib_blocks() {
        let d = data(70_000);
        let block = zlib(&d);
        let mut out = Vec::new();
        let mut dec = BlockDecoder::new();
        dec.decode(Compression::Zlib, &block, d.len(), &mut out)
            .unwrap();
        assert_eq!(out, d);
        let e = dec
            .decode(Compression::Zlib, &block, d.len() - 1, &mut out)
            .unwrap_err();
        assert!(e.contains("more than"), "{e}");
        for cut in (0..block.len()).step_by(7) {
            assert!(
                dec.decode(Compression::Zlib, &block[..cut], d.len(), &mut out)
                    .is_err(),
                "cut {cut}"
            );
        }
        // Raw deflate (no zlib header) is not what FSEQ writes.
        assert!(
            dec.decode(Compression::Zlib, &block[2..], d.len(), &mut out)
                .is_err()
        );
    }

    #[test]
    fn output_grows_with_data_not_with_the_promise() {
        // A tiny block promising 1 GiB stops at the real end of its data, having allocated
        // no more than one growth step beyond what it produced.
        let block = zstd_frame(&data(100));
        let mut out = Vec::new();
        let e = BlockDecoder::new()
            .decode(Compression::Zstd, &block, 1 << 30, &mut out)
            .unwrap_err();
        assert!(e.contains("decompresses to 100 bytes"), "{e}");
        assert!(out.capacity() <= GROW, "{}", out.capacity());
    }

    #[test]
    fn window_limit_is_enforced() {
        let mut e = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
        e.include_contentsize(false).unwrap();
        e.set_parameter(zstd::stream::raw::CParameter::WindowLog(
            ZSTD_WINDOW_LOG_MAX + 2,
        ))
        .unwrap();
        e.write_all(&data(1000)).unwrap();
        let block = e.finish().unwrap();
        let mut out = Vec::new();
        let err = BlockDecoder::new()
            .decode(Compression::Zstd, &block, 1000, &mut out)
            .unwrap_err();
        assert!(err.contains("window larger than 16 MiB"), "{err}");
    }
}
