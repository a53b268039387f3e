//! `pfx-agent bootenv`: the boot environment on the unit's FAT boot partition, the two
//! copies `pfxenv.a` and `pfxenv.b` the boot script (image/uboot/boot.cmd) chooses the
//! root slot from. The thin I/O shell around `pfx-bootenv`, which holds every rule.
//!
//! - `bootenv rauc ARGS`: RAUC's custom bootloader backend (system.conf
//!   `bootloader=custom`, `[handlers] bootloader-custom-backend=/usr/lib/pfx/rauc-bootenv`,
//!   a wrapper that runs this). Answers on stdout exactly what RAUC reads.
//! - `bootenv print [--json]`: both copies, which is the newest, the state, what the next
//!   boot will do.
//! - `bootenv init [--force]`: writes the two initial copies.
//!
//! Every write goes in place into an existing file of exactly 16384 bytes (never truncated,
//! never resized: a FAT file keeps its clusters), then fsync of the file and of the
//! directory; a missing copy is created at full size. One writer at a time: an exclusive
//! flock on the directory.

use anyhow::{Context, Result, anyhow, bail};
use pfx_api::exit;
use pfx_bootenv::{
    BootChoice, BootState, ENV_SIZE, Env, EnvCopy, EnvFile, Invalid, RaucOp, RawVars, Slot,
};
use serde::Serialize;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Where the image mounts the FAT boot partition.
pub const DEFAULT_DIR: &str = "/boot/firmware";

#[derive(clap::Args, Debug)]
pub struct BootenvArgs {
    /// The directory holding pfxenv.a and pfxenv.b: the FAT boot partition.
    #[arg(long, default_value = DEFAULT_DIR, global = true)]
    pub dir: PathBuf,
    #[command(subcommand)]
    pub cmd: BootenvCmd,
}

#[derive(clap::Subcommand, Debug)]
pub enum BootenvCmd {
    /// RAUC's custom bootloader backend. RAUC runs it with one of: `get-primary` (prints
    /// A or B: the first slot of BOOT_ORDER with boot attempts left), `get-state A|B`
    /// (prints good when the slot has attempts left, else bad), `set-primary A|B` (the slot
    /// first in BOOT_ORDER, with 1 attempt: its trial boot), `set-state A|B good|bad`
    /// (3 attempts, or none). A set that changes nothing writes nothing.
    #[command(
        after_help = "Exit status: 0 done; 2 an error (bad arguments, a copy that cannot be read or written, get-primary with no slot bootable), which RAUC reports as the bootloader backend's failure."
    )]
    Rauc {
        /// RAUC's arguments, as it passes them.
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "ARGS"
        )]
        args: Vec<String>,
    },
    /// Both copies (valid or why not, PFX_SEQ, the variables), which one is the newest,
    /// the state in force and what the boot script will do on the next boot.
    Print,
    /// Writes the two initial copies: pfxenv.a PFX_SEQ=1 and pfxenv.b PFX_SEQ=0, both
    /// BOOT_ORDER "A B", A 3 attempts, B none. The image build writes the same.
    Init {
        /// Overwrite even when a copy is valid (the unit's current slot choice is lost:
        /// the next boot is slot A).
        #[arg(long)]
        force: bool,
    },
}

/// Runs `pfx-agent bootenv ...`; `json` is the agent's global `--json`.
pub fn run(args: &BootenvArgs, json: bool) -> ExitCode {
    let r = match &args.cmd {
        BootenvCmd::Rauc { args: rauc_args } => rauc(&args.dir, rauc_args),
        BootenvCmd::Print => print(&args.dir, json),
        BootenvCmd::Init { force } => init(&args.dir, *force),
    };
    match r {
        Ok(()) => ExitCode::from(exit::SUCCESS),
        Err(e) => exit::report("pfx-agent", e.as_ref()),
    }
}

/// One copy as read: its bytes (None: the file is missing) and its length on disk.
struct ReadCopy {
    bytes: Option<Vec<u8>>,
    len: u64,
}

fn read_copy(dir: &Path, f: EnvFile) -> Result<ReadCopy> {
    let path = dir.join(f.file_name());
    let file = match File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(ReadCopy {
                bytes: None,
                len: 0,
            });
        }
        Err(e) => return Err(e).with_context(|| format!("opening {}", path.display())),
    };
    let len = file
        .metadata()
        .with_context(|| format!("reading the size of {}", path.display()))?
        .len();
    // Never more than one byte past the size: a wrong-size copy is invalid whatever it
    // holds, and a huge file must not be read whole.
    let mut bytes = Vec::with_capacity(ENV_SIZE + 1);
    file.take(ENV_SIZE as u64 + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("reading {}", path.display()))?;
    Ok(ReadCopy {
        bytes: Some(bytes),
        len,
    })
}

