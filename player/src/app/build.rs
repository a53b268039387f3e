//! From a resolved `Show` to an `Engine` the render thread can run: outputs opened, files
//! opened and decoding ahead, the show starting on a decoded frame. Runs off the render
//! thread (at start and on reload), so a slow disk never costs a frame.

use std::time::Duration;

use anyhow::Context;

use super::RunOptions;
use crate::config::show::{Item, Show};
use crate::engine::frame_loop::{Engine, ItemSource};
use crate::geometry::Brightness;
use crate::output::{Output, OutputOptions, SocketOptions};
use crate::source::fseq::{self, Prefetcher};

/// A stable sACN CID for this unit: the same unit id always gives the same CID, so
/// receivers keep treating a restarted player as the same source.
fn unit_cid(unit: &str) -> uuid::Uuid {
    const NAMESPACE: uuid::Uuid = uuid::Uuid::from_bytes(*b"pfx-sacn-cid-ns!");
    uuid::Uuid::new_v5(&NAMESPACE, unit.as_bytes())
}

/// The unit's name: `unit_id` from the config, else the host name.
pub fn unit_id(show: &Show) -> String {
    show.config
        .unit_id
        .clone()
        .unwrap_or_else(|| crate::sys::host::hostname().unwrap_or_else(|| "pfx-unit".into()))
}

/// Opens everything a show needs, off the render thread.
pub fn build_engine(show: &Show, opts: &RunOptions) -> anyhow::Result<Engine> {
    build_engine_for(show, &show.playlist, show.config.content.looped, opts)
}

/// An engine for `show`'s poles playing `playlist` (the schedule's choice); no items is
/// black.
pub fn build_engine_for(
    show: &Show,
    playlist: &[Item],
    looped: bool,
    opts: &RunOptions,
) -> anyhow::Result<Engine> {
    let unit = unit_id(show);
    let out_opts = OutputOptions {
        socket: SocketOptions {
            interface: show.config.interface.clone(),
            multicast_ttl: show.config.multicast_ttl,
            multicast_loop: show.config.multicast_loop,
            blocking: opts.blocking_send,
            send_every_frame: opts.send_every_frame,
            send_buffer: opts.send_buffer,
        },
        cid: unit_cid(&unit),
        source_name: format!("pfx {unit}"),
    };
    let mut outputs = Vec::with_capacity(show.outputs.len());
    for o in &show.outputs {
        outputs.push(
            Output::open(o, &out_opts).with_context(|| format!("{}", show.source.display()))?,
        );
    }
    let mut items = Vec::with_capacity(playlist.len());
    for item in playlist {
        items.push(match item {
            Item::Fseq(path) => {
                let file = fseq::open(path)?;
                let h = file.header();
                let (frames, step_ms) = (h.frames, u32::from(h.step_ms));
                let frame_len = file.frame_len();
                // About a second of frames ahead at 20 fps, bounded in memory.
                let ahead = (4 << 20) / frame_len.max(1);
                let mut prefetch = Box::new(Prefetcher::spawn(file, ahead.clamp(4, 64)));
                // The show starts on a decoded frame, never on a blank buffer.
                if prefetch.wait_for(0, Duration::from_secs(5)).is_none() {
                    anyhow::bail!(
                        "{}: cannot decode frame 0: {}",
                        path.display(),
                        prefetch.error().unwrap_or_else(|| "timed out".into())
                    );
                }
                ItemSource::Fseq {
                    prefetch,
                    frames,
                    step_ms,
                    frame_len,
                }
            }
            Item::Pattern(p) => ItemSource::Pattern(*p),
        });
    }
    Ok(Engine {
        outputs,
        brightness: Brightness::new(show.config.brightness),
        fps: show.config.fps,
        looped,
        items,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cid_is_stable_per_unit_and_differs_between_units() {
        assert_eq!(unit_cid("pole-a"), unit_cid("pole-a"));
        assert_ne!(unit_cid("pole-a"), unit_cid("pole-b"));
    }
}
