//! `pfx-image bundle`: a signed RAUC update bundle made from a built image file, so the
//! bundle's root is byte for byte the slot A that `build` made and `verify` checked.
//!
//! The bundle holds slot A's ext4 (`root.ext4`) and a manifest naming the image's target
//! (`compatible`) and version (its `/etc/pfx/image-version`). `rauc bundle` signs it with
//! the operator's key and certificate; the key is only read by rauc on this machine. A
//! sidecar `BUNDLE.json` (version, compatible, sha256, size) lets `pfx-fleet` plan a
//! rollout without RAUC installed on the operator's machine.

use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::artifact::ImageFile;
use crate::config::Target;
use crate::update;

#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("{0}")]
    Refused(String),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> BundleError {
    let what = what.into();
    move |source| BundleError::Io { what, source }
}

/// mksquashfs's compression for a bundle unless the operator gives other arguments.
pub const DEFAULT_SQUASHFS_ARGS: &str = "-comp zstd -Xcompression-level 3";

pub struct Options {
    pub image: PathBuf,
    pub output: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
    /// A CA certificate to check the new bundle against (`rauc info --keyring`), as the
    /// units will.
    pub keyring: Option<PathBuf>,
    /// Extra mksquashfs arguments (compression), handed to `rauc bundle`.
    pub squashfs_args: Option<String>,
    pub force: bool,
}

/// The sidecar, `BUNDLE.json`.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct Sidecar {
    pub bundle: String,
    pub version: String,
    pub compatible: String,
    pub target: String,
    pub sha256: String,
    pub size: u64,
    /// The image file the bundle was made from, and its slot A's size.
    pub image: String,
    pub slot_bytes: u64,
}

pub fn sidecar_path(bundle: &Path) -> PathBuf {
    let mut s = bundle.as_os_str().to_owned();
    s.push(".json");
    PathBuf::from(s)
}

/// The target whose RAUC config a root carries.
pub fn target_of_system_conf(text: &str) -> Option<Target> {
    let c = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("compatible="))?
        .trim();
    [Target::Rpi4Arm64, Target::VmArm64, Target::VmAmd64]
        .into_iter()
        .find(|t| update::compatible(*t) == c)
}

fn stage(i: usize, n: usize, what: &str) {
    eprintln!("[{i}/{n}] {what}");
}

/// The number of stages `make` reports.
const STAGES: usize = 4;

pub fn make(o: &Options) -> Result<Sidecar, BundleError> {
    check_inputs(o)?;
    stage(1, STAGES, "read the image's slot A, its target and version");
    let src = read_source(o)?;
    let out_dir = o
        .output
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let work = tempfile_dir(&out_dir)?;
    let result = make_in(o, &src, &work);
    // The work directory goes whatever happened in it.
    let _ = fs::remove_dir_all(&work);
    result
}

/// Refuses before any work: an output in the way (without --force), a missing
/// certificate or key.
fn check_inputs(o: &Options) -> Result<(), BundleError> {
    if o.output.exists() && !o.force {
        return Err(BundleError::Refused(format!(
            "{} exists; pass --force to overwrite it",
            o.output.display()
        )));
    }
    for (what, p) in [("--cert", &o.cert), ("--key", &o.key)] {
        if !p.is_file() {
            return Err(BundleError::Refused(format!(
                "{what} {}: no such file (make a CA and a signing certificate as docs/update.md, \"Keys\", shows)",
                p.display()
            )));
        }
    }
    Ok(())
}

/// The image a bundle is made from, with what its root says about itself.
struct Source {
    img: ImageFile,
    target: Target,
    version: String,
}

