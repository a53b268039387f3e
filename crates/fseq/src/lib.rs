//! FSEQ v1/v2 reader (xLights / FPP sequence files). Streams: only the block being
//! decoded is held in memory. Pure: it reads through the `Read + Seek` it is handed and
//! reads no clock; opening files and decoding ahead on a thread are the player's
//! (`pfx_player::source::fseq`). See README.md for what this crate must never depend on.

mod block;
pub mod fuzz;
pub mod header;
mod reader;

use std::io;
use std::path::{Path, PathBuf};

pub use block::BlockDecoder;
pub use header::{Block, Compression, ExtendedRef, Header, HeaderError, VarHeader};
pub use reader::{FseqFile, Source};

/// Every error names the file; format errors also name the field and byte offset.
#[derive(Debug, thiserror::Error)]
pub enum FseqError {
    #[error("{path}: error {what} the file: {source}", path = path.display())]
    Io {
        path: PathBuf,
        what: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("{path}: not a valid FSEQ file: {detail} (the file is truncated or corrupt; re-export it from xLights)", path = path.display())]
    Format { path: PathBuf, detail: HeaderError },
    #[error("{path}: block {index} (at byte {offset}, frames from {first_frame}) {problem} (the file is corrupt; re-export it from xLights)", path = path.display())]
    Block {
        path: PathBuf,
        index: u32,
        offset: u64,
        first_frame: u32,
        problem: String,
    },
    #[error("{path}: frame {frame} is out of range: the sequence has frames 0..={last}", path = path.display(), last = frames.saturating_sub(1))]
    FrameOutOfRange {
        path: PathBuf,
        frame: u32,
        frames: u32,
    },
    #[error("{path}: output buffer is {got} bytes but a frame is {need} bytes", path = path.display())]
    BufferSize {
        path: PathBuf,
        got: usize,
        need: usize,
    },
}

impl FseqError {
    /// An I/O error on `path` while `what` ("opening", "reading a block of") the file.
    pub fn io(path: &Path, what: &'static str, source: io::Error) -> Self {
        let what = match (what, source.kind()) {
            // A short read past the header means the file is shorter than its tables say.
            (_, io::ErrorKind::UnexpectedEof) => "reading (truncated file?)",
            (w, _) => w,
        };
        FseqError::Io {
            path: path.to_path_buf(),
            what,
            source,
        }
    }

    fn format(path: &Path, detail: HeaderError) -> Self {
        FseqError::Format {
            path: path.to_path_buf(),
            detail,
        }
    }
}
