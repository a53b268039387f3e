//! Pure parse of an FSEQ file's header: fixed header, block table, sparse ranges and
//! variable headers. Takes the header bytes and the file length; does no I/O, so every
//! size a later read relies on is checked here against the real file length.

use std::fmt;

/// Offsets of the fixed-header fields (docs/formats.md, "FSEQ").
mod field {
    use std::ops::Range;
    pub const MAGIC: Range<usize> = 0..4;
    pub const DATA_OFFSET: Range<usize> = 4..6;
    pub const MINOR: usize = 6;
    pub const MAJOR: usize = 7;
    pub const HEADER_LEN: Range<usize> = 8..10;
    pub const CHANNELS: Range<usize> = 10..14;
    pub const FRAMES: Range<usize> = 14..18;
    pub const STEP: usize = 18;
    pub const FLAGS: usize = 19;
    /// v2: compression type (low nibble) and block count bits 8-11 (high nibble).
    pub const V2_COMPRESSION: usize = 20;
    pub const V2_BLOCKS_LOW: usize = 21;
    pub const V2_SPARSE_COUNT: usize = 22;
    pub const V2_UNIQUE_ID: Range<usize> = 24..32;
    pub const V1_FIXED_LEN: usize = 28;
    pub const V2_FIXED_LEN: usize = V2_UNIQUE_ID.end;
    pub const BLOCK_ENTRY_LEN: usize = 8;
    pub const SPARSE_ENTRY_LEN: usize = 6;
}

/// Smallest prefix that holds every fixed field either version needs before the
/// channel data offset is known.
pub const MIN_PREFIX: usize = field::V1_FIXED_LEN;

/// Largest possible header: the channel data offset is a u16.
pub const MAX_HEADER: usize = u16::MAX as usize;

/// A zstd block holds at most 128 KiB of content and takes at least 4 bytes to encode
/// (3-byte block header + 1 RLE byte), so no zstd data expands more than this.
const ZSTD_MAX_RATIO: u64 = 32 * 1024;
/// Deflate's maximum expansion is about 1032:1.
const ZLIB_MAX_RATIO: u64 = 1032;
/// Upper bound on one decompressed block, whatever the header says.
pub const MAX_BLOCK_BYTES: u64 = 1 << 30;
/// Upper bound on channels per frame: 2^26, twice the whole E1.31 universe space
/// (63,999 × 512), so a corrupt count cannot size huge frame buffers.
pub const MAX_CHANNELS: u32 = 1 << 26;
/// Zstd frames may ask for up to this window (2^24 = 16 MiB); more is refused before
/// anything is allocated. Levels up to 19 stay within it.
pub const ZSTD_WINDOW_LOG_MAX: u32 = 24;

/// What went wrong where: the field, the byte offset in the file, and the problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderError {
    pub field: &'static str,
    pub offset: u64,
    pub problem: String,
}

impl fmt::Display for HeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at byte {}: {}",
            self.field, self.offset, self.problem
        )
    }
}

fn err(field: &'static str, offset: usize, problem: impl Into<String>) -> HeaderError {
    HeaderError {
        field,
        offset: offset as u64,
        problem: problem.into(),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Zstd,
    Zlib,
}

impl Compression {
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Zstd => "zstd",
            Compression::Zlib => "zlib",
        }
    }
}

/// One variable header as stored: 2-byte code and its data (without the 4-byte prefix).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VarHeader {
    pub code: [u8; 2],
    pub data: Vec<u8>,
}

/// An `ED` header: the real header's data lives elsewhere in the file (FSEQ 2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtendedRef {
    pub code: [u8; 2],
    pub offset: u64,
    pub len: u32,
}

impl VarHeader {
    pub fn code_str(&self) -> String {
        String::from_utf8_lossy(&self.code).into_owned()
    }

    /// Data up to the first NUL, as text (for `mf`, `sp`).
    pub fn text(&self) -> String {
        let end = self
            .data
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(self.data.len());
        String::from_utf8_lossy(&self.data[..end]).into_owned()
    }

