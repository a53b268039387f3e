//! The build pipeline: the I/O shell around `plan`, driving mmdebstrap, mke2fs, mkfs.vfat,
//! mtools, sfdisk and dd. Every stage is timed and shown on stderr.

use std::fs::{self, File};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use sha2::Digest;

use crate::config::{Resolved, Target};
use crate::disk::{self, Layout};
use crate::manifest::{self, Expect, ImageManifest};
use crate::plan::{self, BOOT_LABEL, DATA_LABEL, Plan, ROOT_LABEL};
use crate::tools;
use crate::update;

mod initramfs;
// The verifier's tests read archives made by the builder's own writer.
#[cfg(test)]
pub(crate) use initramfs::{Node, cpio_newc};

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("{0}")]
    Refused(String),
    #[error("stage {stage}: {message}")]
    Stage { stage: String, message: String },
}

pub struct Options {
    pub output: PathBuf,
    pub force: bool,
    pub player: Option<PathBuf>,
    pub agent: Option<PathBuf>,
    /// Workspace to build the player from when `player` is not given.
    pub workspace: Option<PathBuf>,
    pub cache: PathBuf,
    pub fresh_root: bool,
    pub keep_staging: bool,
    /// A cached base root older than this is rebuilt (it pins package versions).
    pub root_max_age: Duration,
}

/// The build's stages, in the order they run; the progress lines number them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    HostTools,
    PlayerBinaries,
    Binfmt,
    BaseRoot,
    Customize,
    BootFiles,
    FileSystems,
    DiskImage,
    Verify,
}

impl Stage {
    const ALL: [Stage; 9] = [
        Stage::HostTools,
        Stage::PlayerBinaries,
        Stage::Binfmt,
        Stage::BaseRoot,
        Stage::Customize,
        Stage::BootFiles,
        Stage::FileSystems,
        Stage::DiskImage,
        Stage::Verify,
    ];

    /// As the progress lines, the build log and the manifest's timings name it.
    fn name(self) -> &'static str {
        match self {
            Stage::HostTools => "host tools",
            Stage::PlayerBinaries => "player binaries",
            Stage::Binfmt => "binfmt",
            Stage::BaseRoot => "base root (mmdebstrap + initramfs)",
            Stage::Customize => "customize root",
            Stage::BootFiles => "boot partition files",
            Stage::FileSystems => "file systems",
            Stage::DiskImage => "disk image",
            Stage::Verify => "verify from the image file",
        }
    }

    /// "[3/9]": its place among all the stages.
    fn counter(self) -> String {
        let n = Stage::ALL.iter().position(|s| *s == self).unwrap_or(0) + 1;
        format!("[{n}/{}]", Stage::ALL.len())
    }
}

struct Progress {
    start: Instant,
    current: Option<(Stage, Instant)>,
    timings: Vec<(String, f64)>,
}

impl Progress {
    fn begin(&mut self, stage: Stage) {
        eprintln!("{} {} ...", stage.counter(), stage.name());
        self.current = Some((stage, Instant::now()));
    }
    fn end(&mut self, note: &str) {
        if let Some((stage, t)) = self.current.take() {
            let took = t.elapsed().as_secs_f64();
            eprintln!(
                "{} {}: done in {:.1} s{}{} (elapsed {:.0} s)",
                stage.counter(),
                stage.name(),
                took,
                if note.is_empty() { "" } else { ", " },
                note,
                self.start.elapsed().as_secs_f64()
            );
            self.timings.push((stage.name().to_string(), took));
        }
    }
    fn stage_name(&self) -> String {
        self.current
            .map(|(s, _)| s.name().to_string())
            .unwrap_or_default()
    }
}

struct Ctx {
    log_path: PathBuf,
    progress: Progress,
}

impl Ctx {
    fn fail(&self, message: impl Into<String>) -> BuildError {
        BuildError::Stage {
            stage: self.progress.stage_name(),
            message: message.into(),
        }
    }

    /// Runs a command with its output appended to the build log; on failure the error
    /// carries the log's last lines.
    fn run(&self, cmd: &mut Command) -> Result<(), BuildError> {
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .map_err(|e| self.fail(format!("{}: {e}", self.log_path.display())))?;
        let log2 = log.try_clone().map_err(|e| self.fail(e.to_string()))?;
        {
            let mut l = &log;
            let _ = writeln!(l, "\n$ {cmd:?}");
        }
        let status = cmd
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .status()
            .map_err(|e| self.fail(format!("cannot run {:?}: {e}", cmd.get_program())))?;
        if status.success() {
            return Ok(());
        }
        let text = fs::read_to_string(&self.log_path).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(25).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        Err(self.fail(format!(
            "{:?} failed ({status}); last lines of {}:\n{}",
            cmd.get_program(),
            self.log_path.display(),
            tail.join("\n")
        )))
    }

    /// Starts a command with its output to its own log, for work that runs beside the
    /// stages (the player's cross build beside the base root).
    fn spawn(&self, cmd: &mut Command, log_path: &Path) -> Result<Child, BuildError> {
        let log = fs::File::create(log_path)
            .map_err(|e| self.fail(format!("{}: {e}", log_path.display())))?;
        let log2 = log.try_clone().map_err(|e| self.fail(e.to_string()))?;
        {
            let mut l = &log;
            let _ = writeln!(l, "$ {cmd:?}");
        }
        cmd.stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .spawn()
            .map_err(|e| self.fail(format!("cannot run {:?}: {e}", cmd.get_program())))
    }

    fn io<T>(&self, what: &str, r: std::io::Result<T>) -> Result<T, BuildError> {
        r.map_err(|e| self.fail(format!("{what}: {e}")))
    }
}

/// Removes the staging directory unless asked to keep it.
struct Staging {
    dir: PathBuf,
    keep: bool,
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.keep {
            let _ = fs::remove_dir_all(&self.dir);
        } else {
            eprintln!("staging kept in {}", self.dir.display());
        }
    }
}

pub fn manifest_path(output: &Path) -> PathBuf {
    let mut s = output.as_os_str().to_owned();
    s.push(".manifest.json");
    PathBuf::from(s)
}

pub fn build(r: &Resolved, opts: &Options) -> Result<ImageManifest, BuildError> {
    let out = &opts.output;
    if out.exists() && !opts.force {
        return Err(BuildError::Refused(format!(
            "{} exists; pass --force to overwrite it",
            out.display()
        )));
    }
    let (out_dir, file_name, staging) = prepare_staging(out, opts)?;
    let log_path = out_dir.join(format!("{file_name}.build.log"));
    let _ = fs::remove_file(&log_path);
    eprintln!(
        "pfx-image: building {} ({}) -> {}; log: {}",
        r.source.display(),
        r.config.target,
        out.display(),
        log_path.display()
    );
    let mut cx = Ctx {
        log_path,
        progress: Progress {
            start: Instant::now(),
            current: None,
            timings: Vec::new(),
        },
    };

    let plan = read_plan(r)?;
    let target = plan.target;

    cx.progress.begin(Stage::HostTools);
    tools::check(target, opts.player.is_none()).map_err(|m| cx.fail(m))?;
    cx.progress.end("");

    // player (and agent): a cross build runs beside the base root (it is CPU, the base
    // root mostly emulated dpkg and downloads) and is waited for before customize.
    cx.progress.begin(Stage::PlayerBinaries);
    let mut bins = start_binaries(
        &cx,
        target,
        opts,
        &out_dir.join(format!("{file_name}.cargo.log")),
    )?;
    cx.progress.end(&bins.note());

    cx.progress.begin(Stage::Binfmt);
    let note = if target.arch() == "arm64" {
        ensure_binfmt().map_err(|m| cx.fail(m))?
    } else {
        "native".into()
    };
    cx.progress.end(&note);

    cx.progress.begin(Stage::BaseRoot);
    let root = staging.dir.join("root");
    let note = base_root(&cx, &plan, opts, &root)?;
    cx.progress.end(&note);

    cx.progress.begin(Stage::Customize);
    let (debs, note) = install_pfx(&cx, &plan, opts, &staging.dir, &root, &mut bins)?;
    cx.progress.end(&note);

    cx.progress.begin(Stage::BootFiles);
    let boot_dir = staging.dir.join("boot");
    boot_files(&cx, &plan, &root, &boot_dir)?;
    cx.progress.end("");

    cx.progress.begin(Stage::FileSystems);
    let (layout, images) = file_systems(&cx, &plan, &root, &boot_dir, &staging.dir)?;
    let [boot_img, root_img, data_img] = &images;
    cx.progress.end("");

    cx.progress.begin(Stage::DiskImage);
    let tmp_out = out_dir.join(format!(".{file_name}.partial"));
    assemble(&cx, &layout, boot_img, root_img, data_img, &tmp_out)?;
    cx.io("rename image", fs::rename(&tmp_out, out))?;
    cx.progress.end("");

    cx.progress.begin(Stage::Verify);
    let mut manifest = verify_output(&cx, &plan, out, &staging.dir)?;
    cx.progress.end("");
    manifest.build = Some(build_record(&cx, r, &plan, &debs));
    let json = serde_json::to_string_pretty(&manifest).map_err(|e| cx.fail(e.to_string()))?;
    let mpath = manifest_path(out);
    cx.io("write manifest", fs::write(&mpath, json + "\n"))?;
    eprintln!(
        "pfx-image: {} verified, manifest {} ({:.0} s)",
        out.display(),
        mpath.display(),
        cx.progress.start.elapsed().as_secs_f64()
    );
    Ok(manifest)
}

