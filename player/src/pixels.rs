//! The pixels each output was last sent, for the dashboard (`GET /pixels`): a copy the
//! render thread makes only when a viewer asked for one since the last copy, into a
//! double buffer the HTTP side reads.
//!
//! The render thread never waits for a viewer. With nobody watching, a frame costs it
//! one relaxed atomic load. When a viewer asked, it copies every output's wire pixels
//! (after geometry, brightness and any live override: the bytes the encoders get) into
//! the slot the readers are not pointed at, with `try_lock`: a reader still copying out
//! of that slot makes the render thread skip the copy this frame and try the next, never
//! block. Readers lock only the slot `latest` names, and only to copy it out.
//!
//! One board per process, like `output::queue_keeps_newest`: one render thread plays at
//! a time, and a show reload keeps the board (the next copy has the new outputs).
//!
//! The wire format (all integers little-endian), chosen to be read with one `DataView`:
//!
//! ```text
//! "PXL1"            4 bytes
//! seq               u64  copies made since the player started (a viewer sees a new one)
//! sent_unix_us      u64  the frame's stamp, as its datagrams carry it
//! outputs           u16
//! per output:
//!   name_len        u8, then name_len bytes of UTF-8 (the config's output name)
//!   bytes_per_pixel u8   3 (RGB) or 4 (RGBW)
//!   order           3 bytes: for wire byte k of a pixel, which of R, G, B (0, 1, 2) it is
//!   pixels          u32
//!   data            pixels * bytes_per_pixel bytes, as the pole is sent them
//! ```

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, TryLockError};

use crate::geometry::PoleMap;

pub const MAGIC: &[u8; 4] = b"PXL1";

/// One output's pixels in a copy.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct OutputPixels {
    pub name: String,
    pub bytes_per_pixel: u8,
    pub order: [u8; 3],
    pub data: Vec<u8>,
}

/// One copy of every output's pixels.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Snapshot {
    pub seq: u64,
    pub sent_unix_us: u64,
    pub outputs: Vec<OutputPixels>,
}

/// No copy yet.
const NONE: usize = usize::MAX;

pub struct Board {
    /// A viewer asked for a copy since the last one.
    wanted: AtomicBool,
    /// Copies made so far; a reader waits for this to pass what it saw.
    seq: AtomicU64,
    /// Which slot holds the newest copy (NONE before the first).
    latest: AtomicUsize,
    slots: [Mutex<Snapshot>; 2],
}

impl Default for Board {
    fn default() -> Self {
        Self::new()
    }
}

/// The player's board: the render thread offers, `http` reads.
pub static BOARD: Board = Board::new();

impl Board {
    pub const fn new() -> Board {
        const EMPTY: Snapshot = Snapshot {
            seq: 0,
            sent_unix_us: 0,
            outputs: Vec::new(),
        };
        Board {
            wanted: AtomicBool::new(false),
            seq: AtomicU64::new(0),
            latest: AtomicUsize::new(NONE),
            slots: [Mutex::new(EMPTY), Mutex::new(EMPTY)],
        }
    }

    /// A viewer wants the next frame copied.
    pub fn want(&self) {
        self.wanted.store(true, Ordering::Relaxed);
    }

    /// Copies made so far.
    pub fn seq(&self) -> u64 {
        self.seq.load(Ordering::Acquire)
    }

