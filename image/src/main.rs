//! `pfx-image`: builds the read-only unit image every Pi is flashed from.

mod artifact;
mod build;
mod bundle;
mod config;
mod disk;
mod manifest;
mod plan;
mod release;
mod tools;
mod update;
mod verify;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "pfx-image",
    version,
    about = "Build the read-only pfx unit image (Debian + overlayroot + the player)",
    after_help = pfx_api::exit::help(
        "the image did not verify (verify)",
        &[],
    )
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Build an image from an image YAML, verify it from the image file, write a manifest.
    Build {
        config: PathBuf,
        #[arg(short, long)]
        output: PathBuf,
        /// Overwrite an existing output.
        #[arg(long)]
        force: bool,
        /// Print the manifest as JSON on stdout.
        #[arg(long)]
        json: bool,
        /// A prebuilt player for the target (default: build it from the workspace).
        #[arg(long)]
        player: Option<PathBuf>,
        /// A prebuilt pfx-agent for the target.
        #[arg(long)]
        agent: Option<PathBuf>,
        /// The pfx workspace to build the player from (default: $PFX_TOP, else the
        /// enclosing cargo workspace).
        #[arg(long)]
        workspace: Option<PathBuf>,
        /// Cache for .debs and base roots (default: $PFX_CACHE, else /var/cache/pfx).
        #[arg(long)]
        cache: Option<PathBuf>,
        /// Rebuild the base root even when a cached one matches.
        #[arg(long)]
        fresh_root: bool,
        /// Rebuild cached base roots older than this many days (they pin package versions).
        #[arg(long, default_value_t = 7)]
        root_max_age_days: u64,
        /// Keep the staging directory (for debugging).
        #[arg(long)]
        keep_staging: bool,
    },
    /// Print the resolved config and what the build would put in the image.
    ShowConfig {
        config: PathBuf,
        /// Print only the bytes the image would hold at this path (one of the JSON's
        /// `files`), e.g. `/etc/sudoers.d/pfx-agent`.
        #[arg(long, value_name = "PATH")]
        file: Option<String>,
    },
    /// Verify an existing image file and print its manifest.
    Verify {
        image: PathBuf,
        /// The target the image was built for: rpi4-arm64, vm-arm64 or vm-amd64.
        #[arg(long, value_parser = parse_target)]
        target: config::Target,
        /// The image was built with `overlay: false`.
        #[arg(long)]
        no_overlay: bool,
    },
    /// Make a signed update bundle from a built image file: slot A's root, the image's
    /// target and version (`/etc/pfx/image-version`), signed with the operator's key. Writes
    /// BUNDLE and BUNDLE.json (version, compatible, sha256, size). Needs rauc and
    /// squashfs-tools. The key is read by rauc here and never goes on a unit. See
    /// docs/update.md.
    Bundle {
        /// The image file `pfx-image build` wrote (its manifest need not be beside it).
        image: PathBuf,
        #[arg(short, long)]
        output: PathBuf,
        /// The signing certificate (PEM), issued by the CA in the units' image (update_cert).
        #[arg(long)]
        cert: PathBuf,
        /// The signing key (PEM). Keep it off units and out of any repository.
        #[arg(long)]
        key: PathBuf,
        /// Check the new bundle against this CA certificate, as a unit will.
        #[arg(long)]
        keyring: Option<PathBuf>,
        /// mksquashfs arguments for the bundle's payload (default "-comp zstd
        /// -Xcompression-level 3": as small as gzip's, ten times faster to make; "-comp xz"
        /// for the smallest). Every Debian arm64 kernel reads gzip, xz, lz4, lzo and zstd.
        #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
        squashfs_args: Option<String>,
        /// Overwrite an existing output.
        #[arg(long)]
        force: bool,
        /// Print the sidecar as JSON on stdout.
        #[arg(long)]
        json: bool,
    },
    /// List the host tools a build needs, for every target: command and Debian package
    /// (scripts/tests.d/05-fresh-root.sh checks that scripts/deps installs them).
    Tools {
        /// Print [{"target", "command", "package"}] as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Why `run` failed: the command ran and the answer is no, or an error stopped it.
enum Failure {
    No(anyhow::Error),
    Error(anyhow::Error),
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure::Error(e.into())
    }
}