    /// The pointer an `ED` header holds; `None` for any other code or a short `ED`.
    pub fn extended(&self) -> Option<ExtendedRef> {
        if &self.code != b"ED" || self.data.len() < 14 {
            return None;
        }
        Some(ExtendedRef {
            code: [self.data[0], self.data[1]],
            offset: u64::from_le_bytes(self.data[2..10].try_into().ok()?),
            len: u32::from_le_bytes(self.data[10..14].try_into().ok()?),
        })
    }
}

/// One used entry of the block table (reserved zero-length entries are dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    /// Index of this entry in the file's table (counting reserved entries), for errors.
    pub index: u32,
    pub first_frame: u32,
    /// Frames this block holds: up to the next block's first frame, or the end.
    pub frames: u32,
    /// Absolute file offset of the compressed bytes.
    pub offset: u64,
    pub len: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub major: u8,
    pub minor: u8,
    /// Where frame data starts (bytes 4-5).
    pub data_offset: u16,
    /// Bytes per stored frame (with sparse ranges: the sum of their lengths, maybe padded).
    pub channel_count: u32,
    pub frames: u32,
    pub step_ms: u8,
    pub flags: u8,
    pub compression: Compression,
    /// v2 unique id (writer: creation time in µs); 0 for v1.
    pub unique_id: u64,
    /// Entries in the file's block table, reserved ones included.
    pub block_table_len: u32,
    /// Used blocks, in file order. Empty for uncompressed data.
    pub blocks: Vec<Block>,
    /// (start channel, channel count), in stored order.
    pub sparse_ranges: Vec<(u32, u32)>,
    pub variable_headers: Vec<VarHeader>,
}

fn u16_at(b: &[u8], r: std::ops::Range<usize>) -> u16 {
    u16::from_le_bytes([b[r.start], b[r.start + 1]])
}

fn u32_at(b: &[u8], r: std::ops::Range<usize>) -> u32 {
    u32::from_le_bytes([b[r.start], b[r.start + 1], b[r.start + 2], b[r.start + 3]])
}

fn u24_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], 0])
}

impl Header {
    /// Bytes the caller must pass to [`Header::parse`]: the whole header up to the
    /// channel data offset. `prefix` needs at least [`MIN_PREFIX`] bytes (or the whole file).
    pub fn needed_len(prefix: &[u8]) -> Result<usize, HeaderError> {
        check_magic(prefix)?;
        if prefix.len() < field::DATA_OFFSET.end {
            return Err(err(
                "channel data offset",
                prefix.len(),
                "file ends inside the fixed header (truncated)",
            ));
        }
        Ok(u16_at(prefix, field::DATA_OFFSET) as usize)
    }

