//! TEMPORARY stand-in with the reader's agreed API, replaced by the real reader at merge.
use std::path::Path;
#[derive(Debug, thiserror::Error)]
#[error("fseq reader not merged yet: {0}")]
pub struct FseqError(String);
pub struct Header {
    pub frames: u32,
    pub step_ms: u8,
}
pub struct FseqFile {
    h: Header,
}
impl FseqFile {
    pub fn open(p: &Path) -> Result<FseqFile, FseqError> {
        Err(FseqError(p.display().to_string()))
    }
    pub fn header(&self) -> &Header {
        &self.h
    }
    pub fn frame_len(&self) -> usize {
        0
    }
}
pub struct Prefetcher;
impl Prefetcher {
    pub fn spawn(_f: FseqFile, _ahead: usize) -> Prefetcher {
        Prefetcher
    }
    pub fn get(&mut self, _n: u32) -> Option<&[u8]> {
        None
    }
}