/// The customize stage: waits for the player binaries, packages them and installs them
/// with the image's own files into the root. Returns the packages and the stage's note.
fn install_pfx(
    cx: &Ctx,
    plan: &Plan,
    opts: &Options,
    staging: &Path,
    root: &Path,
    bins: &mut Binaries,
) -> Result<(Vec<Deb>, String), BuildError> {
    let (player, agent, note) = bins.finish(cx)?;
    if !note.is_empty() {
        eprintln!("    player binaries: {note}");
    }
    let agent = agent.ok_or_else(|| {
        cx.fail("no pfx-agent for the image: with --player, pass --agent too (the image installs the pfx-agent package)")
    })?;
    let debs = make_debs(cx, plan, opts, staging, &player, &agent)?;
    customize(cx, plan, root, &debs)?;
    let note = debs
        .iter()
        .map(|d| format!("{} {} installed with dpkg", d.package, d.version))
        .collect::<Vec<_>>()
        .join(", ");
    Ok((debs, note))
}

/// Verifies the image from its file alone; one that does not verify is renamed
/// `.img.unverified` (kept for inspection), never left as an output.
fn verify_output(
    cx: &Ctx,
    plan: &Plan,
    out: &Path,
    staging: &Path,
) -> Result<ImageManifest, BuildError> {
    let expect = Expect {
        target: plan.target,
        overlay: plan.overlay,
        hostname_prefix: Some(plan.hostname_prefix.clone()),
        pfx_version: plan::PFX_VERSION.to_string(),
    };
    match manifest::verify_image(out, &expect, staging) {
        Ok(m) => Ok(m),
        Err(e) => {
            // An image that cannot be verified is not an output.
            let bad = out.with_extension("img.unverified");
            let _ = fs::rename(out, &bad);
            Err(cx.fail(format!(
                "{e}\n(image kept as {} for inspection)",
                bad.display()
            )))
        }
    }
}

/// The three file systems, made from their directories without loop mounts: boot, root
/// and data (in that order), with the disk's layout they fit.
fn file_systems(
    cx: &Ctx,
    plan: &Plan,
    root: &Path,
    boot_dir: &Path,
    staging: &Path,
) -> Result<(Layout, [PathBuf; 3]), BuildError> {
    let layout = Layout::new(plan.image_size_mib, plan.boot_size_mib, plan.data_size_mib)
        .map_err(|m| cx.fail(m))?;
    let root_img = staging.join("root.ext4");
    let boot_img = staging.join("boot.vfat");
    let data_img = staging.join("data.ext4");
    make_filesystems(cx, &layout, root, boot_dir, &root_img, &boot_img)?;
    let store_gid = fleet_gid(cx, root)?;
    make_data_fs(cx, &layout, &staging.join("data"), &data_img, store_gid)?;
    Ok((layout, [boot_img, root_img, data_img]))
}

/// The plan, with the show and the profiles it names read in.
fn read_plan(r: &Resolved) -> Result<Plan, BuildError> {
    let show =
        fs::read(&r.show).map_err(|e| BuildError::Refused(format!("{}: {e}", r.show.display())))?;
    let mut profiles = Vec::new();
    for p in &r.profiles {
        let bytes =
            fs::read(p).map_err(|e| BuildError::Refused(format!("{}: {e}", p.display())))?;
        let name = p
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        profiles.push((name, bytes));
    }
    Ok(plan::plan(r, show, profiles))
}

/// The manifest's `build` record: where the image came from and how long each stage took.
fn build_record(cx: &Ctx, r: &Resolved, plan: &Plan, debs: &[Deb]) -> serde_json::Value {
    let timings: serde_json::Map<String, serde_json::Value> = cx
        .progress
        .timings
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::json!((v * 10.0).round() / 10.0)))
        .collect();
    serde_json::json!({
        "config": r.source.display().to_string(),
        "suite": plan.suite,
        "mirror": plan.mirror,
        "base_key": plan.base_key,
        "base_root": cx_note_base(cx),
        "built_at_unix": SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
        "builder": concat!("pfx-image ", env!("CARGO_PKG_VERSION")),
        "seconds_total": (cx.progress.start.elapsed().as_secs_f64() * 10.0).round() / 10.0,
        "stage_seconds": timings,
        "debs": debs,
    })
}

/// The output's directory and file name, and a fresh staging directory beside it.
fn prepare_staging(out: &Path, opts: &Options) -> Result<(PathBuf, String, Staging), BuildError> {
    let out_dir = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let file_name = out
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| "unit.img".into());
    let staging = Staging {
        dir: out_dir.join(format!(".{file_name}.staging")),
        keep: opts.keep_staging,
    };
    if staging.dir.exists() {
        fs::remove_dir_all(&staging.dir)
            .map_err(|e| BuildError::Refused(format!("{}: {e}", staging.dir.display())))?;
    }
    fs::create_dir_all(&staging.dir)
        .map_err(|e| BuildError::Refused(format!("{}: {e}", staging.dir.display())))?;
    Ok((out_dir, file_name, staging))
}

fn cx_note_base(cx: &Ctx) -> String {
    // The base-root stage's note is in the log; the timing tells hit from miss well enough.
    let t = cx
        .progress
        .timings
        .iter()
        .find(|(k, _)| k.starts_with("base root"))
        .map(|(_, v)| *v)
        .unwrap_or(0.0);
    format!("{t:.1} s")
}

fn workspace_root(opts: &Options) -> Option<PathBuf> {
    if let Some(w) = &opts.workspace {
        return Some(w.clone());
    }
    if let Ok(t) = std::env::var("PFX_TOP") {
        return Some(PathBuf::from(t));
    }
    let mut d = std::env::current_dir().ok()?;
    loop {
        if fs::read_to_string(d.join("Cargo.toml")).is_ok_and(|t| t.contains("[workspace]")) {
            return Some(d);
        }
        if !d.pop() {
            return None;
        }
    }
}

fn host_triple() -> &'static str {
    if cfg!(target_arch = "x86_64") {
        "x86_64-unknown-linux-gnu"
    } else {
        "aarch64-unknown-linux-gnu"
    }
}

/// The player binaries: given, or a cargo build under way.
enum Binaries {
    Given {
        player: PathBuf,
        agent: Option<PathBuf>,
    },
    Building {
        child: Option<Child>,
        started: Instant,
        dir: PathBuf,
        triple: &'static str,
        given_agent: Option<PathBuf>,
        log: PathBuf,
    },
}

impl Binaries {
    fn note(&self) -> String {
        match self {
            Binaries::Given { player, .. } => format!("given: {}", player.display()),
            Binaries::Building { triple, log, .. } => {
                format!(
                    "cargo build for {triple} started beside the next stages (log: {})",
                    log.display()
                )
            }
        }
    }

