//! A large sACN output's whole frame on two threads, split by universe: the render thread
//! does the first half of the universes and the output's helper thread the second, each
//! with its own encoder, batch and `sendmmsg` arrays, and each doing the four steps for
//! its half (channels from the source, geometry, encoding, send). At 5,000 universes the
//! source (a rainbow) took 1.5 ms and geometry 1.0 ms on one thread, beside the send.
//!
//! The halves never share a byte they write: the split falls on a universe boundary that
//! is also a pixel boundary, so each half's channels, wire pixels, datagrams and sequence
//! numbers are its own. Each half's encoder numbers its universes as the output's would,
//! so the two batches together are, datagram for datagram, the one-thread frame (the test
//! below checks it byte for byte).

use std::ops::Range;
use std::os::fd::RawFd;

use super::admit::Rotation;
use super::send::{SendOutcome, Sender};
use super::split::Worker;
use crate::geometry::{Brightness, PoleMap, map_pole};
use crate::source::pattern;
use crate::sys::time::mono_ns;
use crate::wire::{BatchFull, Datagrams, sacn};

/// One half of an output: its universes (indices from the output's first) and the bytes
/// of the output's channel and pixel buffers they carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    pub universes: Range<usize>,
    pub bytes: Range<usize>,
}

/// Where an output of `channels` bytes in `universes` universes of `size` slots, with
/// `bpp` bytes per pixel, splits in two: at the universe boundary nearest the middle that
/// is also a pixel boundary (with 510-slot universes, every one; with 512 and RGB, every
/// third). None when it cannot split (one universe, or no such boundary inside).
pub fn split(universes: usize, size: usize, bpp: usize, channels: usize) -> Option<[Span; 2]> {
    if universes < 2 || size == 0 || bpp == 0 || channels <= (universes - 1) * size {
        return None;
    }
    // A universe boundary k*size is a pixel boundary when k is a multiple of `step`.
    let step = bpp / gcd(size, bpp);
    let half = universes / 2;
    let lower = half / step * step;
    let upper = lower + step;
    let mid = [lower, upper]
        .into_iter()
        .filter(|&k| k > 0 && k < universes)
        .min_by_key(|&k| k.abs_diff(half))?;
    let cut = mid * size;
    Some([
        Span {
            universes: 0..mid,
            bytes: 0..cut,
        },
        Span {
            universes: mid..universes,
            bytes: cut..channels,
        },
    ])
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Where a half's channels come from this frame.
#[derive(Clone, Copy)]
pub enum Fill<'a> {
    /// The sequence frame's channels from the output's start channel on; past the
    /// frame's end, black (as the one-thread copy leaves them).
    Frame(&'a [u8]),
    /// A test pattern; the output is pole `index` of the layout.
    Pattern(&'a pattern::Frame, usize),
    /// The channels keep what they hold: a late frame with nothing older to show, or
    /// black that is already black.
    Keep,
}

/// What a half needs to fill and map its channels.
pub struct Render<'a> {
    /// The output's channels (`map.channels()` bytes, from its start channel).
    pub channels: &'a mut [u8],
    pub fill: Fill<'a>,
    pub map: &'a PoleMap,
    pub brightness: &'a Brightness,
}

/// Time one half spent in each stage, ns.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct HalfTimes {
    pub source_ns: u64,
    pub geometry_ns: u64,
    /// Encoding and `sendmmsg`.
    pub wire_ns: u64,
}

impl HalfTimes {
    /// Stage by stage, the longer of two halves that ran side by side: how long the
    /// frame waited on that stage.
    pub fn max(self, o: HalfTimes) -> HalfTimes {
        HalfTimes {
            source_ns: self.source_ns.max(o.source_ns),
            geometry_ns: self.geometry_ns.max(o.geometry_ns),
            wire_ns: self.wire_ns.max(o.wire_ns),
        }
    }
}

/// One half's encoder (its universes only), batch and `sendmmsg` arrays.
pub struct Part {
    pub span: Span,
    encoder: sacn::Encoder,
    batch: Datagrams,
    sender: Sender,
    /// Where this half's next frame starts (after one was cut short).
    rotation: Rotation,
    /// The last send: where it started and how many datagrams went.
    last: (usize, usize),
}

