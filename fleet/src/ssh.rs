//! Reaching a unit's agent with the OpenSSH client: host keys only from the fleet's
//! known_hosts (unknown or changed keys are refused, never learned), keys only, no
//! prompts; and turning what came back into a recorded state.

use crate::config::SshConfig;
use crate::gate::UnitState;
use pfx_api::agent::ApplyReport;
use serde::Deserialize;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The full `ssh` argument list (without the program).
pub fn ssh_args(c: &SshConfig, host: &str, port: u16, remote: &str) -> Vec<String> {
    args_with(c, host, port, Some(remote), Mux::None)
}

/// [`ssh_args`] plus the options that share one connection per unit through `control`, a
/// socket path inside a [`ControlDir`]. Every pinning option is still given: the first
/// command to a unit makes the connection (and checks the host key); later ones of the
/// same run ride on it.
pub fn ssh_args_reusing(
    c: &SshConfig,
    host: &str,
    port: u16,
    remote: &str,
    control: &Path,
) -> Vec<String> {
    args_with(c, host, port, Some(remote), Mux::Shared(control))
}

/// [`ssh_args`] riding on a connection that `pfx-fleet hold` keeps open at `socket`
/// (`crate::held`). `ControlMaster=no`: when nothing answers there, ssh connects on its
/// own as [`ssh_args`] would, with the same pins, and makes no socket of its own.
pub fn ssh_args_held(
    c: &SshConfig,
    host: &str,
    port: u16,
    remote: &str,
    socket: &Path,
) -> Vec<String> {
    args_with(c, host, port, Some(remote), Mux::Held(socket))
}

/// The arguments of a held connection's master (`pfx-fleet hold`): the same pins, a
/// master on `socket` for as long as the process lives (no `ControlPersist`: it ends with
/// its `hold`), no command (`-N`).
pub fn master_args(c: &SshConfig, host: &str, port: u16, socket: &Path) -> Vec<String> {
    args_with(c, host, port, None, Mux::Master(socket))
}

/// How a command shares a connection.
#[derive(Clone, Copy)]
enum Mux<'a> {
    None,
    /// Within one run: the first command makes it ([`ControlDir`]).
    Shared(&'a Path),
    /// Held by `pfx-fleet hold`: ride on it when it is there, never make it.
    Held(&'a Path),
    /// Be the held master.
    Master(&'a Path),
}

fn args_with(
    c: &SshConfig,
    host: &str,
    port: u16,
    remote: Option<&str>,
    mux: Mux<'_>,
) -> Vec<String> {
    let kh = c.known_hosts.display().to_string();
    let mut a: Vec<String> = vec![
        "-F".into(),
        "/dev/null".into(),
        "-o".into(),
        "BatchMode=yes".into(),
        "-o".into(),
        "StrictHostKeyChecking=yes".into(),
        "-o".into(),
        format!("UserKnownHostsFile={kh}"),
        "-o".into(),
        "GlobalKnownHostsFile=/dev/null".into(),
        "-o".into(),
        "UpdateHostKeys=no".into(),
        "-o".into(),
        "CheckHostIP=no".into(),
        "-o".into(),
        "PasswordAuthentication=no".into(),
        "-o".into(),
        "KbdInteractiveAuthentication=no".into(),
        "-o".into(),
        format!("ConnectTimeout={}", c.connect_timeout_s),
        "-o".into(),
        "ServerAliveInterval=5".into(),
        "-o".into(),
        "ServerAliveCountMax=3".into(),
        "-o".into(),
        "LogLevel=ERROR".into(),
    ];
    if let Some(id) = &c.identity {
        a.extend([
            "-o".into(),
            "IdentitiesOnly=yes".into(),
            "-i".into(),
            id.display().to_string(),
        ]);
    }
    // ssh expands % in ControlPath; ControlDir and the held directory only make paths
    // without one.
    let (master, path, persist) = match mux {
        Mux::None => (None, None, None),
        Mux::Shared(p) => (Some("auto"), Some(p), Some(CONTROL_PERSIST_S.to_string())),
        Mux::Held(p) => (Some("no"), Some(p), None),
        Mux::Master(p) => (Some("yes"), Some(p), Some("no".to_string())),
    };
    if let (Some(m), Some(p)) = (master, path) {
        a.extend([
            "-o".into(),
            format!("ControlMaster={m}"),
            "-o".into(),
            format!("ControlPath={}", p.display()),
        ]);
    }
    if let Some(x) = persist {
        a.extend(["-o".into(), format!("ControlPersist={x}")]);
    }
    if remote.is_none() {
        a.push("-N".into());
    }
    a.extend([
        "-p".into(),
        port.to_string(),
        "-l".into(),
        c.user.clone(),
        host.into(),
    ]);
    if let Some(r) = remote {
        a.extend(["--".into(), r.into()]);
    }
    a
}

/// How long a unit's shared connection stays up with no command on it. Between the
/// commands of one run it is milliseconds; if `pfx-fleet` itself is killed (SIGKILL, no
/// chance to clean up), its connections close on their own after this.
pub const CONTROL_PERSIST_S: u64 = 10;

/// Room ssh needs in a socket path beyond ours: a sockaddr_un holds 108 bytes with the
/// NUL, and ssh binds `PATH.` plus 16 random characters first, then renames.
pub(crate) const SUN_PATH_ROOM: usize = 107 - 17;

/// One run's SSH control sockets: a fresh directory only this user can enter (mode 0700,
/// checked after it is made), one socket per unit slot inside it. A shared connection is
/// only ever reached through its unit's socket here, so a command can ride on nothing but
/// the connection that the same run made, host key checked, to that unit. `close` (also
/// on drop) ends every connection still open and removes the directory.
#[derive(Debug)]
pub struct ControlDir {
    dir: Mutex<PathBuf>,
    ssh: PathBuf,
    closed: AtomicBool,
}

#[derive(Debug, thiserror::Error)]
pub enum ControlDirError {
    #[error("making a private directory for SSH connection reuse in {base}: {source}")]
    Make {
        base: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the directory for SSH connection reuse {path} is not private (uid {uid}, mode {mode:o}; want this user's, 0700)"
    )]
    NotPrivate { path: PathBuf, uid: u32, mode: u32 },
    #[error(
        "no usable directory for SSH control sockets: {0} (a socket path must be short, with no white space, quotes or %); set TMPDIR to a short private directory"
    )]
    NoBase(String),
}

