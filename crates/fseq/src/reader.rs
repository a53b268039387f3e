//! Reading around the pure header parser and block decoder: from any `Read + Seek` the
//! caller hands over (a file the player opened, or bytes), reads only the header, then one
//! block at a time on demand. Opening files is the caller's job (`pfx_player::source::fseq::open`).

use std::io::{self, Cursor, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::FseqError;
use super::block::BlockDecoder;
use super::header::{Compression, ExtendedRef, Header, MAX_HEADER, MIN_PREFIX};

/// Anything we can read an FSEQ from: a file, or bytes in memory (tests, fuzzing).
pub trait Source: Read + Seek + Send {}
impl<T: Read + Seek + Send> Source for T {}

/// An open FSEQ sequence. Holds the header and at most one decoded block.
pub struct FseqFile {
    path: PathBuf,
    src: Box<dyn Source>,
    file_len: u64,
    header: Header,
    /// Index into `header.blocks` of the block held in `block_buf`.
    cached: Option<usize>,
    block_buf: Vec<u8>,
    comp_buf: Vec<u8>,
    /// One stored (sparse, not expanded) frame, for uncompressed sparse files.
    stored_buf: Vec<u8>,
    decoder: BlockDecoder,
    blocks_decoded: u64,
}

impl std::fmt::Debug for FseqFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FseqFile")
            .field("path", &self.path)
            .field("file_len", &self.file_len)
            .field("header", &self.header)
            .finish_non_exhaustive()
    }
}

impl FseqFile {
    /// Reads an FSEQ held in memory; `name` is only used in error messages.
    pub fn open_bytes(name: &str, bytes: Vec<u8>) -> Result<FseqFile, FseqError> {
        let len = bytes.len() as u64;
        Self::from_source(PathBuf::from(name), Box::new(Cursor::new(bytes)), len)
    }

