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