impl Part {
    /// The half `span` of an output whose whole encoder has config `whole`.
    pub fn new(span: Span, whole: &sacn::Config, slot_len: usize) -> Part {
        let mut cfg = whole.clone();
        cfg.first_universe = whole
            .first_universe
            .wrapping_add(span.universes.start as u16);
        let n = span.universes.len();
        Part {
            encoder: sacn::Encoder::new(cfg, span.bytes.len()),
            batch: Datagrams::new(n, slot_len),
            sender: Sender::new(n),
            rotation: Rotation::default(),
            last: (0, 0),
            span,
        }
    }

    /// The datagrams this half last encoded.
    pub fn batch(&self) -> &Datagrams {
        &self.batch
    }

    /// This half's channels from the source and their geometry (with `render`), then its
    /// datagrams from `pixels` (the half's wire pixels). No system call but the clock.
    /// `render.channels` and `pixels` are this half's bytes only.
    pub fn render(
        &mut self,
        render: Option<Render<'_>>,
        pixels: &mut [u8],
        times: &mut HalfTimes,
    ) -> Result<(), BatchFull> {
        let t0 = mono_ns();
        if let Some(r) = render {
            let bpp = r.map.format.bytes_per_pixel();
            match r.fill {
                Fill::Frame(data) => {
                    let src = data.get(self.span.bytes.start..).unwrap_or(&[]);
                    let n = src.len().min(r.channels.len());
                    r.channels[..n].copy_from_slice(&src[..n]);
                    r.channels[n..].fill(0);
                }
                Fill::Pattern(frame, index) => {
                    frame.render_pixels(index, r.map, self.span.bytes.start / bpp, r.channels)
                }
                Fill::Keep => {}
            }
            let t1 = mono_ns();
            times.source_ns = t1 - t0;
            let map = PoleMap {
                start: 0,
                pixels: r.channels.len() / bpp,
                format: r.map.format,
                order: r.map.order,
            };
            map_pole(r.channels, &map, r.brightness, pixels);
            times.geometry_ns = mono_ns() - t1;
        }
        let t2 = mono_ns();
        self.batch.clear();
        let res = self.encoder.encode(pixels, &mut self.batch);
        times.wire_ns = mono_ns() - t2;
        res
    }

    fn send(&mut self, fd: RawFd, dontwait: bool, times: &mut HalfTimes) -> SendOutcome {
        let t = mono_ns();
        let n = self.batch.len();
        let start = self.rotation.start;
        let out = self
            .sender
            .send_rotated(fd, &self.batch, 0..n, n, start, dontwait);
        self.last = (start, out.sent);
        self.rotation.after(n, out.sent);
        times.wire_ns += mono_ns() - t;
        out
    }

    /// Stream-terminated packets for this half's universes (E1.31 §6.7.1), best effort.
    fn terminate(&mut self, fd: RawFd, pixels: &[u8]) {
        self.batch.clear();
        if self
            .encoder
            .encode_terminate(pixels, &mut self.batch)
            .is_ok()
        {
            self.sender.send(fd, &self.batch, true);
        }
    }
}

/// The helper thread and the two halves.
pub struct Halves {
    worker: Worker,
    parts: [Part; 2],
}

/// What a frame in halves did.
#[derive(Debug, Default)]
pub struct FrameResult {
    pub outcome: SendOutcome,
    /// Per stage, the longer of the two halves.
    pub times: HalfTimes,
    /// A half could not encode (a batch sized wrong: a programming error).
    pub error: Option<BatchFull>,
    /// Datagrams the halves encoded.
    pub datagrams: usize,
}

/// One half's frame: render, and send unless the encoding failed.
fn run_half(
    part: &mut Part,
    render: Option<Render<'_>>,
    pixels: &mut [u8],
    fd: RawFd,
    dontwait: bool,
) -> (HalfTimes, Result<SendOutcome, BatchFull>) {
    let mut t = HalfTimes::default();
    let res = part
        .render(render, pixels, &mut t)
        .map(|()| part.send(fd, dontwait, &mut t));
    (t, res)
}

impl Halves {
    /// Starts the helper thread (called when the output is opened).
    pub fn new(parts: [Part; 2]) -> std::io::Result<Halves> {
        Ok(Halves {
            worker: Worker::spawn()?,
            parts,
        })
    }

    pub fn cpu_ns(&self) -> u64 {
        self.worker.cpu_ns()
    }