/// Whether a path can go into `-o ControlPath=...` as it is: ssh splits option values on
/// white space and quotes and expands `%`. Pure.
pub(crate) fn plain_path(p: &Path) -> bool {
    p.to_str().is_some_and(|s| {
        s.starts_with('/')
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"/._-+".contains(&b))
    })
}

/// Whether nobody else could move the run's directory away and put their own (with a
/// socket of their connection in it) at its path: the base is this user's and not
/// writable by group or others, or root's and sticky (/tmp).
fn base_is_safe(base: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    std::fs::metadata(base).is_ok_and(|m| base_mode_is_safe(m.is_dir(), m.uid(), m.mode(), me))
}

/// [`base_is_safe`] on the numbers. Pure.
fn base_mode_is_safe(is_dir: bool, uid: u32, mode: u32, me: u32) -> bool {
    is_dir && ((uid == me && mode & 0o022 == 0) || (uid == 0 && mode & 0o1000 != 0))
}

impl ControlDir {
    /// Makes the run's directory under `$XDG_RUNTIME_DIR` when that is usable, else under
    /// the temporary directory (`$TMPDIR`, else /tmp). `ssh` is the client that will be
    /// asked to end the connections.
    pub fn create(ssh: &Path) -> Result<ControlDir, ControlDirError> {
        let mut bases = Vec::new();
        if let Some(x) = std::env::var_os("XDG_RUNTIME_DIR") {
            bases.push(PathBuf::from(x));
        }
        bases.push(std::env::temp_dir());
        bases.push("/tmp".into());
        let mut why = Vec::new();
        for base in bases {
            // "/pfx-fleet-ssh.XXXXXX" + "/" + a slot of up to 7 digits.
            if !plain_path(&base) || base.as_os_str().len() + 21 + 8 > SUN_PATH_ROOM {
                why.push(format!("{} unusable", base.display()));
                continue;
            }
            if !base_is_safe(&base) {
                why.push(format!(
                    "{} is not this user's or a sticky root directory",
                    base.display()
                ));
                continue;
            }
            let dir = Self::mkdtemp(&base)?;
            return Ok(ControlDir {
                dir: Mutex::new(dir),
                ssh: ssh.to_path_buf(),
                closed: AtomicBool::new(false),
            });
        }
        Err(ControlDirError::NoBase(why.join(", ")))
    }

    fn mkdtemp(base: &Path) -> Result<PathBuf, ControlDirError> {
        use std::os::unix::ffi::OsStringExt;
        use std::os::unix::fs::MetadataExt;
        let make = |e| ControlDirError::Make {
            base: base.to_path_buf(),
            source: e,
        };
        let template = format!("{}/pfx-fleet-ssh.XXXXXX", base.display());
        let mut buf = std::ffi::CString::new(template)
            .map_err(|_| make(std::io::ErrorKind::InvalidInput.into()))?
            .into_bytes_with_nul();
        // SAFETY: `buf` is a NUL-terminated template that mkdtemp rewrites in place.
        let p = unsafe { libc::mkdtemp(buf.as_mut_ptr().cast()) };
        if p.is_null() {
            return Err(make(std::io::Error::last_os_error()));
        }
        buf.pop();
        let dir = PathBuf::from(std::ffi::OsString::from_vec(buf));
        // mkdtemp makes it 0700; check what is there, not what was asked for.
        let m = std::fs::symlink_metadata(&dir).map_err(make)?;
        // SAFETY: geteuid cannot fail.
        let me = unsafe { libc::geteuid() };
        if !m.is_dir() || m.uid() != me || m.mode() & 0o7777 != 0o700 {
            let _ = std::fs::remove_dir(&dir);
            return Err(ControlDirError::NotPrivate {
                path: dir,
                uid: m.uid(),
                mode: m.mode() & 0o7777,
            });
        }
        Ok(dir)
    }

    /// The directory (for messages and tests).
    pub fn path(&self) -> PathBuf {
        self.dir.lock().map(|d| d.clone()).unwrap_or_default()
    }

    /// The socket of unit slot `slot` (each unit of a run has its own slot).
    pub fn socket(&self, slot: usize) -> PathBuf {
        self.path().join(slot.to_string())
    }

