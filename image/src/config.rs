//! The image YAML (`examples/image-*.yaml`; schema in `docs/image.md`).

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What the image boots on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub enum Target {
    /// Raspberry Pi 4, Debian's arm64 kernel booted by the GPU firmware (raspi-firmware).
    #[serde(rename = "rpi4-arm64")]
    Rpi4Arm64,
    /// The same arm64 root as the Pi (same packages), consoles set for `qemu -M virt`.
    #[serde(rename = "vm-arm64")]
    VmArm64,
    /// An amd64 root for `qemu-system-x86_64`, kernel and initramfs on the boot partition.
    #[serde(rename = "vm-amd64")]
    VmAmd64,
}

impl Target {
    pub fn name(self) -> &'static str {
        match self {
            Target::Rpi4Arm64 => "rpi4-arm64",
            Target::VmArm64 => "vm-arm64",
            Target::VmAmd64 => "vm-amd64",
        }
    }
    /// Debian architecture.
    pub fn arch(self) -> &'static str {
        match self {
            Target::Rpi4Arm64 | Target::VmArm64 => "arm64",
            Target::VmAmd64 => "amd64",
        }
    }
    pub fn rust_triple(self) -> &'static str {
        match self {
            Target::Rpi4Arm64 | Target::VmArm64 => "aarch64-unknown-linux-gnu",
            Target::VmAmd64 => "x86_64-unknown-linux-gnu",
        }
    }
    /// The arm64 targets share one root (the VM boots what the Pi boots), so they use
    /// raspi-firmware's kernel hook to fill the boot partition.
    pub fn uses_raspi_firmware(self) -> bool {
        self.arch() == "arm64"
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

fn default_suite() -> String {
    "bookworm".into()
}
fn default_prefix() -> String {
    "pfx".into()
}
fn default_true() -> bool {
    true
}
fn default_image_mib() -> u64 {
    // boot 256 + two root slots of 1.5 GiB + data 256 (the root is about 800 MiB).
    3584
}
fn default_boot_mib() -> u64 {
    256
}
fn default_data_mib() -> u64 {
    256
}

/// The YAML file as written. Paths are relative to the file.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ImageConfig {
    pub target: Target,
    /// Debian suite.
    #[serde(default = "default_suite")]
    pub suite: String,
    /// Debian mirror URL. Default: the host's own (first `URIs:` of
    /// /etc/apt/sources.list.d/debian.sources, else deb.debian.org).
    #[serde(default)]
    pub mirror: Option<String>,
    /// Extra Debian packages, on top of the ones every unit needs.
    #[serde(default)]
    pub packages: Vec<String>,
    /// Host names become `<prefix>-<last 3 MAC bytes>`; the image itself is called `<prefix>`.
    #[serde(default = "default_prefix")]
    pub hostname_prefix: String,
    /// OpenSSH public key lines for root (the fleet tool logs in with these).
    #[serde(default)]
    pub ssh_authorized_keys: Vec<String>,
    /// Files holding public key lines (e.g. `~/.ssh/id_ed25519.pub` copied beside the YAML).
    #[serde(default)]
    pub ssh_authorized_keys_files: Vec<PathBuf>,
    /// Show config installed as /etc/pfx/show.yaml.
    pub show: PathBuf,
    /// Device profiles installed into /etc/pfx/profiles/.
    #[serde(default)]
    pub profiles: Vec<PathBuf>,
    /// Read-only root with a tmpfs overlay (overlayroot). Off only for debugging.
    #[serde(default = "default_true")]
    pub overlay: bool,
    /// Whole image size in MiB (the root partition gets what the boot partition leaves).
    #[serde(default = "default_image_mib")]
    pub image_size_mib: u64,
    /// FAT boot partition size in MiB.
    #[serde(default = "default_boot_mib")]
    pub boot_size_mib: u64,
    /// Data partition (`/var/lib/pfx`) size in MiB in the image file; a unit grows it to the
    /// end of its card on the first boot.
    #[serde(default = "default_data_mib")]
    pub data_size_mib: u64,
    /// This build's software version: `/etc/pfx/image-version` on the unit and the version
    /// of the update bundle made from the image. Dotted numbers (`1.4.2`, optionally
    /// `+build`); a unit refuses a bundle older than the slot it runs unless forced.
    /// Default: pfx's own version.
    #[serde(default)]
    pub version: Option<String>,
    /// The operator's update CA certificate (PEM). The unit keeps it as RAUC's keyring in its
    /// read-only root and installs only bundles signed under it; the signing key never goes
    /// into an image. Without it the unit refuses every bundle.
    #[serde(default)]
    pub update_cert: Option<PathBuf>,
}

