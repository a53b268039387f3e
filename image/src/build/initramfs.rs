//! The initramfs of a foreign-architecture root, in two parts.
//!
//! Under qemu-user every process start is slow, and initramfs-tools with `MODULES=most`
//! starts several per kernel module (realpath, readlink, cp, modinfo): about one module a
//! second, most of the base root's build time. So the root's own `update-initramfs` runs
//! emulated with the module-copying function of its `hook-functions` replaced by one that
//! only records what was asked for (`manual_add_modules` and the hidden-dependency step),
//! and this module does the rest natively on the host:
//! - resolves every request exactly as `manual_add_modules` does (`modprobe --show-depends`
//!   on the root's modules.dep, softdeps and modprobe.d, with and without `--ignore-install`),
//!   copies each module and the firmware its `modinfo` names, in the same order, with the
//!   same usr-merge and symlink rules as `copy_file`;
//! - runs the root's own `hidden_dep_add_modules` logic at the point mkinitramfs does;
//! - runs `depmod -b` over the result, packs it as a newc cpio (sorted, owner 0, mtime 0),
//!   compresses it with the codec of the emulated part, and appends it.
//!
//! The kernel unpacks concatenated compressed cpio archives in order, a later file
//! replacing an earlier one of the same name: the appended modules.dep and friends replace
//! the ones the emulated part generated over its empty module set.
//! The root keeps its untouched hook-functions, so an `update-initramfs` on a unit later
//! makes an ordinary initramfs.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use super::{BuildError, Ctx, in_chroot};
use crate::{artifact, verify};

const HOOK_FUNCTIONS: &str = "usr/share/initramfs-tools/hook-functions";
/// Inside the root; the recording functions append here (one line per request).
const LOG_IN_ROOT: &str = "var/tmp/pfx-initramfs-requests.log";

/// Appended to the root's hook-functions for the emulated run: later definitions win, so
/// mkinitramfs and every hook that sources the file get these. `printf` is a shell
/// builtin: recording starts no process.
pub const RECORDER: &str = r#"

# pfx-image, for one emulated build only: record module requests; the builder resolves
# and copies them natively and appends them as a second archive.
manual_add_modules()
{
	[ $# -eq 0 ] && return 0
	printf 'add %s %s\n' "${version?}" "$*" >> /var/tmp/pfx-initramfs-requests.log
	return 0
}
hidden_dep_add_modules()
{
	printf 'hidden %s\n' "${version?}" >> /var/tmp/pfx-initramfs-requests.log
}
"#;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// `manual_add_modules ARGS`.
    Add(Vec<String>),
    /// The point where mkinitramfs resolves hidden dependencies.
    Hidden,
}

/// The recorded requests, per kernel version, in the order they were made.
pub fn parse_requests(text: &str) -> Result<BTreeMap<String, Vec<Request>>, String> {
    let mut out: BTreeMap<String, Vec<Request>> = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let mut w = line.split_whitespace();
        let (kind, version) = (w.next(), w.next());
        let req = match kind {
            Some("add") => Request::Add(w.map(str::to_string).collect()),
            Some("hidden") => Request::Hidden,
            None => continue,
            Some(k) => return Err(format!("request log line {}: unknown kind {k:?}", n + 1)),
        };
        let version =
            version.ok_or_else(|| format!("request log line {}: no kernel version", n + 1))?;
        out.entry(version.to_string()).or_default().push(req);
    }
    Ok(out)
}

/// The module files `modprobe --show-depends` would insmod, as paths inside the root.
pub fn parse_show_depends(out: &str, root_prefix: &str) -> Vec<String> {
    out.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some("insmod")).then(|| w.next()).flatten()
        })
        .map(|p| {
            let p = p.strip_prefix(root_prefix).unwrap_or(p);
            normalize(&format!("/{p}"))
        })
        .collect()
}

/// `realpath -ms` without a file system: collapses `//`, `.` and `..`.
pub fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    format!("/{}", parts.join("/"))
}

