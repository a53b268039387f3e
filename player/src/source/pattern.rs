//! Test patterns for commissioning: solid, chase, rainbow and an ID pattern. Pure: time
//! and layout in, channel bytes out.

use crate::config::show::PatternKind;
use crate::geometry::PoleMap;

/// Renders pattern `kind` at `t` seconds into the channel buffer, for each pole of
/// `layout` (in the sequence's RGB(W) channel order; geometry applies colour order).
pub fn render(kind: PatternKind, color: [u8; 3], t: f64, layout: &[PoleMap], channels: &mut [u8]) {
    channels.fill(0);
    // One hue wheel per frame: 1,024 HSV conversions instead of one per pixel, so a
    // 1,000-universe rainbow costs a table lookup per pixel.
    let mut wheel = [[0u8; 3]; HUES];
    if kind == PatternKind::Rainbow {
        for (i, c) in wheel.iter_mut().enumerate() {
            *c = hsv(i as f64 / HUES as f64, 1.0, 1.0);
        }
    }
    let shift = ((t * 0.25).fract() * HUES as f64) as usize;
    for (index, pole) in layout.iter().enumerate() {
        let bpp = pole.format.bytes_per_pixel();
        let end = (pole.start + pole.channels()).min(channels.len());
        let Some(buf) = channels.get_mut(pole.start..end) else {
            continue;
        };
        let n = pole.pixels.max(1);
        for (p, px) in buf.chunks_exact_mut(bpp).enumerate() {
            let rgb = match kind {
                PatternKind::Solid => color,
                PatternKind::Chase => chase(color, p, n, t),
                PatternKind::Rainbow => wheel[(p * HUES / n + shift) % HUES],
                PatternKind::Id => id(index, p, t),
            };
            px[..3].copy_from_slice(&rgb);
        }
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
    fn rainbow_primary_hues() {
        assert_eq!(hsv(0.0, 1.0, 1.0), [255, 0, 0]);
        assert_eq!(hsv(1.0 / 3.0, 1.0, 1.0), [0, 255, 0]);
        assert_eq!(hsv(2.0 / 3.0, 1.0, 1.0), [0, 0, 255]);
    }
}