/// The config with every path made absolute and every file read.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub config: ImageConfig,
    pub source: PathBuf,
    pub mirror: String,
    pub show: PathBuf,
    pub profiles: Vec<PathBuf>,
    pub authorized_keys: Vec<String>,
    /// The update CA certificate's PEM text, when `update_cert` is set.
    pub update_cert: Option<String>,
    /// `version`, or pfx's own version.
    pub version: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: cannot read: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// serde-saphyr's message carries line, column and a snippet.
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

pub fn parse(text: &str, origin: &Path) -> Result<ImageConfig, ConfigError> {
    let config: ImageConfig = serde_saphyr::from_str(text).map_err(|e| ConfigError::Parse {
        path: origin.to_path_buf(),
        message: e.to_string(),
    })?;
    validate(&config).map_err(|message| ConfigError::Invalid {
        path: origin.to_path_buf(),
        message,
    })?;
    Ok(config)
}

/// Checks that need no file system.
pub fn validate(c: &ImageConfig) -> Result<(), String> {
    let p = &c.hostname_prefix;
    // A host name label is at most 63 characters; the suffix adds 7 ("-abcdef").
    let label_ok = !p.is_empty()
        && p.len() <= 56
        && p.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !p.starts_with('-')
        && !p.ends_with('-');
    if !label_ok {
        return Err(format!(
            "hostname_prefix {p:?}: use 1-56 characters a-z, 0-9 and '-', not starting or ending with '-'"
        ));
    }
    if !c
        .suite
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        || c.suite.is_empty()
    {
        return Err(format!(
            "suite {:?}: not a Debian suite name (e.g. bookworm)",
            c.suite
        ));
    }
    for pkg in &c.packages {
        let ok = !pkg.is_empty()
            && pkg
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"+-.".contains(&b));
        if !ok {
            return Err(format!("packages: {pkg:?} is not a Debian package name"));
        }
    }
    for key in &c.ssh_authorized_keys {
        check_key_line(key)?;
    }
    if c.boot_size_mib < 64 {
        return Err(format!(
            "boot_size_mib {}: at least 64 (kernel, initramfs, firmware)",
            c.boot_size_mib
        ));
    }
    if c.data_size_mib < 32 {
        return Err(format!(
            "data_size_mib {}: at least 32 (the data partition grows to the card on the first boot)",
            c.data_size_mib
        ));
    }
    let min_root = crate::disk::MIN_ROOT_MIB;
    if c.image_size_mib
        < crate::disk::BOOT_START_MIB + c.boot_size_mib + 2 * min_root + c.data_size_mib
    {
        return Err(format!(
            "image_size_mib {}: must leave at least {min_root} MiB for each of the two root slots between the {} MiB boot partition and the {} MiB data partition",
            c.image_size_mib, c.boot_size_mib, c.data_size_mib
        ));
    }
    if let Some(v) = &c.version {
        crate::release::parse_version(v).map_err(|e| format!("version {v:?}: {e}"))?;
    }
    if let Some(m) = &c.mirror
        && !(m.starts_with("http://") || m.starts_with("https://") || m.starts_with("file://"))
    {
        return Err(format!(
            "mirror {m:?}: use an http://, https:// or file:// URL"
        ));
    }
    Ok(())
}