/// copy_file's usr-merge rule: /bin, /lib*, /sbin live under /usr in the initramfs.
pub fn usr_merged(path: &str) -> String {
    let merged =
        ["/bin/", "/sbin/"].iter().any(|p| path.starts_with(p)) || path.starts_with("/lib");
    if merged {
        format!("/usr{path}")
    } else {
        path.to_string()
    }
}

/// The relative symlink `ln -rs` makes at `link` for `target` (both absolute).
pub fn relative_link(target: &str, link: &str) -> String {
    let t: Vec<&str> = target.trim_start_matches('/').split('/').collect();
    let l: Vec<&str> = link.trim_start_matches('/').split('/').collect();
    let dir = &l[..l.len().saturating_sub(1)];
    let common = t.iter().zip(dir.iter()).take_while(|(a, b)| a == b).count();
    let mut out: Vec<&str> = vec![".."; dir.len() - common];
    out.extend(&t[common..]);
    out.join("/")
}

/// Where `add_firmware` looks, in order.
pub fn firmware_candidates(version: &str, name: &str) -> [String; 4] {
    [
        format!("/lib/firmware/updates/{version}/{name}"),
        format!("/lib/firmware/updates/{name}"),
        format!("/lib/firmware/{version}/{name}"),
        format!("/lib/firmware/{name}"),
    ]
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    Dir,
    File { mode: u32, data: Vec<u8> },
    Symlink(String),
}

/// A newc cpio archive of `entries` (paths without a leading slash), in the order given,
/// with owner 0:0, mtime 0 and inode numbers counted from 1: the same bytes for the same
/// input on any host.
pub fn cpio_newc(entries: &[(String, Node)]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut push = |ino: usize, name: &str, mode: u32, nlink: u32, body: &[u8]| {
        let header = format!(
            "070701{ino:08x}{mode:08x}{:08x}{:08x}{nlink:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}",
            0,
            0,
            0,
            body.len(),
            0,
            0,
            0,
            0,
            name.len() + 1,
            0
        );
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(name.as_bytes());
        out.push(0);
        while out.len() % 4 != 0 {
            out.push(0);
        }
        out.extend_from_slice(body);
        while out.len() % 4 != 0 {
            out.push(0);
        }
    };
    for (i, (name, node)) in entries.iter().enumerate() {
        match node {
            Node::Dir => push(i + 1, name, 0o040755, 2, b""),
            Node::File { mode, data } => push(i + 1, name, 0o100000 | (mode & 0o7777), 1, data),
            Node::Symlink(t) => push(i + 1, name, 0o120777, 1, t.as_bytes()),
        }
    }
    push(0, "TRAILER!!!", 0, 1, b"");
    out
}

/// The host command that compresses like the emulated part did (the kernel's own
/// constraints: xz with crc32, lz4 legacy frames).
pub fn compressor(codec: &str) -> Option<Vec<&'static str>> {
    Some(match codec {
        "zstd" => vec!["zstd", "-q", "-9", "-T0", "-c"],
        "gzip" => vec!["gzip", "-n", "-c"],
        "xz" => vec!["xz", "--check=crc32", "-c"],
        "lz4" => vec!["lz4", "-l", "-9", "-c"],
        "lzma" => vec!["lzma", "-c"],
        _ => return None,
    })
}

/// What the native part added, for the stage note and the comparison with a full build.
pub struct Appended {
    pub version: String,
    pub modules: usize,
    pub firmware: usize,
    pub bytes: usize,
}

/// Restores the root's hook-functions and removes the request log, also on an error path.
struct Restore {
    path: PathBuf,
    original: Vec<u8>,
    log: PathBuf,
}

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = fs::write(&self.path, &self.original);
        let _ = fs::remove_file(&self.log);
    }
}

/// Runs `update-initramfs -c -k all` in the root with module requests recorded, then
/// appends the natively built module archive to every initrd it made.
pub fn generate(cx: &Ctx, root: &Path, scratch: &Path) -> Result<(Vec<Appended>, f64), BuildError> {
    let t = Instant::now();
    let text = emulated_part(cx, root)?;
    let emulated = t.elapsed().as_secs_f64();
    // Kept beside the build log: what mkinitramfs and its hooks asked for.
    let _ = fs::write(scratch.join("initramfs-requests.log"), &text);
    Ok((native_part(cx, root, scratch, &text)?, emulated))
}