    /// Parses the header. `buf` holds the file's first bytes (at least up to the channel
    /// data offset); `file_len` is the whole file's length, used to check every offset.
    pub fn parse(buf: &[u8], file_len: u64) -> Result<Header, HeaderError> {
        check_magic(buf)?;
        let fixed = buf.get(..field::V1_FIXED_LEN).ok_or_else(|| {
            err(
                "fixed header",
                buf.len(),
                format!(
                    "file ends after {} bytes, inside the {}-byte fixed header (truncated)",
                    buf.len(),
                    field::V1_FIXED_LEN
                ),
            )
        })?;
        let data_offset = u16_at(fixed, field::DATA_OFFSET);
        let minor = fixed[field::MINOR];
        let major = fixed[field::MAJOR];
        let header_len = u16_at(fixed, field::HEADER_LEN) as usize;
        let channel_count = u32_at(fixed, field::CHANNELS);
        let frames = u32_at(fixed, field::FRAMES);
        let step_ms = fixed[field::STEP];
        let flags = fixed[field::FLAGS];

        let fixed_len = match major {
            1 => field::V1_FIXED_LEN,
            2 => field::V2_FIXED_LEN,
            other => {
                return Err(err(
                    "major version",
                    field::MAJOR,
                    format!("version {other}.{minor} is not supported (only 1.x and 2.x)"),
                ));
            }
        };
        if channel_count > MAX_CHANNELS {
            return Err(err(
                "channel count",
                field::CHANNELS.start,
                format!("{channel_count} is more than this reader's limit of {MAX_CHANNELS}"),
            ));
        }
        let d = data_offset as usize;
        if d < fixed_len {
            return Err(err(
                "channel data offset",
                field::DATA_OFFSET.start,
                format!("{d} lies inside the {fixed_len}-byte fixed header"),
            ));
        }
        if (d as u64) > file_len || buf.len() < d {
            return Err(err(
                "channel data offset",
                field::DATA_OFFSET.start,
                format!(
                    "header claims {d} bytes but the file has only {} (truncated)",
                    file_len.min(buf.len() as u64)
                ),
            ));
        }
        let hdr = &buf[..d];

        let mut h = Header {
            major,
            minor,
            data_offset,
            channel_count,
            frames,
            step_ms,
            flags,
            compression: Compression::None,
            unique_id: 0,
            block_table_len: 0,
            blocks: Vec::new(),
            sparse_ranges: Vec::new(),
            variable_headers: Vec::new(),
        };

        let var_start = if major == 1 {
            // FPP parses v1 variable headers from byte 28 whatever bytes 8-9 say.
            field::V1_FIXED_LEN
        } else {
            h.parse_v2_tables(hdr, header_len)?
        };
        h.variable_headers = parse_var_headers(&hdr[var_start..d], var_start)?;
        h.check_data(file_len)?;
        Ok(h)
    }

    /// A v2 header's compression, block table and sparse ranges, from `hdr` (the header up
    /// to the channel data offset); where its variable headers start.
    fn parse_v2_tables(&mut self, hdr: &[u8], header_len: usize) -> Result<usize, HeaderError> {
        let d = hdr.len();
        let b20 = hdr[field::V2_COMPRESSION];
        self.compression = match b20 & 0x0F {
            0 => Compression::None,
            1 => Compression::Zstd,
            2 => Compression::Zlib,
            other => {
                return Err(err(
                    "compression type",
                    field::V2_COMPRESSION,
                    format!("{other} is unknown (0 none, 1 zstd, 2 zlib)"),
                ));
            }
        };
        self.block_table_len = (((b20 & 0xF0) as u32) << 4) | hdr[field::V2_BLOCKS_LOW] as u32;
        let sparse_count = hdr[field::V2_SPARSE_COUNT] as usize;
        self.unique_id = u64::from_le_bytes(
            hdr[field::V2_UNIQUE_ID]
                .try_into()
                .map_err(|_| err("unique id", field::V2_UNIQUE_ID.start, "short"))?,
        );
        let table_start = field::V2_FIXED_LEN;
        let table_end = table_start + field::BLOCK_ENTRY_LEN * self.block_table_len as usize;
        let sparse_end = table_end + field::SPARSE_ENTRY_LEN * sparse_count;
        if sparse_end > d {
            return Err(err(
                "block table",
                table_start,
                format!(
                    "{} block entries and {sparse_count} sparse ranges need bytes up to {sparse_end}, \
                     past the channel data offset {d}",
                    self.block_table_len
                ),
            ));
        }
        self.sparse_ranges = parse_sparse(&hdr[table_end..sparse_end], table_end)?;
        self.blocks = parse_blocks(
            &hdr[table_start..table_end],
            table_start,
            d as u64,
            self.frames,
            self.compression,
        )?;
        if header_len < sparse_end {
            return Err(err(
                "header length",
                field::HEADER_LEN.start,
                format!(
                    "{header_len} is shorter than the block table and sparse ranges ({sparse_end})"
                ),
            ));
        }
        Ok(header_len.min(d))
    }

    /// Bytes of one frame after sparse ranges are expanded to absolute channels.
    pub fn frame_len(&self) -> usize {
        if self.sparse_ranges.is_empty() {
            self.channel_count as usize
        } else {
            self.sparse_ranges
                .iter()
                .map(|&(s, c)| s as usize + c as usize)
                .max()
                .unwrap_or(0)
        }
    }

    pub fn version(&self) -> String {
        format!("{}.{}", self.major, self.minor)
    }

