//! What keeps the boot fast: the masked generators and units, and the update stamps not older than /usr.

use super::debugfs::{Inode, Mtime};
use super::error::{Check, CheckFailed};
use serde::Serialize;

/// What `systemd`'s `ConditionNeedsUpdate=` decides for a directory whose `.updated` stamp
/// has `stamp` as its mtime and `stamp_text` as its contents, with `/usr` at `usr`: an
/// update is needed when /usr is newer. As systemd's condition.c compares: seconds first;
/// then nanoseconds, unless /usr has some and the stamp none (a file system without
/// nanoseconds), where the stamp's `TIMESTAMP_NSEC=` is taken instead (none or unreadable:
/// an update is needed).
pub fn needs_update(usr: Mtime, stamp: Mtime, stamp_text: &str) -> bool {
    if usr.sec != stamp.sec {
        return usr.sec > stamp.sec;
    }
    if usr.nsec == 0 || stamp.nsec > 0 {
        return usr.nsec > stamp.nsec;
    }
    let written = stamp_text
        .lines()
        .find_map(|l| l.trim().strip_prefix("TIMESTAMP_NSEC="))
        .and_then(|v| v.trim().trim_matches('"').parse::<u64>().ok());
    match written {
        Some(ns) => {
            let usr_ns = i128::from(usr.sec) * 1_000_000_000 + i128::from(usr.nsec);
            usr_ns > i128::from(ns)
        }
        None => true,
    }
}

/// Where a masked generator's or unit's link to /dev/null must be.
pub fn generator_mask_path(name: &str) -> String {
    format!("/etc/systemd/system-generators/{name}")
}

pub fn unit_mask_path(name: &str) -> String {
    format!("/etc/systemd/system/{name}")
}

/// What the boot-speed checks read from the root: each path with its inode (None:
/// missing), and the update stamps' text.
#[derive(Debug, Clone, Default)]
pub struct BootSpeedFiles {
    /// (generator name, the inode at generator_mask_path).
    pub generators: Vec<(String, Option<Inode>)>,
    /// (unit name, the inode at unit_mask_path).
    pub units: Vec<(String, Option<Inode>)>,
    pub usr: Option<Inode>,
    /// (path of the stamp, its inode, its text).
    pub stamps: Vec<(String, Option<Inode>, String)>,
}

/// One update stamp as read back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UpdateStamp {
    pub path: String,
    pub mtime: Mtime,
    /// The stamp's `TIMESTAMP_NSEC=`, systemd's fallback where mtimes have no nanoseconds.
    pub timestamp_nsec: Option<u64>,
}

/// What the build does for boot speed, as read back from the image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BootSpeedCheck {
    /// plan::MASKED_GENERATORS, each a link to /dev/null in /etc/systemd/system-generators.
    pub masked_generators: Vec<String>,
    /// plan::MASKED_UNITS, each a link to /dev/null in /etc/systemd/system.
    pub masked_units: Vec<String>,
    pub usr_mtime: Mtime,
    /// /etc/.updated and /var/.updated, none older than /usr by systemd's rule.
    pub update_stamps: Vec<UpdateStamp>,
}

/// The stamps systemd looks for: ConditionNeedsUpdate=/etc and =/var.
pub const UPDATE_STAMPS: &[&str] = &["/etc/.updated", "/var/.updated"];

