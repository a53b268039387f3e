//! Pure checks of the data partition, as read back from the image file: its place in the
//! partition table, its file system (label, type, marker, owner and mode), the fstab line
//! that mounts it, the overlay setting that must leave it alone, the journal's settings and
//! the player's ordering after the mount.

use serde::Serialize;

use super::error::DataError;
use super::{Partition, Stat};
use crate::plan::{DATA_LABEL, DATA_MARKER, DATA_MARKER_TEXT, DATA_MOUNT, DATA_ROOT_MODE};

/// The partition table every image has: FAT boot (bootable), Linux root slot A, Linux root
/// slot B (the same size: either holds any bundle), Linux data, in that order, not
/// overlapping, inside the image; data last, so it can grow to the card.
pub fn check_partition_table(
    parts: &[Partition],
    image_bytes: u64,
) -> Result<Partition, DataError> {
    let kinds: Vec<(u8, u8)> = parts.iter().map(|p| (p.index, p.kind)).collect();
    let fat = |k: u8| k == 0x0c || k == 0x0b;
    let shape_ok = parts.len() == 4
        && fat(parts[0].kind)
        && parts[0].bootable
        && parts[1..].iter().all(|p| p.kind == 0x83)
        && parts.iter().zip(1u8..).all(|(p, i)| p.index == i);
    if !shape_ok {
        return Err(DataError::PartitionShape { found: kinds });
    }
    let mut errors = Vec::new();
    if parts[1].sectors != parts[2].sectors {
        errors.push(format!(
            "root slot A has {} sectors and slot B {}: the slots must be the same size, or a bundle made from A may not fit B",
            parts[1].sectors, parts[2].sectors
        ));
    }
    for w in parts.windows(2) {
        if w[0].start_sector + w[0].sectors > w[1].start_sector {
            errors.push(format!(
                "partition {} (sectors {}..{}) overlaps partition {} (from {})",
                w[0].index,
                w[0].start_sector,
                w[0].start_sector + w[0].sectors,
                w[1].index,
                w[1].start_sector
            ));
        }
    }
    let data = parts[3];
    let end = (data.start_sector + data.sectors) * 512;
    if end > image_bytes {
        errors.push(format!(
            "the data partition ends at byte {end}, past the end of the image ({image_bytes})"
        ));
    }
    if !data.start_sector.is_multiple_of(2048) {
        errors.push(format!(
            "the data partition starts at sector {}, not on a MiB boundary",
            data.start_sector
        ));
    }
    if errors.is_empty() {
        Ok(data)
    } else {
        Err(DataError::PartitionTable { problems: errors })
    }
}

/// What `debugfs -R 'stats -h'` says about a file system (the fields the checks use).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FsHeader {
    pub label: String,
    pub magic: String,
    pub features: Vec<String>,
    pub state: String,
    pub block_size: u64,
    pub block_count: u64,
    pub reserved_blocks: u64,
}

pub fn parse_fs_header(text: &str) -> FsHeader {
    let mut h = FsHeader::default();
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = v.trim();
        match k.trim() {
            "Filesystem volume name" => h.label = v.into(),
            "Filesystem magic number" => h.magic = v.to_ascii_lowercase(),
            "Filesystem features" => h.features = v.split_whitespace().map(String::from).collect(),
            "Filesystem state" => h.state = v.into(),
            "Block size" => h.block_size = v.parse().unwrap_or(0),
            "Block count" => h.block_count = v.parse().unwrap_or(0),
            "Reserved block count" => h.reserved_blocks = v.parse().unwrap_or(0),
            _ => {}
        }
    }
    h
}