    /// Whether `close` has begun: nothing should be started on a connection after it.
    pub fn closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Ends the shared connection of `slot`, if there is one (after the unit's last
    /// command, so at most `--parallel` connections are open at any time).
    pub fn release(&self, slot: usize) {
        let s = self.socket(slot);
        if s.exists() {
            self.exit_master(&s);
        }
    }

    fn exit_master(&self, socket: &Path) {
        // `-O exit` talks to the connection over its socket only; the host name is required
        // by the command line and not used.
        let args: Vec<String> = vec![
            "-F".into(),
            "/dev/null".into(),
            "-o".into(),
            format!("ControlPath={}", socket.display()),
            "-O".into(),
            "exit".into(),
            "pfx-fleet-control".into(),
        ];
        let r = run(&self.ssh, &args, None, Duration::from_secs(5));
        // The connection removes its socket as it exits: wait for that (briefly), so a
        // released or closed connection is really gone, not going.
        if r.exit == Some(0) {
            let t0 = Instant::now();
            let mut nap = Duration::from_micros(500);
            while socket.exists() && t0.elapsed() < Duration::from_secs(2) {
                std::thread::sleep(nap);
                nap = (nap * 2).min(Duration::from_millis(50));
            }
        }
    }

    /// Ends every connection still open and removes the directory. The directory is moved
    /// aside first, so a connection that a racing command starts now cannot make its socket
    /// (it fails instead of outliving the run). Idempotent.
    pub fn close(&self) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        let Ok(mut dir) = self.dir.lock() else {
            return;
        };
        let aside = PathBuf::from(format!("{}-closing", dir.display()));
        if std::fs::rename(&*dir, &aside).is_ok() {
            *dir = aside;
        }
        if let Ok(entries) = std::fs::read_dir(&*dir) {
            use std::os::unix::fs::FileTypeExt;
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_socket()) {
                    self.exit_master(&e.path());
                }
            }
        }
        let _ = std::fs::remove_dir_all(&*dir);
    }
}

impl Drop for ControlDir {
    fn drop(&mut self) {
        self.close();
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Raw {
    pub exit: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub timed_out: bool,
    /// The unit's shared connection (its control socket) was gone when an exit 255
    /// came back: the connection ended under the command, see [`run_on`].
    pub shared_lost: bool,
}

/// What a command reads on its stdin: `from` is streamed as the child takes it (a buffer
/// at a time, never held whole), and every byte the child has taken is added to `sent`
/// as it goes (a progress display may read it from another thread).
pub struct Input<'a> {
    pub from: &'a mut dyn Read,
    pub sent: &'a AtomicU64,
}

/// The stdin side of [`run`]: the pipe, a buffer of what was read from the input and not
/// yet taken by the child, and the input.
struct Feed<'a> {
    pipe: ChildStdin,
    input: Input<'a>,
    buf: Box<[u8]>,
    at: usize,
    end: usize,
}

/// What one step of feeding came to.
enum Fed {
    /// More to write (or the pipe is full for now).
    More,
    /// The input is all written, or the child will take no more: close the pipe.
    Finished,
}

impl Feed<'_> {
    fn new(pipe: ChildStdin, input: Input<'_>) -> std::io::Result<Feed<'_>> {
        use std::os::fd::AsRawFd;
        let fd = pipe.as_raw_fd();
        // Non-blocking, so a full pipe never holds up reading the child's output (a
        // child that answers before it has read all of its input would deadlock).
        // SAFETY: fcntl on an fd we own.
        let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        // SAFETY: as above.
        if fl < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Feed {
            pipe,
            input,
            buf: vec![0u8; 64 * 1024].into_boxed_slice(),
            at: 0,
            end: 0,
        })
    }

    /// Refills the buffer when it is empty: `Finished` at the end of the input (or on
    /// an error reading it: the child sees its input end early and says so).
    fn refill(&mut self) -> Fed {
        if self.at < self.end {
            return Fed::More;
        }
        loop {
            match self.input.from.read(&mut self.buf) {
                Ok(0) => return Fed::Finished,
                Ok(n) => {
                    (self.at, self.end) = (0, n);
                    return Fed::More;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return Fed::Finished,
            }
        }
    }

    /// Writes what the pipe takes now.
    fn write(&mut self) -> Fed {
        match self.pipe.write(&self.buf[self.at..self.end]) {
            Ok(n) => {
                self.at += n;
                self.input.sent.fetch_add(n as u64, Ordering::Relaxed);
                self.refill()
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                ) =>
            {
                Fed::More
            }
            // EPIPE: the child closed its stdin (or died); what it said is still read.
            Err(_) => Fed::Finished,
        }
    }
}

/// Runs a command with a hard deadline, feeding `input` (if any) to its stdin and reading
/// both output pipes as they fill (one `poll` loop in the calling thread: no helper
/// threads, and the result is there the moment the child is done, not at the next tick of
/// a timer). Without input the child's stdin is /dev/null.
pub fn run(program: &Path, args: &[String], input: Option<Input<'_>>, timeout: Duration) -> Raw {
    let deadline = Instant::now() + timeout;
    let cannot = |e: std::io::Error| Raw {
        exit: None,
        stdout: String::new(),
        stderr: format!("cannot run {}: {e}", program.display()),
        timed_out: false,
        shared_lost: false,
    };
    let mut child = match Command::new(program)
        .args(args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return cannot(e),
    };
    let feed = match (child.stdin.take(), input) {
        (Some(pipe), Some(input)) => match Feed::new(pipe, input) {
            Ok(mut f) => match f.refill() {
                Fed::More => Some(f),
                Fed::Finished => None,
            },
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return cannot(e);
            }
        },
        _ => None,
    };
    let (out, err, timed_out) = pump(&mut child, feed, deadline);
    let (status, timed_out) = reap(&mut child, timed_out, deadline);
    Raw {
        exit: status.and_then(|s| s.code()),
        stdout: String::from_utf8_lossy(&out).into_owned(),
        stderr: String::from_utf8_lossy(&err).into_owned(),
        timed_out,
        shared_lost: false,
    }
}

