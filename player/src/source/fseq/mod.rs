//! FSEQ sequences: the reader is the pure `pfx-fseq` crate (re-exported here, so
//! `source::fseq::FseqFile` and friends keep their paths); this module adds the two parts
//! that touch the OS: opening a file ([`open`]) and decoding ahead on a thread
//! ([`Prefetcher`]).

mod prefetch;

use std::fs::File;
use std::io::BufReader;
use std::path::Path;

pub use pfx_fseq::*;
pub use prefetch::{Fetch, PrefetchStats, Prefetcher};

/// Opens `path` and reads its header and tables (never the frame data).
pub fn open(path: &Path) -> Result<FseqFile, FseqError> {
    let file = File::open(path).map_err(|e| FseqError::io(path, "opening", e))?;
    let len = file
        .metadata()
        .map_err(|e| FseqError::io(path, "reading the size of", e))?
        .len();
    FseqFile::from_source(path.to_path_buf(), Box::new(BufReader::new(file)), len)
}