    pub fn var_header(&self, code: &[u8; 2]) -> Option<&VarHeader> {
        self.variable_headers.iter().find(|v| &v.code == code)
    }

    /// The `mf` header: the audio file the sequence was made for.
    pub fn media_file(&self) -> Option<String> {
        self.var_header(b"mf").map(VarHeader::text)
    }

    /// The `sp` header: which program wrote the file.
    pub fn producer(&self) -> Option<String> {
        self.var_header(b"sp").map(VarHeader::text)
    }

    /// `ED` pointers (FSEQ 2.2 extended data).
    pub fn extended(&self) -> impl Iterator<Item = ExtendedRef> + '_ {
        self.variable_headers.iter().filter_map(VarHeader::extended)
    }

    /// Checks the frame data against the file length and the size limits; for compressed
    /// data without a usable block table, makes the whole data area one block.
    fn check_data(&mut self, file_len: u64) -> Result<(), HeaderError> {
        let d = self.data_offset as u64;
        let stored: u64 = self.sparse_ranges.iter().map(|&(_, c)| c as u64).sum();
        if stored > self.channel_count as u64 {
            return Err(err(
                "sparse ranges",
                field::V2_FIXED_LEN + field::BLOCK_ENTRY_LEN * self.block_table_len as usize,
                format!(
                    "ranges cover {stored} channels but a stored frame has only {} (channel count)",
                    self.channel_count
                ),
            ));
        }
        for x in self.extended() {
            if x.offset
                .checked_add(x.len as u64)
                .is_none_or(|end| end > file_len)
            {
                return Err(err(
                    "ED extended data",
                    0,
                    format!(
                        "points to bytes {}..+{} beyond the end of the file ({file_len} bytes)",
                        x.offset, x.len
                    ),
                ));
            }
        }
        let cc = self.channel_count as u64;
        if self.compression == Compression::None {
            let need = d + cc * self.frames as u64;
            if need > file_len {
                return Err(err(
                    "frame data",
                    d as usize,
                    format!(
                        "{} frames of {cc} bytes need {need} bytes but the file has {file_len} (truncated)",
                        self.frames
                    ),
                ));
            }
            self.blocks.clear();
            return Ok(());
        }
        if self.blocks.is_empty() && self.frames > 0 {
            // FPP: compressed without a used block entry = the whole data area is one block;
            // it ends where extended data starts, if that lies inside.
            let end = self
                .extended()
                .map(|x| x.offset)
                .filter(|&o| o >= d)
                .fold(file_len, u64::min);
            self.blocks.push(Block {
                index: 0,
                first_frame: 0,
                frames: self.frames,
                offset: d,
                len: end.saturating_sub(d),
            });
        }
        self.check_blocks(file_len)
    }

    /// Each used block against the file's end, this reader's size limit and what its
    /// compression can expand to.
    fn check_blocks(&self, file_len: u64) -> Result<(), HeaderError> {
        let cc = self.channel_count as u64;
        let ratio = match self.compression {
            Compression::Zlib => ZLIB_MAX_RATIO,
            _ => ZSTD_MAX_RATIO,
        };
        for b in &self.blocks {
            let table_at = field::V2_FIXED_LEN + field::BLOCK_ENTRY_LEN * b.index as usize;
            let end = b.offset + b.len;
            if end > file_len {
                return Err(err(
                    "block table",
                    table_at,
                    format!(
                        "block {} (bytes {}..{end}) runs past the end of the file ({file_len} bytes; truncated)",
                        b.index, b.offset
                    ),
                ));
            }
            let out = b.frames as u64 * cc;
            if out > MAX_BLOCK_BYTES {
                return Err(err(
                    "block table",
                    table_at,
                    format!(
                        "block {} would decompress to {out} bytes, more than this reader's limit of {MAX_BLOCK_BYTES}",
                        b.index
                    ),
                ));
            }
            if out > b.len.saturating_mul(ratio) + 64 {
                return Err(err(
                    "block table",
                    table_at,
                    format!(
                        "block {} is {} bytes but must hold {} frames of {cc} bytes ({out}); {} cannot expand that much (corrupt)",
                        b.index,
                        b.len,
                        b.frames,
                        self.compression.name()
                    ),
                ));
            }
        }
        Ok(())
    }
}