/// Each name's link to /dev/null, from `found`; an error per name that has none, saying
/// what it costs (`why`).
fn check_masks(
    names: &[&str],
    found: &[(String, Option<Inode>)],
    path: fn(&str) -> String,
    why: &dyn Fn(&str) -> String,
    errors: &mut Vec<String>,
) -> Vec<String> {
    let mut ok = Vec::new();
    for &name in names {
        let p = path(name);
        let inode = found
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, i)| i.as_ref());
        let fault = match inode {
            None => format!("the image has no {p} link to /dev/null"),
            Some(i) if i.kind != "symlink" => {
                format!("{p} is a {} file, not a link to /dev/null", i.kind)
            }
            Some(Inode { link: Some(t), .. }) if t == "/dev/null" => {
                ok.push(name.to_string());
                continue;
            }
            Some(Inode { link: Some(t), .. }) => format!("{p} links to {t:?}, not /dev/null"),
            Some(_) => format!("{p} is a link whose target could not be read"),
        };
        errors.push(format!(
            "{fault}: {}; rebuild the image with this pfx-image",
            why(name)
        ));
    }
    ok
}

/// The boot-speed parts of the image, which only a booted unit would otherwise show
/// missing: the masked generators and units (plan.rs says why each), and update stamps
/// that systemd's ConditionNeedsUpdate= takes as "not older than /usr". Pure.
pub fn check_boot_speed(f: &BootSpeedFiles) -> Result<BootSpeedCheck, CheckFailed> {
    use crate::plan::{MASKED_GENERATORS, MASKED_UNITS};
    let mut errors = Vec::new();
    let masked_generators = check_masks(
        MASKED_GENERATORS,
        &f.generators,
        generator_mask_path,
        &|g| {
            format!(
                "systemd would run {g} at every boot before it loads a single unit (166-504 ms \
                 each in the VM, docs/perf/image.md)"
            )
        },
        &mut errors,
    );
    let masked_units = check_masks(
        MASKED_UNITS,
        &f.units,
        unit_mask_path,
        &|u| format!("{u} is not masked and would run on the unit (plan::MASKED_UNITS says why)"),
        &mut errors,
    );
    let usr_mtime = match &f.usr {
        Some(i) if i.kind == "directory" => Some(i.mtime),
        Some(i) => {
            errors.push(format!(
                "/usr is a {} file, not a directory: the image's root is broken; rebuild it",
                i.kind
            ));
            None
        }
        None => {
            errors.push("the image has no /usr: its root is broken; rebuild it".into());
            None
        }
    };
    let mut update_stamps = Vec::new();
    for &path in UPDATE_STAMPS {
        let dir = path.trim_end_matches("/.updated");
        let example = if dir == "/etc" {
            "systemd-sysusers among them, 0.6-0.85 s ahead of the data partition's check"
        } else {
            "systemd-journal-catalog-update among them"
        };
        let cost = format!(
            "systemd would count every boot as the first after an update (the overlay forgets \
             the stamp a boot writes) and run the ConditionNeedsUpdate={dir} units ({example}) \
             each time"
        );
        let found = f.stamps.iter().find(|(p, ..)| p == path);
        match found {
            None | Some((_, None, _)) => errors.push(format!(
                "the image has no {path}: {cost}; rebuild the image with this pfx-image"
            )),
            Some((_, Some(i), _)) if i.kind != "regular" => errors.push(format!(
                "{path} is a {} file, not the regular file systemd-update-done writes: {cost}; \
                 rebuild the image with this pfx-image",
                i.kind
            )),
            Some((_, Some(i), text)) => {
                if let Some(usr) = usr_mtime
                    && needs_update(usr, i.mtime, text)
                {
                    errors.push(format!(
                        "{path} (mtime {}.{:09}) is older than /usr (mtime {}.{:09}): {cost}; \
                         something changed /usr after the build wrote the stamps (they must be \
                         the last step of the root's customisation): rebuild the image with \
                         this pfx-image",
                        i.mtime.sec, i.mtime.nsec, usr.sec, usr.nsec
                    ));
                }
                update_stamps.push(UpdateStamp {
                    path: path.to_string(),
                    mtime: i.mtime,
                    timestamp_nsec: text
                        .lines()
                        .find_map(|l| l.trim().strip_prefix("TIMESTAMP_NSEC="))
                        .and_then(|v| v.trim().parse().ok()),
                });
            }
        }
    }
    match usr_mtime {
        Some(usr_mtime) if errors.is_empty() => Ok(BootSpeedCheck {
            masked_generators,
            masked_units,
            usr_mtime,
            update_stamps,
        }),
        _ => Err(CheckFailed::new(Check::BootSpeed, errors)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inode(kind: &str, sec: i64, nsec: u32, link: Option<&str>) -> Option<Inode> {
        Some(Inode {
            kind: kind.into(),
            mtime: Mtime { sec, nsec },
            link: link.map(str::to_string),
        })
    }

    /// A root as the build leaves it: every mask a link to /dev/null, both stamps with
    /// /usr's mtime (seconds only, as mke2fs -d of e2fsprogs 1.47.0 copies them).
    fn good_boot_files() -> BootSpeedFiles {
        let null = |n: &&str| (n.to_string(), inode("symlink", 5, 0, Some("/dev/null")));
        let text = "# This file was created by pfx-image\nTIMESTAMP_NSEC=1000000000123\n";
        BootSpeedFiles {
            generators: crate::plan::MASKED_GENERATORS.iter().map(null).collect(),
            units: crate::plan::MASKED_UNITS.iter().map(null).collect(),
            usr: inode("directory", 1000, 0, None),
            stamps: UPDATE_STAMPS
                .iter()
                .map(|p| (p.to_string(), inode("regular", 1000, 0, None), text.into()))
                .collect(),
        }
    }

    #[test]
    fn boot_speed_as_the_build_leaves_it_passes() {
        let c = check_boot_speed(&good_boot_files()).unwrap();
        assert_eq!(c.masked_generators, crate::plan::MASKED_GENERATORS);
        assert_eq!(c.masked_units, crate::plan::MASKED_UNITS);
        assert_eq!(c.usr_mtime, Mtime { sec: 1000, nsec: 0 });
        assert_eq!(c.update_stamps.len(), 2);
        assert_eq!(c.update_stamps[1].path, "/var/.updated");
        assert_eq!(c.update_stamps[0].timestamp_nsec, Some(1_000_000_000_123));
    }

    #[test]
    fn a_generator_not_masked_is_named() {
        // Missing (the masking loop skipped it).
        let mut f = good_boot_files();
        f.generators.retain(|(n, _)| n != "systemd-sysv-generator");
        let e = check_boot_speed(&f).unwrap_err().to_string();
        assert!(
            e.contains(
                "the image has no /etc/systemd/system-generators/systemd-sysv-generator link \
                 to /dev/null: systemd would run systemd-sysv-generator at every boot"
            ) && e.contains("rebuild the image with this pfx-image"),
            "{e}"
        );
        assert_eq!(e.matches("; rebuild").count(), 1, "{e}");
        // Read back as missing.
        let mut f = good_boot_files();
        f.generators[0].1 = None;
        let e = check_boot_speed(&f).unwrap_err().to_string();
        assert!(e.contains("no /etc/systemd/system-generators/systemd-cryptsetup-generator link"));
        // A link to somewhere else.
        let mut f = good_boot_files();
        f.generators[1].1 = inode("symlink", 5, 0, Some("/usr/lib/systemd/x"));
        let e = check_boot_speed(&f).unwrap_err().to_string();
        assert!(
            e.contains("systemd-gpt-auto-generator links to \"/usr/lib/systemd/x\", not /dev/null"),
            "{e}"
        );
        // A regular file.
        let mut f = good_boot_files();
        f.generators[2].1 = inode("regular", 5, 0, None);
        let e = check_boot_speed(&f).unwrap_err().to_string();
        assert!(
            e.contains(
                "systemd-hibernate-resume-generator is a regular file, not a link to /dev/null"
            ),
            "{e}"
        );
        // A link whose target was not read.
        let mut f = good_boot_files();
        f.generators[3].1 = inode("symlink", 5, 0, None);
        assert!(
            check_boot_speed(&f)
                .unwrap_err()
                .to_string()
                .contains("could not be read")
        );
    }

    #[test]
    fn a_unit_not_masked_is_named() {
        let mut f = good_boot_files();
        f.units.retain(|(n, _)| n != "systemd-pstore.service");
        let e = check_boot_speed(&f).unwrap_err().to_string();
        assert!(
            e.contains("the image has no /etc/systemd/system/systemd-pstore.service link to /dev/null: systemd-pstore.service is not masked"),
            "{e}"
        );
        let mut f = good_boot_files();
        f.units[0].1 = inode(
            "symlink",
            5,
            0,
            Some("/usr/lib/systemd/system/e2scrub_reap.service"),
        );
        let e = check_boot_speed(&f).unwrap_err().to_string();
        assert!(
            e.contains("/etc/systemd/system/e2scrub_reap.service links to"),
            "{e}"
        );
    }

    #[test]
    fn update_stamps_missing_or_not_regular_are_named() {
        let mut f = good_boot_files();
        f.stamps.retain(|(p, ..)| p != "/var/.updated");
        let e = check_boot_speed(&f).unwrap_err().to_string();
        assert!(
            e.contains("the image has no /var/.updated: systemd would count every boot")
                && e.contains("ConditionNeedsUpdate=/var"),
            "{e}"
        );
        assert!(!e.contains("/etc/.updated"), "{e}");
        let mut f = good_boot_files();
        f.stamps[0].1 = None;
        assert!(
            check_boot_speed(&f)
                .unwrap_err()
                .to_string()
                .contains("no /etc/.updated")
        );
        let mut f = good_boot_files();
        f.stamps[0].1 = inode("symlink", 1000, 0, Some("/run/x"));
        let e = check_boot_speed(&f).unwrap_err().to_string();
        assert!(
            e.contains("/etc/.updated is a symlink file, not the regular file"),
            "{e}"
        );
        let mut f = good_boot_files();
        f.usr = None;
        assert!(
            check_boot_speed(&f)
                .unwrap_err()
                .to_string()
                .contains("no /usr")
        );
    }

    #[test]
    fn a_stamp_older_than_usr_is_refused() {
        let mut f = good_boot_files();
        f.usr = inode("directory", 1001, 0, None);
        let e = check_boot_speed(&f).unwrap_err().to_string();
        assert!(
            e.contains(
                "/etc/.updated (mtime 1000.000000000) is older than /usr (mtime 1001.000000000)"
            ) && e.contains("/var/.updated (mtime 1000"),
            "{e}"
        );
        // Newer than /usr is fine (systemd asks only whether /usr is newer).
        let mut f = good_boot_files();
        f.usr = inode("directory", 999, 999_999_999, None);
        check_boot_speed(&f).unwrap();
    }

    #[test]
    fn needs_update_follows_systemd() {
        let t = |sec, nsec| Mtime { sec, nsec };
        assert!(!needs_update(t(10, 0), t(10, 0), ""));
        assert!(needs_update(t(11, 0), t(10, 999), ""));
        assert!(!needs_update(t(10, 5), t(11, 0), ""));
        // Both with nanoseconds: those decide.
        assert!(needs_update(t(10, 6), t(10, 5), ""));
        assert!(!needs_update(t(10, 5), t(10, 5), ""));
        // /usr with nanoseconds, the stamp without: its TIMESTAMP_NSEC decides, none is old.
        assert!(!needs_update(
            t(10, 5),
            t(10, 0),
            "TIMESTAMP_NSEC=10000000005\n"
        ));
        assert!(needs_update(
            t(10, 6),
            t(10, 0),
            "TIMESTAMP_NSEC=10000000005\n"
        ));
        assert!(needs_update(t(10, 5), t(10, 0), "# no timestamp\n"));
        assert!(needs_update(t(10, 5), t(10, 0), "TIMESTAMP_NSEC=garbage\n"));
    }
}