/// Opens the image and reads its target (RAUC's system.conf) and version; an image of
/// the single-root layout, or one from before A/B updates, is refused.
fn read_source(o: &Options) -> Result<Source, BundleError> {
    let img = ImageFile::open(&o.image).map_err(|e| BundleError::Refused(e.to_string()))?;
    if img.root_b.is_none() {
        return Err(BundleError::Refused(format!(
            "{}: single-root layout (no slot B): rebuild it with this pfx-image; a unit of that layout cannot take bundles either",
            o.image.display()
        )));
    }
    let conf = img
        .root_read(update::SYSTEM_CONF)
        .map_err(|e| BundleError::Refused(format!("{e} (an image built before A/B updates)")))?;
    let target = target_of_system_conf(&String::from_utf8_lossy(&conf)).ok_or_else(|| {
        BundleError::Refused(format!(
            "{}: {} names no pfx target",
            o.image.display(),
            update::SYSTEM_CONF
        ))
    })?;
    let version = String::from_utf8_lossy(
        &img.root_read(update::VERSION_FILE)
            .map_err(|e| BundleError::Refused(e.to_string()))?,
    )
    .trim()
    .to_string();
    update::parse_version(&version)
        .map_err(|e| BundleError::Refused(format!("{}: {version:?}: {e}", update::VERSION_FILE)))?;
    Ok(Source {
        img,
        target,
        version,
    })
}

/// Stages 2 to 4 in the work directory: the bundle's content, the signed bundle, its
/// check, then the bundle moved to the output and its sidecar written.
fn make_in(o: &Options, src: &Source, work: &Path) -> Result<Sidecar, BundleError> {
    let content = work.join("content");
    fs::create_dir(&content).map_err(io(format!("mkdir {}", content.display())))?;
    let slot_bytes = src.img.root.sectors * 512;
    stage(
        2,
        STAGES,
        &format!("copy slot A ({} MiB) into the bundle", slot_bytes >> 20),
    );
    copy_range(
        &o.image,
        src.img.root.offset(),
        slot_bytes,
        &content.join("root.ext4"),
    )?;
    write_manifest(o, src, &content)?;
    stage(3, STAGES, "rauc bundle (squashfs, then the CMS signature)");
    let tmp_out = work.join("bundle.raucb");
    rauc_bundle(o, &content, &tmp_out)?;
    stage(4, STAGES, "check the signature as a unit will");
    rauc_check(o, &tmp_out)?;
    let (sha256, size) = sha256_file(&tmp_out)?;
    fs::rename(&tmp_out, &o.output).map_err(io(format!("move to {}", o.output.display())))?;
    let side = Sidecar {
        bundle: o
            .output
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default(),
        version: src.version.clone(),
        compatible: update::compatible(src.target),
        target: src.target.name().into(),
        sha256,
        size,
        image: o.image.display().to_string(),
        slot_bytes,
    };
    let json = serde_json::to_string_pretty(&side).unwrap_or_default();
    fs::write(sidecar_path(&o.output), json + "\n").map_err(io("write the sidecar"))?;
    Ok(side)
}

/// The bundle's manifest.raucm: target, version and the build tag.
fn write_manifest(o: &Options, src: &Source, content: &Path) -> Result<(), BundleError> {
    // The build tag: the image file it came from, for `rauc info` and the history.
    let build: String = o
        .image
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || "-._".contains(*c))
        .collect();
    fs::write(
        content.join("manifest.raucm"),
        update::bundle_manifest_text(src.target, &src.version, &build),
    )
    .map_err(io("write manifest.raucm"))
}

/// `rauc bundle`: the content squashed and signed with the operator's key into `out`.
fn rauc_bundle(o: &Options, content: &Path, out: &Path) -> Result<(), BundleError> {
    let mut b = Command::new("rauc");
    b.arg("bundle")
        .arg(format!("--cert={}", o.cert.display()))
        .arg(format!("--key={}", o.key.display()));
    // zstd at level 3 by default: on the 2-core build machine it squashes a root in a
    // tenth of gzip's time at the same size, and the unit unpacks it faster too.
    let args = o.squashfs_args.as_deref().unwrap_or(DEFAULT_SQUASHFS_ARGS);
    b.arg(format!("--mksquashfs-args={args}"));
    run(b.arg(content).arg(out))
}