    /// One frame: the first half on this thread, the second on the helper, side by side;
    /// returns when both are in the kernel (the frame barrier: it allocates nothing and
    /// waits only for the other half's work). With `render`, each half also fills and
    /// maps its channels; without, it encodes the wire pixels as they are.
    pub fn frame(
        &mut self,
        fd: RawFd,
        dontwait: bool,
        render: Option<Render<'_>>,
        pixels: &mut [u8],
    ) -> FrameResult {
        let cut = self.parts[1].span.bytes.start.min(pixels.len());
        let [a, b] = &mut self.parts;
        let (pa, pb) = pixels.split_at_mut(cut);
        let (ra, rb) = match render {
            Some(r) => {
                let (ca, cb) = r.channels.split_at_mut(cut.min(r.channels.len()));
                let half = |channels| Render {
                    channels,
                    fill: r.fill,
                    map: r.map,
                    brightness: r.brightness,
                };
                (Some(half(ca)), Some(half(cb)))
            }
            None => (None, None),
        };
        let (x, y) = self.worker.join(
            || run_half(a, ra, pa, fd, dontwait),
            || run_half(b, rb, pb, fd, dontwait),
        );
        // The helper died in the job (a panic): send its half from here, as it is.
        let y = y.unwrap_or_else(|| {
            run_half(&mut self.parts[1], None, &mut pixels[cut..], fd, dontwait)
        });
        let mut r = FrameResult {
            times: x.0.max(y.0),
            datagrams: self.parts[0].batch().len() + self.parts[1].batch().len(),
            ..FrameResult::default()
        };
        for half in [x.1, y.1] {
            match half {
                // The first half's errno wins: it is where one thread would have stopped.
                Ok(o) => r.outcome = r.outcome.merge(o),
                Err(e) => r.error = r.error.or(Some(e)),
            }
        }
        r
    }

    /// Each half's last send as (first universe index, universes, start, sent), for the
    /// per-universe count of a frame sent in part.
    pub fn last_sends(&self) -> [(usize, usize, usize, usize); 2] {
        self.parts.each_ref().map(|p| {
            (
                p.span.universes.start,
                p.span.universes.len(),
                p.last.0,
                p.last.1,
            )
        })
    }