/// The emulated `update-initramfs` with the recording hook-functions: the request log.
fn emulated_part(cx: &Ctx, root: &Path) -> Result<String, BuildError> {
    let hf = root.join(HOOK_FUNCTIONS);
    let original = cx.io(&format!("read {}", hf.display()), fs::read(&hf))?;
    let log = root.join(LOG_IN_ROOT);
    let _ = fs::remove_file(&log);
    let restore = Restore {
        path: hf.clone(),
        original: original.clone(),
        log: log.clone(),
    };
    let mut recording = original.clone();
    recording.extend_from_slice(RECORDER.as_bytes());
    cx.io(
        &format!("write {}", hf.display()),
        fs::write(&hf, &recording),
    )?;
    in_chroot(cx, root, "update-initramfs -c -k all")?;
    let text = cx.io(&format!("read {}", log.display()), fs::read_to_string(&log))?;
    drop(restore);
    let restored = cx.io("re-read hook-functions", fs::read(&hf))?;
    if restored != original {
        return Err(cx.fail(format!("{} was not restored", hf.display())));
    }
    Ok(text)
}

fn native_part(
    cx: &Ctx,
    root: &Path,
    scratch: &Path,
    log: &str,
) -> Result<Vec<Appended>, BuildError> {
    let requests = parse_requests(log).map_err(|m| cx.fail(m))?;
    let mut done = Vec::new();
    for (version, reqs) in &requests {
        done.push(append_modules(cx, root, scratch, version, reqs)?);
    }
    if done.is_empty() {
        return Err(cx.fail(
            "update-initramfs recorded no module requests: the root's mkinitramfs no longer \
             calls manual_add_modules as this builder expects",
        ));
    }
    Ok(done)
}

/// The initramfs being assembled natively: what the emulated part already has (by name)
/// and what is staged for the appended archive.
struct Dest {
    root: PathBuf,
    version: String,
    first: BTreeSet<String>,
    staged: BTreeMap<String, Node>,
}

impl Dest {
    fn exists(&self, target: &str) -> bool {
        let t = target.trim_start_matches('/');
        self.first.contains(t) || self.staged.contains_key(t)
    }

    fn add_dirs(&mut self, target: &str) {
        let t = target.trim_start_matches('/');
        let mut acc = String::new();
        let parts: Vec<&str> = t.split('/').collect();
        for p in &parts[..parts.len().saturating_sub(1)] {
            if !acc.is_empty() {
                acc.push('/');
            }
            acc.push_str(p);
            self.staged.entry(acc.clone()).or_insert(Node::Dir);
        }
    }

    /// Resolves every symlink of an absolute path inside the root (`readlink -f`).
    fn resolve(&self, path: &str) -> Result<String, String> {
        let mut done: Vec<String> = Vec::new();
        let mut todo: Vec<String> = path
            .split('/')
            .filter(|c| !c.is_empty())
            .rev()
            .map(str::to_string)
            .collect();
        let mut hops = 0;
        while let Some(c) = todo.pop() {
            match c.as_str() {
                "." => continue,
                ".." => {
                    done.pop();
                    continue;
                }
                _ => {}
            }
            done.push(c);
            let here = self.root.join(done.join("/"));
            if let Ok(t) = fs::read_link(&here) {
                hops += 1;
                if hops > 40 {
                    return Err(format!("{path}: too many symlinks in the root"));
                }
                done.pop();
                let t = t.to_string_lossy().into_owned();
                if t.starts_with('/') {
                    done.clear();
                }
                todo.extend(
                    t.split('/')
                        .filter(|c| !c.is_empty())
                        .rev()
                        .map(str::to_string),
                );
            }
        }
        Ok(format!("/{}", done.join("/")))
    }