fn check_key_line(key: &str) -> Result<(), String> {
    let mut words = key.split_whitespace();
    let kind = words.next().unwrap_or("");
    let body = words.next().unwrap_or("");
    let known = kind.starts_with("ssh-") || kind.starts_with("ecdsa-") || kind.starts_with("sk-");
    if !known || body.len() < 16 || key.contains('\n') {
        return Err(format!(
            "ssh key {:?}: expected one OpenSSH public key line (\"ssh-ed25519 AAAA... comment\")",
            key.chars().take(40).collect::<String>()
        ));
    }
    Ok(())
}

/// The first `URIs:` of the host's deb822 Debian source, the mirror this machine already uses.
pub fn host_mirror(sources_text: &str) -> Option<String> {
    let mut stanza_is_debian = false;
    for stanza in sources_text.split("\n\n") {
        let mut uri = None;
        stanza_is_debian = false;
        for line in stanza.lines() {
            let line = line.trim();
            if let Some(v) = line.strip_prefix("URIs:") {
                uri = v.split_whitespace().next().map(str::to_string);
            }
            if let Some(v) = line.strip_prefix("Suites:") {
                // The main archive, not -security (a different archive layout).
                stanza_is_debian = v.split_whitespace().any(|s| !s.ends_with("-security"));
            }
        }
        if stanza_is_debian && let Some(u) = uri {
            return Some(u);
        }
    }
    let _ = stanza_is_debian;
    None
}

pub const DEFAULT_MIRROR: &str = "http://deb.debian.org/debian";

