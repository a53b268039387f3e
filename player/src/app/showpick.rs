//! Which show plays: the store's active show when `--store` names a data partition that
//! holds a valid one, else the `--config` show, with the reason. `/profile`, `/health` and
//! doctor say which and why.

use std::path::Path;
use std::sync::{Arc, Mutex};

use pfx_api::show::{ShowInfo, ShowSource};

use crate::config::show::{Show, ShowConfig};

/// What plays now, shared with the HTTP thread (written only at a start or reload).
pub type ShowState = Arc<Mutex<Option<ShowInfo>>>;

fn now_ms() -> u64 {
    crate::sys::time::unix_micros() / 1000
}

/// The config show's description, with why the store's show is not playing.
pub fn config_info(config: &Path, reason: Option<String>) -> ShowInfo {
    ShowInfo {
        name: config
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| config.display().to_string()),
        id: None,
        source: ShowSource::Config,
        since_unix_ms: Some(now_ms()),
        reason,
    }
}

/// Picks the show and opens it with `open` (which must succeed for the show to count):
/// the store's active show first, when `store` is given; the config show otherwise, or
/// when the store has none or its show does not load or open. An error only when the
/// config show fails too.
pub fn pick<T>(
    config: &Path,
    store: Option<&Path>,
    mut open: impl FnMut(&Show) -> anyhow::Result<T>,
) -> anyhow::Result<(Show, ShowInfo, T)> {
    let mut reason = None;
    if let Some(root) = store {
        match pfx_store::active_show_yaml(root) {
            Ok(active) => {
                let opened = ShowConfig::load(&active.show_yaml)
                    .map_err(anyhow::Error::from)
                    .and_then(|show| open(&show).map(|t| (show, t)));
                match opened {
                    Ok((show, t)) => {
                        let info = ShowInfo {
                            name: active.name,
                            id: Some(active.id.to_string()),
                            source: ShowSource::Store,
                            since_unix_ms: Some(now_ms()),
                            reason: None,
                        };
                        return Ok((show, info, t));
                    }
                    Err(e) => {
                        reason = Some(format!(
                            "the active show {} ({}) failed to load: {e:#}",
                            active.name, active.id
                        ))
                    }
                }
            }
            Err(e) => reason = Some(e.to_string()),
        }
    }
    if let Some(r) = &reason {
        tracing::warn!("playing the config show {}: {r}", config.display());
    }
    let show = ShowConfig::load(config)?;
    let t = open(&show)?;
    Ok((show, config_info(config, reason), t))
}

/// Records what plays now.
pub fn set(state: &ShowState, info: ShowInfo) {
    if let Ok(mut s) = state.lock() {
        *s = Some(info);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHOW: &str = "interface: lo\noutputs:\n  - name: a\n    profile: bench-ddp\n    destination: 127.0.0.1:9\ncontent:\n  playlist:\n    - pattern: id\n";

    #[test]
    fn falls_back_to_the_config_show_and_says_why() {
        let d = tempfile::tempdir().unwrap();
        let cfg = d.path().join("show.yaml");
        std::fs::write(&cfg, SHOW).unwrap();
        let data = d.path().join("data");
        std::fs::create_dir(&data).unwrap();
        let ok = |_: &Show| Ok(());

        let (_, info, ()) = pick(&cfg, Some(&data), ok).unwrap();
        assert_eq!(info.source, ShowSource::Config);
        let r = info.reason.unwrap();
        assert!(r.contains("the data partition is not mounted at"), "{r}");

        std::fs::write(data.join(pfx_store::MARKER), b"").unwrap();
        let (_, info, ()) = pick(&cfg, Some(&data), ok).unwrap();
        assert!(info.reason.unwrap().contains("no active show"));

        let store = pfx_store::Store::open(&data).unwrap();
        let bad = store
            .make_show("broken", b"interface: lo\nfps: 1000\n", &Default::default())
            .unwrap();
        store.activate(&bad).unwrap();
        let (_, info, ()) = pick(&cfg, Some(&data), ok).unwrap();
        let r = info.reason.unwrap();
        assert!(r.contains("failed to load") && r.contains("fps"), "{r}");

        let good = store
            .make_show("evening", SHOW.as_bytes(), &Default::default())
            .unwrap();
        store.activate(&good).unwrap();
        let (_, info, ()) = pick(&cfg, Some(&data), ok).unwrap();
        assert_eq!(
            (
                info.source,
                info.name.as_str(),
                info.id.as_deref(),
                info.reason
            ),
            (ShowSource::Store, "evening", Some(good.as_str()), None)
        );
        // A show that loads but does not open falls back as well.
        let (_, info, ()) = pick(&cfg, Some(&data), |s: &Show| {
            if s.source.starts_with(&data) {
                anyhow::bail!("cannot open")
            }
            Ok(())
        })
        .unwrap();
        assert!(info.reason.unwrap().contains("cannot open"));
    }
}