/// Both copies of `dir`, read under the lock.
struct Pair {
    a: ReadCopy,
    b: ReadCopy,
    env: Env,
}

fn read_pair(dir: &Path) -> Result<Pair> {
    let a = read_copy(dir, EnvFile::A)?;
    let b = read_copy(dir, EnvFile::B)?;
    let env = Env::read(
        a.bytes.as_deref().unwrap_or(&[]),
        b.bytes.as_deref().unwrap_or(&[]),
    );
    Ok(Pair { a, b, env })
}

impl Pair {
    fn read(&self, f: EnvFile) -> &ReadCopy {
        match f {
            EnvFile::A => &self.a,
            EnvFile::B => &self.b,
        }
    }
}

/// An exclusive flock on the directory, held until dropped: RAUC's calls and an operator's
/// `init` never interleave their read-modify-write.
fn lock(dir: &Path) -> Result<File> {
    let d = File::open(dir).with_context(|| {
        format!(
            "opening {} (the FAT boot partition, where pfxenv.a and pfxenv.b live; --dir to name another)",
            dir.display()
        )
    })?;
    // SAFETY: flock on a file descriptor we own; blocks until another holder is done.
    if unsafe { libc::flock(d.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("locking {}", dir.display()));
    }
    Ok(d)
}

/// Writes one copy in place: the existing file must be exactly ENV_SIZE bytes (a copy of
/// another size is refused, not resized); a missing copy is created at full size. Then
/// fsync of the file and of the directory (the directory entry of a created file).
fn write_copy(dir: &Path, f: EnvFile, bytes: &[u8]) -> Result<()> {
    let path = dir.join(f.file_name());
    let file = match OpenOptions::new().write(true).open(&path) {
        Ok(file) => {
            let len = file
                .metadata()
                .with_context(|| format!("reading the size of {}", path.display()))?
                .len();
            if len != ENV_SIZE as u64 {
                bail!(
                    "{} is {len} bytes, not {ENV_SIZE}: a copy is never resized (the boot script rewrites it in place); \
                     check what wrote it, then run `pfx-agent bootenv init --force` after removing it",
                    path.display()
                );
            }
            file
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .with_context(|| format!("creating {}", path.display()))?,
        Err(e) => return Err(e).with_context(|| format!("opening {} to write it", path.display())),
    };
    file.write_all_at(bytes, 0)
        .with_context(|| format!("writing {}", path.display()))?;
    file.sync_all()
        .with_context(|| format!("fsync of {}", path.display()))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("fsync of the directory {}", dir.display()))?;
    Ok(())
}

fn rauc(dir: &Path, args: &[String]) -> Result<()> {
    let op = RaucOp::parse(args)?;
    let _lock = lock(dir)?;
    let pair = read_pair(dir)?;
    // Neither file there: most likely the FAT partition is not mounted on `dir`, and an
    // answer (or a write into the directory under it) would be about a boot environment
    // U-Boot never reads. Only `init` makes copies from nothing.
    if pair.a.bytes.is_none() && pair.b.bytes.is_none() {
        bail!(
            "neither pfxenv.a nor pfxenv.b is in {}: is the FAT boot partition mounted there? \
             (`pfx-agent bootenv init` makes them on a partition that lacks them)",
            dir.display()
        );
    }
    let cur = pair.env.current();
    let out = op.apply(&cur.state)?;
    if let Some(line) = out.print {
        // stdout is what RAUC reads; nothing else goes there.
        println!("{line}");
    }
    if let Some(state) = out.write {
        let w = pair.env.write(&state);
        write_copy(dir, w.file, &w.bytes)
            .with_context(|| format!("rauc {}: writing the new state", args.join(" ")))?;
        // stderr reaches RAUC's log (the journal).
        eprintln!(
            "pfx-agent bootenv: rauc {}: wrote {} PFX_SEQ={}: {}",
            args.join(" "),
            w.file.file_name(),
            w.seq,
            describe(&state)
        );
    }
    Ok(())
}

fn describe(s: &BootState) -> String {
    format!(
        "BOOT_ORDER={} BOOT_A_LEFT={} BOOT_B_LEFT={}",
        s.boot_order(),
        s.left(Slot::A),
        s.left(Slot::B)
    )
}