    /// The render thread, once per frame after the send: copies `outputs` (name, map,
    /// wire pixels) when a viewer asked, never waiting. Returns whether it copied.
    /// Allocates only when the outputs grow (the first copy, a reload to a larger show).
    pub fn offer<'a>(
        &self,
        sent_unix_us: u64,
        outputs: impl Iterator<Item = (&'a str, &'a PoleMap, &'a [u8])>,
    ) -> bool {
        if !self.wanted.load(Ordering::Relaxed) {
            return false;
        }
        let next = match self.latest.load(Ordering::Acquire) {
            0 => 1,
            _ => 0,
        };
        let mut slot = match self.slots[next].try_lock() {
            Ok(g) => g,
            // A reader panicked while copying: the slot is overwritten whole anyway.
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            // A reader is copying out of it: next frame.
            Err(TryLockError::WouldBlock) => return false,
        };
        let seq = self.seq.load(Ordering::Relaxed) + 1;
        slot.seq = seq;
        slot.sent_unix_us = sent_unix_us;
        let mut n = 0;
        for (name, map, pixels) in outputs {
            if slot.outputs.len() == n {
                slot.outputs.push(OutputPixels::default());
            }
            let o = &mut slot.outputs[n];
            if o.name != name {
                o.name.clear();
                o.name.push_str(name);
            }
            o.bytes_per_pixel = map.format.bytes_per_pixel() as u8;
            let order = map.order.wire_to_source();
            o.order = [order[0] as u8, order[1] as u8, order[2] as u8];
            o.data.clear();
            o.data.extend_from_slice(pixels);
            n += 1;
        }
        slot.outputs.truncate(n);
        drop(slot);
        self.latest.store(next, Ordering::Release);
        self.seq.store(seq, Ordering::Release);
        self.wanted.store(false, Ordering::Relaxed);
        true
    }

    /// The newest copy, encoded (`encode`); None before the first. Holds the slot's lock
    /// only while encoding (one copy of the bytes).
    pub fn encoded(&self) -> Option<Vec<u8>> {
        let i = self.latest.load(Ordering::Acquire);
        let slot = self.slots.get(i)?;
        let g = slot.lock().unwrap_or_else(|e| e.into_inner());
        Some(encode(&g))
    }
}

/// The longest output name the format carries; a longer one is cut at a character
/// boundary.
const NAME_MAX: usize = 255;

