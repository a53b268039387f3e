//! Test patterns for commissioning: solid, chase, rainbow and an ID pattern. Pure: time
//! and layout in, channel bytes out.

use crate::config::show::PatternKind;
use crate::geometry::PoleMap;

/// Renders pattern `kind` at `t` seconds into the channel buffer, for each pole of
/// `layout` (in the sequence's RGB(W) channel order; geometry applies colour order).
pub fn render(kind: PatternKind, color: [u8; 3], t: f64, layout: &[PoleMap], channels: &mut [u8]) {
    channels.fill(0);
    let frame = Frame::new(kind, color, t);
    for (index, pole) in layout.iter().enumerate() {
        let end = (pole.start + pole.channels()).min(channels.len());
        if let Some(buf) = channels.get_mut(pole.start..end) {
            frame.render_pixels(index, pole, 0, buf);
        }
    }
}

/// One moment of a pattern, ready to colour any pixel of any pole: the render thread
/// builds it once per frame, and both halves of a large pole read it (it is plain data).
pub struct Frame {
    kind: PatternKind,
    color: [u8; 3],
    t: f64,
    /// One hue wheel per frame: 1,024 HSV conversions instead of one per pixel, so a
    /// 5,000-universe rainbow costs a table lookup per pixel.
    wheel: [[u8; 3]; HUES],
    shift: usize,
}

impl Frame {
    pub fn new(kind: PatternKind, color: [u8; 3], t: f64) -> Frame {
        let mut wheel = [[0u8; 3]; HUES];
        if kind == PatternKind::Rainbow {
            for (i, c) in wheel.iter_mut().enumerate() {
                *c = hsv(i as f64 / HUES as f64, 1.0, 1.0);
            }
        }
        Frame {
            kind,
            color,
            t,
            wheel,
            shift: ((t * 0.25).fract() * HUES as f64) as usize,
        }
    }

    /// Pixels `first..` of pole `index` of the layout into `channels`, which holds just
    /// those pixels in the pole's format: R, G, B set, anything past them (white, a
    /// partial pixel) black, as `render` leaves them.
    pub fn render_pixels(&self, index: usize, pole: &PoleMap, first: usize, channels: &mut [u8]) {
        let bpp = pole.format.bytes_per_pixel();
        let n = pole.pixels.max(1);
        let t = self.t;
        if self.kind == PatternKind::Rainbow {
            self.rainbow(first, n, bpp, channels);
            return;
        }
        let mut chunks = channels.chunks_exact_mut(bpp);
        for (k, px) in chunks.by_ref().enumerate() {
            let p = first + k;
            let rgb = match self.kind {
                PatternKind::Solid => self.color,
                PatternKind::Chase => chase(self.color, p, n, t),
                PatternKind::Rainbow => self.wheel[(p * HUES / n + self.shift) % HUES],
                PatternKind::Id => id(index, p, t),
                PatternKind::Walk => walk(p, n, t),
            };
            px[..3].copy_from_slice(&rgb);
            px[3..].fill(0);
        }
        chunks.into_remainder().fill(0);
    }

    /// The rainbow, run by run: pixel p shows hue `p * HUES / n` (shifted), so on a long
    /// pole about n / 1,024 neighbours share one colour. One division per run instead of
    /// one per pixel: at 850,000 pixels the per-pixel division was most of the source
    /// stage's 1.5 ms.
    fn rainbow(&self, first: usize, n: usize, bpp: usize, channels: &mut [u8]) {
        let mut chunks = channels.chunks_exact_mut(bpp);
        let count = chunks.len();
        let mut k = 0;
        while k < count {
            let hue = (first + k) * HUES / n;
            // The first pixel q with q * HUES / n > hue.
            let next = ((hue + 1) * n).div_ceil(HUES);
            let end = next.saturating_sub(first).clamp(k + 1, count);
            let rgb = self.wheel[(hue + self.shift) % HUES];
            for px in chunks.by_ref().take(end - k) {
                px[..3].copy_from_slice(&rgb);
                px[3..].fill(0);
            }
            k = end;
        }
        chunks.into_remainder().fill(0);
    }
}