fn init(dir: &Path, force: bool) -> Result<()> {
    let _lock = lock(dir)?;
    let pair = read_pair(dir)?;
    if !force {
        let cur = pair.env.current();
        if let Some(f) = cur.from {
            bail!(
                "{} already holds a valid boot environment ({} PFX_SEQ={}: {}); init would make slot A \
                 the next boot. Pass --force to do it anyway",
                dir.display(),
                f.file_name(),
                cur.seq.unwrap_or(0),
                describe(&cur.state)
            );
        }
    }
    // The copy that ends up older first: whichever moment a power cut hits, the pair holds
    // a valid state.
    for f in EnvFile::BOTH {
        let have = pair.read(f);
        if have.bytes.is_some() && have.len != ENV_SIZE as u64 {
            bail!(
                "{} is {} bytes, not {ENV_SIZE}; init rewrites copies in place and never resizes one: \
                 remove it, then run init again",
                dir.join(f.file_name()).display(),
                have.len
            );
        }
    }
    let [(fa, a), (fb, b)] = pfx_bootenv::initial_copies();
    for (f, bytes) in [(fb, b), (fa, a)] {
        write_copy(dir, f, &bytes)?;
    }
    println!(
        "{}: wrote pfxenv.b (PFX_SEQ=0) and pfxenv.a (PFX_SEQ=1): {}",
        dir.display(),
        describe(&BootState::initial())
    );
    Ok(())
}

// ------------------------------------------------------------------ print

#[derive(Serialize)]
struct PrintReport {
    dir: String,
    copies: Vec<CopyReport>,
    /// The newest valid copy's file name; null when neither is valid.
    newest: Option<&'static str>,
    state: StateReport,
    rauc: RaucReport,
    next_boot: NextBoot,
}

#[derive(Serialize)]
struct CopyReport {
    file: &'static str,
    present: bool,
    size: u64,
    valid: bool,
    /// Why not valid; null when valid.
    error: Option<String>,
    /// The CRC stored in the file's first 4 bytes (little-endian), 8 hex digits.
    crc32: Option<String>,
    seq: Option<u32>,
    /// The four variables as U-Boot's import finds them (absent ones left out).
    vars: Option<VarsReport>,
}

#[derive(Serialize)]
#[allow(non_snake_case)] // the U-Boot variable names
struct VarsReport {
    #[serde(skip_serializing_if = "Option::is_none")]
    PFX_SEQ: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    BOOT_ORDER: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    BOOT_A_LEFT: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    BOOT_B_LEFT: Option<String>,
}

#[derive(Serialize, PartialEq, Eq, Clone, Copy)]
struct StateReport {
    /// The copy the state comes from; null: neither is valid and this is the fallback.
    from: Option<&'static str>,
    seq: Option<u32>,
    boot_order: &'static str,
    a_left: u8,
    b_left: u8,
}

#[derive(Serialize)]
struct RaucReport {
    /// What `get-primary` answers; null when no slot has attempts left.
    primary: Option<&'static str>,
    a: &'static str,
    b: &'static str,
}

#[derive(Serialize)]
struct NextBoot {
    /// `boot` or `reset-both`.
    action: &'static str,
    slot: Option<&'static str>,
    left_before: Option<u8>,
    left_after: Option<u8>,
    trial: bool,
    /// The copy the boot script writes before booting, and what.
    write: WriteReport,
}

#[derive(Serialize)]
struct WriteReport {
    file: &'static str,
    seq: u32,
    crc32: String,
    boot_order: &'static str,
    a_left: u8,
    b_left: u8,
}

fn lossy(v: &Option<Vec<u8>>) -> Option<String> {
    v.as_ref().map(|b| String::from_utf8_lossy(b).into_owned())
}

fn stored_crc(bytes: &Option<Vec<u8>>) -> Option<String> {
    match bytes.as_deref() {
        Some([a, b, c, d, ..]) => Some(format!("{:08x}", u32::from_le_bytes([*a, *b, *c, *d]))),
        _ => None,
    }
}

fn copy_report(f: EnvFile, read: &ReadCopy, decoded: &Result<EnvCopy, Invalid>) -> CopyReport {
    let (valid, error, seq, raw): (bool, Option<String>, Option<u32>, Option<&RawVars>) =
        match (&read.bytes, decoded) {
            (None, _) => (false, Some("missing".to_string()), None, None),
            (Some(_), Ok(c)) => (true, None, Some(c.seq), Some(&c.raw)),
            (Some(_), Err(Invalid::WrongSize { .. })) => (
                false,
                Some(format!(
                    "{} bytes, not {ENV_SIZE} (never resized: see `bootenv init`)",
                    read.len
                )),
                None,
                None,
            ),
            (Some(_), Err(e)) => (false, Some(e.to_string()), None, None),
        };
    CopyReport {
        file: f.file_name(),
        present: read.bytes.is_some(),
        size: read.len,
        valid,
        error,
        crc32: stored_crc(&read.bytes),
        seq,
        vars: raw.map(|r| VarsReport {
            PFX_SEQ: lossy(&r.pfx_seq),
            BOOT_ORDER: lossy(&r.boot_order),
            BOOT_A_LEFT: lossy(&r.boot_a_left),
            BOOT_B_LEFT: lossy(&r.boot_b_left),
        }),
    }
}