fn short_name(name: &str) -> &str {
    if name.len() <= NAME_MAX {
        return name;
    }
    let mut end = NAME_MAX;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

/// The wire format of the module's documentation.
pub fn encode(s: &Snapshot) -> Vec<u8> {
    let len: usize = 22
        + s.outputs
            .iter()
            .map(|o| 1 + short_name(&o.name).len() + 8 + o.data.len())
            .sum::<usize>();
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&s.seq.to_le_bytes());
    out.extend_from_slice(&s.sent_unix_us.to_le_bytes());
    let n = s.outputs.len().min(usize::from(u16::MAX));
    out.extend_from_slice(&(n as u16).to_le_bytes());
    for o in s.outputs.iter().take(n) {
        let name = short_name(&o.name);
        out.push(name.len() as u8);
        out.extend_from_slice(name.as_bytes());
        let bpp = usize::from(o.bytes_per_pixel.max(1));
        out.push(bpp as u8);
        out.extend_from_slice(&o.order);
        let pixels = o.data.len() / bpp;
        out.extend_from_slice(&(pixels as u32).to_le_bytes());
        out.extend_from_slice(&o.data[..pixels * bpp]);
    }
    out
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum DecodeError {
    #[error("pixels document: {0} at byte {1}")]
    Bad(&'static str, usize),
}

/// The inverse of `encode`, for tests and tools that read `/pixels`.
pub fn decode(b: &[u8]) -> Result<Snapshot, DecodeError> {
    let mut at = 0usize;
    let mut take = |n: usize, what: &'static str| -> Result<&[u8], DecodeError> {
        let s = b.get(at..at + n).ok_or(DecodeError::Bad(what, at))?;
        at += n;
        Ok(s)
    };
    if take(4, "short magic")? != MAGIC {
        return Err(DecodeError::Bad("not PXL1", 0));
    }
    let u64_at = |s: &[u8]| u64::from_le_bytes(s.try_into().unwrap_or([0; 8]));
    let seq = u64_at(take(8, "short seq")?);
    let sent_unix_us = u64_at(take(8, "short stamp")?);
    let c = take(2, "short output count")?;
    let count = u16::from_le_bytes([c[0], c[1]]);
    let mut outputs = Vec::new();
    for _ in 0..count {
        let l = usize::from(take(1, "short name length")?[0]);
        let name = String::from_utf8(take(l, "short name")?.to_vec())
            .map_err(|_| DecodeError::Bad("name not UTF-8", 0))?;
        let bpp = take(1, "short bytes per pixel")?[0];
        let o = take(3, "short order")?;
        let order = [o[0], o[1], o[2]];
        let p = take(4, "short pixel count")?;
        let pixels = u32::from_le_bytes([p[0], p[1], p[2], p[3]]) as usize;
        let data = take(pixels * usize::from(bpp), "short pixel data")?.to_vec();
        outputs.push(OutputPixels {
            name,
            bytes_per_pixel: bpp,
            order,
            data,
        });
    }
    Ok(Snapshot {
        seq,
        sent_unix_us,
        outputs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ColorOrder, PixelFormat};

    fn map(pixels: usize, format: PixelFormat, order: ColorOrder) -> PoleMap {
        PoleMap {
            start: 0,
            pixels,
            format,
            order,
        }
    }

    #[test]
    fn nothing_is_copied_until_a_viewer_asks_and_one_ask_is_one_copy() {
        let b = Board::new();
        let m = map(2, PixelFormat::Rgb8, ColorOrder::Grb);
        let px = [1u8, 2, 3, 4, 5, 6];
        assert!(!b.offer(7, [("a", &m, &px[..])].into_iter()));
        assert_eq!(b.encoded(), None);
        b.want();
        assert!(b.offer(7, [("a", &m, &px[..])].into_iter()));
        assert!(
            !b.offer(8, [("a", &m, &px[..])].into_iter()),
            "one ask, one copy"
        );
        let s = decode(&b.encoded().expect("a copy")).expect("decodes");
        assert_eq!(s.seq, 1);
        assert_eq!(s.sent_unix_us, 7);
        assert_eq!(
            s.outputs,
            vec![OutputPixels {
                name: "a".into(),
                bytes_per_pixel: 3,
                order: [1, 0, 2],
                data: px.to_vec(),
            }]
        );
    }

    #[test]
    fn a_reader_holding_the_other_slot_makes_the_render_thread_skip_not_wait() {
        let b = Board::new();
        let m = map(1, PixelFormat::Rgb8, ColorOrder::Rgb);
        b.want();
        assert!(b.offer(1, [("a", &m, &[9u8, 9, 9][..])].into_iter()));
        // latest is slot 0; the next copy goes to slot 1. A reader that read `latest`
        // before it flipped may hold slot 1 (here: held by hand).
        let held = b.slots[1].lock().expect("lock");
        b.want();
        assert!(!b.offer(2, [("a", &m, &[1u8, 1, 1][..])].into_iter()));
        drop(held);
        assert!(
            b.offer(3, [("a", &m, &[2u8, 2, 2][..])].into_iter()),
            "tries again"
        );
        let s = decode(&b.encoded().expect("copy")).expect("decodes");
        assert_eq!((s.seq, s.sent_unix_us), (2, 3));
        assert_eq!(s.outputs[0].data, vec![2, 2, 2]);
    }

    #[test]
    fn a_reload_to_fewer_outputs_drops_the_old_ones_and_names_change() {
        let b = Board::new();
        let m = map(1, PixelFormat::Rgbw8, ColorOrder::Bgr);
        let px = [1u8, 2, 3, 4];
        b.want();
        b.offer(0, [("a", &m, &px[..]), ("b", &m, &px[..])].into_iter());
        b.want();
        b.offer(0, [("c", &m, &px[..])].into_iter());
        let s = decode(&b.encoded().expect("copy")).expect("decodes");
        assert_eq!(s.outputs.len(), 1);
        assert_eq!(s.outputs[0].name, "c");
        assert_eq!(s.outputs[0].bytes_per_pixel, 4);
        assert_eq!(s.outputs[0].order, [2, 1, 0]);
    }

    #[test]
    fn long_names_are_cut_on_a_character_boundary_and_truncated_input_is_refused() {
        let s = Snapshot {
            seq: 1,
            sent_unix_us: 2,
            outputs: vec![OutputPixels {
                name: "é".repeat(200),
                bytes_per_pixel: 3,
                order: [0, 1, 2],
                data: vec![5; 30],
            }],
        };
        let e = encode(&s);
        let d = decode(&e).expect("decodes");
        assert_eq!(d.outputs[0].name, "é".repeat(127));
        assert_eq!(d.outputs[0].data, vec![5; 30]);
        for cut in 0..e.len() {
            assert!(decode(&e[..cut]).is_err(), "cut at {cut}");
        }
    }
}