    /// Waits for the build and finds what it made.
    fn finish(&mut self, cx: &Ctx) -> Result<(PathBuf, Option<PathBuf>, String), BuildError> {
        // Its errors are the player stage's, whichever stage is running when it is collected.
        self.collect(cx).map_err(|e| match e {
            BuildError::Stage { message, .. } => BuildError::Stage {
                stage: Stage::PlayerBinaries.name().to_string(),
                message,
            },
            e => e,
        })
    }

    fn collect(&mut self, cx: &Ctx) -> Result<(PathBuf, Option<PathBuf>, String), BuildError> {
        match self {
            Binaries::Given { player, agent } => Ok((player.clone(), agent.clone(), String::new())),
            Binaries::Building {
                child,
                started,
                dir,
                triple,
                given_agent,
                log,
            } => {
                let waited = Instant::now();
                let status = match child.take() {
                    Some(mut c) => cx.io("wait for cargo", c.wait())?,
                    None => return Err(cx.fail("the player build was already collected")),
                };
                if !status.success() {
                    let text = fs::read_to_string(&*log).unwrap_or_default();
                    let tail: Vec<&str> = text.lines().rev().take(25).collect();
                    let tail: Vec<&str> = tail.into_iter().rev().collect();
                    return Err(cx.fail(format!(
                        "cargo build of the player failed ({status}); last lines of {}:\n{}\n\
                         (cross-compiling needs: rustup target add {triple}; apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross)",
                        log.display(),
                        tail.join("\n")
                    )));
                }
                let player = dir.join("pfx-player");
                if !player.is_file() {
                    return Err(
                        cx.fail(format!("cargo built, but {} is missing", player.display()))
                    );
                }
                let built_agent = dir.join("pfx-agent");
                let agent = match (&given_agent, built_agent.is_file()) {
                    (Some(a), _) => Some(a.clone()),
                    (None, true) => Some(built_agent),
                    (None, false) => None,
                };
                Ok((
                    player,
                    agent,
                    format!(
                        "{triple}, built in {:.0} s beside the base root (waited {:.0} s for it)",
                        started.elapsed().as_secs_f64(),
                        waited.elapsed().as_secs_f64()
                    ),
                ))
            }
        }
    }
}