fn report(dir: &Path, pair: &Pair) -> Result<PrintReport> {
    let env = &pair.env;
    let cur = env.current();
    let (choice, w) = env.boot();
    let rauc_state = |s: Slot| -> Result<&'static str> {
        RaucOp::GetState(s)
            .apply(&cur.state)?
            .print
            .ok_or_else(|| anyhow!("get-state answered nothing"))
    };
    let next_boot = match choice {
        BootChoice::Boot {
            slot,
            left_before,
            trial,
            after,
        } => NextBoot {
            action: "boot",
            slot: Some(slot.name()),
            left_before: Some(left_before),
            left_after: Some(after.left(slot)),
            trial,
            write: write_report(&w),
        },
        BootChoice::ResetBoth { .. } => NextBoot {
            action: "reset-both",
            slot: None,
            left_before: None,
            left_after: None,
            trial: false,
            write: write_report(&w),
        },
    };
    Ok(PrintReport {
        dir: dir.display().to_string(),
        copies: EnvFile::BOTH
            .iter()
            .map(|f| copy_report(*f, pair.read(*f), env.copy(*f)))
            .collect(),
        newest: env.newest().map(EnvFile::file_name),
        state: StateReport {
            from: cur.from.map(EnvFile::file_name),
            seq: cur.seq,
            boot_order: cur.state.boot_order(),
            a_left: cur.state.left(Slot::A),
            b_left: cur.state.left(Slot::B),
        },
        rauc: RaucReport {
            primary: cur.state.bootable().map(Slot::name),
            a: rauc_state(Slot::A)?,
            b: rauc_state(Slot::B)?,
        },
        next_boot,
    })
}

fn write_report(w: &pfx_bootenv::Write) -> WriteReport {
    WriteReport {
        file: w.file.file_name(),
        seq: w.seq,
        crc32: stored_crc(&Some(w.bytes.clone())).unwrap_or_default(),
        boot_order: w.state.boot_order(),
        a_left: w.state.left(Slot::A),
        b_left: w.state.left(Slot::B),
    }
}

