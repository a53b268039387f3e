//! dpkg's view: installed packages, OpenSSH's key exchange, the pfx packages at the build's version with their bytes.

use super::error::{Check, CheckFailed, Md5sumsError};
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Package {
    pub name: String,
    pub version: String,
    pub arch: String,
}

/// Whether a Debian version of OpenSSH (`[epoch:]upstream[-revision]`, e.g.
/// `1:10.0p1-7~bpo12+1`) is 9.9 or later, the first with the mlkem768x25519-sha256 key
/// exchange that the fleet relies on to stay post-quantum at a low CPU cost per unit.
pub fn openssh_has_mlkem(version: &str) -> bool {
    let upstream = version.split_once(':').map_or(version, |(_, v)| v);
    let mut parts = upstream.split(|c: char| !c.is_ascii_digit());
    let major = parts.next().and_then(|m| m.parse::<u32>().ok());
    let minor = parts.next().and_then(|m| m.parse::<u32>().ok());
    match (major, minor) {
        (Some(ma), Some(mi)) => (ma, mi) >= (9, 9),
        (Some(ma), None) => ma >= 10,
        _ => false,
    }
}

/// Installed packages from /var/lib/dpkg/status.
pub fn parse_dpkg_status(text: &str) -> Vec<Package> {
    let mut out = Vec::new();
    for stanza in text.split("\n\n") {
        let (mut name, mut version, mut arch, mut installed) = (None, None, String::new(), false);
        for line in stanza.lines() {
            if let Some(v) = line.strip_prefix("Package: ") {
                name = Some(v.trim().to_string());
            } else if let Some(v) = line.strip_prefix("Version: ") {
                version = Some(v.trim().to_string());
            } else if let Some(v) = line.strip_prefix("Architecture: ") {
                arch = v.trim().to_string();
            } else if let Some(v) = line.strip_prefix("Status: ") {
                installed = v.trim().ends_with(" installed");
            }
        }
        if let (Some(name), Some(version), true) = (name, version, installed) {
            out.push(Package {
                name,
                version,
                arch,
            });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// One of the workspace's packages as the image's dpkg database has it, its files checked
/// against its md5sums.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PfxPackage {
    pub name: String,
    pub version: String,
    pub arch: String,
    /// Files compared with the package's md5sums (its conffiles are the image's to set).
    pub files_checked: usize,
}

/// The stanza of package `name` in a dpkg status file: (Status, Version, Architecture,
/// conffile paths).
fn status_stanza(status: &str, name: &str) -> Option<(String, String, String, Vec<String>)> {
    status.split("\n\n").find_map(|stanza| {
        let mut lines = stanza.lines().peekable();
        let (mut pkg, mut st, mut ver, mut arch, mut conf) = (
            None,
            String::new(),
            String::new(),
            String::new(),
            Vec::new(),
        );
        while let Some(line) = lines.next() {
            if let Some(v) = line.strip_prefix("Package: ") {
                pkg = Some(v.trim());
            } else if let Some(v) = line.strip_prefix("Status: ") {
                st = v.trim().to_string();
            } else if let Some(v) = line.strip_prefix("Version: ") {
                ver = v.trim().to_string();
            } else if let Some(v) = line.strip_prefix("Architecture: ") {
                arch = v.trim().to_string();
            } else if line.starts_with("Conffiles:") {
                while let Some(c) = lines.next_if(|l| l.starts_with(' ')) {
                    if let Some(path) = c.split_whitespace().next() {
                        conf.push(path.to_string());
                    }
                }
            }
        }
        (pkg == Some(name)).then_some((st, ver, arch, conf))
    })
}

/// (md5, path) from a dpkg md5sums file; paths as dpkg writes them (relative to /).
pub fn parse_md5sums(text: &str) -> Result<Vec<(String, String)>, Md5sumsError> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (sum, path) = l.split_once("  ").ok_or_else(|| Md5sumsError::NoPath {
                line: l.to_string(),
            })?;
            if sum.len() != 32 || !sum.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(Md5sumsError::NotMd5 {
                    line: l.to_string(),
                    sum: sum.to_string(),
                });
            }
            Ok((
                sum.to_ascii_lowercase(),
                format!("/{}", path.trim_start_matches('/')),
            ))
        })
        .collect()
}

/// The binary each package must carry (and its md5sums must list).
pub fn pfx_package_binary(name: &str) -> String {
    format!("/usr/bin/{name}")
}