fn check_magic(buf: &[u8]) -> Result<(), HeaderError> {
    match buf.get(field::MAGIC) {
        Some(b"PSEQ") | Some(b"FSEQ") => Ok(()),
        Some(b"ESEQ") => Err(err(
            "magic",
            0,
            "ESEQ (effect sequence) files are not supported; export a full FSEQ",
        )),
        Some(m) => Err(err(
            "magic",
            0,
            format!("{:02x?} is not an FSEQ file (expected \"PSEQ\")", m),
        )),
        None => Err(err(
            "magic",
            0,
            format!("file is {} bytes, too short to be an FSEQ file", buf.len()),
        )),
    }
}

fn parse_sparse(table: &[u8], at: usize) -> Result<Vec<(u32, u32)>, HeaderError> {
    let mut ranges = Vec::with_capacity(table.len() / field::SPARSE_ENTRY_LEN);
    for (i, e) in table.chunks_exact(field::SPARSE_ENTRY_LEN).enumerate() {
        let (start, count) = (u24_at(e, 0), u24_at(e, 3));
        if count == 0 {
            return Err(err(
                "sparse range",
                at + i * field::SPARSE_ENTRY_LEN,
                format!("range {i} starting at channel {start} has 0 channels"),
            ));
        }
        ranges.push((start, count));
    }
    Ok(ranges)
}

fn parse_blocks(
    table: &[u8],
    at: usize,
    data_offset: u64,
    frames: u32,
    compression: Compression,
) -> Result<Vec<Block>, HeaderError> {
    let mut blocks: Vec<Block> = Vec::with_capacity(table.len() / field::BLOCK_ENTRY_LEN);
    let mut offset = data_offset;
    for (i, e) in table.chunks_exact(field::BLOCK_ENTRY_LEN).enumerate() {
        let first_frame = u32_at(e, 0..4);
        let len = u32_at(e, 4..8) as u64;
        let entry_at = at + i * field::BLOCK_ENTRY_LEN;
        if len == 0 {
            // Reserved slot the writer pre-allocated: no data, skip.
            continue;
        }
        if compression == Compression::None {
            // Uncompressed frames are addressed directly; the table is informational.
            continue;
        }
        match blocks.last() {
            None if first_frame != 0 => {
                return Err(err(
                    "block table",
                    entry_at,
                    format!("first block starts at frame {first_frame}, not 0"),
                ));
            }
            Some(prev) if first_frame < prev.first_frame => {
                return Err(err(
                    "block table",
                    entry_at,
                    format!(
                        "block {i} starts at frame {first_frame}, before the previous block's {}",
                        prev.first_frame
                    ),
                ));
            }
            _ => {}
        }
        if first_frame > frames {
            return Err(err(
                "block table",
                entry_at,
                format!("block {i} starts at frame {first_frame}, past the {frames} frames"),
            ));
        }
        blocks.push(Block {
            index: i as u32,
            first_frame,
            frames: 0,
            offset,
            len,
        });
        offset += len;
    }
    let mut next = frames;
    for b in blocks.iter_mut().rev() {
        b.frames = next - b.first_frame;
        next = b.first_frame;
    }
    Ok(blocks)
}