/// Feeds the child's stdin and reads its stdout and stderr, all through one poll, until
/// both outputs are closed and the input is all taken, or the deadline. Returns what it
/// printed and whether the deadline came first.
fn pump(
    child: &mut std::process::Child,
    mut feed: Option<Feed<'_>>,
    deadline: Instant,
) -> (Vec<u8>, Vec<u8>, bool) {
    use std::os::fd::AsRawFd;
    let (mut out, mut err) = (Vec::new(), Vec::new());
    // The handles own the fds (they close on drop, after the loop); poll and read use the
    // raw numbers.
    let (so, se) = (child.stdout.take(), child.stderr.take());
    let mut pipes = [
        so.as_ref().map(|p| p.as_raw_fd()),
        se.as_ref().map(|p| p.as_raw_fd()),
    ];
    while pipes.iter().any(Option::is_some) || feed.is_some() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return (out, err, true);
        }
        let stdin_fd = feed.as_ref().map(|f| f.pipe.as_raw_fd());
        let mut fds: Vec<libc::pollfd> = pipes
            .iter()
            .flatten()
            .map(|&fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .chain(stdin_fd.map(|fd| libc::pollfd {
                fd,
                events: libc::POLLOUT,
                revents: 0,
            }))
            .collect();
        let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: `fds` is a valid array of pollfd for the duration of the call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        for p in fds.iter().filter(|p| p.revents != 0) {
            if Some(p.fd) == stdin_fd {
                if let Some(f) = feed.as_mut()
                    && let Fed::Finished = f.write()
                {
                    // Dropping the pipe closes it: the child sees the end of its input.
                    feed = None;
                }
                continue;
            }
            let (slot, buf) = if Some(p.fd) == pipes[0] {
                (0, &mut out)
            } else {
                (1, &mut err)
            };
            if !read_some(p.fd, buf) {
                pipes[slot] = None;
            }
        }
    }
    (out, err, false)
}

/// Reads what `fd` has into `buf`; false when it is closed (or failed).
fn read_some(fd: i32, buf: &mut Vec<u8>) -> bool {
    let mut chunk = [0u8; 8192];
    // SAFETY: reading into a local buffer of the given length from an fd we own.
    let r = unsafe { libc::read(fd, chunk.as_mut_ptr().cast(), chunk.len()) };
    if r > 0 {
        buf.extend_from_slice(&chunk[..r as usize]);
        true
    } else {
        r < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
    }
}

/// The child's exit: killed at once when the deadline came first; else waited for, still
/// within the deadline (a child that closes its output and keeps running is killed at
/// it). Returns its status and whether the deadline came first.
fn reap(
    child: &mut std::process::Child,
    timed_out: bool,
    deadline: Instant,
) -> (Option<std::process::ExitStatus>, bool) {
    if timed_out {
        let _ = child.kill();
        return (child.wait().ok(), true);
    }
    let mut nap = Duration::from_micros(200);
    loop {
        match child.try_wait() {
            Ok(Some(s)) => return (Some(s), false),
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                return (child.wait().ok(), true);
            }
            Ok(None) => {
                std::thread::sleep(nap);
                nap = (nap * 2).min(Duration::from_millis(20));
            }
            Err(_) => return (None, false),
        }
    }
}

/// [`run`] for a command that rides on (or makes) the shared connection at `socket` (see
/// [`ssh_args_reusing`]). When ssh comes back with its own exit 255 and nothing answers on
/// the socket any more, the connection ended under the command: its master was killed or
/// died. OpenSSH's mux client does not say so at `LogLevel=ERROR` (its "Control master
/// terminated unexpectedly" is a debug message), so it is looked at here. A master that
/// was gone before the command is not this case: ssh then makes a fresh connection
/// itself, with the same pinned options.
pub fn run_on(
    program: &Path,
    args: &[String],
    input: Option<Input<'_>>,
    timeout: Duration,
    socket: Option<&Path>,
) -> Raw {
    let mut raw = run(program, args, input, timeout);
    if let Some(s) = socket {
        raw.shared_lost = raw.exit == Some(255) && !raw.timed_out && master_gone(s);
    }
    raw
}