/// Everything read from the data file system.
#[derive(Debug, Clone, Default)]
pub struct DataFiles {
    pub header: String,
    /// `(mode, uid)` of the file system's root directory.
    pub root: Stat,
    pub marker: Stat,
    pub marker_text: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DataFs {
    pub label: String,
    pub fs_type: String,
    pub features: Vec<String>,
    pub state: String,
    pub block_size: u64,
    pub bytes: u64,
    pub root_mode: String,
    pub root_uid: u32,
    pub marker: String,
    pub marker_mode: String,
}

/// The data file system must be the ext4 the mount names (label), clean, with 4 KiB
/// blocks (it grows by orders of magnitude), root-owned, set-gid and group-writable (the
/// agent writes as root, the player as a throw-away user in the store's group; its gid is
/// not checked here) and hold the marker.
pub fn check_data_fs(f: &DataFiles) -> Result<DataFs, DataError> {
    let h = parse_fs_header(&f.header);
    let mut errors = Vec::new();
    if h.magic != "0xef53" {
        errors.push(format!("not an ext2/3/4 file system (magic {:?})", h.magic));
    }
    let has = |x: &str| h.features.iter().any(|f| f == x);
    if !(has("has_journal") && has("extent")) {
        errors.push(format!(
            "not ext4 (needs has_journal and extent; features: {})",
            h.features.join(" ")
        ));
    }
    if h.label != DATA_LABEL {
        errors.push(format!(
            "label {:?}, expected {DATA_LABEL:?} (fstab mounts LABEL={DATA_LABEL})",
            h.label
        ));
    }
    if h.state != "clean" {
        errors.push(format!("state {:?}, expected clean", h.state));
    }
    if h.block_size != 4096 {
        errors.push(format!("block size {}, expected 4096", h.block_size));
    }
    let (root_mode, root_uid) = f.root.unwrap_or((0, u32::MAX));
    if f.root.is_none() {
        errors.push("cannot read the root directory".into());
    } else if root_uid != 0 || root_mode != DATA_ROOT_MODE {
        errors.push(format!(
            "root directory is mode {root_mode:04o} uid {root_uid}, expected {DATA_ROOT_MODE:04o} uid 0 (set-gid, group-writable for the store's group)"
        ));
    }
    match (f.marker, f.marker_text.as_deref()) {
        (None, _) | (_, None) => errors.push(format!("no /{DATA_MARKER} marker")),
        (Some((m, u)), Some(t)) => {
            if m != 0o644 || u != 0 {
                errors.push(format!(
                    "/{DATA_MARKER} is mode {m:04o} uid {u}, expected 0644 uid 0"
                ));
            }
            if t != DATA_MARKER_TEXT {
                errors.push(format!("/{DATA_MARKER} holds {t:?}"));
            }
        }
    }
    if !errors.is_empty() {
        return Err(DataError::FileSystem { problems: errors });
    }
    Ok(DataFs {
        label: h.label,
        fs_type: "ext4".into(),
        features: h.features,
        state: h.state,
        block_size: h.block_size,
        bytes: h.block_size * h.block_count,
        root_mode: format!("{root_mode:04o}"),
        root_uid,
        marker: format!("/{DATA_MARKER}"),
        marker_mode: format!("{:04o}", f.marker.map(|m| m.0).unwrap_or(0)),
    })
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FstabEntry {
    pub spec: String,
    pub mount_point: String,
    pub fs_type: String,
    pub options: Vec<String>,
    pub pass: u32,
}

/// The one fstab line for the data mount point: by label, ext4, effectively nodev and
/// nosuid (the last of dev/nodev, suid/nosuid wins; `defaults` means dev,suid), nofail with
/// a bounded device wait, grown after mounting, checked at boot (pass 2).
pub fn check_fstab(text: &str) -> Result<FstabEntry, DataError> {
    let lines: Vec<Vec<&str>> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.split_whitespace().collect())
        .collect();
    let here: Vec<&Vec<&str>> = lines
        .iter()
        .filter(|f| {
            f.get(1)
                .is_some_and(|m| m.trim_end_matches('/') == DATA_MOUNT)
        })
        .collect();
    let f = match here.as_slice() {
        [one] => *one,
        [] => return Err(DataError::NoFstabLine),
        _ => return Err(DataError::FstabLines { lines: here.len() }),
    };
    let mut errors = Vec::new();
    let want_spec = format!("LABEL={DATA_LABEL}");
    if f[0] != want_spec {
        errors.push(format!("mounts {:?}, expected {want_spec}", f[0]));
    }
    if f.get(2).copied() != Some("ext4") {
        errors.push(format!("type {:?}, expected ext4", f.get(2)));
    }
    let options: Vec<String> = f
        .get(3)
        .map(|o| o.split(',').map(String::from).collect())
        .unwrap_or_default();
    let (mut dev, mut suid) = (true, true);
    for o in &options {
        match o.as_str() {
            "defaults" => (dev, suid) = (true, true),
            "dev" => dev = true,
            "nodev" => dev = false,
            "suid" => suid = true,
            "nosuid" => suid = false,
            _ => {}
        }
    }
    if dev {
        errors.push("device files allowed (needs nodev)".into());
    }
    if suid {
        errors.push("set-uid allowed (needs nosuid)".into());
    }
    let has = |x: &str| options.iter().any(|o| o == x);
    if !has("nofail") {
        errors.push("no nofail: a unit without its data partition would not boot".into());
    }
    if !options
        .iter()
        .any(|o| o.starts_with("x-systemd.device-timeout="))
    {
        errors.push(
            "no x-systemd.device-timeout=: boot would wait 90 s for a missing partition".into(),
        );
    }
    if !has("x-systemd.growfs") {
        errors.push(
            "no x-systemd.growfs: the file system would not follow the grown partition".into(),
        );
    }
    for bad in ["noauto", "ro"] {
        if has(bad) {
            errors.push(format!("`{bad}`"));
        }
    }
    let pass = f.get(5).and_then(|p| p.parse::<u32>().ok()).unwrap_or(0);
    if pass != 2 {
        errors.push(format!(
            "fsck pass {:?}, expected 2 (checked at every boot)",
            f.get(5)
        ));
    }
    if !errors.is_empty() {
        return Err(DataError::FstabLine { problems: errors });
    }
    Ok(FstabEntry {
        spec: f[0].into(),
        mount_point: f[1].into(),
        fs_type: f[2].into(),
        options,
        pass,
    })
}

/// overlayroot's `recurse` defaults to 1, which turns every other ext4 line of fstab into an
/// overlay with a tmpfs upper: the data partition would look mounted while its writes went
/// to RAM. Takes the value of `overlayroot=` from the command line.
pub fn check_overlay_recurse(overlayroot: &str) -> Result<(), DataError> {
    let opts = overlayroot.strip_prefix("tmpfs").unwrap_or(overlayroot);
    let recurse = opts
        .trim_start_matches(':')
        .split(',')
        .filter_map(|o| o.strip_prefix("recurse="))
        .next_back();
    match recurse {
        Some("0") => Ok(()),
        _ => Err(DataError::OverlayRecurses {
            overlayroot: overlayroot.to_string(),
        }),
    }
}

/// journald's effective `[Journal]` settings from its files in reading order (the main
/// file, then the drop-ins sorted): logs must stay in RAM and be bounded.
pub fn check_journald(files: &[(String, String)]) -> Result<Vec<(String, String)>, DataError> {
    let mut set: Vec<(String, String)> = Vec::new();
    for (_, text) in files {
        for line in text.lines().map(str::trim) {
            if line.starts_with('#') || line.starts_with(';') || line.starts_with('[') {
                continue;
            }
            if let Some((k, v)) = line.split_once('=') {
                let (k, v) = (k.trim().to_string(), v.trim().to_string());
                set.retain(|(x, _)| *x != k);
                set.push((k, v));
            }
        }
    }
    let get = |k: &str| set.iter().find(|(x, _)| x == k).map(|(_, v)| v.as_str());
    let mut errors = Vec::new();
    if get("Storage") != Some("volatile") {
        errors.push(format!(
            "Storage={} (expected volatile: logs in RAM, not on the read-only root or the data partition)",
            get("Storage").unwrap_or("auto")
        ));
    }
    match get("RuntimeMaxUse") {
        Some(v) if !v.is_empty() && v != "infinity" => {}
        v => errors.push(format!(
            "RuntimeMaxUse={v:?}: the journal in RAM needs a bound"
        )),
    }
    if errors.is_empty() {
        Ok(set)
    } else {
        Err(DataError::Journald { problems: errors })
    }
}

/// The player waits for the data mount (After=) but never depends on it: a unit without a
/// data partition must still play its built-in show.
pub fn check_player_unit(text: &str) -> Result<(), DataError> {
    let mount = "var-lib-pfx.mount";
    let mut after = false;
    let mut errors = Vec::new();
    for line in text.lines().map(str::trim) {
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        let names: Vec<&str> = v.split_whitespace().collect();
        match k.trim() {
            "After" if names.contains(&mount) => after = true,
            "Requires" | "Requisite" | "BindsTo" | "PartOf" | "Upholds"
                if names.contains(&mount) =>
            {
                errors.push(format!(
                    "{line:?}: the player must not depend on the data mount"
                ))
            }
            "RequiresMountsFor" if names.iter().any(|p| p.starts_with(DATA_MOUNT)) => errors.push(
                format!("{line:?}: the player must not depend on the data mount"),
            ),
            _ => {}
        }
    }
    if !after {
        errors.push(format!(
            "no After={mount}: the player could start before its show store is mounted"
        ));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(DataError::PlayerUnit { problems: errors })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan;

    fn part(index: u8, kind: u8, start: u64, sectors: u64) -> Partition {
        Partition {
            index,
            kind,
            bootable: index == 1,
            start_sector: start,
            sectors,
        }
    }

    fn table() -> Vec<Partition> {
        let l = crate::disk::Layout::new(3072, 256, 256).unwrap();
        vec![
            part(1, 0x0c, l.boot_start, l.boot_sectors),
            part(2, 0x83, l.root_start, l.root_sectors),
            part(3, 0x83, l.root_b_start, l.root_sectors),
            part(4, 0x83, l.data_start, l.data_sectors),
        ]
    }

    #[test]
    fn the_builders_layout_passes_and_faults_fail() {
        let bytes = 3072 * 1024 * 1024;
        let d = check_partition_table(&table(), bytes).unwrap();
        assert_eq!(d.index, 4);
        let mut t = table();
        t[2].sectors -= 2048;
        assert!(
            check_partition_table(&t, bytes)
                .unwrap_err()
                .to_string()
                .contains("same size")
        );
        let mut t = table();
        t.pop();
        assert!(
            check_partition_table(&t, bytes)
                .unwrap_err()
                .to_string()
                .contains("expected partitions")
        );
        let mut t = table();
        t[2].kind = 0x82;
        assert!(check_partition_table(&t, bytes).is_err());
        let mut t = table();
        t[2].start_sector -= 2048;
        assert!(
            check_partition_table(&t, bytes)
                .unwrap_err()
                .to_string()
                .contains("overlaps")
        );
        let mut t = table();
        t[3].sectors += 1;
        assert!(
            check_partition_table(&t, bytes)
                .unwrap_err()
                .to_string()
                .contains("past the end")
        );
        let mut t = table();
        t[0].bootable = false;
        assert!(check_partition_table(&t, bytes).is_err());
    }

    const HEADER: &str = "Filesystem volume name:   pfx-data\nLast mounted on:          <not available>\n\
        Filesystem magic number:  0xEF53\nFilesystem features:      has_journal ext_attr resize_inode dir_index filetype extent 64bit flex_bg sparse_super large_file huge_file dir_nlink extra_isize metadata_csum\n\
        Filesystem state:         clean\nBlock count:              65536\nReserved block count:     0\nBlock size:               4096\n";

    fn good() -> DataFiles {
        DataFiles {
            header: HEADER.into(),
            root: Some((DATA_ROOT_MODE, 0)),
            marker: Some((0o644, 0)),
            marker_text: Some(plan::DATA_MARKER_TEXT.into()),
        }
    }

    #[test]
    fn data_fs_read_back() {
        let d = check_data_fs(&good()).unwrap();
        assert_eq!(d.label, "pfx-data");
        assert_eq!(d.bytes, 256 * 1024 * 1024);
        assert_eq!(
            (d.root_mode.as_str(), d.marker_mode.as_str()),
            ("2775", "0644")
        );
        type Fault = fn(&mut DataFiles);
        let cases: Vec<(&str, Fault, &str)> = vec![
            (
                "other label",
                |f| f.header = f.header.replace("pfx-data", "data"),
                "label",
            ),
            (
                "ext2",
                |f| f.header = f.header.replace("has_journal ", ""),
                "not ext4",
            ),
            (
                "not ext",
                |f| f.header = f.header.replace("0xEF53", "0x4d44"),
                "magic",
            ),
            (
                "dirty",
                |f| f.header = f.header.replace("clean", "not clean"),
                "state",
            ),
            (
                "1k blocks",
                |f| f.header = f.header.replace("4096", "1024"),
                "block size",
            ),
            (
                "no marker",
                |f| (f.marker, f.marker_text) = (None, None),
                "marker",
            ),
            ("marker text", |f| f.marker_text = Some("x".into()), "holds"),
            ("marker writable", |f| f.marker = Some((0o666, 0)), "0644"),
            (
                "root not root's",
                |f| f.root = Some((0o2775, 1000)),
                "2775 uid 0",
            ),
            (
                "root world-writable",
                |f| f.root = Some((0o777, 0)),
                "2775 uid 0",
            ),
            (
                "player cannot write (no group write, no set-gid)",
                |f| f.root = Some((0o755, 0)),
                "2775 uid 0",
            ),
            (
                "player cannot read",
                |f| f.root = Some((0o700, 0)),
                "2775 uid 0",
            ),
        ];
        for (name, fault, want) in cases {
            let mut f = good();
            fault(&mut f);
            let e = check_data_fs(&f).expect_err(name).to_string();
            assert!(e.contains(want), "{name}: {e}");
        }
    }

    #[test]
    fn the_plans_fstab_passes_and_faults_fail() {
        let f = plan::fstab_text();
        let e = check_fstab(&f).unwrap();
        assert_eq!(e.spec, "LABEL=pfx-data");
        assert_eq!(e.pass, 2);
        assert!(e.options.iter().any(|o| o == "nodev"));
        let line = f
            .lines()
            .find(|l| l.contains(DATA_MOUNT))
            .unwrap()
            .to_string();
        let with = |new: &str| f.replace(&line, new);
        let opts = plan::DATA_MOUNT_OPTIONS;
        let cases: Vec<(String, &str)> = vec![
            (f.replace(&line, ""), "no line"),
            (format!("{f}{line}\n"), "2 lines"),
            (with(&line.replace("nodev,", "")), "nodev"),
            (with(&line.replace("nosuid,", "")), "nosuid"),
            (with(&line.replace(opts, &format!("{opts},suid"))), "nosuid"),
            (
                with(&line.replace(opts, &format!("{opts},defaults"))),
                "nodev",
            ),
            (with(&line.replace("nofail,", "")), "nofail"),
            (
                with(&line.replace("x-systemd.device-timeout=90s,", "")),
                "device-timeout",
            ),
            (with(&line.replace(",x-systemd.growfs", "")), "growfs"),
            (with(&line.replace(" 0 2", " 0 0")), "fsck pass"),
            (with(&line.replace("ext4", "auto")), "type"),
            (
                with(&line.replace("LABEL=pfx-data", "/dev/mmcblk0p3")),
                "mounts",
            ),
            (
                with(&line.replace(opts, &format!("{opts},noauto"))),
                "noauto",
            ),
        ];
        for (text, want) in cases {
            let e = check_fstab(&text).expect_err(want).to_string();
            assert!(e.contains(want), "{want}: {e}");
        }
        // `defaults` first, then nodev,nosuid: effective nodev,nosuid.
        check_fstab(&with(&line.replace(opts, &format!("defaults,{opts}")))).unwrap();
    }

    #[test]
    fn overlay_must_not_recurse_into_the_data_mount() {
        check_overlay_recurse(plan::OVERLAYROOT).unwrap();
        check_overlay_recurse("tmpfs:swap=1,recurse=0").unwrap();
        for bad in [
            "tmpfs",
            "tmpfs:recurse=1",
            "tmpfs:recurse=0,recurse=1",
            "tmpfs:swap=1",
        ] {
            let e = check_overlay_recurse(bad).expect_err(bad).to_string();
            assert!(e.contains("recurse=0"), "{bad}: {e}");
        }
    }

    #[test]
    fn journal_in_ram_and_bounded() {
        let main = (
            "/etc/systemd/journald.conf".to_string(),
            "[Journal]\n#Storage=auto\n".to_string(),
        );
        let ours = (
            plan::JOURNALD_DROPIN.to_string(),
            plan::JOURNALD_TEXT.to_string(),
        );
        let s = check_journald(&[main.clone(), ours.clone()]).unwrap();
        assert!(s.contains(&("Storage".into(), "volatile".into())));
        assert!(
            check_journald(std::slice::from_ref(&main))
                .unwrap_err()
                .to_string()
                .contains("Storage=auto")
        );
        let later = (
            "z.conf".to_string(),
            "[Journal]\nStorage=persistent\n".to_string(),
        );
        assert!(check_journald(&[main.clone(), ours.clone(), later]).is_err());
        let unbounded = (
            "z.conf".to_string(),
            "[Journal]\nRuntimeMaxUse=infinity\n".to_string(),
        );
        assert!(
            check_journald(&[main, ours, unbounded])
                .unwrap_err()
                .to_string()
                .contains("bound")
        );
    }

    #[test]
    fn player_orders_after_the_mount_without_needing_it() {
        let unit = include_str!("../../../systemd/pfx-player.service");
        check_player_unit(unit).unwrap();
        let no_after = unit.replace("After=var-lib-pfx.mount", "");
        assert!(
            check_player_unit(&no_after)
                .unwrap_err()
                .to_string()
                .contains("no After=")
        );
        let needs = unit.replace("[Service]", "Requires=var-lib-pfx.mount\n[Service]");
        assert!(
            check_player_unit(&needs)
                .unwrap_err()
                .to_string()
                .contains("must not depend")
        );
        let needs = unit.replace(
            "[Service]",
            "RequiresMountsFor=/var/lib/pfx/shows\n[Service]",
        );
        assert!(check_player_unit(&needs).is_err());
    }
}