    /// initramfs-tools' `copy_file` for a file of the root: Ok(true) when it was added.
    fn copy_file(&mut self, src: &str) -> Result<bool, String> {
        let src = usr_merged(&normalize(src));
        let mut target = src.clone();
        if self.exists(&target) {
            return Ok(false);
        }
        let link_target = usr_merged(&self.resolve(&src)?);
        let host = self.root.join(link_target.trim_start_matches('/'));
        if !host.is_file() {
            return Err(format!("{src}: not a file in the root"));
        }
        if link_target != src {
            self.add_dirs(&target);
            self.staged.insert(
                target.trim_start_matches('/').to_string(),
                Node::Symlink(relative_link(&link_target, &target)),
            );
            target = link_target;
            if self.exists(&target) {
                return Ok(true);
            }
        }
        let data = fs::read(&host).map_err(|e| format!("{}: {e}", host.display()))?;
        let mode = fs::metadata(&host)
            .map_err(|e| format!("{}: {e}", host.display()))?
            .permissions()
            .mode();
        self.add_dirs(&target);
        self.staged.insert(
            target.trim_start_matches('/').to_string(),
            Node::File { mode, data },
        );
        Ok(true)
    }

    fn modules_dir(&self) -> String {
        format!("usr/lib/modules/{}", self.version)
    }
}