const HUES: usize = 1024;

/// A lit window a tenth of the pole long, running the pole's length every two seconds.
fn chase(color: [u8; 3], p: usize, n: usize, t: f64) -> [u8; 3] {
    let width = (n / 10).max(1);
    let head = ((t * 0.5).fract() * n as f64) as usize;
    let behind = (head + n - p) % n;
    if behind < width { color } else { [0, 0, 0] }
}

/// Channels a second the walk steps through.
pub const WALK_PER_S: f64 = 10.0;

/// The channel walk: channel k of the pole at full (R, G, B of pixel 0, then of pixel 1,
/// ...), k stepping ten times a second and starting again at the pole's end; every other
/// channel black. A crew sees which pixel and which colour each channel drives (a wrong
/// colour order or start channel shows at once).
fn walk(p: usize, n: usize, t: f64) -> [u8; 3] {
    let step = (t.max(0.0) * WALK_PER_S) as usize % (3 * n).max(1);
    let mut rgb = [0, 0, 0];
    if step / 3 == p {
        rgb[step % 3] = 255;
    }
    rgb
}

/// Pole i shows i+1 blocks of 5 lit pixels separated by 5 dark ones, in a colour of its
/// own, blinking once a second, so a crew on the ground can count which pole is which.
fn id(index: usize, p: usize, t: f64) -> [u8; 3] {
    const PALETTE: [[u8; 3]; 6] = [
        [255, 0, 0],
        [0, 255, 0],
        [0, 0, 255],
        [255, 255, 0],
        [0, 255, 255],
        [255, 0, 255],
    ];
    let block = p / 10;
    let lit = p % 10 < 5 && block <= index;
    let on = (t.fract()) < 0.8;
    if lit && on {
        PALETTE[index % PALETTE.len()]
    } else {
        [0, 0, 0]
    }
}