/// The workspace's packages in the image: each `install ok installed` at the build's version
/// and the target's architecture, and every file its md5sums lists (but its conffiles) with
/// those bytes in the image. `md5sums` is (package, its md5sums text); `actual` gives the
/// MD5 of a path as read back from the image (None: not there).
pub fn check_pfx_packages(
    status: &str,
    names: &[&str],
    want_version: &str,
    want_arch: &str,
    md5sums: &[(String, String)],
    actual: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<PfxPackage>, CheckFailed> {
    let mut errors = Vec::new();
    let mut out = Vec::new();
    for &name in names {
        let Some((st, version, arch, conffiles)) = status_stanza(status, name) else {
            errors.push(format!("package {name} is not in the image's dpkg status"));
            continue;
        };
        if st != "install ok installed" {
            errors.push(format!(
                "package {name} is {st:?} in dpkg's status, not \"install ok installed\""
            ));
        }
        if version != want_version {
            errors.push(format!(
                "package {name} is version {version:?}, the build's is {want_version:?}"
            ));
        }
        if arch != want_arch {
            errors.push(format!(
                "package {name} is for {arch:?}, the image is {want_arch:?}"
            ));
        }
        let Some((_, text)) = md5sums.iter().find(|(p, _)| p == name) else {
            errors.push(format!(
                "package {name} has no md5sums in /var/lib/dpkg/info"
            ));
            continue;
        };
        let sums = match parse_md5sums(text) {
            Ok(s) => s,
            Err(e) => {
                errors.push(format!("{name}.md5sums: {e}"));
                continue;
            }
        };
        let bin = pfx_package_binary(name);
        if !sums.iter().any(|(_, p)| crate::plan::merged_usr(p) == bin) {
            errors.push(format!("{name}.md5sums does not list {bin}"));
        }
        let mut checked = 0;
        for (sum, path) in &sums {
            if conffiles
                .iter()
                .any(|c| crate::plan::merged_usr(c) == crate::plan::merged_usr(path))
            {
                continue;
            }
            match actual(path) {
                Some(got) if got == *sum => checked += 1,
                Some(got) => errors.push(format!(
                    "{path} in the image has MD5 {got}, package {name} installed {sum}"
                )),
                None => errors.push(format!(
                    "{path} of package {name} is missing from the image"
                )),
            }
        }
        out.push(PfxPackage {
            name: name.to_string(),
            version,
            arch,
            files_checked: checked,
        });
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(CheckFailed::new(Check::PfxPackages, errors))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openssh_versions_with_and_without_mlkem() {
        for v in ["1:10.0p1-7~bpo12+1", "1:9.9p1-1", "10.2p1", "1:11.0p1-1"] {
            assert!(openssh_has_mlkem(v), "{v}");
        }
        for v in [
            "1:9.2p1-2+deb12u10",
            "1:8.4p1-5",
            "9.8p1",
            "",
            "1:",
            "garbage",
        ] {
            assert!(!openssh_has_mlkem(v), "{v}");
        }
    }

    #[test]
    fn dpkg_status_lists_only_installed() {
        let t = "Package: a\nStatus: install ok installed\nArchitecture: arm64\nVersion: 1.0\n\n\
                 Package: b\nStatus: deinstall ok config-files\nVersion: 2\n\n\
                 Package: busybox\nStatus: install ok installed\nVersion: 1:1.35.0-4+b3\nArchitecture: arm64\n";
        let p = parse_dpkg_status(t);
        assert_eq!(p.len(), 2);
        assert_eq!(p[1].name, "busybox");
        assert_eq!(p[1].version, "1:1.35.0-4+b3");
    }

    const STATUS: &str = "Package: busybox\nStatus: install ok installed\nVersion: 1:1.35.0-4+b3\nArchitecture: arm64\n\n\
Package: pfx-player\nStatus: install ok installed\nPriority: optional\nArchitecture: arm64\nVersion: 0.1.0\n\
Conffiles:\n /etc/pfx/show.yaml 0123456789abcdef0123456789abcdef\nDescription: LED show player\n more\n\n\
Package: pfx-agent\nStatus: install ok installed\nArchitecture: arm64\nVersion: 0.1.0\n";
    const SUM_BIN: &str = "11111111111111111111111111111111";
    const SUM_UNIT: &str = "22222222222222222222222222222222";
    const SUM_AGENT: &str = "33333333333333333333333333333333";

    fn sums() -> Vec<(String, String)> {
        vec![
            (
                "pfx-player".into(),
                format!(
                    "{SUM_BIN}  usr/bin/pfx-player\n{SUM_UNIT}  lib/systemd/system/pfx-player.service\n\
                     44444444444444444444444444444444  etc/pfx/show.yaml\n"
                ),
            ),
            (
                "pfx-agent".into(),
                format!("{SUM_AGENT}  usr/bin/pfx-agent\n"),
            ),
        ]
    }

    fn image_md5(path: &str) -> Option<String> {
        match crate::plan::merged_usr(path).as_str() {
            "/usr/bin/pfx-player" => Some(SUM_BIN.into()),
            "/usr/lib/systemd/system/pfx-player.service" => Some(SUM_UNIT.into()),
            "/usr/bin/pfx-agent" => Some(SUM_AGENT.into()),
            // The image's own show: not the package's bytes, and not compared.
            "/etc/pfx/show.yaml" => Some("55555555555555555555555555555555".into()),
            _ => None,
        }
    }

    const NAMES: &[&str] = &["pfx-player", "pfx-agent"];

    #[test]
    fn pfx_packages_installed_at_the_build_version_with_their_bytes() {
        let p = check_pfx_packages(STATUS, NAMES, "0.1.0", "arm64", &sums(), &image_md5).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].name.as_str(), p[0].files_checked), ("pfx-player", 2));
        assert_eq!(
            (p[1].name.as_str(), p[1].version.as_str()),
            ("pfx-agent", "0.1.0")
        );
    }

    #[test]
    fn pfx_packages_wrong_or_missing_are_refused() {
        let check =
            |status: &str, sums: Vec<(String, String)>, md5: &dyn Fn(&str) -> Option<String>| {
                check_pfx_packages(status, NAMES, "0.1.0", "arm64", &sums, md5)
                    .unwrap_err()
                    .to_string()
            };
        let e = check(
            &STATUS.replace("Version: 0.1.0\n", "Version: 0.0.9\n"),
            sums(),
            &image_md5,
        );
        assert!(e.contains("the build's is \"0.1.0\""), "{e}");
        let e = check(
            &STATUS.replacen("install ok installed", "deinstall ok config-files", 2),
            sums(),
            &image_md5,
        );
        assert!(e.contains("not \"install ok installed\""), "{e}");
        let e = check(
            STATUS.split("\n\nPackage: pfx-agent").next().unwrap(),
            sums(),
            &image_md5,
        );
        assert!(
            e.contains("pfx-agent is not in the image's dpkg status"),
            "{e}"
        );
        let e = check(
            &STATUS.replace("arm64\nVersion: 0.1.0", "amd64\nVersion: 0.1.0"),
            sums(),
            &image_md5,
        );
        assert!(e.contains("the image is \"arm64\""), "{e}");
        // A binary changed after dpkg installed it.
        let changed = |p: &str| {
            if p.ends_with("pfx-player") {
                Some("66666666666666666666666666666666".into())
            } else {
                image_md5(p)
            }
        };
        let e = check(STATUS, sums(), &changed);
        assert!(
            e.contains("/usr/bin/pfx-player in the image has MD5 6666"),
            "{e}"
        );
        let gone = |p: &str| {
            if p.ends_with("pfx-player.service") {
                None
            } else {
                image_md5(p)
            }
        };
        let e = check(STATUS, sums(), &gone);
        assert!(
            e.contains("pfx-player.service of package pfx-player is missing"),
            "{e}"
        );
        // md5sums that do not name the binary, or no md5sums at all.
        let mut s = sums();
        s[1].1 = format!("{SUM_AGENT}  usr/share/doc/pfx-agent/copyright\n");
        let e = check(STATUS, s, &|p: &str| {
            if p.ends_with("copyright") {
                Some(SUM_AGENT.into())
            } else {
                image_md5(p)
            }
        });
        assert!(
            e.contains("pfx-agent.md5sums does not list /usr/bin/pfx-agent"),
            "{e}"
        );
        let e = check(STATUS, sums()[..1].to_vec(), &image_md5);
        assert!(e.contains("pfx-agent has no md5sums"), "{e}");
        let mut s = sums();
        s[0].1 = "not an md5 line\n".into();
        assert!(check(STATUS, s, &image_md5).contains("is not `MD5  PATH`"));
    }
}
