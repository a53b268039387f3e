//! Is the render loop on time? Pure: the caller passes the ages and counts.

use std::time::Duration;

/// No frame for longer than this means the loop is stalled.
pub const STALL_AFTER: Duration = Duration::from_secs(1);
/// More deadline misses than this share of the window's frames is unhealthy.
pub const MAX_MISS_RATIO: f64 = 0.01;
/// A window fps below this share of the target is unhealthy.
pub const MIN_FPS_RATIO: f64 = 0.95;

#[derive(Debug, Clone, PartialEq)]
pub struct Inputs {
    /// Wall time since the last frame arrived (since start if none has).
    pub since_last_frame: Duration,
    pub window_frames: u64,
    pub window_misses: u64,
    pub window_fps: f64,
    pub window_s: f64,
    pub fps_target: u32,
}

/// Ok, or the first reason the loop is not on time, worded for an operator.
pub fn evaluate(i: &Inputs) -> Result<(), String> {
    if i.since_last_frame > STALL_AFTER {
        return Err(format!(
            "render loop stalled: no frame for {} ms",
            i.since_last_frame.as_millis()
        ));
    }
    if i.window_frames > 0 && i.window_misses as f64 > MAX_MISS_RATIO * i.window_frames as f64 {
        return Err(format!(
            "deadline misses: {} of {} frames in the last {:.0} s ({:.1} %, limit {:.0} %)",
            i.window_misses,
            i.window_frames,
            i.window_s,
            100.0 * i.window_misses as f64 / i.window_frames as f64,
            100.0 * MAX_MISS_RATIO
        ));
    }
    let floor = MIN_FPS_RATIO * i.fps_target as f64;
    // fps needs two frames; until then the stall check above is what speaks.
    if i.window_frames >= 2 && i.window_fps < floor {
        return Err(format!(
            "frame rate {:.1} fps over the last {:.0} s is below {:.1} ({:.0} % of the {} fps target)",
            i.window_fps,
            i.window_s,
            floor,
            100.0 * MIN_FPS_RATIO,
            i.fps_target
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok_inputs() -> Inputs {
        Inputs {
            since_last_frame: Duration::from_millis(20),
            window_frames: 300,
            window_misses: 0,
            window_fps: 60.0,
            window_s: 5.0,
            fps_target: 60,
        }
    }

    #[test]
    fn transitions() {
        assert_eq!(evaluate(&ok_inputs()), Ok(()));

        let stalled = Inputs {
            since_last_frame: Duration::from_millis(1500),
            ..ok_inputs()
        };
        assert_eq!(
            evaluate(&stalled),
            Err("render loop stalled: no frame for 1500 ms".into())
        );

        // 3 misses in 300 frames = 1 %: still ok; 4 is over.
        assert_eq!(
            evaluate(&Inputs {
                window_misses: 3,
                ..ok_inputs()
            }),
            Ok(())
        );
        let e = evaluate(&Inputs {
            window_misses: 4,
            ..ok_inputs()
        })
        .unwrap_err();
        assert!(e.starts_with("deadline misses: 4 of 300 frames"), "{e}");

        // 57 fps = 95 % of 60: ok; 56.9 is not.
        assert_eq!(
            evaluate(&Inputs {
                window_fps: 57.0,
                ..ok_inputs()
            }),
            Ok(())
        );
        let e = evaluate(&Inputs {
            window_fps: 26.0,
            ..ok_inputs()
        })
        .unwrap_err();
        assert!(e.contains("frame rate 26.0 fps"), "{e}");

        // and back to ok once the window is clean again
        assert_eq!(evaluate(&ok_inputs()), Ok(()));
    }

    #[test]
    fn startup_is_not_an_error_until_a_second_passes() {
        let fresh = Inputs {
            since_last_frame: Duration::from_millis(300),
            window_frames: 0,
            window_fps: 0.0,
            ..ok_inputs()
        };
        assert_eq!(evaluate(&fresh), Ok(()));
        let late = Inputs {
            since_last_frame: Duration::from_millis(1001),
            ..fresh
        };
        assert!(evaluate(&late).is_err());
    }
}