fn parse_var_headers(area: &[u8], at: usize) -> Result<Vec<VarHeader>, HeaderError> {
    let mut out = Vec::new();
    let mut i = 0;
    while i + 4 <= area.len() {
        let len = u16::from_le_bytes([area[i], area[i + 1]]) as usize;
        let code = [area[i + 2], area[i + 3]];
        if len == 0 {
            // Zero padding up to the channel data offset.
            break;
        }
        if len <= 4 {
            out.push(VarHeader {
                code,
                data: Vec::new(),
            });
            i += 4;
            continue;
        }
        if i + len > area.len() {
            return Err(err(
                "variable header",
                at + i,
                format!(
                    "'{}' claims {len} bytes but only {} remain before the channel data",
                    String::from_utf8_lossy(&code),
                    area.len() - i
                ),
            ));
        }
        out.push(VarHeader {
            code,
            data: area[i + 4..i + len].to_vec(),
        });
        i += len;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A v2.1 zstd header laid out by hand, every byte annotated.
    /// 3 table entries (the middle one reserved), 1 sparse range, `mf`, unknown `Zz`,
    /// an empty `QQ` and `sp`; then padding to the channel data offset 108.
    #[rustfmt::skip]
    const V2: [u8; 108] = [
        b'P', b'S', b'E', b'Q',
        108, 0,             // channel data offset
        1, 2,               // minor 1, major 2
        74, 0,              // header length: where variable headers start
        6, 0, 0, 0,         // channel count (bytes per stored frame)
        30, 0, 0, 0,        // frames
        25,                 // step ms
        0,                  // flags
        0x01,               // zstd, block count bits 8-11 = 0
        3,                  // block count low byte
        1,                  // sparse ranges
        0,                  // reserved
        1, 2, 3, 4, 5, 6, 7, 8, // unique id
        0, 0, 0, 0, 20, 0, 0, 0,    // block 0: frames from 0, 20 bytes
        0, 0, 0, 0, 0, 0, 0, 0,     // reserved entry (length 0)
        12, 0, 0, 0, 9, 0, 0, 0,    // block 2: frames from 12, 9 bytes
        0x10, 0x27, 0, 6, 0, 0,     // sparse: start 10000, 6 channels
        // 32 + 24 + 6 = 62; a 12-byte gap the header length skips (FPP reads from bytes 8-9)
        0xEE, 0xEE, 0xEE, 0xEE, 0xEE, 0xEE, 0xEE, 0xEE, 0xEE, 0xEE, 0xEE, 0xEE,
        // 74: variable headers
        10, 0, b'm', b'f', b'a', b'.', b'm', b'p', b'3', 0,
        7, 0, b'Z', b'z', 9, 8, 7,
        4, 0, b'Q', b'Q',
        8, 0, b's', b'p', b'x', b'L', b't', 0,
        // 103: padding to 108
        0, 0, 0, 0, 0,
    ];

    fn file_with_data() -> Vec<u8> {
        let mut f = V2.to_vec();
        f.resize(108 + 29, 0);
        f
    }

    #[test]
    fn parse_hand_built_v2() {
        let f = file_with_data();
        let h = Header::parse(&f, f.len() as u64).unwrap();
        assert_eq!((h.major, h.minor, h.data_offset), (2, 1, 108));
        assert_eq!(
            (h.channel_count, h.frames, h.step_ms, h.flags),
            (6, 30, 25, 0)
        );
        assert_eq!(h.compression, Compression::Zstd);
        assert_eq!(h.unique_id, 0x0807_0605_0403_0201);
        assert_eq!(h.block_table_len, 3);
        assert_eq!(
            h.blocks,
            [
                Block {
                    index: 0,
                    first_frame: 0,
                    frames: 12,
                    offset: 108,
                    len: 20
                },
                Block {
                    index: 2,
                    first_frame: 12,
                    frames: 18,
                    offset: 128,
                    len: 9
                },
            ]
        );
        assert_eq!(h.sparse_ranges, [(10000, 6)]);
        assert_eq!(h.frame_len(), 10006);
        let codes: Vec<_> = h.variable_headers.iter().map(|v| v.code).collect();
        assert_eq!(codes, [*b"mf", *b"Zz", *b"QQ", *b"sp"]);
        assert_eq!(h.variable_headers[1].data, [9, 8, 7]);
        assert!(h.variable_headers[2].data.is_empty());
        assert_eq!(h.media_file().as_deref(), Some("a.mp3"));
        assert_eq!(h.producer().as_deref(), Some("xLt"));
        assert_eq!(h.version(), "2.1");
    }

    #[test]
    fn block_count_high_nibble() {
        let mut f = file_with_data();
        f[20] = 0x11; // zstd + 256 more entries: the table no longer fits before byte 108
        let e = Header::parse(&f, f.len() as u64).unwrap_err();
        assert_eq!(e.field, "block table");
        assert!(e.problem.contains("259 block entries"), "{e}");
    }

    #[test]
    fn v1_header() {
        #[rustfmt::skip]
        let mut f = vec![
            b'P', b'S', b'E', b'Q', 40, 0, 0, 1, 28, 0,
            3, 0, 0, 0,  2, 0, 0, 0,  50, 0,
            0, 0, 0, 0, 1, 2, 0, 0,
            8, 0, b's', b'p', b'v', b'1', b'!', 0,   // 28..36
            0, 0, 0, 0,                              // pad to 40
        ];
        f.extend_from_slice(&[1, 2, 3, 4, 5, 6]);
        let h = Header::parse(&f, f.len() as u64).unwrap();
        assert_eq!(
            (h.major, h.channel_count, h.frames, h.step_ms),
            (1, 3, 2, 50)
        );
        assert_eq!(h.compression, Compression::None);
        assert_eq!(h.producer().as_deref(), Some("v1!"));
        // One byte short of two frames.
        let e = Header::parse(&f[..f.len() - 1], f.len() as u64 - 1).unwrap_err();
        assert_eq!((e.field, e.offset), ("frame data", 40));
    }

    #[test]
    fn errors_name_field_and_offset() {
        let f = file_with_data();
        let cases: Vec<(usize, u8, &str, u64)> = vec![
            (0, b'X', "magic", 0),
            (7, 3, "major version", 7),
            (20, 0x07, "compression type", 20),
            (4, 20, "channel data offset", 4),
            (33, 5, "block table", 32),  // first block starts at frame 5
            (59, 0, "sparse range", 56), // range of 0 channels
            (74, 200, "variable header", 74),
            (8, 10, "header length", 8),
        ];
        for (at, val, field, offset) in cases {
            let mut g = f.clone();
            g[at] = val;
            if at == 33 {
                g[32] = 5;
                g[33] = 0;
            }
            let e = Header::parse(&g, g.len() as u64).unwrap_err();
            assert_eq!((e.field, e.offset), (field, offset), "byte {at}={val}: {e}");
        }
    }

    #[test]
    fn block_past_end_of_file_is_truncation() {
        let f = file_with_data();
        let e = Header::parse(&f[..f.len() - 1], f.len() as u64 - 1).unwrap_err();
        assert_eq!((e.field, e.offset), ("block table", 48));
        assert!(
            e.problem
                .contains("block 2 (bytes 128..137) runs past the end"),
            "{e}"
        );
    }

    #[test]
    fn header_values_cannot_demand_huge_blocks() {
        let mut f = file_with_data();
        // 6 → 60000 channels: block 0 would need 720000 bytes from 20 compressed: fine for
        // zstd's 32768:1 bound; 2,000,000 channels is not.
        f[10..14].copy_from_slice(&2_000_000u32.to_le_bytes());
        let e = Header::parse(&f, f.len() as u64).unwrap_err();
        assert!(e.problem.contains("cannot expand that much"), "{e}");
        f[10..14].copy_from_slice(&(MAX_CHANNELS + 1).to_le_bytes());
        let e = Header::parse(&f, f.len() as u64).unwrap_err();
        assert_eq!(e.field, "channel count");
    }

    #[test]
    fn compressed_without_blocks_is_one_block() {
        let mut f = file_with_data();
        f[32..40].fill(0); // no used entry left: the whole data area is one block
        f[48..56].fill(0);
        let h = Header::parse(&f, f.len() as u64).unwrap();
        assert_eq!(
            h.blocks,
            [Block {
                index: 0,
                first_frame: 0,
                frames: 30,
                offset: 108,
                len: 29
            }]
        );
    }

    #[test]
    fn short_inputs_never_panic() {
        let f = file_with_data();
        for len in 0..f.len() {
            assert!(Header::parse(&f[..len], len as u64).is_err(), "len {len}");
            let _ = Header::needed_len(&f[..len]);
        }
    }
}