/// Which connection a command to a unit rides on.
#[derive(Clone, Copy, Debug)]
pub enum Via<'a> {
    /// Its own connection ([`ssh_args`]).
    Own,
    /// The run's shared connection to the unit at this socket ([`ssh_args_reusing`]).
    Shared(&'a Path),
    /// A connection `pfx-fleet hold` keeps at this socket ([`ssh_args_held`]).
    Held(&'a Path),
}

impl<'a> Via<'a> {
    /// The run's shared connection when there is one, else the command's own.
    pub fn shared(socket: Option<&'a Path>) -> Via<'a> {
        socket.map_or(Via::Own, Via::Shared)
    }

    /// A held connection when one answers, else the command's own.
    pub fn held(socket: Option<&'a Path>) -> Via<'a> {
        socket.map_or(Via::Own, Via::Held)
    }

    fn socket(self) -> Option<&'a Path> {
        match self {
            Via::Own => None,
            Via::Shared(s) | Via::Held(s) => Some(s),
        }
    }
}

/// One command to a unit (`remote`, the agent's whole command line) over `via`: the
/// pinned arguments built, run within `timeout`, and a shared connection lost under it
/// noticed ([`run_on`]). Every command the operator side sends a unit goes through here,
/// so all of them are built and run alike.
pub fn run_for(
    c: &SshConfig,
    host: &str,
    port: u16,
    remote: &str,
    via: Via<'_>,
    input: Option<Input<'_>>,
    timeout: Duration,
) -> Raw {
    let mux = match via {
        Via::Own => Mux::None,
        Via::Shared(s) => Mux::Shared(s),
        Via::Held(s) => Mux::Held(s),
    };
    let args = args_with(c, host, port, Some(remote), mux);
    run_on(&c.ssh, &args, input, timeout, via.socket())
}

/// Whether the master behind `socket` is gone, looked at a few times over 100 ms: a
/// killed master's connection to its client can close a moment before its listening
/// socket does, so a single look right after the client's exit may still be let in.
fn master_gone(socket: &Path) -> bool {
    for _ in 0..5 {
        if !master_answers(socket) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Whether a shared connection's master accepts on `socket` (a stale socket file of a
/// killed master refuses; one that exited removed its file).
pub(crate) fn master_answers(socket: &Path) -> bool {
    std::os::unix::net::UnixStream::connect(socket).is_ok()
}

/// What OpenSSH 9's client prints when the shared connection (the ControlMaster and its
/// socket) fails a command, at `LogLevel=ERROR` and above (from its mux.c and ssh.c). Each
/// means the transport failed, not the unit: a later run makes a fresh connection.
const MUX_ERRORS: [&str; 8] = [
    "master alive request failed",
    "read from master failed",
    "master hello exchange failed",
    "mux_client_request_alive: write packet",
    "mux_client_request_session: write packet",
    "send fds failed",
    "Failed to connect to new control master",
    // Only above LogLevel=ERROR; kept for a client run with more logging.
    "Control master terminated unexpectedly",
];

#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub state: UnitState,
    pub reason: Option<String>,
    /// The agent's JSON answer, verbatim (compact), when there was one.
    pub readback: Option<String>,
    pub unit_read_ms: Option<u64>,
}

fn tail(s: &str) -> String {
    let t = s.trim();
    let lines: Vec<&str> = t.lines().rev().take(2).collect();
    lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
}

/// An outcome with a reason and nothing read back.
fn no_readback(state: UnitState, reason: String) -> Outcome {
    Outcome {
        state,
        reason: Some(reason),
        readback: None,
        unit_read_ms: None,
    }
}

/// What SSH itself said, before any answer of the agent's: timed out, host key or login
/// refused, unreachable, the shared connection lost. None when it ran the command.
fn transport_failure(raw: &Raw, timeout_s: u64) -> Option<Outcome> {
    let o = |state, reason| Some(no_readback(state, reason));
    if raw.timed_out {
        return o(
            UnitState::Pending,
            format!(
                "no answer within {timeout_s}s (unit offline or stuck); the agent may have applied, re-run to verify"
            ),
        );
    }
    let err = &raw.stderr;
    if raw.exit == Some(255) {
        if err.contains("Host key verification failed")
            || err.contains("REMOTE HOST IDENTIFICATION HAS CHANGED")
            || err.contains("No ED25519 host key is known")
            || err.contains("host key is known")
        {
            return o(
                UnitState::Failed,
                format!(
                    "host key refused: not in the fleet known_hosts or changed ({})",
                    tail(err)
                ),
            );
        }
        if err.contains("Permission denied") {
            return o(
                UnitState::Failed,
                format!("ssh authentication refused: {}", tail(err)),
            );
        }
        for w in [
            "Connection refused",
            "timed out",
            "No route to host",
            "Network is unreachable",
            "Could not resolve",
            "Connection closed by",
            "Connection reset",
        ] {
            if err.contains(w) && !raw.stdout.contains('{') {
                return o(UnitState::Pending, format!("unreachable: {}", tail(err)));
            }
        }
        // Reached, then lost: the shared connection ended under the command.
        if raw.shared_lost || MUX_ERRORS.iter().any(|w| err.contains(w)) {
            return o(
                UnitState::Pending,
                format!(
                    "the shared SSH connection to the unit ended during the command (its ssh master was killed or died){}; the agent may have applied, re-run to verify",
                    if err.trim().is_empty() {
                        String::new()
                    } else {
                        format!(": {}", tail(err))
                    }
                ),
            );
        }
    }
    None
}

/// What a push's SSH run means for the unit. Pure.
pub fn classify(raw: &Raw, expected_unit: &str, timeout_s: u64) -> Outcome {
    if let Some(out) = transport_failure(raw, timeout_s) {
        return out;
    }
    let o = no_readback;
    let err = &raw.stderr;
    let exit_and_stderr = || {
        format!(
            "(exit {}): {}",
            raw.exit
                .map(|c| c.to_string())
                .unwrap_or_else(|| "by signal".into()),
            if err.trim().is_empty() {
                "no stderr".into()
            } else {
                tail(err)
            }
        )
    };
    let v = match serde_json::from_str::<serde_json::Value>(raw.stdout.trim()) {
        Ok(v) if v.get("verified").is_some() => v,
        _ => {
            return o(
                UnitState::Failed,
                format!("no answer from the agent {}", exit_and_stderr()),
            );
        }
    };
    // Read through the agent's own type (pfx-api), so a renamed or retyped field is an
    // error here and in the golden tests, never a silently missing "verified".
    let report = match ApplyReport::deserialize(&v) {
        Ok(r) => r,
        Err(e) => {
            return Outcome {
                readback: Some(v.to_string()),
                ..o(
                    UnitState::Failed,
                    format!(
                        "the agent's answer is not an apply report this pfx-fleet reads ({e}) {}: are the unit's agent and this pfx-fleet from different releases? Update the one that is behind",
                        exit_and_stderr()
                    ),
                )
            };
        }
    };
    // Recorded as the agent sent it (compact), not as re-serialised.
    let compact = v.to_string();
    let mut out = Outcome {
        state: UnitState::Failed,
        reason: None,
        readback: Some(compact.clone()),
        unit_read_ms: Some(report.read_at_unix_ms),
    };
    if report.unit != expected_unit {
        out.reason = Some(format!(
            "answered as unit {:?}, expected {expected_unit:?}: wrong host in the config?",
            report.unit
        ));
        return out;
    }
    if crate::gate::readback_verified(&compact) && raw.exit == Some(0) {
        out.state = UnitState::Done;
        out.reason = Some(report.message);
    } else {
        out.reason = Some(if report.errors.is_empty() {
            report.message
        } else {
            format!(
                "{} ({})",
                report.message,
                serde_json::to_string(&report.errors).unwrap_or_default()
            )
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::tests::good_readback;

    fn raw(exit: Option<i32>, stdout: &str, stderr: &str) -> Raw {
        Raw {
            exit,
            stdout: stdout.into(),
            stderr: stderr.into(),
            timed_out: false,
            shared_lost: false,
        }
    }

    /// The golden apply report (compact, as the agent's JSON reads on one line) as `unit`.
    fn answer(unit: &str) -> String {
        good_readback().replace("\"unit\":\"gen3-7\"", &format!("\"unit\":\"{unit}\""))
    }

    #[test]
    fn args_pin_host_keys_and_never_prompt() {
        let c = SshConfig {
            known_hosts: "/k".into(),
            identity: Some("/id".into()),
            ..Default::default()
        };
        let a = ssh_args(&c, "10.0.0.1", 2222, "pfx-agent apply pause-off --json").join(" ");
        for want in [
            "BatchMode=yes",
            "StrictHostKeyChecking=yes",
            "UserKnownHostsFile=/k",
            "GlobalKnownHostsFile=/dev/null",
            "-i /id",
            "-p 2222",
            "-l pfx 10.0.0.1 -- pfx-agent apply pause-off --json",
        ] {
            assert!(a.contains(want), "{want} missing in {a}");
        }
        assert!(!a.contains("accept-new") && !a.contains("StrictHostKeyChecking=no"));
    }

    #[test]
    fn reusing_args_keep_every_pin_and_add_only_the_control_options() {
        let c = SshConfig {
            known_hosts: "/k".into(),
            identity: Some("/id".into()),
            ..Default::default()
        };
        let plain = ssh_args(&c, "10.0.0.1", 22, "status --json");
        let reuse = ssh_args_reusing(
            &c,
            "10.0.0.1",
            22,
            "status --json",
            Path::new("/run/x/pfx-fleet-ssh.abc/7"),
        );
        // Exactly the plain list with the three control options before the port, host
        // and command.
        let at = plain.iter().position(|a| a == "-p").unwrap();
        let mut want = plain.clone();
        want.splice(
            at..at,
            [
                "-o".to_string(),
                "ControlMaster=auto".into(),
                "-o".into(),
                "ControlPath=/run/x/pfx-fleet-ssh.abc/7".into(),
                "-o".into(),
                format!("ControlPersist={CONTROL_PERSIST_S}"),
            ],
        );
        assert_eq!(reuse, want);
        assert_eq!(reuse.last().map(String::as_str), Some("status --json"));
    }

    #[test]
    fn run_for_runs_the_argument_list_its_via_names() {
        // `echo` as the ssh program prints the arguments it was given: run_for must give
        // each way exactly the list of its ssh_args_* function.
        let c = SshConfig {
            ssh: "/bin/echo".into(),
            known_hosts: "/k".into(),
            identity: Some("/id".into()),
            ..Default::default()
        };
        let sock = Path::new("/run/x/pfx-fleet-ssh.abc/3");
        let cmd = "pfx-agent status --json";
        for (via, want) in [
            (Via::Own, ssh_args(&c, "10.0.0.9", 2222, cmd)),
            (
                Via::Shared(sock),
                ssh_args_reusing(&c, "10.0.0.9", 2222, cmd, sock),
            ),
            (
                Via::Held(sock),
                ssh_args_held(&c, "10.0.0.9", 2222, cmd, sock),
            ),
        ] {
            let raw = run_for(
                &c,
                "10.0.0.9",
                2222,
                cmd,
                via,
                None,
                Duration::from_secs(10),
            );
            assert_eq!(raw.exit, Some(0), "{via:?}: {raw:?}");
            assert_eq!(raw.stdout.trim_end(), want.join(" "), "{via:?}");
            assert!(
                !raw.shared_lost,
                "{via:?}: exit 0 is never a lost connection"
            );
        }
        assert!(matches!(Via::shared(None), Via::Own));
        assert!(matches!(Via::held(Some(sock)), Via::Held(_)));
    }

    #[test]
    fn held_args_ride_without_making_and_the_master_runs_no_command() {
        let c = SshConfig {
            known_hosts: "/k".into(),
            identity: Some("/id".into()),
            ..Default::default()
        };
        let sock = Path::new("/run/x/pfx-fleet-held/0123456789abcdef");
        let plain = ssh_args(&c, "10.0.0.1", 22, "control blackout");
        let held = ssh_args_held(&c, "10.0.0.1", 22, "control blackout", sock);
        let at = plain.iter().position(|a| a == "-p").unwrap();
        let mut want = plain.clone();
        want.splice(
            at..at,
            [
                "-o".to_string(),
                "ControlMaster=no".into(),
                "-o".into(),
                format!("ControlPath={}", sock.display()),
            ],
        );
        assert_eq!(
            held, want,
            "a held command never persists or makes a master"
        );
        let master = master_args(&c, "10.0.0.1", 22, sock);
        // Every pin of a command, then the master's options, `-N`, and no command.
        assert_eq!(master[..at], plain[..at]);
        assert_eq!(
            master[at..],
            [
                "-o",
                "ControlMaster=yes",
                "-o",
                &format!("ControlPath={}", sock.display()),
                "-o",
                "ControlPersist=no",
                "-N",
                "-p",
                "22",
                "-l",
                "pfx",
                "10.0.0.1"
            ]
        );
    }

    #[test]
    fn control_paths_are_only_plain_absolute_paths() {
        for ok in ["/tmp", "/run/user/1000", "/a/b-c_d.e+f"] {
            assert!(plain_path(Path::new(ok)), "{ok}");
        }
        for bad in ["tmp", "/a b", "/a%h", "/a\"b", "/a'b", "/a\tb", "/a~b"] {
            assert!(!plain_path(Path::new(bad)), "{bad}");
        }
    }

    #[test]
    fn control_dir_base_must_be_ours_or_sticky_root() {
        assert!(base_mode_is_safe(true, 1000, 0o40700, 1000));
        assert!(base_mode_is_safe(true, 0, 0o41777, 1000));
        assert!(base_mode_is_safe(true, 0, 0o41777, 0));
        // Another user's runtime directory (sudo keeping XDG_RUNTIME_DIR): they could
        // swap the run's directory for their own.
        assert!(!base_mode_is_safe(true, 1000, 0o40700, 0));
        assert!(!base_mode_is_safe(true, 1000, 0o40775, 1000));
        assert!(!base_mode_is_safe(true, 0, 0o40777, 0));
        assert!(!base_mode_is_safe(false, 0, 0o41777, 0));
        assert!(base_is_safe(Path::new("/tmp")));
    }

    #[test]
    fn control_dir_is_private_and_removed_on_close() {
        use std::os::unix::fs::MetadataExt;
        let d = ControlDir::create(Path::new("ssh")).expect("a control dir under /tmp");
        let p = d.path();
        let m = std::fs::symlink_metadata(&p).unwrap();
        assert!(m.is_dir() && m.mode() & 0o7777 == 0o700, "{:o}", m.mode());
        assert_eq!(m.uid(), unsafe { libc::geteuid() });
        assert!(
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("pfx-fleet-ssh.")
        );
        assert_eq!(d.socket(3), p.join("3"));
        std::fs::write(p.join("leftover"), b"x").unwrap();
        d.close();
        assert!(d.closed());
        assert!(!p.exists() && !PathBuf::from(format!("{}-closing", p.display())).exists());
        // Dropping a second time is harmless; two dirs never share a path.
        let (a, b) = (
            ControlDir::create(Path::new("ssh")).unwrap(),
            ControlDir::create(Path::new("ssh")).unwrap(),
        );
        assert_ne!(a.path(), b.path());
        let pa = a.path();
        drop(a);
        assert!(!pa.exists());
    }

    #[test]
    fn verified_answer_is_done() {
        let o = classify(&raw(Some(0), &answer("u1"), ""), "u1", 60);
        assert_eq!(o.state, UnitState::Done, "{o:?}");
        assert!(o.readback.is_some());
    }

    /// The operator's half of the golden test: the agent's golden apply report (the
    /// agent's own test writes it, pfx-api's reads it back) is what `push` and the gate
    /// read, through the pfx-api type. A field renamed on either side fails here.
    #[test]
    fn the_agents_golden_report_is_read_through_its_type() {
        let golden = pfx_api::golden::read("agent-apply.json");
        let o = classify(&raw(Some(0), &golden, ""), "gen3-7", 60);
        assert_eq!(o.state, UnitState::Done, "{o:?}");
        assert_eq!(o.reason.as_deref(), Some("applied and verified"));
        assert_eq!(o.unit_read_ms, Some(1_764_547_200_000));
        assert!(crate::gate::readback_verified(&golden));
        // A renamed field: still JSON with "verified", no longer the agent's type.
        let renamed = golden.replace("\"lower_readonly\"", "\"lower_ro\"");
        let o = classify(&raw(Some(0), &renamed, ""), "gen3-7", 60);
        assert_eq!(o.state, UnitState::Failed, "{o:?}");
        assert!(
            o.reason
                .as_deref()
                .is_some_and(|r| r.contains("not an apply report") && r.contains("lower_readonly")),
            "{o:?}"
        );
        assert!(!crate::gate::readback_verified(&renamed));
    }

    #[test]
    fn failures_are_never_done() {
        let cases = [
            (
                raw(Some(255), "", "Host key verification failed.\n"),
                UnitState::Failed,
                "host key",
            ),
            (
                raw(
                    Some(255),
                    "",
                    "ssh: connect to host 10.0.0.1 port 22: Connection refused\n",
                ),
                UnitState::Pending,
                "unreachable",
            ),
            (
                raw(
                    Some(255),
                    "",
                    "root@10.0.0.1: Permission denied (publickey).\n",
                ),
                UnitState::Failed,
                "authentication",
            ),
            (
                raw(Some(255), "{\"unit\":", ""),
                UnitState::Failed,
                "no answer",
            ),
            (raw(None, "", ""), UnitState::Failed, "by signal"),
            (
                raw(Some(0), &answer("u2"), ""),
                UnitState::Failed,
                "expected \"u1\"",
            ),
            (
                raw(
                    Some(1),
                    &answer("u1").replace("\"verified\":true", "\"verified\":false"),
                    "",
                ),
                UnitState::Failed,
                "applied",
            ),
            // A verified JSON with a non-zero exit is not trusted either.
            (raw(Some(1), &answer("u1"), ""), UnitState::Failed, ""),
        ];
        for (r, want, word) in cases {
            let o = classify(&r, "u1", 60);
            assert_eq!(o.state, want, "{r:?} -> {o:?}");
            assert!(
                o.reason.as_deref().unwrap_or("").contains(word),
                "{o:?} lacks {word}"
            );
        }
        let mut t = raw(None, "", "");
        t.timed_out = true;
        assert_eq!(classify(&t, "u1", 60).state, UnitState::Pending);
    }

    #[test]
    fn a_shared_connection_lost_under_a_command_is_pending() {
        // The master killed mid-command: ssh exits 255 and says nothing at LogLevel=ERROR;
        // run_on finds the socket dead. Even a whole answer without its exit status is
        // only pending.
        for stdout in [String::new(), answer("u1")] {
            let mut r = raw(Some(255), &stdout, "");
            r.shared_lost = true;
            let o = classify(&r, "u1", 60);
            assert_eq!(o.state, UnitState::Pending, "{o:?}");
            assert!(o.reason.unwrap().contains("shared SSH connection"));
        }
        for text in [
            "mux_client_request_session: master alive request failed\n",
            "mux_client_request_session: read from master failed: Broken pipe\n",
            "muxclient: master hello exchange failed\n",
            "mux_client_request_alive: write packet: Broken pipe\n",
            "Failed to connect to new control master\n",
        ] {
            let o = classify(&raw(Some(255), "", text), "u1", 60);
            assert_eq!(o.state, UnitState::Pending, "{text} -> {o:?}");
        }
        // Without either, an exit 255 with no answer stays a failure; and a refused host
        // key is refused whatever became of the connection.
        assert_eq!(
            classify(&raw(Some(255), "", ""), "u1", 60).state,
            UnitState::Failed
        );
        let mut r = raw(Some(255), "", "Host key verification failed.\n");
        r.shared_lost = true;
        assert_eq!(classify(&r, "u1", 60).state, UnitState::Failed);
        // A unit that was never reached has no connection to lose: it is unreachable.
        let mut r = raw(
            Some(255),
            "",
            "ssh: connect to host 10.0.0.1 port 22: Connection refused\n",
        );
        r.shared_lost = true;
        let o = classify(&r, "u1", 60);
        assert!(o.reason.unwrap().starts_with("unreachable"));
    }

    /// `sh -c script` with `len` bytes on its stdin: what came back and how many were taken.
    fn fed(script: &str, len: usize) -> (Raw, u64) {
        let sent = AtomicU64::new(0);
        let mut data = std::io::Cursor::new(vec![1u8; len]);
        let r = run(
            Path::new("sh"),
            &["-c".into(), script.into()],
            Some(Input {
                from: &mut data,
                sent: &sent,
            }),
            Duration::from_secs(10),
        );
        (r, sent.load(Ordering::Relaxed))
    }

    #[test]
    fn run_feeds_stdin_as_the_child_takes_it_and_counts_it() {
        let (r, sent) = fed("wc -c", 300_000);
        assert_eq!(
            (r.exit, r.stdout.trim(), sent),
            (Some(0), "300000", 300_000),
            "{r:?}"
        );
        // A child that answers before it reads (more than a pipe holds on both sides) is
        // not deadlocked by a full stdin.
        let (r, sent) = fed("head -c 200000 /dev/zero | tr '\\0' a; wc -c", 1_000_000);
        assert_eq!((r.exit, sent), (Some(0), 1_000_000), "{r:?}");
        assert!(r.stdout.ends_with("1000000\n") && r.stdout.len() == 200_008);
        // One that never reads gets its input cut off at its exit, and what it said is
        // still there.
        let (r, sent) = fed("echo early; exit 4", 1_000_000);
        assert_eq!(
            (r.exit, r.stdout.as_str(), r.timed_out),
            (Some(4), "early\n", false)
        );
        assert!(sent < 1_000_000, "{sent}");
    }

    #[test]
    fn run_enforces_the_deadline() {
        let t0 = Instant::now();
        let r = run(
            Path::new("sleep"),
            &["5".into()],
            None,
            Duration::from_millis(200),
        );
        assert!(r.timed_out);
        assert!(t0.elapsed() < Duration::from_secs(3));
        let r = run(
            Path::new("sh"),
            &["-c".into(), "echo out; echo err >&2; exit 3".into()],
            None,
            Duration::from_secs(5),
        );
        assert_eq!(
            (r.exit, r.stdout.as_str(), r.stderr.as_str()),
            (Some(3), "out\n", "err\n")
        );
        // More than a pipe holds, on both pipes at once, all read; and no timer tick is
        // waited for once the child is done.
        let t0 = Instant::now();
        let r = run(
            Path::new("sh"),
            &[
                "-c".into(),
                "head -c 300000 /dev/zero | tr '\\0' a; head -c 200000 /dev/zero | tr '\\0' b >&2"
                    .into(),
            ],
            None,
            Duration::from_secs(10),
        );
        assert_eq!(
            (r.exit, r.stdout.len(), r.stderr.len()),
            (Some(0), 300000, 200000)
        );
        assert!(r.stdout.bytes().all(|b| b == b'a') && r.stderr.bytes().all(|b| b == b'b'));
        assert!(t0.elapsed() < Duration::from_secs(5));
        // A child that closes its output but keeps running is still bounded by the deadline.
        let t0 = Instant::now();
        let r = run(
            Path::new("sh"),
            &["-c".into(), "exec >&- 2>&-; sleep 5".into()],
            None,
            Duration::from_millis(300),
        );
        assert!(
            r.timed_out && t0.elapsed() < Duration::from_secs(3),
            "{r:?}"
        );
    }
}