impl Drop for Binaries {
    /// A build that fails elsewhere does not leave cargo running.
    fn drop(&mut self) {
        if let Binaries::Building { child: Some(c), .. } = self {
            // cargo's rustc children are in its process group (started as its leader).
            if let Ok(pid) = i32::try_from(c.id()) {
                // SAFETY: kill(2) with a negative pid signals that process group; no memory
                // is touched.
                unsafe {
                    libc::kill(-pid, libc::SIGKILL);
                }
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The player for the target: given, or built from the workspace (cross-compiled for arm64),
/// started now and collected by `Binaries::finish`.
fn start_binaries(
    cx: &Ctx,
    target: Target,
    opts: &Options,
    log: &Path,
) -> Result<Binaries, BuildError> {
    if let Some(p) = &opts.player {
        if !p.is_file() {
            return Err(cx.fail(format!("--player {}: no such file", p.display())));
        }
        return Ok(Binaries::Given {
            player: p.clone(),
            agent: opts.agent.clone(),
        });
    }
    let ws = workspace_root(opts)
        .ok_or_else(|| cx.fail("cannot find the pfx workspace (set PFX_TOP, or pass --player)"))?;
    let triple = target.rust_triple();
    let native = triple == host_triple();
    let mut cmd = Command::new("cargo");
    cmd.current_dir(&ws)
        .args(["build", "--release", "--locked", "-p", "pfx-player"]);
    // The image installs the pfx-agent package too: the fleet crate's unit-side agent.
    cmd.args([
        "-p",
        "pfx-fleet",
        "--bin",
        "pfx-agent",
        "--bin",
        "pfx-player",
    ]);
    if !native {
        // A target dir in the cache, outside the checkout: the cross-compiled dependencies
        // outlive a fresh CI clone (only the workspace's own crates rebuild).
        cmd.args(["--target", triple])
            .arg("--target-dir")
            .arg(opts.cache.join("cargo-target"));
        let var = format!(
            "CARGO_TARGET_{}_LINKER",
            triple.to_uppercase().replace('-', "_")
        );
        if std::env::var_os(&var).is_none() {
            cmd.env(&var, "aarch64-linux-gnu-gcc");
        }
    }
    let dir = if native {
        ws.join("target/release")
    } else {
        opts.cache.join("cargo-target").join(triple).join("release")
    };
    // Its own process group, so a failed build can stop cargo and every rustc it started.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let child = cx.spawn(&mut cmd, log)?;
    Ok(Binaries::Building {
        child: Some(child),
        started: Instant::now(),
        dir,
        triple,
        given_agent: opts.agent.clone(),
        log: log.to_path_buf(),
    })
}

/// Registers qemu-aarch64 with binfmt_misc when missing: a fresh Debian host has binfmt_misc
/// unmounted and no update-binfmts, so mmdebstrap could not run arm64 maintainer scripts.
fn ensure_binfmt() -> Result<String, String> {
    let bm = Path::new("/proc/sys/fs/binfmt_misc");
    if bm.join("qemu-aarch64").exists() {
        return Ok("qemu-aarch64 already registered".into());
    }
    if !bm.join("register").exists() {
        let st = Command::new("mount")
            .args(["-t", "binfmt_misc", "binfmt_misc"])
            .arg(bm)
            .status()
            .map_err(|e| format!("mount binfmt_misc: {e}"))?;
        if !st.success() {
            return Err("cannot mount binfmt_misc on /proc/sys/fs/binfmt_misc (needs root)".into());
        }
    }
    let conf = Path::new("/usr/lib/binfmt.d/qemu-aarch64.conf");
    let line = fs::read_to_string(conf)
        .map_err(|e| format!("{}: {e} (apt-get install qemu-user-static)", conf.display()))?;
    let line = line
        .lines()
        .find(|l| l.starts_with(':'))
        .ok_or_else(|| format!("{}: no registration line", conf.display()))?;
    fs::write(bm.join("register"), line)
        .map_err(|e| format!("registering qemu-aarch64 with binfmt_misc: {e}"))?;
    Ok("registered qemu-aarch64".into())
}

fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The base root: a cached copy when one exists for this exact recipe, else mmdebstrap with
/// the .deb cache, initramfs generation deferred to one run at the end, its kernel-module
/// part built natively (initramfs.rs).
/// A cached root under the key, complete and younger than the age limit.
fn cached_root(opts: &Options, key: &str) -> Option<PathBuf> {
    let dir = opts.cache.join("roots").join(key);
    let fresh = fs::metadata(dir.join(".pfx-complete"))
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age < opts.root_max_age);
    (fresh && !opts.fresh_root).then_some(dir)
}

fn copy_cached(cx: &Ctx, cached: &Path, root: &Path) -> Result<(), BuildError> {
    cx.run(Command::new("cp").arg("-a").arg(cached).arg(root))?;
    let _ = fs::remove_file(root.join(".pfx-complete"));
    Ok(())
}

/// Saves `root` as the cached root of `key`; the marker is written last and the directory
/// renamed into place, so a build killed half-way leaves no root that looks complete.
fn save_root(cx: &Ctx, opts: &Options, key: &str, root: &Path) -> Result<(), BuildError> {
    let roots = opts.cache.join("roots");
    let tmp = roots.join(format!("{key}.tmp"));
    let dir = roots.join(key);
    let _ = fs::remove_dir_all(&tmp);
    let _ = fs::remove_dir_all(&dir);
    cx.io("create root cache", fs::create_dir_all(&roots))?;
    cx.run(Command::new("cp").arg("-a").arg(root).arg(&tmp))?;
    cx.io(
        "root cache marker",
        fs::write(tmp.join(".pfx-complete"), format!("{key}\n")),
    )?;
    cx.io("root cache rename", fs::rename(&tmp, &dir))
}

/// The base root: cached under `base_key`; else, with extra packages, the target's own root
/// (cached under `core_key`, or made) plus an apt layer; else a fresh mmdebstrap.
fn base_root(cx: &Ctx, plan: &Plan, opts: &Options, root: &Path) -> Result<String, BuildError> {
    if let Some(cached) = cached_root(opts, &plan.base_key) {
        copy_cached(cx, &cached, root)?;
        return Ok(format!("cached base root {}", &plan.base_key[..12]));
    }
    if plan.extra_packages.is_empty() {
        fresh_root(cx, plan, opts, root, &plan.packages)?;
        save_root(cx, opts, &plan.base_key, root)?;
        return Ok(format!("built and cached as {}", &plan.base_key[..12]));
    }
    let core = match cached_root(opts, &plan.core_key) {
        Some(cached) => {
            copy_cached(cx, &cached, root)?;
            format!("cached core root {}", &plan.core_key[..12])
        }
        None => {
            let core_packages: Vec<String> = plan
                .packages
                .iter()
                .filter(|p| !plan.extra_packages.contains(p))
                .cloned()
                .collect();
            fresh_root(cx, plan, opts, root, &core_packages)?;
            save_root(cx, opts, &plan.core_key, root)?;
            format!("core root built and cached as {}", &plan.core_key[..12])
        }
    };
    let t = Instant::now();
    extra_layer(cx, plan, opts, root)?;
    let layer_s = t.elapsed().as_secs_f64();
    save_root(cx, opts, &plan.base_key, root)?;
    Ok(format!(
        "{core}; + {} in {layer_s:.0} s; cached as {}",
        plan.extra_packages.join(" "),
        &plan.base_key[..12]
    ))
}

/// Installs the config's extra packages into a copy of the target's own root, as mmdebstrap
/// would have: recommends off, update-initramfs deferred to one run at the end (it is minutes
/// per run under qemu-user), the .deb cache shared with mmdebstrap's, apt's lists removed.
/// The initramfs is always made again: a package can change what its hooks find (a `zstd`
/// changes the compression, an `fsck.*` is copied in).
fn extra_layer(cx: &Ctx, plan: &Plan, opts: &Options, root: &Path) -> Result<(), BuildError> {
    let debs = opts
        .cache
        .join("debs")
        .join(format!("{}-{}", plan.suite, plan.arch));
    cx.io("create deb cache", fs::create_dir_all(&debs))?;
    let archives = root.join("var/cache/apt/archives");
    cx.io("create the root's apt cache", fs::create_dir_all(&archives))?;
    let debs_s = sh_quote(&debs.display().to_string());
    let archives_s = sh_quote(&archives.display().to_string());
    cx.run(Command::new("sh").arg("-c").arg(format!(
        "find {debs_s} -maxdepth 1 -name '*.deb' -exec cp -t {archives_s} {{}} +"
    )))?;
    // apt needs a resolver inside the root; the root's own resolv.conf (often a symlink into
    // /run) is put back afterwards.
    let resolv = root.join("etc/resolv.conf");
    let saved = root.join("etc/resolv.conf.pfx-layer");
    let had_resolv = fs::symlink_metadata(&resolv).is_ok();
    if had_resolv {
        cx.io("set aside resolv.conf", fs::rename(&resolv, &saved))?;
    }
    let host_resolv = fs::read("/etc/resolv.conf").unwrap_or_default();
    cx.io("write resolv.conf", fs::write(&resolv, host_resolv))?;
    let names: Vec<String> = plan.extra_packages.iter().map(|p| sh_quote(p)).collect();
    let script = format!(
        "dpkg-divert --quiet --local --rename --add /usr/sbin/update-initramfs; \
         printf '#!/bin/sh\\necho \"pfx: update-initramfs deferred\"\\n' > /usr/sbin/update-initramfs; \
         chmod 755 /usr/sbin/update-initramfs; \
         apt-get -q -o Acquire::Retries=3 update; \
         DEBIAN_FRONTEND=noninteractive apt-get -q -y -o APT::Install-Recommends=0 install {}; \
         rm -f /usr/sbin/update-initramfs; \
         dpkg-divert --quiet --local --rename --remove /usr/sbin/update-initramfs",
        names.join(" ")
    );
    let installed = in_chroot(cx, root, &script);
    let _ = fs::remove_file(&resolv);
    if had_resolv {
        cx.io("restore resolv.conf", fs::rename(&saved, &resolv))?;
    }
    installed.map_err(|e| {
        cx.fail(format!(
            "{e}\n(installing packages: [{}] into the cached root failed; check the names against the suite {}, or pass --fresh-root)",
            plan.extra_packages.join(", "),
            plan.suite
        ))
    })?;
    cx.run(Command::new("sh").arg("-c").arg(format!(
        "find {archives_s} -maxdepth 1 -name '*.deb' -exec cp -n -t {debs_s} {{}} + ; \
         rm -f {archives_s}/*.deb {r}/var/cache/apt/*.bin; rm -rf {r}/var/lib/apt/lists/*_Packages",
        r = sh_quote(&root.display().to_string())
    )))?;
    let scratch = root
        .parent()
        .ok_or_else(|| cx.fail("the root has no parent directory"))?;
    let t = Instant::now();
    let (appended, emulated_s) = if plan.arch == "arm64" {
        initramfs::generate(cx, root, scratch)?
    } else {
        in_chroot(cx, root, "update-initramfs -u -k all")?;
        (Vec::new(), t.elapsed().as_secs_f64())
    };
    eprintln!(
        "    layer: initramfs again {:.1} s (emulated part {emulated_s:.1} s, {} kernels)",
        t.elapsed().as_secs_f64(),
        appended.len().max(1)
    );
    Ok(())
}

/// The image's initramfs-tools hook (plan::INITRAMFS_HOOK), before the root's one
/// initramfs run. It stays in the root, so a later `update-initramfs` keeps the rule.
fn install_initramfs_hook(cx: &Ctx, root: &Path) -> Result<(), BuildError> {
    let (path, text) = plan::INITRAMFS_HOOK;
    write_file(cx, root, path, 0o755, text.as_bytes())
}

/// The stamps systemd-update-done leaves in /etc and /var: "this directory is as new as
/// /usr". Without them every boot of the read-only image counts as the first after an
/// update (the overlay forgets whatever a boot writes), and the units with
/// `ConditionNeedsUpdate=` (systemd-sysusers, ahead of the data partition's check) run each
/// time, though the build already made the users. Written as the tool writes them: its
/// timestamp and /usr's modification time. The last step of the customisation, after
/// everything that changes /usr.
fn write_update_stamps(cx: &Ctx, root: &Path) -> Result<(), BuildError> {
    let usr = cx.io("stat /usr", fs::metadata(root.join("usr")))?;
    let mtime = cx.io("/usr's modification time", usr.modified())?;
    let nsec = mtime
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_err(|e| cx.fail(format!("/usr's modification time is before 1970: {e}")))?
        .as_nanos();
    let text = format!(
        "# This file was created by pfx-image, as systemd-update-done writes it. Its only\n\
         # purpose is to hold a timestamp of the time this directory\n\
         # was updated. See man:systemd-update-done.service(8).\n\
         TIMESTAMP_NSEC={nsec}\n"
    );
    for dir in ["etc", "var"] {
        write_file(
            cx,
            root,
            &format!("/{dir}/.updated"),
            0o644,
            text.as_bytes(),
        )?;
        let path = root.join(dir).join(".updated");
        let f = cx.io(
            &format!("open /{dir}/.updated"),
            File::options().write(true).open(&path),
        )?;
        cx.io(
            &format!("set the time of /{dir}/.updated"),
            f.set_modified(mtime),
        )?;
    }
    Ok(())
}

/// mmdebstrap of `packages`, then the one initramfs run.
fn fresh_root(
    cx: &Ctx,
    plan: &Plan,
    opts: &Options,
    root: &Path,
    packages: &[String],
) -> Result<(), BuildError> {
    let debs = opts
        .cache
        .join("debs")
        .join(format!("{}-{}", plan.suite, plan.arch));
    cx.io("create deb cache", fs::create_dir_all(&debs))?;
    let debs_s = debs.display().to_string();
    let sources = apt_sources(plan, packages);
    let mmdebstrap_s = run_mmdebstrap(cx, plan, root, packages, &debs_s, &sources)?;
    let (appended, emulated_s, initramfs_s) = first_initramfs(cx, plan, root)?;
    eprintln!(
        "    mmdebstrap {mmdebstrap_s:.1} s; initramfs {initramfs_s:.1} s (emulated part {emulated_s:.1} s); {}",
        appended_summary(&appended).join("; ")
    );
    Ok(())
}

/// The apt sources of a fresh root: the suite, its updates, the suites `NAME/SUITE`
/// packages ask for, and security when the mirror is Debian's layout.
fn apt_sources(plan: &Plan, packages: &[String]) -> Vec<String> {
    let mut sources = vec![format!(
        "deb {} {} {}",
        plan.mirror,
        plan.suite,
        plan.components.join(" ")
    )];
    sources.push(format!(
        "deb {} {}-updates {}",
        plan.mirror,
        plan.suite,
        plan.components.join(" ")
    ));
    // The suites that `NAME/SUITE` packages ask for (plan::backported).
    let mut extra_suites: Vec<&str> = packages
        .iter()
        .filter_map(|p| plan::package_suite(p))
        .collect();
    extra_suites.sort();
    extra_suites.dedup();
    for s in extra_suites {
        sources.push(format!(
            "deb {} {s} {}",
            plan.mirror,
            plan.components.join(" ")
        ));
    }
    if let Some(sec) = plan
        .mirror
        .strip_suffix("/debian")
        .map(|m| format!("{m}/debian-security"))
    {
        sources.push(format!(
            "deb {sec} {}-security {}",
            plan.suite,
            plan.components.join(" ")
        ));
    }
    sources
}

/// mmdebstrap itself, with update-initramfs diverted while packages install and the deb
/// cache synced in and out; the seconds it took.
fn run_mmdebstrap(
    cx: &Ctx,
    plan: &Plan,
    root: &Path,
    packages: &[String],
    debs_s: &str,
    sources: &[String],
) -> Result<f64, BuildError> {
    let divert = "chroot \"$1\" dpkg-divert --quiet --local --rename --add /usr/sbin/update-initramfs \
                  && printf '#!/bin/sh\\necho \"pfx: update-initramfs deferred\"\\n' > \"$1/usr/sbin/update-initramfs\" \
                  && chmod 755 \"$1/usr/sbin/update-initramfs\"";
    // The one real initramfs run comes after mmdebstrap (initramfs::generate).
    let undivert = "rm -f \"$1/usr/sbin/update-initramfs\" \
                    && chroot \"$1\" dpkg-divert --quiet --local --rename --remove /usr/sbin/update-initramfs";
    let mut cmd = Command::new("mmdebstrap");
    cmd.args([
        "--mode=root",
        "--variant=minbase",
        &format!("--arch={}", plan.arch),
        &format!("--include={}", packages.join(",")),
        "--skip=essential/unlink",
        "--aptopt=Acquire::Retries \"3\"",
        // Every package runs update-initramfs; under qemu-user one run takes minutes, so
        // the runs are diverted to a no-op and done once, at the end, with busybox present.
        &format!("--essential-hook={divert}"),
        "--setup-hook=mkdir -p \"$1/var/cache/apt/archives\"",
        &format!("--setup-hook=sync-in {} /var/cache/apt/archives/", sh_quote(debs_s)),
        &format!("--customize-hook=sync-out /var/cache/apt/archives {}", sh_quote(debs_s)),
        "--customize-hook=rm -f \"$1\"/var/cache/apt/archives/*.deb \"$1\"/var/cache/apt/*.bin; rm -rf \"$1\"/var/lib/apt/lists/*_Packages",
        &format!("--customize-hook={undivert}"),
        &plan.suite,
    ]);
    cmd.arg(root);
    cmd.args(sources);
    let t = Instant::now();
    cx.run(&mut cmd)?;
    Ok(t.elapsed().as_secs_f64())
}

/// The one initramfs run, after mmdebstrap: what was appended natively, the emulated
/// part's seconds and the whole run's seconds.
fn first_initramfs(
    cx: &Ctx,
    plan: &Plan,
    root: &Path,
) -> Result<(Vec<initramfs::Appended>, f64, f64), BuildError> {
    let scratch = root
        .parent()
        .ok_or_else(|| cx.fail("the root has no parent directory"))?;
    install_initramfs_hook(cx, root)?;
    let t = Instant::now();
    let (appended, emulated_s) = if plan.arch == "arm64" {
        initramfs::generate(cx, root, scratch)?
    } else {
        // Native: mkinitramfs is quick as it is.
        in_chroot(cx, root, "update-initramfs -c -k all")?;
        (Vec::new(), t.elapsed().as_secs_f64())
    };
    let initramfs_s = t.elapsed().as_secs_f64();
    Ok((appended, emulated_s, initramfs_s))
}

/// One phrase per kernel of what the native step appended to its initramfs.
fn appended_summary(appended: &[initramfs::Appended]) -> Vec<String> {
    appended
        .iter()
        .map(|a| {
            format!(
                "{}: {} modules + {} firmware files appended natively ({} KiB)",
                a.version,
                a.modules,
                a.firmware,
                a.bytes / 1024
            )
        })
        .collect()
}

fn write_file(
    cx: &Ctx,
    root: &Path,
    path: &str,
    mode: u32,
    contents: &[u8],
) -> Result<(), BuildError> {
    let p = root.join(path.trim_start_matches('/'));
    if let Some(d) = p.parent() {
        cx.io(&format!("mkdir {}", d.display()), fs::create_dir_all(d))?;
    }
    // Never write through a symlink into the build host.
    if p.is_symlink() {
        cx.io(&format!("remove {}", p.display()), fs::remove_file(&p))?;
    }
    cx.io(&format!("write {}", p.display()), fs::write(&p, contents))?;
    cx.io(
        &format!("chmod {}", p.display()),
        fs::set_permissions(&p, fs::Permissions::from_mode(mode)),
    )
}

fn kernel_version(cx: &Ctx, root: &Path) -> Result<String, BuildError> {
    let dir = root.join("usr/lib/modules");
    let mut v: Vec<String> = cx
        .io("list kernel modules", fs::read_dir(&dir))?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    v.sort();
    v.pop()
        .ok_or_else(|| cx.fail(format!("no kernel in {}", dir.display())))
}

/// Runs a command chrooted into `root` with /proc, /sys and /dev mounted in a private mount
/// namespace, so nothing leaks onto the host even if the build dies.
fn in_chroot(cx: &Ctx, root: &Path, script: &str) -> Result<(), BuildError> {
    let r = sh_quote(&root.display().to_string());
    let full = format!(
        "set -e; mount -t proc proc {r}/proc; mount -t sysfs sys {r}/sys; mount --rbind /dev {r}/dev; \
         chroot {r} /bin/sh -ec {}",
        sh_quote(script)
    );
    cx.run(Command::new("unshare").args([
        "--mount",
        "--propagation",
        "private",
        "--",
        "sh",
        "-c",
        &full,
    ]))
}

/// Adds the fleet account (plan::add_fleet_account) to the root's account files.
fn fleet_account(cx: &Ctx, root: &Path) -> Result<(), BuildError> {
    let read = |p: &str| fs::read_to_string(root.join(p));
    let passwd = cx.io("read /etc/passwd", read("etc/passwd"))?;
    let group = cx.io("read /etc/group", read("etc/group"))?;
    let shadow = cx.io("read /etc/shadow", read("etc/shadow"))?;
    let gshadow = read("etc/gshadow").ok();
    let (p, g, s, gs) = plan::add_fleet_account(&passwd, &group, &shadow, gshadow.as_deref())
        .map_err(|m| cx.fail(m))?;
    write_file(cx, root, "/etc/passwd", 0o644, p.as_bytes())?;
    write_file(cx, root, "/etc/group", 0o644, g.as_bytes())?;
    write_file(cx, root, "/etc/shadow", 0o640, s.as_bytes())?;
    if let Some(gs) = gs {
        write_file(cx, root, "/etc/gshadow", 0o640, gs.as_bytes())?;
    }
    // Root's, read-only to the account: it has nothing to write.
    let home = root.join(plan::FLEET_HOME.trim_start_matches('/'));
    cx.io("mkdir the fleet account's home", fs::create_dir_all(&home))?;
    cx.io(
        "chmod the fleet account's home",
        fs::set_permissions(&home, fs::Permissions::from_mode(0o755)),
    )
}

/// A workspace package for the image, as scripts/build-deb made it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Deb {
    pub package: String,
    pub version: String,
    pub arch: String,
    pub sha256: String,
    /// Its non-directory paths, as dpkg-deb lists them.
    #[serde(skip)]
    pub files: Vec<String>,
    #[serde(skip)]
    pub conffiles: Vec<String>,
    #[serde(skip)]
    pub path: PathBuf,
}

impl Ctx {
    /// A command's stdout (its stderr to the build log), for commands that answer.
    fn output(&self, cmd: &mut Command) -> Result<String, BuildError> {
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .map_err(|e| self.fail(format!("{}: {e}", self.log_path.display())))?;
        {
            let mut l = &log;
            let _ = writeln!(l, "\n$ {cmd:?}");
        }
        let out = cmd
            .stdin(Stdio::null())
            .stderr(log)
            .output()
            .map_err(|e| self.fail(format!("cannot run {:?}: {e}", cmd.get_program())))?;
        if !out.status.success() {
            return Err(self.fail(format!(
                "{cmd:?} failed ({}); see {}",
                out.status,
                self.log_path.display()
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// The image's packages (plan::PFX_PACKAGES) from the build's binaries, by the workspace's
/// scripts/build-deb: the same packaging a unit already running installs, made again for
/// every build (the binaries change; the cached base root never holds them).
fn make_debs(
    cx: &Ctx,
    plan: &Plan,
    opts: &Options,
    staging: &Path,
    player: &Path,
    agent: &Path,
) -> Result<Vec<Deb>, BuildError> {
    let ws = workspace_root(opts).ok_or_else(|| {
        cx.fail("cannot find the pfx workspace for scripts/build-deb (set PFX_TOP, or pass --workspace)")
    })?;
    let script = ws.join("scripts/build-deb");
    if !script.is_file() {
        return Err(cx.fail(format!(
            "{} missing: the image's packages are made by it (is {} the pfx workspace?)",
            script.display(),
            ws.display()
        )));
    }
    let bin = staging.join("bin");
    let out = staging.join("debs");
    for d in [&bin, &out] {
        let _ = fs::remove_dir_all(d);
        cx.io(&format!("mkdir {}", d.display()), fs::create_dir_all(d))?;
    }
    for (name, from) in [("pfx-player", player), ("pfx-agent", agent)] {
        let from = cx.io(&format!("find {}", from.display()), fs::canonicalize(from))?;
        cx.io(
            &format!("link {name}"),
            std::os::unix::fs::symlink(&from, bin.join(name)),
        )?;
    }
    cx.run(
        Command::new("bash")
            .arg(&script)
            .args(["--arch", plan.arch, "--version", plan::PFX_VERSION])
            .arg("--bin-dir")
            .arg(&bin)
            .arg("--out")
            .arg(&out)
            .args(["--packages", &plan::PFX_PACKAGES.join(",")])
            .current_dir(&ws)
            .env("PFX_TOP", &ws),
    )?;
    let mut debs = Vec::new();
    for pkg in plan::PFX_PACKAGES {
        let path = out.join(format!("{pkg}_{}_{}.deb", plan::PFX_VERSION, plan.arch));
        let fields = cx.output(
            Command::new("dpkg-deb")
                .arg("--showformat=${Package}\t${Version}\t${Architecture}\n")
                .arg("--show")
                .arg(&path),
        )?;
        let f: Vec<&str> = fields.trim().split('\t').collect();
        if f.len() != 3 || f[0] != *pkg || f[1] != plan::PFX_VERSION || f[2] != plan.arch {
            return Err(cx.fail(format!(
                "{} says {:?}, expected {pkg} {} {}",
                path.display(),
                fields.trim(),
                plan::PFX_VERSION,
                plan.arch
            )));
        }
        let listing = cx.output(Command::new("dpkg-deb").arg("--contents").arg(&path))?;
        let files = deb_listing_files(&listing);
        // No conffiles member is no conffiles.
        let conffiles = Command::new("dpkg-deb")
            .arg("--info")
            .arg(&path)
            .arg("conffiles")
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .map(|l| l.trim().to_string())
                    .filter(|l| !l.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        let bytes = cx.io(&format!("read {}", path.display()), fs::read(&path))?;
        debs.push(Deb {
            package: pkg.to_string(),
            version: f[1].to_string(),
            arch: f[2].to_string(),
            sha256: plan::hex(&sha2::Sha256::digest(&bytes)),
            files,
            conffiles,
            path,
        });
    }
    Ok(debs)
}

/// The non-directory paths of a `dpkg-deb --contents` listing (tar's verbose format).
pub(crate) fn deb_listing_files(listing: &str) -> Vec<String> {
    listing
        .lines()
        .filter(|l| !l.starts_with('d'))
        .filter_map(|l| {
            // perms owner size date time path [-> target]
            let path = l.split_whitespace().nth(5)?;
            Some(plan::merged_usr(path))
        })
        .collect()
}

fn customize(cx: &Ctx, plan: &Plan, root: &Path, debs: &[Deb]) -> Result<(), BuildError> {
    let conffiles: Vec<String> = debs
        .iter()
        .flat_map(|d| d.conffiles.iter().map(|c| plan::merged_usr(c)))
        .collect();
    let packaged: Vec<(String, Vec<String>)> = debs
        .iter()
        .map(|d| (d.package.clone(), d.files.clone()))
        .collect();
    let image_paths: Vec<String> = plan.files.iter().map(|f| f.path.clone()).collect();
    plan::check_no_overlap(&image_paths, &packaged, &conffiles).map_err(|m| cx.fail(m))?;
    let is_conffile = |f: &plan::FileSpec| conffiles.contains(&plan::merged_usr(&f.path));
    // The image's own files first: the package's postinst reads /etc/fstab (the data
    // partition's mount point gets no store marker) and finds the fleet account's group.
    for f in plan.files.iter().filter(|f| !is_conffile(f)) {
        write_file(cx, root, &f.path, f.mode, &f.contents)?;
    }
    fleet_account(cx, root)?;
    let ssh = root.join("root/.ssh");
    if ssh.exists() {
        cx.io(
            "chmod /root/.ssh",
            fs::set_permissions(&ssh, fs::Permissions::from_mode(0o700)),
        )?;
    }
    install_debs(cx, root, debs)?;
    // A conffile the image sets (the config's show): after dpkg, as an operator's edit.
    for f in plan.files.iter().filter(|f| is_conffile(f)) {
        write_file(cx, root, &f.path, f.mode, &f.contents)?;
    }
    // Host keys are made per unit on its first boot (pfx-ssh-hostkeys), never shared.
    if let Ok(rd) = fs::read_dir(root.join("etc/ssh")) {
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().starts_with("ssh_host_") {
                cx.io("remove ssh host key", fs::remove_file(e.path()))?;
            }
        }
    }
    units(cx, root)?;
    write_update_stamps(cx, root)
}

/// The pfx packages, installed with dpkg in the root (emulated for arm64: seconds). Their
/// maintainer scripts see no running systemd and only make links.
fn install_debs(cx: &Ctx, root: &Path, debs: &[Deb]) -> Result<(), BuildError> {
    let inbox = root.join("tmp/pfx-debs");
    cx.io("mkdir /tmp/pfx-debs", fs::create_dir_all(&inbox))?;
    let mut names = Vec::new();
    for d in debs {
        let name = d
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        cx.io(
            &format!("copy {name} into the root"),
            fs::copy(&d.path, inbox.join(&name)).map(|_| ()),
        )?;
        names.push(sh_quote(&format!("/tmp/pfx-debs/{name}")));
    }
    let installed = in_chroot(
        cx,
        root,
        &format!(
            "export DEBIAN_FRONTEND=noninteractive; dpkg --install {}",
            names.join(" ")
        ),
    );
    let _ = fs::remove_dir_all(&inbox);
    installed?;
    Ok(())
}

/// Enables and masks the units and masks the generators (only symlinks: the host's
/// systemctl does it offline, no emulation), then has systemd check the pfx units.
fn units(cx: &Ctx, root: &Path) -> Result<(), BuildError> {
    let mut cmd = Command::new("systemctl");
    cmd.arg(format!("--root={}", root.display()))
        .arg("enable")
        .args(plan::ENABLED_UNITS);
    cx.run(&mut cmd)?;
    let mut cmd = Command::new("systemctl");
    cmd.arg(format!("--root={}", root.display()))
        .arg("mask")
        .args(plan::MASKED_UNITS);
    cx.run(&mut cmd)?;
    let generators = root.join("etc/systemd/system-generators");
    cx.io(
        "create /etc/systemd/system-generators",
        fs::create_dir_all(&generators),
    )?;
    for g in plan::MASKED_GENERATORS {
        let link = generators.join(g);
        let _ = fs::remove_file(&link);
        cx.io(
            &format!("mask the generator {g}"),
            std::os::unix::fs::symlink("/dev/null", &link),
        )?;
    }
    let mut cmd = Command::new("systemd-analyze");
    cmd.arg("verify").arg(format!("--root={}", root.display()));
    cmd.args([
        "pfx-player.service",
        "pfx-eth-no-pause@eth0.service",
        "pfx-hostname.service",
        "pfx-ssh-hostkeys.service",
        "pfx-data-grow.service",
        "pfx-data-absent.service",
    ]);
    cx.run(&mut cmd)
}

/// Fills the FAT partition's directory: for the arm64 targets raspi-firmware's own kernel
/// hook writes config.txt/cmdline.txt from /etc/default/raspi-firmware* (then our z51 hook
/// drops `rw`); for vm-amd64 we copy kernel and initramfs and write cmdline.txt.
fn boot_files(cx: &Ctx, plan: &Plan, root: &Path, boot_dir: &Path) -> Result<(), BuildError> {
    let kver = kernel_version(cx, root)?;
    let fw = root.join("boot/firmware");
    cx.io("mkdir /boot/firmware", fs::create_dir_all(&fw))?;
    if plan.target.uses_raspi_firmware() {
        in_chroot(
            cx,
            root,
            &format!(
                // As raspi-firmware's own initramfs post-update hook calls it (without
                // DEB_MAINT_PARAMS=configure the hook exits doing nothing).
                "export DEB_MAINT_PARAMS=configure; /etc/kernel/postinst.d/z50-raspi-firmware {kver} /boot/vmlinuz-{kver}; \
                 /etc/kernel/postinst.d/z51-pfx-cmdline {kver} /boot/vmlinuz-{kver}"
            ),
        )?;
    } else {
        let copy = |from: &str, to: &str| -> Result<(), BuildError> {
            cx.io(
                &format!("copy {from}"),
                fs::copy(root.join(from), fw.join(to)).map(|_| ()),
            )
        };
        copy(&format!("boot/vmlinuz-{kver}"), "vmlinuz")?;
        copy(&format!("boot/initrd.img-{kver}"), "initrd.img")?;
        let line = format!(
            "console=tty0 console=ttyS0,115200 root=LABEL={ROOT_LABEL} fsck.repair=yes net.ifnames=0 rootwait {}\n",
            plan.extra_cmdline
        );
        cx.io("write cmdline.txt", fs::write(fw.join("cmdline.txt"), line))?;
    }
    ab_boot_files(cx, plan, root, &fw, &kver)?;
    // The FAT partition gets these files; the root keeps an empty mount point.
    cx.io("move boot files", fs::rename(&fw, boot_dir))?;
    cx.io("mkdir /boot/firmware", fs::create_dir_all(&fw))?;
    Ok(())
}

/// The A/B parts of the boot: U-Boot's script and the boot environment on the FAT
/// partition, U-Boot itself on a Pi (config.txt starts it instead of the kernel), and in the
/// root slot its own kernel, initramfs and command line, which the script loads from
/// whichever slot it boots (docs/update.md, "Booting a slot").
fn ab_boot_files(
    cx: &Ctx,
    plan: &Plan,
    root: &Path,
    fw: &Path,
    kver: &str,
) -> Result<(), BuildError> {
    slot_boot_files(cx, root, fw, kver)?;
    uboot_script_and_env(cx, plan, fw)?;
    if plan.target.uses_raspi_firmware() {
        pi_uboot_files(cx, root, fw)?;
    }
    Ok(())
}

/// The root slot's own command line, kernel and initramfs links, and the FAT's
/// cmdline.txt rewritten to name slot A.
fn slot_boot_files(cx: &Ctx, root: &Path, fw: &Path, kver: &str) -> Result<(), BuildError> {
    // The slot's kernel command line: the one the FAT's cmdline.txt carries (raspi-firmware's
    // generated line after z51, or the VM's), less its root=, which the script sets to the
    // booted slot. `panic=10`: a kernel that panics during a trial boot restarts, so the trial
    // ends and the other slot boots, instead of hanging until the watchdog.
    let fat_line = cx.io(
        "read cmdline.txt",
        fs::read_to_string(fw.join("cmdline.txt")),
    )?;
    let words: Vec<&str> = fat_line
        .split_whitespace()
        .filter(|w| !w.starts_with("root=") && !w.starts_with("panic="))
        .collect();
    let slot_words = format!("{} panic=10", words.join(" "));
    let boot = root.join("boot");
    cx.io(
        "write the slot's command line",
        fs::write(
            root.join(update::SLOT_CMDLINE.trim_start_matches('/')),
            format!("{slot_words}\n"),
        ),
    )?;
    for (link, to) in [
        ("vmlinuz", format!("vmlinuz-{kver}")),
        ("initrd.img", format!("initrd.img-{kver}")),
    ] {
        let l = boot.join(link);
        let _ = fs::remove_file(&l);
        cx.io(
            &format!("link /boot/{link}"),
            std::os::unix::fs::symlink(&to, &l),
        )?;
    }
    // The FAT's cmdline.txt (the VM's direct -kernel boot, and a Pi whose config.txt is put
    // back to start the kernel by hand) names slot A the way the script would.
    let direct = update::slot_cmdline(&slot_words, disk::PART_ROOT_A).map_err(|m| cx.fail(m))?;
    cx.io(
        "write cmdline.txt",
        fs::write(fw.join("cmdline.txt"), format!("{direct}\n")),
    )?;
    Ok(())
}

/// U-Boot's compiled boot script and the two copies of its environment, on the FAT.
fn uboot_script_and_env(cx: &Ctx, plan: &Plan, fw: &Path) -> Result<(), BuildError> {
    // The boot script, compiled by mkimage (u-boot-tools), and the two environment copies.
    let cmd_path = fw.join("boot.cmd");
    cx.io("write boot.cmd", fs::write(&cmd_path, BOOT_CMD))?;
    let arch = if plan.target.arch() == "arm64" {
        "arm64"
    } else {
        "x86_64"
    };
    cx.run(
        Command::new("mkimage")
            .args(["-A", arch, "-O", "linux", "-T", "script", "-C", "none"])
            .args(["-n", "pfx A/B boot"])
            .arg("-d")
            .arg(&cmd_path)
            .arg(fw.join(update::BOOT_SCRIPT)),
    )?;
    let [a, b] = update::initial_env();
    for (name, blob) in update::ENV_FILES.iter().zip([a, b]) {
        cx.io(&format!("write {name}"), fs::write(fw.join(name), blob))?;
    }
    Ok(())
}

/// A Pi's firmware starting U-Boot: u-boot.bin, the overlay that drops its boot delay, and
/// config.txt pointing at it.
fn pi_uboot_files(cx: &Ctx, root: &Path, fw: &Path) -> Result<(), BuildError> {
    // The Pi's firmware starts U-Boot, which runs the script. The kernel, initramfs and
    // DTBs the firmware hook copied stay on the FAT as a documented way back (put the
    // kernel= and initramfs lines back in config.txt to boot slot A without U-Boot).
    cx.io(
        "copy u-boot.bin",
        fs::copy(
            root.join("usr/lib/u-boot/rpi_arm64/u-boot.bin"),
            fw.join("u-boot.bin"),
        )
        .map(|_| ()),
    )?;
    // U-Boot's 2 s boot delay goes, by a device tree overlay the firmware applies.
    let overlays = fw.join("overlays");
    cx.io("create overlays/", fs::create_dir_all(&overlays))?;
    let dts = fw.join("pfx-uboot.dts");
    cx.io(
        "write pfx-uboot.dts",
        fs::write(&dts, update::BOOTDELAY_OVERLAY_DTS),
    )?;
    cx.run(
        Command::new("dtc")
            .args(["-q", "-@", "-I", "dts", "-O", "dtb", "-o"])
            .arg(fw.join(update::BOOTDELAY_OVERLAY))
            .arg(&dts),
    )?;
    cx.io("remove pfx-uboot.dts", fs::remove_file(&dts))?;
    let cfg = cx.io("read config.txt", fs::read_to_string(fw.join("config.txt")))?;
    cx.io(
        "write config.txt",
        fs::write(fw.join("config.txt"), uboot_config_txt(&cfg)),
    )?;
    Ok(())
}

/// U-Boot's script, compiled into boot.scr by the build.
const BOOT_CMD: &str = include_str!("../uboot/boot.cmd");

/// raspi-firmware's config.txt with the firmware starting U-Boot instead of the kernel:
/// its `kernel=` and `initramfs` lines are dropped (U-Boot loads both from the slot) and
/// one `kernel=u-boot.bin` is added.
pub fn uboot_config_txt(cfg: &str) -> String {
    let mut out: String = cfg
        .lines()
        .filter(|l| {
            let t = l.trim();
            !t.starts_with("kernel=") && !t.starts_with("initramfs ")
        })
        .map(|l| format!("{l}\n"))
        .collect();
    out.push_str("# pfx: the firmware starts U-Boot; its boot.scr picks root slot A or B.\nkernel=u-boot.bin\n");
    out.push_str("# pfx: U-Boot boots without its 2 s delay (/config/bootdelay = 0).\n");
    out.push_str(crate::update::BOOTDELAY_OVERLAY_LINE);
    out.push('\n');
    out
}

fn make_filesystems(
    cx: &Ctx,
    l: &Layout,
    root: &Path,
    boot_dir: &Path,
    root_img: &Path,
    boot_img: &Path,
) -> Result<(), BuildError> {
    let root_bytes = l.root_sectors * 512;
    let f = cx.io("create root.ext4", File::create(root_img))?;
    cx.io("size root.ext4", f.set_len(root_bytes))?;
    drop(f);
    cx.run(
        Command::new("mke2fs")
            .args([
                "-q",
                "-F",
                "-t",
                "ext4",
                "-L",
                ROOT_LABEL,
                "-E",
                "root_owner=0:0",
                "-d",
            ])
            .arg(root)
            .arg(root_img),
    )
    .map_err(|e| {
        cx.fail(format!(
            "{e}\n(if the root does not fit, raise image_size_mib)"
        ))
    })?;
    let kib = l.boot_sectors / 2;
    cx.run(
        Command::new("mkfs.vfat")
            .args(["-F", "32", "-n", BOOT_LABEL, "-C"])
            .arg(boot_img)
            .arg(kib.to_string()),
    )?;
    let mut entries: Vec<PathBuf> = cx
        .io("list boot files", fs::read_dir(boot_dir))?
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    if entries.is_empty() {
        return Err(cx.fail("no files for the boot partition"));
    }
    let mut cmd = Command::new("mcopy");
    cmd.env("MTOOLS_SKIP_CHECK", "1")
        .args(["-s", "-p", "-m", "-i"])
        .arg(boot_img)
        .args(&entries)
        .arg("::");
    cx.run(&mut cmd)
}

/// The gid of the fleet account's group in the finished root: the show store's group.
fn fleet_gid(cx: &Ctx, root: &Path) -> Result<u32, BuildError> {
    let group = cx.io(
        "read /etc/group",
        fs::read_to_string(root.join("etc/group")),
    )?;
    plan::group_gid(&group, plan::FLEET_USER).ok_or_else(|| {
        cx.fail(format!(
            "no {:?} group in the root's /etc/group",
            plan::FLEET_USER
        ))
    })
}

/// The data file system: ext4 with 4 KiB blocks whatever its size in the image (mke2fs
/// would pick 1 KiB blocks for a small one, and it is grown to the card), holding only the
/// marker. Its root is root's, group `gid` (the fleet account's group), mode 2775: the
/// agent writes as root, the player (a DynamicUser with that supplementary group) writes
/// FPP Connect uploads, and the set-gid bit gives every directory made below the group.
/// No reserved blocks: the show store keeps its own reserve.
fn make_data_fs(cx: &Ctx, l: &Layout, dir: &Path, img: &Path, gid: u32) -> Result<(), BuildError> {
    cx.io("mkdir data", fs::create_dir_all(dir))?;
    cx.io(
        "chmod data",
        fs::set_permissions(dir, fs::Permissions::from_mode(plan::DATA_ROOT_MODE)),
    )?;
    let marker = dir.join(plan::DATA_MARKER);
    cx.io(
        "write the data marker",
        fs::write(&marker, plan::DATA_MARKER_TEXT),
    )?;
    cx.io(
        "chmod the data marker",
        fs::set_permissions(&marker, fs::Permissions::from_mode(0o644)),
    )?;
    let f = cx.io("create data.ext4", File::create(img))?;
    cx.io("size data.ext4", f.set_len(l.data_sectors * 512))?;
    drop(f);
    cx.run(
        Command::new("mke2fs")
            .args([
                "-q",
                "-F",
                "-t",
                "ext4",
                "-T",
                "default",
                "-b",
                "4096",
                "-i",
                "65536",
                "-m",
                "0",
                "-L",
                DATA_LABEL,
                // Room in the descriptor table for an online resize up to 2 TiB (the MBR's
                // limit), so growing to a big card needs no offline step.
                "-E",
                &format!("root_owner=0:{gid},resize=536870912"),
                "-d",
            ])
            .arg(dir)
            .arg(img),
    )?;
    // mke2fs -d gives the root 0755 whatever the source directory's mode (this e2fsprogs
    // has no root_perms); the mode, set-gid bit included, is set on the inode afterwards.
    cx.run(
        Command::new("debugfs")
            .arg("-w")
            .arg("-R")
            .arg(format!(
                "set_inode_field / mode 04{:04o}",
                plan::DATA_ROOT_MODE
            ))
            .arg(img),
    )
}

fn assemble(
    cx: &Ctx,
    l: &Layout,
    boot_img: &Path,
    root_img: &Path,
    data_img: &Path,
    out: &Path,
) -> Result<(), BuildError> {
    let _ = fs::remove_file(out);
    let f = cx.io("create image", File::create(out))?;
    cx.io("size image", f.set_len(l.total_bytes))?;
    drop(f);
    let mut child = Command::new("sfdisk")
        .args(["--no-reread", "--no-tell-kernel", "--quiet"])
        .arg(out)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| cx.fail(format!("cannot run sfdisk: {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        cx.io(
            "sfdisk input",
            stdin.write_all(l.sfdisk_script().as_bytes()),
        )?;
    }
    let o = cx.io("sfdisk", child.wait_with_output())?;
    if !o.status.success() {
        return Err(cx.fail(format!(
            "sfdisk failed: {}",
            String::from_utf8_lossy(&o.stderr)
        )));
    }
    for (img, start) in [
        (boot_img, l.boot_start),
        (root_img, l.root_start),
        (data_img, l.data_start),
    ] {
        cx.run(
            Command::new("dd")
                .arg(format!("if={}", img.display()))
                .arg(format!("of={}", out.display()))
                .args(["bs=1M", "conv=notrunc,sparse", "status=none"])
                .arg(format!("seek={}", start * 512))
                .arg("oflag=seek_bytes"),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The progress lines say what they always said: nine stages, numbered in run order.
    #[test]
    fn stages_are_named_and_numbered_in_run_order() {
        let lines: Vec<String> = Stage::ALL
            .iter()
            .map(|s| format!("{} {}", s.counter(), s.name()))
            .collect();
        assert_eq!(
            lines,
            [
                "[1/9] host tools",
                "[2/9] player binaries",
                "[3/9] binfmt",
                "[4/9] base root (mmdebstrap + initramfs)",
                "[5/9] customize root",
                "[6/9] boot partition files",
                "[7/9] file systems",
                "[8/9] disk image",
                "[9/9] verify from the image file",
            ]
        );
    }
}
