//! Channel ranges to each output's pixel buffer: colour order and brightness.
//!
//! The sequence (or pattern) buffer holds R, G, B (, W) per pixel in xLights channel order.
//! Each pole takes `channels` bytes from its start channel and wants them in its own
//! colour order, scaled by the show's brightness.

use crate::config::{ColorOrder, PixelFormat};

/// Where one pole's pixels live in the channel buffer and how it wants them.
#[derive(Debug, Clone, PartialEq)]
pub struct PoleMap {
    /// 0-based first channel.
    pub start: usize,
    pub pixels: usize,
    pub format: PixelFormat,
    pub order: ColorOrder,
}

impl PoleMap {
    pub fn channels(&self) -> usize {
        self.pixels * self.format.bytes_per_pixel()
    }
}

/// Brightness as a 256-entry lookup table, built once per config, so the per-byte work on
/// the render thread is one load.
#[derive(Clone)]
pub struct Brightness([u8; 256], f32);

impl Brightness {
    pub fn new(level: f32) -> Brightness {
        let level = if level.is_nan() {
            0.0
        } else {
            level.clamp(0.0, 1.0)
        };
        let mut t = [0u8; 256];
        for (i, v) in t.iter_mut().enumerate() {
            *v = (i as f32 * level).round() as u8;
        }
        Brightness(t, level)
    }

    /// The level this table was built for, 0.0..=1.0.
    pub fn level(&self) -> f32 {
        self.1
    }

    /// This level times `factor` (a live `brightness F`), never above full. No
    /// allocation: the render thread builds it when an override or a show changes.
    pub fn scaled(&self, factor: f32) -> Brightness {
        Brightness::new(self.1 * factor)
    }

    #[inline]
    pub fn apply(&self, v: u8) -> u8 {
        self.0[v as usize]
    }
}

impl std::fmt::Debug for Brightness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Brightness({}/255)", self.0[255])
    }
}

/// Fills `out` (the pole's wire pixels, `map.channels()` bytes) from the channel buffer.
/// Channels past the end of `channels` (a sequence shorter than the layout) are black.
pub fn map_pole(channels: &[u8], map: &PoleMap, brightness: &Brightness, out: &mut [u8]) {
    let bpp = map.format.bytes_per_pixel();
    let n = map.channels().min(out.len());
    let src = channels.get(map.start..).unwrap_or(&[]);
    let order = map.order.wire_to_source();
    let out = &mut out[..n];
    // Pixels the channel buffer has, then black for the rest. Zipped chunks, not indices:
    // at 850,000 pixels a frame the per-pixel offset arithmetic and bounds checks were
    // most of the stage.
    let avail = (src.len() / bpp).min(out.len() / bpp);
    let (lit, dark) = out.split_at_mut(avail * bpp);
    for (dst, s) in lit.chunks_exact_mut(bpp).zip(src.chunks_exact(bpp)) {
        dst[0] = brightness.apply(s[order[0]]);
        dst[1] = brightness.apply(s[order[1]]);
        dst[2] = brightness.apply(s[order[2]]);
        if bpp == 4 {
            dst[3] = brightness.apply(s[3]);
        }
    }
    let whole = dark.len() / bpp * bpp;
    dark[..whole].fill(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(start: usize, pixels: usize, order: ColorOrder) -> PoleMap {
        PoleMap {
            start,
            pixels,
            format: PixelFormat::Rgb8,
            order,
        }
    }

    #[test]
    fn a_live_factor_multiplies_the_show_level_and_never_goes_above_full() {
        let show = Brightness::new(0.5);
        assert_eq!(show.scaled(0.5).apply(200), 50);
        assert_eq!(show.scaled(1.0).apply(200), 100);
        assert_eq!(show.scaled(4.0).apply(255), 255, "capped at full");
        assert_eq!(show.scaled(0.0).apply(255), 0);
        assert_eq!(Brightness::new(f32::NAN).apply(255), 0);
    }

    #[test]
    fn grb_pole_gets_green_first() {
        let ch = [0, 0, 10, 20, 30, 40, 50, 60];
        let mut out = [0xa5u8; 6];
        map_pole(
            &ch,
            &map(2, 2, ColorOrder::Grb),
            &Brightness::new(1.0),
            &mut out,
        );
        assert_eq!(out, [20, 10, 30, 50, 40, 60]);
    }

    #[test]
    fn every_order_is_a_permutation_of_rgb() {
        for order in [
            ColorOrder::Rgb,
            ColorOrder::Rbg,
            ColorOrder::Grb,
            ColorOrder::Gbr,
            ColorOrder::Brg,
            ColorOrder::Bgr,
        ] {
            let mut out = [0u8; 3];
            map_pole(
                &[1, 2, 3],
                &map(0, 1, order),
                &Brightness::new(1.0),
                &mut out,
            );
            let mut sorted = out;
            sorted.sort();
            assert_eq!(sorted, [1, 2, 3], "{order:?}");
        }
        let mut out = [0u8; 3];
        map_pole(
            &[1, 2, 3],
            &map(0, 1, ColorOrder::Bgr),
            &Brightness::new(1.0),
            &mut out,
        );
        assert_eq!(out, [3, 2, 1]);
    }

    #[test]
    fn brightness_scales_and_short_source_is_black() {
        let ch = [200, 100, 50];
        let mut out = [0xa5u8; 6];
        map_pole(
            &ch,
            &map(0, 2, ColorOrder::Rgb),
            &Brightness::new(0.5),
            &mut out,
        );
        assert_eq!(out, [100, 50, 25, 0, 0, 0]);
        let mut out = [0xa5u8; 3];
        map_pole(
            &ch,
            &map(100, 1, ColorOrder::Rgb),
            &Brightness::new(1.0),
            &mut out,
        );
        assert_eq!(out, [0, 0, 0]);
    }

    #[test]
    fn rgbw_keeps_white_last() {
        let m = PoleMap {
            start: 0,
            pixels: 1,
            format: PixelFormat::Rgbw8,
            order: ColorOrder::Grb,
        };
        let mut out = [0u8; 4];
        map_pole(&[1, 2, 3, 4], &m, &Brightness::new(1.0), &mut out);
        assert_eq!(out, [2, 1, 3, 4]);
    }
}