fn parse_target(s: &str) -> Result<config::Target, String> {
    match s {
        "rpi4-arm64" => Ok(config::Target::Rpi4Arm64),
        "vm-arm64" => Ok(config::Target::VmArm64),
        "vm-amd64" => Ok(config::Target::VmAmd64),
        _ => Err("one of rpi4-arm64, vm-arm64, vm-amd64".into()),
    }
}

fn cache_dir(given: Option<PathBuf>) -> PathBuf {
    given
        .or_else(|| std::env::var_os("PFX_CACHE").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/var/cache/pfx"))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Error(e)) => pfx_api::exit::report("pfx-image", e.as_ref()),
        Err(Failure::No(e)) => {
            eprintln!("{}", pfx_api::exit::message("pfx-image", e.as_ref()));
            ExitCode::from(pfx_api::exit::NO)
        }
    }
}

fn run(cli: Cli) -> Result<(), Failure> {
    match cli.cmd {
        Cmd::Build {
            config,
            output,
            force,
            json,
            player,
            agent,
            workspace,
            cache,
            fresh_root,
            root_max_age_days,
            keep_staging,
        } => {
            if unsafe_geteuid() != 0 {
                return Err(anyhow::anyhow!(
                    "building an image needs root (mmdebstrap --mode=root, chroot, binfmt)"
                )
                .into());
            }
            let resolved = config::load(&config)?;
            let opts = build::Options {
                output,
                force,
                player,
                agent,
                workspace,
                cache: cache_dir(cache),
                fresh_root,
                keep_staging,
                root_max_age: Duration::from_secs(root_max_age_days * 86400),
            };
            let manifest = build::build(&resolved, &opts)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&manifest)?);
            }
            Ok(())
        }
        Cmd::ShowConfig { config, file } => show_config(&config, file.as_deref()),
        Cmd::Verify {
            image,
            target,
            no_overlay,
        } => {
            // An image that cannot be opened is an error (2); one that opens and does
            // not verify is a clean no (1).
            std::fs::File::open(&image)
                .with_context(|| format!("opening the image {}", image.display()))?;
            let scratch = scratch_dir()?;
            let expect = manifest::Expect {
                target,
                overlay: !no_overlay,
                hostname_prefix: None,
                pfx_version: plan::PFX_VERSION.to_string(),
            };
            let m = manifest::verify_image(&image, &expect, scratch.path());
            drop(scratch);
            let m = m.map_err(|e| Failure::No(anyhow::Error::msg(e)))?;
            println!("{}", serde_json::to_string_pretty(&m)?);
            Ok(())
        }
        Cmd::Bundle {
            image,
            output,
            cert,
            key,
            keyring,
            squashfs_args,
            force,
            json,
        } => {
            let side = bundle::make(&bundle::Options {
                image,
                output,
                cert,
                key,
                keyring,
                squashfs_args,
                force,
            })?;
            if json {
                println!("{}", serde_json::to_string_pretty(&side)?);
            } else {
                eprintln!(
                    "pfx-image: {} {} for {}, {} bytes, sha256 {}",
                    side.bundle, side.version, side.compatible, side.size, side.sha256
                );
            }
            Ok(())
        }
        Cmd::Tools { json } => tools(json),
    }
}

