//! Show configuration and device profiles, read from YAML.
//!
//! Every error a user can cause names the file, and where the YAML parser knows it, the
//! line and column.

pub mod builtin;
pub mod locate;
pub mod profile;
pub mod show;
mod yaml;

pub use profile::{ColorOrder, DeviceProfile, PixelFormat, Protocol};
pub use show::{ContentItem, OutputConfig, ShowConfig};
pub use yaml::{ConfigError, from_yaml_file, from_yaml_str};

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::show::Item;

    const PROFILE: &str = "name: p\nprotocol: sacn\npixels: 10\npixel_format: rgb8\ncolor_order: grb\ndestination: 239.255.0.1:5568\n";

    #[test]
    fn shipped_profiles_load() {
        for name in ["gen3-bigpacket", "legacy-2018-2023-sacn", "bench-ddp"] {
            let path = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../profiles")
                .join(format!("{name}.yaml"));
            let p = DeviceProfile::load(&path).unwrap();
            assert_eq!(p.name, name);
        }
    }

    #[test]
    fn unknown_key_is_rejected_with_file_line_and_column() {
        let text = format!("{PROFILE}pixles: 3\n");
        let e = DeviceProfile::from_str(&text, Path::new("/etc/pfx/profiles/x.yaml"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("/etc/pfx/profiles/x.yaml: "), "{e}");
        assert!(e.contains("pixles"), "{e}");
        assert!(e.contains("line 7"), "{e}");
        assert!(e.contains("column 1"), "{e}");
    }

    #[test]
    fn bad_value_names_line() {
        let text = PROFILE.replace("pixels: 10", "pixels: many");
        let e = DeviceProfile::from_str(&text, Path::new("p.yaml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 3"), "{e}");
    }

    #[test]
    fn protocol_section_for_another_protocol_is_rejected() {
        let text = format!("{PROFILE}ddp:\n  data_type: 11\n");
        let e = DeviceProfile::from_str(&text, Path::new("p.yaml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("ddp: options given"), "{e}");
    }

    #[test]
    fn sacn_priority_over_200_is_rejected() {
        let text = format!("{PROFILE}sacn:\n  priority: 201\n");
        assert!(DeviceProfile::from_str(&text, Path::new("p.yaml")).is_err());
    }

    #[test]
    fn demo_show_resolves_with_builtin_profiles() {
        let show = crate::demo::demo_show().unwrap();
        assert_eq!(show.outputs.len(), 3);
        assert_eq!(show.outputs[1].start, 900);
        assert!(matches!(show.playlist[0], Item::Pattern(_)));
    }

    #[test]
    fn fpp_connect_needs_an_argon2_hash_when_enabled() {
        let base = "interface: lo\noutputs:\n  - name: a\n    profile: bench-ddp\ncontent:\n  playlist:\n    - pattern: id\n";
        let load =
            |extra: &str| ShowConfig::from_str(&format!("{base}{extra}"), Path::new("s.yaml"));
        let show = load("").expect("no fpp_connect");
        assert!(show.config.fpp_connect.is_none());
        let off = load("fpp_connect:\n  enabled: false\n").expect("off needs nothing");
        assert!(off.config.fpp_connect.is_some_and(|f| !f.enabled));
        let e = load("fpp_connect:\n  enabled: true\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("fpp_connect.password_hash") && e.contains("hash-password"),
            "{e}"
        );
        let e = load("fpp_connect:\n  enabled: true\n  password_hash: hunter2\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not an argon2 hash"), "{e}");
        use argon2::password_hash::{PasswordHasher, SaltString};
        let salt = SaltString::from_b64("c29tZXNhbHRzb21lc2FsdA").expect("salt");
        let h = argon2::Argon2::default()
            .hash_password(b"pw", &salt)
            .expect("hash")
            .to_string();
        let ok = load(&format!(
            "fpp_connect:\n  enabled: true\n  password_hash: \"{h}\"\n"
        ))
        .expect("a real hash");
        let f = ok.config.fpp_connect.expect("section");
        assert_eq!((f.user.as_str(), f.http.port()), ("admin", 80));
        let e = load("fpp_connect:\n  enabled: true\n  pasword_hash: x\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("pasword_hash"), "unknown keys are refused: {e}");
    }

    #[test]
    fn show_errors_name_the_entry() {
        let base =
            "interface: lo\noutputs:\n  - name: a\n    profile: bench-ddp\ncontent:\n  playlist:\n";
        let e = ShowConfig::from_str(
            &format!("{base}    - fseq: /nonexistent.fseq\n"),
            Path::new("s.yaml"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("content.playlist[0].fseq: /nonexistent.fseq does not exist"),
            "{e}"
        );
        let e = ShowConfig::from_str(
            &format!("{base}    - pattern: solid\n      color: red\n"),
            Path::new("s.yaml"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("`red` is not #rrggbb"), "{e}");
        let e = ShowConfig::from_str(
            &format!("{base}    - pattern: sparkle\n"),
            Path::new("s.yaml"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("line 7"), "{e}");
        let e = ShowConfig::from_str(
            &format!("fps: 0\n{base}    - pattern: id\n"),
            Path::new("s.yaml"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("fps: 0 is outside"), "{e}");
    }

    #[test]
    fn tx_queue_parent_is_kept_parsed() {
        use crate::nic::tx_queue::Parent;
        let base = "interface: lo\noutputs:\n  - name: a\n    profile: bench-ddp\ncontent:\n  playlist:\n    - pattern: id\n";
        let show = ShowConfig::from_str(base, Path::new("s.yaml")).unwrap();
        assert_eq!(show.tx_queue_parent, Parent::Root);
        let show = ShowConfig::from_str(
            &format!("tx_queue_parent: \"10:a\"\n{base}"),
            Path::new("s.yaml"),
        )
        .unwrap();
        assert_eq!(show.tx_queue_parent, Parent::Class(0x0010_000a));
    }

    #[test]
    fn tx_queue_settings() {
        let base = "interface: lo\noutputs:\n  - name: a\n    profile: bench-ddp\ncontent:\n  playlist:\n    - pattern: id\n";
        let show = ShowConfig::from_str(base, Path::new("s.yaml")).unwrap();
        assert_eq!(show.config.tx_queue, show::TxQueuePolicy::Newest);
        let show = ShowConfig::from_str(
            &format!("tx_queue: kernel\ntx_queue_parent: \"2:1\"\n{base}"),
            Path::new("s.yaml"),
        )
        .unwrap();
        assert_eq!(show.config.tx_queue, show::TxQueuePolicy::Kernel);
        let e = ShowConfig::from_str(
            &format!("tx_queue_parent: eth0\n{base}"),
            Path::new("s.yaml"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("tx_queue_parent: \"eth0\" is not `root` or a tc class handle"),
            "{e}"
        );
        let e = ShowConfig::from_str(&format!("{base}tx_queue: fresh\n"), Path::new("s.yaml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 8"), "{e}");
    }
}

#[cfg(test)]
mod schedule_tests {
    use std::path::Path;

    use super::*;
    use crate::schedule::{At, Days, Idle, Stop};

    const BASE: &str = "interface: lo\noutputs:\n  - name: a\n    profile: bench-ddp\n";
    const LISTS: &str =
        "playlists:\n  evening:\n    - pattern: rainbow\n  idle:\n    - pattern: id\n";

    fn load(text: &str) -> Result<show::Show, String> {
        ShowConfig::from_str(text, Path::new("s.yaml")).map_err(|e| e.to_string())
    }

    #[test]
    fn a_schedule_with_named_playlists_resolves() {
        let text = format!(
            "{BASE}{LISTS}schedule:\n  timezone: Europe/Berlin\n  latitude: 52.5\n  longitude: 13.4\n  idle: idle\n  entries:\n    - playlist: evening\n      days: [sat, sun]\n      start: sunset-10\n      end: 23:30\n      dates:\n        - from: 2026-12-01\n          to: 2026-12-24\n      repeat: false\n      stop: hard\n    - playlist: evening\n      days: weekdays\n      start: \"19:00\"\n      end: \"22:00\"\n"
        );
        let show = load(&text).unwrap();
        assert!(show.playlist.is_empty());
        assert_eq!(show.playlists.len(), 2);
        let s = show.schedule.unwrap();
        assert_eq!(s.idle, Idle::Playlist("idle".into()));
        let e = &s.entries[0];
        assert_eq!(e.days, Days::WEEKEND);
        assert!(matches!(
            e.start,
            At::Sun {
                offset_min: -10,
                ..
            }
        ));
        // Unquoted 23:30 (a YAML 1.1 sexagesimal number) still reads as a time.
        assert_eq!(
            e.end,
            At::Clock(jiff::civil::Time::new(23, 30, 0, 0).unwrap())
        );
        assert_eq!((e.repeat, e.stop, e.dates.len()), (false, Stop::Hard, 1));
        assert_eq!(s.entries[1].days, Days::WEEKDAYS);
        assert_eq!(s.entries[1].stop, Stop::Graceful, "graceful by default");
        assert!(s.entries[1].repeat, "repeats by default");
    }

    #[test]
    fn schedule_errors_name_the_entry_and_say_what_to_do() {
        let entry = |e: &str| {
            format!(
                "{BASE}{LISTS}schedule:\n  timezone: America/New_York\n  entries:\n    - playlist: evening\n{e}"
            )
        };
        let cases = [
            (
                entry("      start: \"7pm\"\n      end: \"23:00\"\n"),
                "schedule.entries[0].start: `7pm` is not a time",
            ),
            (
                entry("      start: sunset\n      end: \"23:00\"\n"),
                "schedule.entries[0]: a sun time needs the unit's place",
            ),
            (
                entry("      start: \"19:00\"\n      end: \"23:00\"\n      days: someday\n"),
                "schedule.entries[0].days: `someday` is not",
            ),
            (
                entry(
                    "      start: \"19:00\"\n      end: \"23:00\"\n      dates:\n        - from: 2026-12-24\n          to: 2026-12-01\n",
                ),
                "schedule.entries[0].dates[0]: `to` (2026-12-01) is before `from`",
            ),
            (
                format!(
                    "{BASE}{LISTS}schedule:\n  timezone: America/New_York\n  entries:\n    - playlist: morning\n      start: \"07:00\"\n      end: \"08:00\"\n"
                ),
                "schedule.entries[0].playlist: no playlist named `morning`",
            ),
            (
                format!("{BASE}{LISTS}schedule:\n  timezone: Mars/Olympus\n  entries: []\n"),
                "schedule.timezone: `Mars/Olympus` is not a known time zone",
            ),
            (
                format!("{BASE}{LISTS}"),
                "playlists: given but there is no `schedule:`",
            ),
        ];
        for (text, want) in cases {
            let e = load(&text).unwrap_err();
            assert!(e.contains(want), "{e}\nwanted: {want}");
        }
    }

    #[test]
    fn the_scheduled_example_loads() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/scheduled-show.yaml");
        let show = ShowConfig::load(&path).unwrap();
        let s = show.schedule.unwrap();
        assert_eq!(s.entries.len(), 3);
        assert_eq!(s.entries[0].days, Days::WEEKEND);
        assert_eq!(show.playlists.len(), 3);
    }

    #[test]
    fn a_config_without_a_schedule_still_needs_content() {
        let e = load(BASE).unwrap_err();
        assert!(e.contains("content.playlist: empty"), "{e}");
    }
}

#[cfg(test)]
mod sync_tests {
    use std::path::Path;

    use super::*;
    use crate::config::show::{MasterLostThen, SyncRole, SyncTransport};

    const BASE: &str = "interface: lo\noutputs:\n  - name: a\n    profile: bench-ddp\n";
    const CONTENT: &str = "content:\n  playlist:\n    - pattern: id\n";

    fn load(text: &str) -> Result<show::Show, String> {
        ShowConfig::from_str(text, Path::new("/etc/pfx/s.yaml")).map_err(|e| e.to_string())
    }

    #[test]
    fn no_sync_section_is_standalone_and_defaults_fill_in() {
        assert!(load(&format!("{BASE}{CONTENT}")).unwrap().sync.is_none());
        assert!(
            load(&format!("{BASE}{CONTENT}sync:\n  role: standalone\n"))
                .unwrap()
                .sync
                .is_none()
        );
        let s = load(&format!("{BASE}{CONTENT}sync:\n  role: master\n"))
            .unwrap()
            .sync
            .unwrap();
        assert_eq!(
            (s.role, s.port, s.transport, s.interface.as_str()),
            (SyncRole::Master, 32320, SyncTransport::Multicast, "lo")
        );
        assert_eq!((s.lost_after_s, s.lost_then), (5.0, MasterLostThen::Stop));
    }

    #[test]
    fn a_remote_needs_no_content_and_reads_every_key() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("seqs")).unwrap();
        let cfg = dir.path().join("show.yaml");
        std::fs::write(
            &cfg,
            format!("{BASE}sync:\n  role: remote\n  interface: eth1\n  port: 32321\n  sequences: seqs\n  offset_ms: -20\n  master_lost:\n    after_s: 2.5\n    then: continue\n"),
        )
        .unwrap();
        let s = ShowConfig::load(&cfg).unwrap().sync.unwrap();
        assert_eq!(s.role, SyncRole::Remote);
        assert_eq!(
            (s.interface.as_str(), s.port, s.offset_ms),
            ("eth1", 32321, -20)
        );
        assert_eq!(s.sequences, dir.path().join("seqs"));
        assert_eq!(
            (s.lost_after_s, s.lost_then),
            (2.5, MasterLostThen::Continue)
        );
    }

    #[test]
    fn unicast_master_lists_its_remotes() {
        let s = load(&format!("{BASE}{CONTENT}sync:\n  role: master\n  transport: unicast\n  remotes: [10.0.0.2, 10.0.0.3]\n"))
            .unwrap()
            .sync
            .unwrap();
        assert_eq!(s.remotes.len(), 2);
    }

    #[test]
    fn sync_errors_name_file_line_and_column_and_say_what_to_do() {
        let cases = [
            (format!("{BASE}{CONTENT}sync:\n  role: boss\n"), "line 9"),
            (
                format!("{BASE}{CONTENT}sync:\n  role: master\n  transport: unicast\n"),
                "list at least one address",
            ),
            (
                format!("{BASE}{CONTENT}sync:\n  role: master\n  port: 0\n"),
                "sync.port: 0",
            ),
            (
                format!("{BASE}{CONTENT}sync:\n  role: remote\n  transport: broadcast\n"),
                "only a master sends",
            ),
            (
                format!("{BASE}{CONTENT}sync:\n  role: remote\n  master_lost:\n    after_s: 0\n"),
                "after_s: 0 must be more than 0",
            ),
            (
                format!("{BASE}{CONTENT}sync:\n  role: remote\n  master_lost:\n    then: panic\n"),
                "line 11",
            ),
            (
                format!("{BASE}{CONTENT}sync:\n  role: remote\n  offset_ms: 99999\n"),
                "sync.offset_ms",
            ),
            (
                format!("{BASE}{CONTENT}sync:\n  role: remote\n  remotes: [1.2.3.4]\n"),
                "only a master sends",
            ),
            (
                format!("{BASE}{CONTENT}sync:\n  role: remote\n  sequences: /nonexistent-pfx\n"),
                "is not a directory",
            ),
            (
                format!("{BASE}{CONTENT}sync:\n  role: master\n  remotes: [not-an-ip]\n"),
                "line 10",
            ),
            (
                format!("{BASE}{CONTENT}sync:\n  role: master\n  colour: red\n"),
                "colour",
            ),
        ];
        for (text, want) in cases {
            let e = load(&text).unwrap_err();
            assert!(e.starts_with("/etc/pfx/s.yaml"), "{e}");
            assert!(e.contains(want), "{e}\nwanted: {want}");
        }
        // The combination errors point at the section too.
        let e = load(&format!(
            "{BASE}{CONTENT}sync:\n  role: master\n  transport: unicast\n"
        ))
        .unwrap_err();
        assert!(e.contains("/etc/pfx/s.yaml:9:3"), "{e}");
    }

    #[test]
    fn the_sync_examples_load() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
        let m = ShowConfig::load(&dir.join("sync-master.yaml"))
            .unwrap()
            .sync
            .unwrap();
        assert_eq!(
            (m.role, m.transport),
            (SyncRole::Master, SyncTransport::Multicast)
        );
        let r = ShowConfig::load(&dir.join("sync-remote.yaml"))
            .unwrap()
            .sync
            .unwrap();
        assert_eq!(r.role, SyncRole::Remote);
        assert_eq!(r.sequences, dir.join("."));
    }

    #[test]
    fn a_remote_takes_no_schedule() {
        let text = format!(
            "{BASE}playlists:\n  a:\n    - pattern: id\nschedule:\n  timezone: UTC\n  entries:\n    - playlist: a\n      start: \"19:00\"\n      end: \"20:00\"\nsync:\n  role: remote\n"
        );
        let e = load(&text).unwrap_err();
        assert!(
            e.contains("a sync remote plays what its master plays"),
            "{e}"
        );
    }

    /// Found by tests/config_fuzz.rs: a remote's (or an explicit standalone's) `sync:`
    /// was written back with `transport: multicast`, which reading refuses, so FPP
    /// Connect's rewrite of the active config failed its own check.
    #[test]
    fn a_sync_section_written_back_reads_again() {
        for role in ["remote", "standalone", "master"] {
            let text = format!("{BASE}{CONTENT}sync:\n  role: {role}\n");
            // In `.`, so a remote's sequence folder (this file's directory) exists.
            let origin = Path::new("./s.yaml");
            let show = ShowConfig::from_str(&text, origin).unwrap();
            let json = serde_json::to_string_pretty(&show.config).unwrap();
            let again = ShowConfig::from_str(&json, origin);
            assert!(again.is_ok(), "{role}: {json}: {:?}", again.err());
        }
    }
}