    /// Reads the header and tables (never the frame data) from `src`, which holds
    /// `file_len` bytes; `path` names it in error messages.
    pub fn from_source(
        path: PathBuf,
        mut src: Box<dyn Source>,
        file_len: u64,
    ) -> Result<FseqFile, FseqError> {
        let want = file_len.min(MAX_HEADER as u64) as usize;
        let mut prefix = vec![0u8; want.min(MIN_PREFIX)];
        read_at(&mut *src, 0, &mut prefix)
            .map_err(|e| FseqError::io(&path, "reading the header of", e))?;
        let need = Header::needed_len(&prefix).map_err(|e| FseqError::format(&path, e))?;
        if need > prefix.len() && (need as u64) <= file_len {
            prefix.resize(need, 0);
            read_at(&mut *src, 0, &mut prefix)
                .map_err(|e| FseqError::io(&path, "reading the header of", e))?;
        }
        let header = Header::parse(&prefix, file_len).map_err(|e| FseqError::format(&path, e))?;
        Ok(FseqFile {
            path,
            src,
            file_len,
            header,
            cached: None,
            block_buf: Vec::new(),
            comp_buf: Vec::new(),
            stored_buf: Vec::new(),
            decoder: BlockDecoder::new(),
            blocks_decoded: 0,
        })
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn file_len(&self) -> u64 {
        self.file_len
    }

    /// Bytes of one frame with sparse ranges expanded to absolute channels.
    pub fn frame_len(&self) -> usize {
        self.header.frame_len()
    }

    pub fn frames(&self) -> u32 {
        self.header.frames
    }

    /// frames × step time.
    pub fn duration(&self) -> Duration {
        Duration::from_millis(self.header.frames as u64 * self.header.step_ms as u64)
    }

    /// How many blocks have been decompressed so far (a sequential read decodes each once).
    pub fn blocks_decoded(&self) -> u64 {
        self.blocks_decoded
    }

    /// Writes frame `n` into `out` (exactly [`frame_len`](Self::frame_len) bytes): sparse
    /// ranges at their absolute channels, zeros elsewhere.
    pub fn read_frame(&mut self, n: u32, out: &mut [u8]) -> Result<(), FseqError> {
        if n >= self.header.frames {
            return Err(FseqError::FrameOutOfRange {
                path: self.path.clone(),
                frame: n,
                frames: self.header.frames,
            });
        }
        if out.len() != self.frame_len() {
            return Err(FseqError::BufferSize {
                path: self.path.clone(),
                got: out.len(),
                need: self.frame_len(),
            });
        }
        let cc = self.header.channel_count as usize;
        let sparse = !self.header.sparse_ranges.is_empty();
        if self.header.compression == Compression::None {
            let at = self.header.data_offset as u64 + n as u64 * cc as u64;
            let dst: &mut [u8] = if sparse {
                self.stored_buf.resize(cc, 0);
                &mut self.stored_buf
            } else {
                out
            };
            read_at(&mut *self.src, at, dst)
                .map_err(|e| FseqError::io(&self.path, "reading frame data of", e))?;
            if sparse {
                expand(&self.header.sparse_ranges, &self.stored_buf, out);
            }
            return Ok(());
        }
        let bi = self.block_of(n);
        if self.cached != Some(bi) {
            self.load_block(bi)?;
        }
        let b = &self.header.blocks[bi];
        let start = (n - b.first_frame) as usize * cc;
        let stored = &self.block_buf[start..start + cc];
        if sparse {
            expand(&self.header.sparse_ranges, stored, out);
        } else {
            out.copy_from_slice(stored);
        }
        Ok(())
    }

    /// Reads the data an `ED` header points to (bounded by the file length at open).
    pub fn read_extended(&mut self, x: &ExtendedRef) -> Result<Vec<u8>, FseqError> {
        let mut buf = vec![0u8; x.len as usize];
        read_at(&mut *self.src, x.offset, &mut buf)
            .map_err(|e| FseqError::io(&self.path, "reading extended data of", e))?;
        Ok(buf)
    }

    /// The block holding frame `n` (< frames): the last one starting at or before it.
    fn block_of(&self, n: u32) -> usize {
        let blocks = &self.header.blocks;
        blocks
            .partition_point(|b| b.first_frame <= n)
            .saturating_sub(1)
    }

    fn load_block(&mut self, bi: usize) -> Result<(), FseqError> {
        self.cached = None;
        let b = self.header.blocks[bi];
        // Sizes were checked against the file length and limits when the header was parsed.
        self.comp_buf.resize(b.len as usize, 0);
        read_at(&mut *self.src, b.offset, &mut self.comp_buf)
            .map_err(|e| FseqError::io(&self.path, "reading a block of", e))?;
        let expected = b.frames as usize * self.header.channel_count as usize;
        self.decoder
            .decode(
                self.header.compression,
                &self.comp_buf,
                expected,
                &mut self.block_buf,
            )
            .map_err(|problem| FseqError::Block {
                path: self.path.clone(),
                index: b.index,
                offset: b.offset,
                first_frame: b.first_frame,
                problem,
            })?;
        self.cached = Some(bi);
        self.blocks_decoded += 1;
        Ok(())
    }
}

fn read_at(src: &mut dyn Source, at: u64, buf: &mut [u8]) -> io::Result<()> {
    src.seek(SeekFrom::Start(at))?;
    src.read_exact(buf)
}

/// Places each sparse range's bytes at its absolute channels; everything else is zero.
fn expand(ranges: &[(u32, u32)], stored: &[u8], out: &mut [u8]) {
    out.fill(0);
    let mut at = 0usize;
    for &(start, count) in ranges {
        let (s, c) = (start as usize, count as usize);
        // Header parse guarantees Σcount ≤ stored.len() and start+count ≤ out.len().
        if let (Some(src), Some(dst)) = (stored.get(at..at + c), out.get_mut(s..s + c)) {
            dst.copy_from_slice(src);
        }
        at += c;
    }
}
