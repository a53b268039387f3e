//! `POST /api/playlist/NAME` → the unit's next show (docs/fpp-connect.md 2.5): which
//! sequences an FPP playlist names, and the current show config with those in place of
//! what it plays.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::config::show::{ContentItem, ShowConfig, profile_file};

/// The sequences an FPP playlist plays, in order: `leadIn`, `mainPlaylist`, `leadOut`,
/// enabled entries of type `sequence` or `both`. Other entry types are skipped.
pub fn sequences_of(playlist: &Value) -> Result<Vec<String>, String> {
    if !playlist.is_object() {
        return Err("the playlist is not a JSON object".into());
    }
    let mut out = Vec::new();
    for section in ["leadIn", "mainPlaylist", "leadOut"] {
        // xLights posts a new playlist before its uploads with `"mainPlaylist": null`.
        let Some(entries) = playlist.get(section).filter(|v| !v.is_null()) else {
            continue;
        };
        let Some(entries) = entries.as_array() else {
            return Err(format!("`{section}` is not a list"));
        };
        for (i, e) in entries.iter().enumerate() {
            let enabled = match e.get("enabled") {
                None => true,
                Some(v) => v.as_i64().map(|n| n != 0).or(v.as_bool()).unwrap_or(true),
            };
            let kind = e.get("type").and_then(Value::as_str).unwrap_or("");
            if !enabled || !(kind == "sequence" || kind == "both") {
                continue;
            }
            match e.get("sequenceName").and_then(Value::as_str) {
                Some(s) if !s.is_empty() => out.push(s.to_string()),
                _ => return Err(format!("`{section}[{i}]` has no `sequenceName`")),
            }
        }
    }
    if out.is_empty() {
        return Err("the playlist names no sequence (pfx plays sequences only)".into());
    }
    Ok(out)
}

/// `cfg` (read from a file in `base`) with every relative path made absolute, so the
/// same config can be written anywhere and read the same profiles and files.
pub fn rebase(cfg: &ShowConfig, base: &Path) -> ShowConfig {
    let mut c = cfg.clone();
    let dir = c.profiles_dir.as_ref().map(|d| base.join(d));
    for o in &mut c.outputs {
        if let Some(p) = profile_file(&o.profile, base, dir.as_deref()) {
            o.profile = p.to_string_lossy().into_owned();
        }
    }
    c.profiles_dir = dir;
    let fix = |items: &mut Vec<ContentItem>| {
        for it in items {
            if let Some(p) = &it.fseq {
                it.fseq = Some(base.join(p));
            }
        }
    };
    fix(&mut c.content.playlist);
    for items in c.playlists.values_mut() {
        fix(items);
    }
    c
}

/// What plays replaced by `fseqs`: the schedule's playlist called `name` if there is one,
/// else `content.playlist` (looping).
pub fn with_playlist(mut c: ShowConfig, name: &str, fseqs: &[PathBuf]) -> ShowConfig {
    let items: Vec<ContentItem> = fseqs
        .iter()
        .map(|p| ContentItem {
            fseq: Some(p.clone()),
            pattern: None,
            seconds: None,
            color: None,
        })
        .collect();
    if c.schedule.is_some() && c.playlists.contains_key(name) {
        c.playlists.insert(name.to_string(), items);
    } else {
        c.schedule = None;
        c.playlists.clear();
        c.content.playlist = items;
        c.content.looped = true;
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn playlist_sequences_in_order() {
        let pl = json!({
            "name": "Show",
            "leadIn": [{"type": "sequence", "sequenceName": "Intro.fseq"}],
            "mainPlaylist": [
                {"type": "both", "enabled": 1, "sequenceName": "A.fseq", "mediaName": "a.mp3"},
                {"type": "pause", "duration": 5},
                {"type": "sequence", "enabled": 0, "sequenceName": "Off.fseq"},
                {"type": "sequence", "enabled": 1, "sequenceName": "B.fseq"}
            ]
        });
        assert_eq!(
            sequences_of(&pl).expect("ok"),
            vec!["Intro.fseq", "A.fseq", "B.fseq"]
        );
        assert!(sequences_of(&json!({"mainPlaylist": []})).is_err());
        assert!(sequences_of(&json!([1])).is_err());
        assert!(sequences_of(&json!({"mainPlaylist": [{"type": "sequence"}]})).is_err());
        assert!(sequences_of(&json!({"mainPlaylist": 3})).is_err());
        // xLights' first POST of a new playlist, before any upload.
        assert_eq!(
            sequences_of(&json!({"name": "New", "mainPlaylist": null})),
            Err("the playlist names no sequence (pfx plays sequences only)".into())
        );
    }

    fn cfg(v: Value) -> ShowConfig {
        serde_json::from_value(v).expect("cfg")
    }

    #[test]
    fn content_is_replaced_and_loops() {
        let c = cfg(
            json!({"interface": "eth0", "outputs": [{"name": "p", "profile": "x/p.yaml"}],
            "content": {"loop": false, "playlist": [{"pattern": "solid"}]}}),
        );
        let c = rebase(&c, Path::new("/shows/one"));
        assert_eq!(c.outputs[0].profile, "/shows/one/x/p.yaml");
        let n = with_playlist(c, "Main", &[PathBuf::from("/s/a.fseq")]);
        assert!(n.content.looped);
        assert_eq!(n.content.playlist.len(), 1);
        assert_eq!(
            n.content.playlist[0].fseq.as_deref(),
            Some(Path::new("/s/a.fseq"))
        );
    }

    #[test]
    fn a_scheduled_playlist_of_that_name_is_replaced() {
        let c = cfg(json!({"interface": "eth0", "outputs": [],
            "playlists": {"Main": [{"pattern": "solid"}], "Other": [{"fseq": "o.fseq"}]},
            "schedule": {"timezone": "UTC", "entries": [{"playlist": "Main", "start": "18:00", "end": "23:00"}]}}));
        let c = rebase(&c, Path::new("/base"));
        let n = with_playlist(c, "Main", &[PathBuf::from("/s/a.fseq")]);
        assert!(n.schedule.is_some());
        assert_eq!(
            n.playlists["Main"][0].fseq.as_deref(),
            Some(Path::new("/s/a.fseq"))
        );
        assert_eq!(
            n.playlists["Other"][0].fseq.as_deref(),
            Some(Path::new("/base/o.fseq"))
        );
    }
}