fn hsv(h: f64, s: f64, v: f64) -> [u8; 3] {
    let i = (h * 6.0).floor();
    let f = h * 6.0 - i;
    let (p, q, t) = (v * (1.0 - s), v * (1.0 - f * s), v * (1.0 - (1.0 - f) * s));
    let (r, g, b) = match i as i64 % 6 {
        0 => (v, t, p),
        1 => (q, v, p),
        2 => (p, v, t),
        3 => (p, q, v),
        4 => (t, p, v),
        _ => (v, p, q),
    };
    [
        (r * 255.0).round() as u8,
        (g * 255.0).round() as u8,
        (b * 255.0).round() as u8,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ColorOrder, PixelFormat};

    fn layout() -> Vec<PoleMap> {
        (0..3)
            .map(|i| PoleMap {
                start: i * 300,
                pixels: 100,
                format: PixelFormat::Rgb8,
                order: ColorOrder::Rgb,
            })
            .collect()
    }

    #[test]
    fn solid_fills_every_pole_and_nothing_between() {
        let mut ch = vec![0xa5; 1000];
        render(PatternKind::Solid, [1, 2, 3], 0.0, &layout(), &mut ch);
        assert!(ch[..900].chunks(3).all(|c| c == [1, 2, 3]));
        assert!(ch[900..].iter().all(|&b| b == 0));
    }

    #[test]
    fn id_pattern_shows_index_plus_one_blocks() {
        let mut ch = vec![0; 900];
        render(PatternKind::Id, [0; 3], 0.1, &layout(), &mut ch);
        for (i, pole) in layout().iter().enumerate() {
            let lit = (0..pole.pixels)
                .filter(|p| ch[pole.start + p * 3..pole.start + p * 3 + 3] != [0, 0, 0])
                .count();
            assert_eq!(lit, 5 * (i + 1), "pole {i}");
        }
    }

    #[test]
    fn chase_moves_and_lights_a_tenth() {
        let mut a = vec![0; 900];
        let mut b = vec![0; 900];
        render(PatternKind::Chase, [9, 9, 9], 0.0, &layout(), &mut a);
        render(PatternKind::Chase, [9, 9, 9], 0.5, &layout(), &mut b);
        let lit = |c: &[u8]| c[..300].chunks(3).filter(|p| p[0] == 9).count();
        assert_eq!(lit(&a), 10);
        assert_eq!(lit(&b), 10);
        assert_ne!(a, b);
    }

    #[test]
    fn rainbow_runs_the_hue_wheel_along_the_pole_and_moves() {
        let mut a = vec![0; 900];
        render(PatternKind::Rainbow, [0; 3], 0.0, &layout(), &mut a);
        assert_eq!(&a[..3], &[255, 0, 0]);
        // A third of the way along the pole: green.
        let p = 100 / 3 + 1;
        assert!(
            a[p * 3 + 1] > 200 && a[p * 3] < 60,
            "{:?}",
            &a[p * 3..p * 3 + 3]
        );
        let mut b = vec![0; 900];
        render(PatternKind::Rainbow, [0; 3], 1.0, &layout(), &mut b);
        assert_ne!(a, b);
    }

    #[test]
    fn a_pole_rendered_in_two_pieces_equals_the_whole() {
        for kind in [
            PatternKind::Solid,
            PatternKind::Chase,
            PatternKind::Rainbow,
            PatternKind::Id,
            PatternKind::Walk,
        ] {
            for format in [PixelFormat::Rgb8, PixelFormat::Rgbw8] {
                let pole = PoleMap {
                    start: 0,
                    pixels: 1000,
                    format,
                    order: ColorOrder::Rgb,
                };
                let len = pole.channels();
                let mut whole = vec![0xa5; len];
                render(
                    kind,
                    [4, 5, 6],
                    0.3,
                    std::slice::from_ref(&pole),
                    &mut whole,
                );
                let f = Frame::new(kind, [4, 5, 6], 0.3);
                let mut parts = vec![0xa5; len];
                let cut = 377 * format.bytes_per_pixel();
                let (a, b) = parts.split_at_mut(cut);
                f.render_pixels(0, &pole, 0, a);
                f.render_pixels(0, &pole, 377, b);
                assert_eq!(parts, whole, "{kind:?} {format:?}");
            }
        }
    }

    #[test]
    fn the_rainbow_run_by_run_is_the_per_pixel_formula() {
        for (pixels, first, t) in [
            (850_000, 0, 0.7),
            (1000, 377, 0.1),
            (3, 1, 0.0),
            (2047, 5, 3.3),
        ] {
            let pole = PoleMap {
                start: 0,
                pixels,
                format: PixelFormat::Rgb8,
                order: ColorOrder::Rgb,
            };
            let f = Frame::new(PatternKind::Rainbow, [0; 3], t);
            let mut got = vec![0xa5; (pixels - first) * 3];
            f.render_pixels(0, &pole, first, &mut got);
            for (k, px) in got.chunks(3).enumerate() {
                let p = first + k;
                let want = f.wheel[(p * HUES / pixels + f.shift) % HUES];
                assert_eq!(px, want, "pixel {p} of {pixels}");
            }
        }
    }

    #[test]
    fn walk_lights_one_channel_at_a_time_in_order() {
        let pole = &layout()[..1];
        let lit = |t: f64| {
            let mut ch = vec![0; 300];
            render(PatternKind::Walk, [0; 3], t, pole, &mut ch);
            let on: Vec<usize> = (0..300).filter(|&i| ch[i] != 0).collect();
            assert_eq!(on.len(), 1, "one channel at t={t}");
            assert_eq!(ch[on[0]], 255);
            on[0]
        };
        assert_eq!(lit(0.0), 0);
        assert_eq!(lit(0.1), 1, "green of pixel 0");
        assert_eq!(lit(0.25), 2);
        assert_eq!(lit(0.3), 3, "red of pixel 1");
        assert_eq!(lit(30.0), 0, "again from the start after 300 channels");
    }

    #[test]
    fn rainbow_primary_hues() {
        assert_eq!(hsv(0.0, 1.0, 1.0), [255, 0, 0]);
        assert_eq!(hsv(1.0 / 3.0, 1.0, 1.0), [0, 255, 0]);
        assert_eq!(hsv(2.0 / 3.0, 1.0, 1.0), [0, 0, 255]);
    }
}