/// `show-config`: what the config resolves to and what the image would hold, as JSON.
fn show_config(config: &std::path::Path, only: Option<&str>) -> Result<(), Failure> {
    let r = config::load(config)?;
    let plan = plan::plan(&r, Vec::new(), Vec::new());
    let files: Vec<&str> = plan.files.iter().map(|f| f.path.as_str()).collect();
    if let Some(path) = only {
        let Some(f) = plan.files.iter().find(|f| f.path == path) else {
            return Err(Failure::No(anyhow::anyhow!(
                "show-config: the image holds no planned file {path}; it holds: {}",
                files.join(", ")
            )));
        };
        use std::io::Write;
        std::io::stdout()
            .write_all(&f.contents)
            .map_err(|e| Failure::Error(e.into()))?;
        return Ok(());
    }
    let out = serde_json::json!({
        "config": r.config,
        "source": r.source,
        "mirror": r.mirror,
        "show": r.show,
        "profiles": r.profiles,
        "authorized_keys": r.authorized_keys.len(),
        "arch": plan.arch,
        "components": plan.components,
        "packages": plan.packages,
        "base_key": plan.base_key,
        "extra_cmdline": plan.extra_cmdline,
        "enabled_units": plan::ENABLED_UNITS,
        "files": files,
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

/// `tools`: the host commands each target's build needs, and their packages.
fn tools(json: bool) -> Result<(), Failure> {
    let all = [
        config::Target::Rpi4Arm64,
        config::Target::VmArm64,
        config::Target::VmAmd64,
    ];
    let rows: Vec<_> = all
        .iter()
        .flat_map(|&t| {
            tools::required(t, true)
                .into_iter()
                .map(move |(c, p)| (t.name(), c, p))
        })
        .collect();
    if json {
        let v: Vec<_> = rows
            .iter()
            .map(|(t, c, p)| serde_json::json!({"target": t, "command": c, "package": p}))
            .collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        for (t, c, p) in rows {
            println!("{t:<12} {c:<34} {p}");
        }
    }
    Ok(())
}

/// Verify's scratch directory: created new (never an existing path, so never a symlink
/// someone planted), mode 0700, with a name nobody can guess, removed when dropped. A
/// fixed name like /tmp/pfx-image-verify-PID let another user point it elsewhere before a
/// root verify wrote through it.
fn scratch_dir() -> anyhow::Result<tempfile::TempDir> {
    use std::os::unix::fs::PermissionsExt;
    tempfile::Builder::new()
        .prefix("pfx-image-verify-")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .with_context(|| {
            format!(
                "creating a private scratch directory in {} (set TMPDIR to a writable directory)",
                std::env::temp_dir().display()
            )
        })
}

fn unsafe_geteuid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    /// The scratch directory is new, private and unguessable: a symlink planted at the old
    /// predictable name is not followed, two verifies never share one, and it is gone
    /// after use.
    #[test]
    fn scratch_dir_is_private_and_never_a_planted_path() {
        let tmp = std::env::temp_dir();
        let target = tempfile::tempdir().unwrap();
        let planted = tmp.join(format!("pfx-image-verify-{}", std::process::id()));
        let _ = std::fs::remove_file(&planted);
        std::os::unix::fs::symlink(target.path(), &planted).unwrap();
        let (a, b) = (scratch_dir().unwrap(), scratch_dir().unwrap());
        let _ = std::fs::remove_file(&planted);
        for d in [&a, &b] {
            assert_ne!(d.path(), planted, "the predictable name was used");
            let m = std::fs::symlink_metadata(d.path()).unwrap();
            assert!(m.is_dir() && !m.file_type().is_symlink());
            assert_eq!(
                m.permissions().mode() & 0o777,
                0o700,
                "{}",
                d.path().display()
            );
            assert_eq!(m.uid(), unsafe_geteuid());
        }
        assert_ne!(a.path(), b.path());
        assert_eq!(std::fs::read_dir(target.path()).unwrap().count(), 0);
        let p = a.path().to_path_buf();
        drop(a);
        assert!(!p.exists(), "the scratch directory outlived the verify");
    }
}