/// Reads and resolves the YAML: relative paths against its directory, key files read.
pub fn load(path: &Path) -> Result<Resolved, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let config = parse(&text, path)?;
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let abs = |p: &Path| {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            dir.join(p)
        }
    };
    let invalid = |message: String| ConfigError::Invalid {
        path: path.to_path_buf(),
        message,
    };

    let show = abs(&config.show);
    if !show.is_file() {
        return Err(invalid(format!("show: {} does not exist", show.display())));
    }
    let mut profiles = Vec::new();
    for p in &config.profiles {
        let p = abs(p);
        if !p.is_file() {
            return Err(invalid(format!("profiles: {} does not exist", p.display())));
        }
        profiles.push(p);
    }
    let mut authorized_keys = config.ssh_authorized_keys.clone();
    for f in &config.ssh_authorized_keys_files {
        let f = abs(f);
        let text = std::fs::read_to_string(&f)
            .map_err(|e| invalid(format!("ssh_authorized_keys_files: {}: {e}", f.display())))?;
        for line in text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            check_key_line(line).map_err(|m| invalid(format!("{}: {m}", f.display())))?;
            authorized_keys.push(line.to_string());
        }
    }
    let mirror = match &config.mirror {
        Some(m) => m.clone(),
        None => std::fs::read_to_string("/etc/apt/sources.list.d/debian.sources")
            .ok()
            .and_then(|t| host_mirror(&t))
            .unwrap_or_else(|| DEFAULT_MIRROR.to_string()),
    };
    let update_cert = match &config.update_cert {
        None => None,
        Some(c) => {
            let c = abs(c);
            let text = std::fs::read_to_string(&c)
                .map_err(|e| invalid(format!("update_cert: {}: {e}", c.display())))?;
            crate::release::check_cert_pem(&text)
                .map_err(|m| invalid(format!("update_cert: {}: {m}", c.display())))?;
            Some(text)
        }
    };
    let version = config
        .version
        .clone()
        .unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_string());
    Ok(Resolved {
        config,
        source: path.to_path_buf(),
        mirror,
        show,
        profiles,
        authorized_keys,
        update_cert,
        version,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: &str = "target: rpi4-arm64\nshow: show.yaml\n";

    #[test]
    fn defaults() {
        let c = parse(MIN, Path::new("x.yaml")).unwrap();
        assert_eq!(c.target, Target::Rpi4Arm64);
        assert_eq!(c.suite, "bookworm");
        assert!(c.overlay);
        assert_eq!(c.hostname_prefix, "pfx");
        assert_eq!(c.image_size_mib, 3584);
        assert_eq!(c.version, None);
        assert_eq!(c.update_cert, None);
    }

    #[test]
    fn unknown_field_names_file_line_column() {
        let e = parse(
            "target: vm-arm64\nshow: s.yaml\noverlai: false\n",
            Path::new("img.yaml"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("img.yaml: "), "{e}");
        assert!(e.contains("overlai"), "{e}");
        assert!(e.contains("line 3"), "{e}");
        assert!(e.contains("column"), "{e}");
    }

    #[test]
    fn bad_target_and_prefix() {
        assert!(parse("target: rpi5\nshow: s\n", Path::new("a")).is_err());
        let e = parse(
            "target: vm-amd64\nshow: s\nhostname_prefix: Pfx_1\n",
            Path::new("a"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("hostname_prefix"), "{e}");
    }

    #[test]
    fn bad_key_and_size() {
        let e = parse(
            "target: vm-amd64\nshow: s\nssh_authorized_keys: [hello]\n",
            Path::new("a"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("ssh key"), "{e}");
        let e = parse(
            "target: vm-amd64\nshow: s\nimage_size_mib: 300\n",
            Path::new("a"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("image_size_mib"), "{e}");
        // The default image (3584 MiB) holds boot, two root slots and the data partition;
        // a data partition that eats the slots is refused, as is a useless one.
        let c = parse(MIN, Path::new("a")).unwrap();
        assert_eq!(c.data_size_mib, 256);
        let e = parse(&format!("{MIN}data_size_mib: 2400\n"), Path::new("a")).unwrap_err();
        assert!(e.to_string().contains("image_size_mib 3584"), "{e}");
        assert!(e.to_string().contains("two root slots"), "{e}");
        let e = parse(&format!("{MIN}version: 1.2-rc1\n"), Path::new("a")).unwrap_err();
        assert!(e.to_string().contains("version"), "{e}");
        assert!(parse(&format!("{MIN}version: 1.2.3+b7\n"), Path::new("a")).is_ok());
        let e = parse(&format!("{MIN}data_size_mib: 8\n"), Path::new("a")).unwrap_err();
        assert!(e.to_string().contains("data_size_mib 8"), "{e}");
    }

    #[test]
    fn host_mirror_skips_security() {
        let t = "Types: deb\nURIs: http://deb.debian.org/debian-security\nSuites: bookworm-security\n\n\
                 Types: deb\n# comment\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n";
        assert_eq!(
            host_mirror(t).as_deref(),
            Some("http://mirror.example/debian")
        );
        assert_eq!(host_mirror(""), None);
    }

    #[test]
    fn load_resolves_paths_relative_to_the_yaml() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("p")).unwrap();
        std::fs::write(d.path().join("show.yaml"), "x").unwrap();
        std::fs::write(d.path().join("p/a.yaml"), "x").unwrap();
        std::fs::write(
            d.path().join("k.pub"),
            "# fleet\nssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGx op@host\n",
        )
        .unwrap();
        let y = d.path().join("img.yaml");
        std::fs::write(
            &y,
            "target: vm-arm64\nshow: show.yaml\nprofiles: [p/a.yaml]\nssh_authorized_keys_files: [k.pub]\nmirror: http://m.example/debian\n",
        )
        .unwrap();
        let r = load(&y).unwrap();
        assert_eq!(r.show, d.path().join("show.yaml"));
        assert_eq!(r.profiles, vec![d.path().join("p/a.yaml")]);
        assert_eq!(r.authorized_keys.len(), 1);
        assert_eq!(r.mirror, "http://m.example/debian");
        std::fs::write(&y, "target: vm-arm64\nshow: missing.yaml\n").unwrap();
        let e = load(&y).unwrap_err().to_string();
        assert!(
            e.contains("missing.yaml") && e.contains("does not exist"),
            "{e}"
        );
    }
}