    /// Stream-terminated packets, three times, half by half, from the calling thread.
    pub fn terminate(&mut self, fd: RawFd, pixels: &[u8]) {
        for _ in 0..3 {
            for p in &mut self.parts {
                let bytes =
                    p.span.bytes.start.min(pixels.len())..p.span.bytes.end.min(pixels.len());
                p.terminate(fd, &pixels[bytes]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::show::PatternKind;
    use crate::config::{ColorOrder, PixelFormat};

    #[test]
    fn the_halves_cover_every_universe_and_byte_exactly_once_on_pixel_boundaries() {
        let mut checked = 0;
        for size in [1usize, 2, 3, 100, 170, 509, 510, 511, 512] {
            for bpp in [3usize, 4] {
                for pixels in (1..400).chain([850_000 / 3, 850_000]) {
                    let channels = pixels * bpp;
                    let universes = channels.div_ceil(size);
                    let Some([a, b]) = split(universes, size, bpp, channels) else {
                        continue;
                    };
                    checked += 1;
                    let mut seen = vec![0u8; universes];
                    for s in [&a, &b] {
                        assert!(!s.universes.is_empty() && !s.bytes.is_empty());
                        assert_eq!(s.bytes.start, s.universes.start * size);
                        assert_eq!(s.bytes.start % bpp, 0, "a pixel split in two");
                        for u in s.universes.clone() {
                            seen[u] += 1;
                        }
                    }
                    assert!(
                        seen.iter().all(|&n| n == 1),
                        "{size} {bpp} {pixels}: {seen:?}"
                    );
                    assert_eq!((a.bytes.start, a.bytes.end), (0, b.bytes.start));
                    assert_eq!(b.bytes.end, channels);
                    // The second half's bytes span exactly its universes.
                    assert_eq!((channels - b.bytes.start).div_ceil(size), b.universes.len());
                    let step = bpp / gcd(size, bpp);
                    assert!(a.universes.end.abs_diff(universes / 2) <= step);
                }
            }
        }
        assert!(checked > 1000, "{checked}");
        assert_eq!(split(1, 510, 3, 510), None, "one universe stays whole");
        // 5,000 universes of 170 RGB pixels: 2,500 each.
        let [a, b] = split(5000, 510, 3, 5000 * 510).expect("splits");
        assert_eq!((a.universes, b.universes), (0..2500, 2500..5000));
    }

    fn config(size: u16, sync: Option<u16>) -> sacn::Config {
        sacn::Config {
            cid: uuid::Uuid::from_bytes([7; 16]),
            source_name: "halves test".into(),
            priority: 100,
            first_universe: 300,
            universe_size: size,
            sync_universe: sync,
            dest: sacn::Dest::Multicast { port: sacn::PORT },
        }
    }

    /// The one-thread frame: channels from `fill`, geometry, the whole encoder.
    fn one_thread(
        fill: &Fill<'_>,
        map: &PoleMap,
        brightness: &Brightness,
        channels: &mut [u8],
        enc: &mut sacn::Encoder,
        out: &mut Datagrams,
    ) {
        match fill {
            Fill::Frame(d) => {
                let n = d.len().min(channels.len());
                channels[..n].copy_from_slice(&d[..n]);
                channels[n..].fill(0);
            }
            Fill::Pattern(f, i) => f.render_pixels(*i, map, 0, channels),
            Fill::Keep => {}
        }
        let mut pixels = vec![0u8; map.channels()];
        map_pole(channels, map, brightness, &mut pixels);
        out.clear();
        enc.encode(&pixels, out).expect("encode");
    }

    #[test]
    fn a_frame_in_two_halves_is_byte_for_byte_the_one_thread_frame() {
        let brightness = Brightness::new(0.7);
        for (size, format, pixels) in [
            (510u16, PixelFormat::Rgb8, 300 * 170 + 13),
            (512, PixelFormat::Rgb8, 200 * 170),
            (512, PixelFormat::Rgbw8, 150 * 128 + 1),
        ] {
            let map = PoleMap {
                start: 0,
                pixels,
                format,
                order: ColorOrder::Grb,
            };
            let len = map.channels();
            let cfg = config(size, Some(9));
            let mut whole = sacn::Encoder::new(cfg.clone(), len);
            let size = usize::from(size);
            let spans =
                split(whole.universes(), size, format.bytes_per_pixel(), len).expect("splits");
            let mut parts = spans.map(|s| Part::new(s, whole.config(), sacn::MAX_PACKET));
            let mut want = Datagrams::new(whole.universes(), sacn::MAX_PACKET);
            let mut ch_one = vec![0u8; len];
            let mut ch_two = vec![0u8; len];
            let mut px_two = vec![0u8; len];
            let seq: Vec<u8> = (0..len * 2 / 3).map(|i| (i * 7 % 253) as u8).collect();
            // Three frames, so sequence numbers advance on both sides.
            for (k, t) in [0.1, 1.7, 2.2].into_iter().enumerate() {
                let frame = pattern::Frame::new(PatternKind::Rainbow, [0; 3], t);
                let fill = match k {
                    0 => Fill::Pattern(&frame, 0),
                    1 => Fill::Frame(&seq),
                    _ => Fill::Keep,
                };
                one_thread(&fill, &map, &brightness, &mut ch_one, &mut whole, &mut want);
                let cut = parts[1].span.bytes.start;
                let (ca, cb) = ch_two.split_at_mut(cut);
                let (pa, pb) = px_two.split_at_mut(cut);
                let [a, b] = &mut parts;
                std::thread::scope(|s| {
                    let r = |channels| {
                        Some(Render {
                            channels,
                            fill,
                            map: &map,
                            brightness: &brightness,
                        })
                    };
                    let (ra, rb) = (r(ca), r(cb));
                    let h = s.spawn(|| b.render(rb, pb, &mut HalfTimes::default()));
                    a.render(ra, pa, &mut HalfTimes::default())
                        .expect("first half");
                    h.join().expect("second half thread").expect("second half");
                });
                let got: Vec<_> = parts.iter().flat_map(|p| p.batch().iter()).collect();
                let want: Vec<_> = want.iter().collect();
                assert_eq!(got.len(), want.len(), "datagrams, frame {k}");
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    assert_eq!(g, w, "datagram {i} of frame {k} ({size}-slot universes)");
                }
            }
        }
    }
}
