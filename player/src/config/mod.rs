//! Show configuration and device profiles, read from YAML.
//!
//! Every error a user can cause names the file, and where the YAML parser knows it, the
//! line and column.

pub mod builtin;
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
        assert!(matches!(show.playlist[0], Item::Pattern { .. }));
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
        use crate::nic::txqueue::Parent;
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