fn print(dir: &Path, json: bool) -> Result<()> {
    let pair = {
        let _lock = lock(dir)?;
        read_pair(dir)?
    };
    let r = report(dir, &pair)?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&r).context("encoding the report")?
        );
        return Ok(());
    }
    for c in &r.copies {
        let mark = if r.newest == Some(c.file) {
            "  (newest)"
        } else {
            ""
        };
        match (&c.error, &c.vars) {
            (None, Some(v)) => println!(
                "{}: valid, PFX_SEQ={} BOOT_ORDER={} BOOT_A_LEFT={} BOOT_B_LEFT={}{mark}",
                c.file,
                c.seq.unwrap_or(0),
                v.BOOT_ORDER.as_deref().unwrap_or("(absent)"),
                v.BOOT_A_LEFT.as_deref().unwrap_or("(absent)"),
                v.BOOT_B_LEFT.as_deref().unwrap_or("(absent)"),
            ),
            (e, _) => println!("{}: INVALID: {}", c.file, e.as_deref().unwrap_or("unknown")),
        }
    }
    let s = &r.state;
    match s.from {
        Some(f) => println!(
            "state (from {f}): BOOT_ORDER={}; A: {} attempts left ({}), B: {} ({}); RAUC primary {}",
            s.boot_order,
            s.a_left,
            r.rauc.a,
            s.b_left,
            r.rauc.b,
            r.rauc.primary.unwrap_or("none")
        ),
        None => println!(
            "state: neither copy is valid, so the boot script uses the fallback: BOOT_ORDER={}; A: {}, B: {}",
            s.boot_order, s.a_left, s.b_left
        ),
    }
    let n = &r.next_boot;
    match n.slot {
        Some(slot) => println!(
            "next boot: slot {slot}, attempt {} -> {} left{}; the boot script writes {} PFX_SEQ={}",
            n.left_before.unwrap_or(0),
            n.left_after.unwrap_or(0),
            if n.trial {
                ", its last (pfx.trial=1)"
            } else {
                ""
            },
            n.write.file,
            n.write.seq
        ),
        None => println!(
            "next boot: no slot has attempts left: the boot script sets both to 3, writes {} PFX_SEQ={} and resets",
            n.write.file, n.write.seq
        ),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent_dir() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    fn state(dir: &Path) -> StateReport {
        let pair = read_pair(dir).unwrap();
        report(dir, &pair).unwrap().state
    }

    #[test]
    fn init_then_rauc_round_trip_on_real_files() {
        let d = agent_dir();
        let dir = d.path();
        init(dir, false).unwrap();
        for f in EnvFile::BOTH {
            assert_eq!(
                std::fs::metadata(dir.join(f.file_name())).unwrap().len(),
                ENV_SIZE as u64
            );
        }
        // A second init refuses: the unit's state would be lost.
        let e = init(dir, false).unwrap_err().to_string();
        assert!(e.contains("--force"), "{e}");
        let s = state(dir);
        assert_eq!(
            (s.from, s.seq, s.a_left, s.b_left),
            (Some("pfxenv.a"), Some(1), 3, 0)
        );
        rauc(dir, &["set-primary".into(), "B".into()]).unwrap();
        let s = state(dir);
        assert_eq!(
            (s.from, s.seq, s.boot_order, s.b_left),
            (Some("pfxenv.b"), Some(2), "B A", 1)
        );
        rauc(dir, &["set-state".into(), "B".into(), "good".into()]).unwrap();
        let s = state(dir);
        assert_eq!((s.from, s.seq, s.b_left), (Some("pfxenv.a"), Some(3), 3));
        // Unchanged: no write, the sequence stays.
        rauc(dir, &["set-state".into(), "B".into(), "good".into()]).unwrap();
        assert_eq!(state(dir).seq, Some(3));
        assert!(rauc(dir, &["set-state".into(), "C".into(), "good".into()]).is_err());
        assert!(rauc(dir, &["frobnicate".into()]).is_err());
    }

    #[test]
    fn a_wrong_size_copy_is_refused_not_resized() {
        let d = agent_dir();
        let dir = d.path();
        init(dir, false).unwrap();
        // pfxenv.b is the copy the next write goes to.
        let b = dir.join("pfxenv.b");
        std::fs::write(&b, [0u8; 100]).unwrap();
        let e = format!(
            "{:#}",
            rauc(dir, &["set-primary".into(), "B".into()]).unwrap_err()
        );
        assert!(e.contains("100 bytes"), "{e}");
        assert_eq!(std::fs::metadata(&b).unwrap().len(), 100);
        assert!(init(dir, true).is_err());
    }

    #[test]
    fn a_missing_copy_is_created_at_full_size() {
        let d = agent_dir();
        let dir = d.path();
        init(dir, false).unwrap();
        std::fs::remove_file(dir.join("pfxenv.b")).unwrap();
        rauc(dir, &["set-state".into(), "A".into(), "bad".into()]).unwrap();
        assert_eq!(
            std::fs::metadata(dir.join("pfxenv.b")).unwrap().len(),
            ENV_SIZE as u64
        );
        let s = state(dir);
        assert_eq!((s.from, s.a_left), (Some("pfxenv.b"), 0));
    }

    #[test]
    fn rauc_refuses_a_directory_without_copies() {
        // As when the FAT partition is not mounted: no answer, and nothing written.
        let d = agent_dir();
        let dir = d.path();
        for args in [
            &["get-primary"][..],
            &["set-primary", "B"][..],
            &["set-state", "A", "good"][..],
        ] {
            let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
            let e = format!("{:#}", rauc(dir, &args).unwrap_err());
            assert!(e.contains("mounted"), "{e}");
        }
        assert_eq!(std::fs::read_dir(dir).unwrap().count(), 0);
    }

    #[test]
    fn writes_keep_the_inode() {
        // In place: the same file, not a replacement (a FAT file keeps its clusters).
        use std::os::unix::fs::MetadataExt;
        let d = agent_dir();
        let dir = d.path();
        init(dir, false).unwrap();
        let ino = |f: &str| std::fs::metadata(dir.join(f)).unwrap().ino();
        let (a, b) = (ino("pfxenv.a"), ino("pfxenv.b"));
        rauc(dir, &["set-primary".into(), "B".into()]).unwrap();
        rauc(dir, &["set-state".into(), "B".into(), "good".into()]).unwrap();
        assert_eq!((ino("pfxenv.a"), ino("pfxenv.b")), (a, b));
    }
}