/// `rauc info` on the new bundle, against the keyring when given (as a unit checks it).
fn rauc_check(o: &Options, bundle: &Path) -> Result<(), BundleError> {
    let mut info = Command::new("rauc");
    info.arg("info").arg("--output-format=json");
    match &o.keyring {
        Some(k) => info.arg(format!("--keyring={}", k.display())),
        None => info.arg("--no-verify"),
    };
    run(info.arg(bundle))
}

/// A fresh private directory beside the output (rauc needs room for the squashfs; /tmp
/// may be a small tmpfs). Made with mkdir's O_EXCL semantics and mode 0700.
fn tempfile_dir(beside: &Path) -> Result<PathBuf, BundleError> {
    use std::os::unix::fs::DirBuilderExt;
    for i in 0..100u32 {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let d = beside.join(format!(".pfx-bundle.{}.{nanos:x}{i}", std::process::id()));
        match fs::DirBuilder::new().mode(0o700).create(&d) {
            Ok(()) => return Ok(d),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io(format!("mkdir {}", d.display()))(e)),
        }
    }
    Err(BundleError::Refused(format!(
        "could not make a work directory in {}",
        beside.display()
    )))
}

fn copy_range(src: &Path, offset: u64, len: u64, dst: &Path) -> Result<(), BundleError> {
    let mut f = fs::File::open(src).map_err(io(format!("open {}", src.display())))?;
    f.seek(SeekFrom::Start(offset))
        .map_err(io(format!("seek {}", src.display())))?;
    let mut out = fs::File::create(dst).map_err(io(format!("create {}", dst.display())))?;
    let mut buf = vec![0u8; 1 << 20];
    let mut left = len;
    // Zero blocks become holes: the slot is mostly free space.
    while left > 0 {
        let want = left.min(buf.len() as u64) as usize;
        f.read_exact(&mut buf[..want]).map_err(io(format!(
            "read {} (is the image cut short?)",
            src.display()
        )))?;
        if buf[..want].iter().all(|&b| b == 0) {
            out.seek(SeekFrom::Current(want as i64))
                .map_err(io("seek root.ext4"))?;
        } else {
            out.write_all(&buf[..want]).map_err(io("write root.ext4"))?;
        }
        left -= want as u64;
    }
    out.set_len(len).map_err(io("size root.ext4"))?;
    Ok(())
}

fn run(cmd: &mut Command) -> Result<(), BundleError> {
    let o = cmd
        .output()
        .map_err(|e| BundleError::Refused(format!("cannot run {cmd:?}: {e} (install rauc)")))?;
    if !o.status.success() {
        return Err(BundleError::Refused(format!(
            "{:?} failed: {}{}",
            cmd,
            String::from_utf8_lossy(&o.stderr),
            String::from_utf8_lossy(&o.stdout)
        )));
    }
    Ok(())
}

pub fn sha256_file(p: &Path) -> Result<(String, u64), BundleError> {
    let mut f = fs::File::open(p).map_err(io(format!("open {}", p.display())))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = f
            .read(&mut buf)
            .map_err(io(format!("read {}", p.display())))?;
        if n == 0 {
            break;
        }
        size += n as u64;
        h.update(&buf[..n]);
    }
    Ok((crate::plan::hex(&h.finalize()), size))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_comes_from_the_roots_rauc_config() {
        let t = update::system_conf_text(Target::Rpi4Arm64);
        assert_eq!(target_of_system_conf(&t), Some(Target::Rpi4Arm64));
        assert_eq!(target_of_system_conf("compatible=other\n"), None);
        assert_eq!(target_of_system_conf(""), None);
    }

    #[test]
    fn the_sidecar_sits_beside_the_bundle() {
        assert_eq!(
            sidecar_path(Path::new("/x/u.raucb")),
            PathBuf::from("/x/u.raucb.json")
        );
    }
}