fn output(cx: &Ctx, cmd: &mut Command) -> Result<String, BuildError> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| cx.fail(format!("cannot run {:?}: {e}", cmd.get_program())))?;
    if !out.status.success() {
        return Err(cx.fail(format!(
            "{cmd:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The root's modprobe configuration directories (kmod's defaults, inside the root).
fn modprobe_config(root: &Path) -> Vec<PathBuf> {
    [
        "etc/modprobe.d",
        "run/modprobe.d",
        "usr/local/lib/modprobe.d",
        "lib/modprobe.d",
    ]
    .iter()
    .map(|d| root.join(d))
    .filter(|d| d.is_dir())
    .collect()
}

/// `manual_add_modules ARGS` natively: both modprobe passes, each new module copied and the
/// firmware it names added.
fn add_modules(
    cx: &Ctx,
    d: &mut Dest,
    args: &[String],
    empty_conf: &Path,
) -> Result<(), BuildError> {
    if args.is_empty() {
        return Ok(());
    }
    let root_s = d.root.display().to_string();
    let mut conf = modprobe_config(&d.root);
    if conf.is_empty() {
        // Without -C modprobe would read the build host's configuration.
        conf.push(empty_conf.to_path_buf());
    }
    let mut paths = Vec::new();
    for ignore_install in [true, false] {
        let mut cmd = Command::new("modprobe");
        cmd.arg("-d").arg(&d.root);
        for c in &conf {
            cmd.arg("-C").arg(c);
        }
        cmd.args(["--all", &format!("--set-version={}", d.version)]);
        if ignore_install {
            cmd.arg("--ignore-install");
        }
        cmd.args(["--quiet", "--show-depends"]).args(args);
        // modprobe --quiet exits non-zero when one of many names is unknown, exactly as
        // in hook-functions (which ignores the status): only its insmod lines count.
        let out = cmd
            .stdin(Stdio::null())
            .output()
            .map_err(|e| cx.fail(format!("cannot run modprobe: {e} (apt-get install kmod)")))?;
        paths.extend(parse_show_depends(
            &String::from_utf8_lossy(&out.stdout),
            &root_s,
        ));
    }
    let mut added = Vec::new();
    for p in paths {
        if d.copy_file(&p)
            .map_err(|m| cx.fail(format!("module {m}")))?
        {
            added.push(p);
        }
    }
    if added.is_empty() {
        return Ok(());
    }
    let files: Vec<PathBuf> = added
        .iter()
        .map(|p| d.root.join(usr_merged(p).trim_start_matches('/')))
        .collect();
    let fw = output(
        cx,
        Command::new("modinfo")
            .args(["-k", &d.version, "-F", "firmware"])
            .args(&files),
    )?;
    for name in fw.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let cands = firmware_candidates(&d.version, name);
        if cands.iter().any(|c| d.exists(&usr_merged(c))) {
            continue;
        }
        // A missing firmware file is a warning in mkinitramfs, and skipped here alike.
        if let Some(c) = cands
            .iter()
            .find(|c| d.root.join(c.trim_start_matches('/')).exists())
        {
            d.copy_file(c)
                .map_err(|m| cx.fail(format!("firmware {m}")))?;
        }
    }
    Ok(())
}

/// The root's own `hidden_dep_add_modules`, run by the host's shell over the staged tree:
/// the names it asks for.
fn hidden_deps(cx: &Ctx, d: &Dest, stage: &Path) -> Result<Vec<String>, BuildError> {
    write_stage(cx, d, stage)?;
    let script = format!(
        ". {}; manual_add_modules() {{ echo \"$@\"; }}; hidden_dep_add_modules",
        super::sh_quote(&d.root.join(HOOK_FUNCTIONS).display().to_string())
    );
    let out = output(
        cx,
        Command::new("sh")
            .args(["-c", &script])
            .env("DESTDIR", stage)
            .env("version", &d.version),
    )?;
    Ok(out.split_whitespace().map(str::to_string).collect())
}

/// Writes the staged tree to `stage` (replacing what was there).
fn write_stage(cx: &Ctx, d: &Dest, stage: &Path) -> Result<(), BuildError> {
    let _ = fs::remove_dir_all(stage);
    cx.io("create initramfs stage", fs::create_dir_all(stage))?;
    // As in the initramfs itself: /lib is usr/lib (the emulated part has that link).
    cx.io(
        "stage lib link",
        std::os::unix::fs::symlink("usr/lib", stage.join("lib")),
    )?;
    for (name, node) in &d.staged {
        let p = stage.join(name);
        match node {
            Node::Dir => cx.io(&format!("mkdir {}", p.display()), fs::create_dir_all(&p))?,
            Node::File { mode, data } => {
                cx.io(&format!("write {}", p.display()), fs::write(&p, data))?;
                cx.io(
                    &format!("chmod {}", p.display()),
                    fs::set_permissions(&p, fs::Permissions::from_mode(*mode)),
                )?;
            }
            Node::Symlink(t) => cx.io(
                &format!("symlink {}", p.display()),
                std::os::unix::fs::symlink(t, &p),
            )?,
        }
    }
    Ok(())
}

/// Reads a tree back into nodes, named `rel/...` (the path of `dir` in the initramfs).
fn read_tree(dir: &Path, rel: &str, out: &mut BTreeMap<String, Node>) -> std::io::Result<()> {
    for e in fs::read_dir(dir)? {
        let e = e?;
        let name = format!("{rel}/{}", e.file_name().to_string_lossy());
        let ft = e.file_type()?;
        if ft.is_symlink() {
            let t = fs::read_link(e.path())?;
            out.insert(name, Node::Symlink(t.to_string_lossy().into_owned()));
        } else if ft.is_dir() {
            out.insert(name.clone(), Node::Dir);
            read_tree(&e.path(), &name, out)?;
        } else {
            let mode = e.metadata()?.permissions().mode();
            out.insert(
                name,
                Node::File {
                    mode,
                    data: fs::read(e.path())?,
                },
            );
        }
    }
    Ok(())
}

fn append_modules(
    cx: &Ctx,
    root: &Path,
    scratch: &Path,
    version: &str,
    reqs: &[Request],
) -> Result<Appended, BuildError> {
    let initrd = root.join(format!("boot/initrd.img-{version}"));
    let (first, codec) = read_first_archive(cx, &initrd, scratch)?;
    let mut d = Dest {
        root: root.to_path_buf(),
        version: version.to_string(),
        first,
        staged: BTreeMap::new(),
    };
    let stage = scratch.join(format!("initramfs-{version}"));
    let empty_conf = scratch.join("modprobe.d-empty");
    cx.io("create empty modprobe.d", fs::create_dir_all(&empty_conf))?;
    stage_builtin_lists(cx, &mut d)?;
    for r in reqs {
        match r {
            Request::Add(args) => add_modules(cx, &mut d, args, &empty_conf)?,
            Request::Hidden => {
                let names = hidden_deps(cx, &d, &stage)?;
                add_modules(cx, &mut d, &names, &empty_conf)?;
            }
        }
    }
    let (modules, firmware) = count_staged(cx, &d)?;
    let archive = depmod_archive(cx, &d, &stage)?;
    let compressed = compress(cx, codec, archive)?;
    let mut f = cx.io(
        &format!("open {}", initrd.display()),
        fs::OpenOptions::new().append(true).open(&initrd),
    )?;
    cx.io(
        &format!("append to {}", initrd.display()),
        f.write_all(&compressed),
    )?;
    let _ = fs::remove_dir_all(&stage);
    Ok(Appended {
        version: version.to_string(),
        modules,
        firmware,
        bytes: compressed.len(),
    })
}

/// The names in the initramfs mkinitramfs made (so nothing is added twice) and the
/// compression of its last part (the appended archive uses the same).
fn read_first_archive(
    cx: &Ctx,
    initrd: &Path,
    scratch: &Path,
) -> Result<(BTreeSet<String>, &'static str), BuildError> {
    let first_bytes = cx.io(&format!("read {}", initrd.display()), fs::read(initrd))?;
    let first: BTreeSet<String> = artifact::initramfs_names(&first_bytes, scratch)
        .map_err(|m| cx.fail(format!("{}: {m}", initrd.display())))?
        .into_iter()
        .collect();
    let (_, end) = verify::cpio_names(&first_bytes).map_err(|m| cx.fail(m.to_string()))?;
    let codec = verify::compression(&first_bytes[end..])
        .ok_or_else(|| cx.fail(format!("{}: unknown compression", initrd.display())))?;
    Ok((first, codec))
}

/// The kernel's built-in module lists, which mkinitramfs copies before any module
/// (depmod needs them and does not generate them).
fn stage_builtin_lists(cx: &Ctx, d: &mut Dest) -> Result<(), BuildError> {
    let mdir = d.modules_dir();
    for x in [
        "modules.builtin",
        "modules.builtin.bin",
        "modules.builtin.modinfo",
        "modules.order",
    ] {
        let host = d.root.join(&mdir).join(x);
        if host.is_file() {
            let data = cx.io(&format!("read {}", host.display()), fs::read(&host))?;
            d.add_dirs(&format!("{mdir}/{x}"));
            d.staged
                .insert(format!("{mdir}/{x}"), Node::File { mode: 0o644, data });
        }
    }
    Ok(())
}

/// How many modules and firmware files were staged; compressed modules are refused.
fn count_staged(cx: &Ctx, d: &Dest) -> Result<(usize, usize), BuildError> {
    let mdir = d.modules_dir();
    let ko = |n: &String| n.starts_with(&mdir) && (n.ends_with(".ko") || n.contains(".ko."));
    let modules = d.staged.keys().filter(|n| ko(n)).count();
    let firmware = d
        .staged
        .iter()
        .filter(|(n, v)| n.starts_with("usr/lib/firmware/") && !matches!(v, Node::Dir))
        .count();
    if d.staged
        .keys()
        .any(|n| n.ends_with(".ko.xz") || n.ends_with(".ko.zst"))
    {
        return Err(cx.fail(
            "compressed kernel modules: mkinitramfs decompresses them, which this builder \
             does not do yet; build this suite's root with the initramfs made in emulation",
        ));
    }
    Ok((modules, firmware))
}

/// The staged tree with depmod's output, as an uncompressed cpio archive.
fn depmod_archive(cx: &Ctx, d: &Dest, stage: &Path) -> Result<Vec<u8>, BuildError> {
    let mdir = d.modules_dir();
    // depmod over the result, as mkinitramfs does, then its map files removed.
    write_stage(cx, d, stage)?;
    cx.run(
        Command::new("depmod")
            .args(["-a", "-b"])
            .arg(stage)
            .arg(&d.version),
    )
    .map_err(|e| cx.fail(format!("{e}\n(apt-get install kmod)")))?;
    let mut tree = BTreeMap::new();
    cx.io(
        "read initramfs stage",
        read_tree(&stage.join("usr"), "usr", &mut tree),
    )?;
    tree.insert("usr".into(), Node::Dir);
    tree.retain(|n, _| {
        let base = n.rsplit('/').next().unwrap_or("");
        !(n.starts_with(&mdir) && base.starts_with("modules.") && base.ends_with("map"))
    });
    // Sorted by name (BTreeMap) like mkinitramfs' `find | LC_ALL=C sort`.
    let entries: Vec<(String, Node)> = tree.into_iter().collect();
    Ok(cpio_newc(&entries))
}

/// The archive through the compressor for `codec`, fed from a thread so a full output
/// pipe cannot block the input.
fn compress(cx: &Ctx, codec: &str, archive: Vec<u8>) -> Result<Vec<u8>, BuildError> {
    let argv = compressor(codec).ok_or_else(|| cx.fail(format!("no compressor for {codec}")))?;
    let mut child = Command::new(argv[0])
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| cx.fail(format!("cannot run {}: {e}", argv[0])))?;
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| cx.fail("compressor stdin"))?;
    let writer = std::thread::spawn(move || stdin.write_all(&archive));
    let out = cx.io("compress module archive", child.wait_with_output())?;
    let wrote = writer
        .join()
        .map_err(|_| cx.fail("compressor writer thread panicked"))?;
    cx.io("compress module archive", wrote)?;
    if !out.status.success() {
        return Err(cx.fail(format!(
            "{} failed: {}",
            argv[0],
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(out.stdout)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole step on a real root (made by mmdebstrap, initramfs not yet generated):
    /// `PFX_INITRAMFS_ROOT=/path cargo test -p pfx-image -- --ignored --nocapture on_a_root`.
    #[test]
    #[ignore = "needs root, binfmt and a foreign root in PFX_INITRAMFS_ROOT"]
    fn on_a_root() {
        let Some(root) = std::env::var_os("PFX_INITRAMFS_ROOT") else {
            eprintln!("skipped: PFX_INITRAMFS_ROOT not set");
            return;
        };
        let root = PathBuf::from(root);
        let scratch = root.parent().unwrap().join("initramfs-scratch");
        fs::create_dir_all(&scratch).unwrap();
        let cx = Ctx {
            log_path: scratch.join("log"),
            progress: super::super::Progress {
                start: Instant::now(),
                current: None,
                timings: Vec::new(),
            },
        };
        let t = Instant::now();
        // With a saved request log and emulated initrd, only the native part runs again.
        let saved_log = scratch.join("initramfs-requests.log");
        let saved = |v: &str| scratch.join(format!("initrd.img-{v}.emulated"));
        let result = if let Ok(text) = fs::read_to_string(&saved_log) {
            for v in parse_requests(&text).unwrap().keys() {
                fs::copy(saved(v), root.join(format!("boot/initrd.img-{v}"))).unwrap();
            }
            native_part(&cx, &root, &scratch, &text).map(|a| (a, 0.0))
        } else {
            let text = emulated_part(&cx, &root).unwrap();
            fs::write(&saved_log, &text).unwrap();
            for v in parse_requests(&text).unwrap().keys() {
                fs::copy(root.join(format!("boot/initrd.img-{v}")), saved(v)).unwrap();
            }
            native_part(&cx, &root, &scratch, &text).map(|a| (a, t.elapsed().as_secs_f64()))
        };
        match result {
            Ok((a, emulated)) => {
                for a in a {
                    eprintln!(
                        "{}: {} modules, {} firmware, {} bytes appended; emulated {emulated:.1} s, total {:.1} s",
                        a.version,
                        a.modules,
                        a.firmware,
                        a.bytes,
                        t.elapsed().as_secs_f64()
                    );
                }
            }
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn requests_in_order_per_version() {
        let t = "add 6.1.0-1-arm64 ext4 btrfs\nhidden 6.1.0-1-arm64\nadd 6.1.0-1-arm64 overlay\n";
        let r = parse_requests(t).unwrap();
        assert_eq!(
            r["6.1.0-1-arm64"],
            vec![
                Request::Add(vec!["ext4".into(), "btrfs".into()]),
                Request::Hidden,
                Request::Add(vec!["overlay".into()]),
            ]
        );
        assert!(parse_requests("remove 6.1 x\n").is_err());
        assert!(parse_requests("hidden\n").is_err());
    }

    #[test]
    fn show_depends_keeps_insmod_lines_inside_the_root() {
        let out = "builtin crc32c\ninsmod /r/lib/modules/6.1/kernel/lib/libcrc32c.ko \n\
                   insmod /r/lib/modules/6.1/kernel/fs/btrfs/btrfs.ko opt=1\n";
        assert_eq!(
            parse_show_depends(out, "/r"),
            vec![
                "/lib/modules/6.1/kernel/lib/libcrc32c.ko",
                "/lib/modules/6.1/kernel/fs/btrfs/btrfs.ko"
            ]
        );
    }

    #[test]
    fn paths_as_copy_file_makes_them() {
        assert_eq!(
            normalize("//lib/./modules/../modules/x.ko"),
            "/lib/modules/x.ko"
        );
        assert_eq!(usr_merged("/lib/modules/x.ko"), "/usr/lib/modules/x.ko");
        assert_eq!(usr_merged("/lib64/ld.so"), "/usr/lib64/ld.so");
        assert_eq!(usr_merged("/usr/lib/x"), "/usr/lib/x");
        assert_eq!(usr_merged("/etc/x"), "/etc/x");
        assert_eq!(
            relative_link(
                "/usr/lib/firmware/brcm/a.bin",
                "/usr/lib/firmware/brcm/b.bin"
            ),
            "a.bin"
        );
        assert_eq!(
            relative_link(
                "/usr/lib/firmware/cypress/a.bin",
                "/usr/lib/firmware/brcm/b.bin"
            ),
            "../cypress/a.bin"
        );
    }

    #[test]
    fn cpio_is_readable_by_the_verifier_and_deterministic() {
        let entries = vec![
            ("usr".to_string(), Node::Dir),
            ("usr/lib".to_string(), Node::Dir),
            (
                "usr/lib/a.ko".to_string(),
                Node::File {
                    mode: 0o100644,
                    data: b"abcde".to_vec(),
                },
            ),
            ("usr/lib/b.ko".to_string(), Node::Symlink("a.ko".into())),
        ];
        let a = cpio_newc(&entries);
        assert_eq!(a, cpio_newc(&entries));
        let (names, end) = verify::cpio_names(&a).unwrap();
        assert_eq!(
            names,
            vec!["usr", "usr/lib", "usr/lib/a.ko", "usr/lib/b.ko"]
        );
        assert_eq!(end, a.len());
    }

    #[test]
    fn compressors_for_the_kernel() {
        assert!(compressor("xz").unwrap().contains(&"--check=crc32"));
        assert!(compressor("lz4").unwrap().contains(&"-l"));
        assert_eq!(compressor("zstd").unwrap()[0], "zstd");
        assert!(compressor("bzip3").is_none());
    }

    #[test]
    fn resolve_and_copy_follow_symlinks_inside_the_root() {
        let r = tempfile::tempdir().unwrap();
        let root = r.path();
        fs::create_dir_all(root.join("usr/lib/firmware/cypress")).unwrap();
        fs::create_dir_all(root.join("usr/lib/firmware/brcm")).unwrap();
        std::os::unix::fs::symlink("usr/lib", root.join("lib")).unwrap();
        fs::write(root.join("usr/lib/firmware/cypress/c.bin"), b"fw").unwrap();
        // An absolute link must resolve inside the root, never on the host.
        std::os::unix::fs::symlink(
            "/lib/firmware/cypress/c.bin",
            root.join("usr/lib/firmware/brcm/b.bin"),
        )
        .unwrap();
        let mut d = Dest {
            root: root.to_path_buf(),
            version: "6.1".into(),
            first: BTreeSet::new(),
            staged: BTreeMap::new(),
        };
        assert_eq!(
            d.resolve("/lib/firmware/brcm/b.bin").unwrap(),
            "/usr/lib/firmware/cypress/c.bin"
        );
        assert!(d.copy_file("/lib/firmware/brcm/b.bin").unwrap());
        assert_eq!(
            d.staged["usr/lib/firmware/brcm/b.bin"],
            Node::Symlink("../cypress/c.bin".into())
        );
        assert!(matches!(
            d.staged["usr/lib/firmware/cypress/c.bin"],
            Node::File { .. }
        ));
        // Already there: not added again.
        assert!(!d.copy_file("/lib/firmware/cypress/c.bin").unwrap());
        assert!(d.copy_file("/lib/firmware/none.bin").is_err());
    }
}
