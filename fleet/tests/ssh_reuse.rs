//! SSH connection reuse against real `sshd`s on loopback: the commands of one run to one
//! unit share its connection, a host whose key is not pinned (or changed) is refused with
//! reuse on exactly as without it, and closing the run ends the connections and removes
//! the private directory. Root only (sshd logs in as root here).

use pfx_fleet::config::SshConfig;
use pfx_fleet::gate::UnitState;
use pfx_fleet::ssh::{self, ControlDir};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

// The player tests' poll-until-true helper (one copy for the workspace's tests).
#[path = "../../player/tests/common/wait.rs"]
mod wait;
use wait::wait_until;

struct Sshd {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn keygen(path: &Path) {
    let st = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .status()
        .expect("ssh-keygen runs");
    assert!(st.success());
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

fn start_sshd(dir: &Path, name: &str, authorized: &Path) -> Sshd {
    let key = dir.join(format!("{name}-hostkey"));
    keygen(&key);
    let port = free_port();
    let log = dir.join(format!("{name}.log"));
    let conf = dir.join(format!("{name}.conf"));
    std::fs::write(
        &conf,
        format!(
            "ListenAddress 127.0.0.1\nPort {port}\nHostKey {}\nPidFile none\nAuthorizedKeysFile {}\n\
             PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
             UsePAM no\nStrictModes no\nLogLevel INFO\n",
            key.display(),
            authorized.display()
        ),
    )
    .unwrap();
    let _ = std::fs::create_dir_all("/run/sshd");
    let child = Command::new("/usr/sbin/sshd")
        .arg("-D")
        .arg("-f")
        .arg(&conf)
        .arg("-E")
        .arg(&log)
        .stdin(Stdio::null())
        .spawn()
        .expect("sshd starts");
    wait_until(
        Duration::from_secs(10),
        &format!("sshd {name} to listen on 127.0.0.1:{port}"),
        || TcpStream::connect(("127.0.0.1", port)).is_ok(),
    );
    Sshd { child, port, log }
}

fn host_key(dir: &Path, name: &str) -> String {
    let pubkey = std::fs::read_to_string(dir.join(format!("{name}-hostkey.pub"))).unwrap();
    pubkey
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ")
}

fn logins(s: &Sshd) -> usize {
    std::fs::read_to_string(&s.log)
        .unwrap_or_default()
        .matches("Accepted publickey")
        .count()
}

/// Processes whose command line names `needle` (the run's control directory).
fn procs_naming(needle: &str) -> Vec<String> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        if let Ok(c) = std::fs::read(e.path().join("cmdline")) {
            let c = String::from_utf8_lossy(&c).replace('\0', " ");
            if c.contains(needle) {
                v.push(format!("{}: {c}", e.file_name().to_string_lossy()));
            }
        }
    }
    v
}

/// Whether this test can run sshd (root; it logs in as root here); says why not.
fn can_run_sshd() -> bool {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root (sshd logs in as root)");
        return false;
    }
    if !Path::new("/usr/sbin/sshd").exists() {
        panic!("FAILED: /usr/sbin/sshd missing (scripts/deps/fleet.apt)");
    }
    true
}

/// The client's key in `dir` and an authorized_keys file holding it.
fn client_key(dir: &Path) -> (PathBuf, PathBuf) {
    let id = dir.join("id");
    keygen(&id);
    let authorized = dir.join("authorized_keys");
    std::fs::copy(dir.join("id.pub"), &authorized).unwrap();
    (id, authorized)
}

/// The fleet's SSH settings for root with key `id`, host keys only from `kh`.
fn client(id: &Path, kh: &Path) -> SshConfig {
    SshConfig {
        user: "root".into(),
        identity: Some(id.to_path_buf()),
        known_hosts: kh.to_path_buf(),
        connect_timeout_s: 5,
        command_timeout_s: 30,
        ..Default::default()
    }
}

#[test]
fn one_connection_per_unit_and_no_unpinned_host_through_it() {
    if !can_run_sshd() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (id, authorized) = client_key(dir);
    let a = start_sshd(dir, "a", &authorized);
    let b = start_sshd(dir, "b", &authorized);
    // Pinned: a's key for a; b's port pinned to a's key (a changed key); no line for b's
    // own key at all.
    let kh = dir.join("known_hosts");
    std::fs::write(
        &kh,
        format!(
            "[127.0.0.1]:{} {}\n[127.0.0.1]:{} {}\n",
            a.port,
            host_key(dir, "a"),
            b.port,
            host_key(dir, "a")
        ),
    )
    .unwrap();
    let cfg = client(&id, &kh);
    let ctl = ControlDir::create(&cfg.ssh).unwrap();
    let ctl_path = ctl.path().display().to_string();
    let t = Duration::from_secs(30);
    let on = |slot: usize, port: u16, cmd: &str| {
        ssh::run(
            &cfg.ssh,
            &ssh::ssh_args_reusing(&cfg, "127.0.0.1", port, cmd, &ctl.socket(slot)),
            None,
            t,
        )
    };

    // Unit slot 0 on a: two commands, one login.
    let r1 = on(0, a.port, "echo one");
    assert_eq!((r1.exit, r1.stdout.trim()), (Some(0), "one"), "{r1:?}");
    assert!(
        ctl.socket(0).exists(),
        "no shared connection after the first command"
    );
    let r2 = on(0, a.port, "echo two");
    assert_eq!((r2.exit, r2.stdout.trim()), (Some(0), "two"), "{r2:?}");
    assert_eq!(logins(&a), 1, "the second command made its own login");

    // Unit slot 1 on b, whose key is not the pinned one: refused, with a's connection
    // open in the same directory, and no connection of its own is left to reuse.
    for _ in 0..2 {
        let r = on(1, b.port, "echo through");
        assert_eq!(r.exit, Some(255), "{r:?}");
        assert!(!r.stdout.contains("through"), "{r:?}");
        let o = ssh::classify(&r, "u1", 30);
        assert_eq!(o.state, UnitState::Failed, "{o:?}");
        assert!(
            o.reason
                .as_deref()
                .unwrap_or("")
                .contains("host key refused"),
            "{o:?}"
        );
        assert!(!ctl.socket(1).exists());
    }
    assert_eq!(logins(&b), 0, "b let a client log in");

    // The same with b's line removed: an unknown host, refused, never learned.
    std::fs::write(
        &kh,
        format!("[127.0.0.1]:{} {}\n", a.port, host_key(dir, "a")),
    )
    .unwrap();
    let before = std::fs::read(&kh).unwrap();
    let r = on(2, b.port, "echo through");
    assert_eq!(r.exit, Some(255), "{r:?}");
    assert_eq!(ssh::classify(&r, "u2", 30).state, UnitState::Failed);
    assert_eq!(
        std::fs::read(&kh).unwrap(),
        before,
        "known_hosts was changed"
    );
    assert_eq!(logins(&b), 0);

    // Releasing a slot ends its connection; the next command logs in again.
    ctl.release(0);
    assert!(!ctl.socket(0).exists());
    let r3 = on(0, a.port, "echo three");
    assert_eq!((r3.exit, r3.stdout.trim()), (Some(0), "three"), "{r3:?}");
    assert_eq!(logins(&a), 2);

    // Closing the run: no connection process left, no directory.
    assert!(
        !procs_naming(&ctl_path).is_empty(),
        "the shared connection is not running"
    );
    ctl.close();
    wait_until(
        Duration::from_secs(5),
        &format!("no process naming {ctl_path} after close"),
        || procs_naming(&ctl_path).is_empty(),
    );
    assert!(!Path::new(&ctl_path).exists());
    assert!(!Path::new(&format!("{ctl_path}-closing")).exists());
}

/// The pid of the shared connection's master for `socket` (its command line is
/// `ssh: SOCKET [mux]`).
fn master_of(socket: &Path) -> Option<i32> {
    procs_naming(&socket.display().to_string())
        .into_iter()
        .find(|p| p.contains("[mux]"))
        .and_then(|p| p.split(':').next()?.parse().ok())
}

#[test]
fn a_shared_connection_killed_between_or_under_commands() {
    if !can_run_sshd() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (id, authorized) = client_key(dir);
    let a = start_sshd(dir, "a", &authorized);
    let kh = dir.join("known_hosts");
    std::fs::write(
        &kh,
        format!("[127.0.0.1]:{} {}\n", a.port, host_key(dir, "a")),
    )
    .unwrap();
    let cfg = client(&id, &kh);
    let ctl = ControlDir::create(&cfg.ssh).unwrap();
    let sock = ctl.socket(0);
    let on = |cmd: &str| {
        ssh::run_on(
            &cfg.ssh,
            &ssh::ssh_args_reusing(&cfg, "127.0.0.1", a.port, cmd, &sock),
            None,
            Duration::from_secs(30),
            Some(&sock),
        )
    };
    let kill = |pid: i32| unsafe { libc::kill(pid, libc::SIGKILL) };

    let r = on("echo one");
    assert_eq!((r.exit, r.stdout.trim()), (Some(0), "one"), "{r:?}");
    let master = master_of(&sock).expect("a shared connection after the first command");

    // Killed between two commands: its socket is stale; ssh finds nobody behind it and
    // makes a fresh connection (the same pinned options) for the next command.
    kill(master);
    wait_until(
        Duration::from_secs(5),
        &format!("the SIGKILLed master {master} to be gone"),
        || master_of(&sock) != Some(master),
    );
    assert!(sock.exists(), "a SIGKILLed master cannot remove its socket");
    let r = on("echo two");
    assert_eq!((r.exit, r.stdout.trim()), (Some(0), "two"), "{r:?}");
    assert!(!r.shared_lost);
    assert_eq!(
        logins(&a),
        2,
        "the next command did not make a fresh connection"
    );
    let master = master_of(&sock).expect("the fresh connection is shared again");

    // Killed under a command: ssh exits 255 and, at LogLevel=ERROR, says nothing. The
    // unit is pending (retryable), not failed.
    let started = dir.join("started");
    let cmd = format!("touch {}; sleep 5; echo three", started.display());
    let killer = std::thread::spawn({
        let started = started.clone();
        move || {
            // Not killed unless the command runs: a timeout here fails the test below.
            wait_until(
                Duration::from_secs(20),
                &format!(
                    "the remote command to start ({} to exist)",
                    started.display()
                ),
                || started.exists(),
            );
            unsafe { libc::kill(master, libc::SIGKILL) };
        }
    });
    let r = on(&cmd);
    killer
        .join()
        .expect("the killer saw the command start and killed the master under it");
    assert!(started.exists(), "the command never ran");
    assert_eq!(r.exit, Some(255), "{r:?}");
    assert!(!r.stdout.contains("three") && !r.timed_out, "{r:?}");
    assert!(r.shared_lost, "run_on missed the lost connection: {r:?}");
    let o = ssh::classify(&r, "u1", 30);
    assert_eq!(o.state, UnitState::Pending, "{o:?}");
    assert!(
        o.reason
            .as_deref()
            .unwrap_or("")
            .contains("shared SSH connection"),
        "{o:?}"
    );
    // The same answer without run_on's look at the socket is an ordinary failure: the
    // look is what tells the two apart.
    let plain = ssh::Raw {
        shared_lost: false,
        ..r
    };
    assert_eq!(ssh::classify(&plain, "u1", 30).state, UnitState::Failed);
    // And the next command is fine again, over a fresh connection.
    let r = on("echo four");
    assert_eq!((r.exit, r.stdout.trim()), (Some(0), "four"), "{r:?}");
    ctl.close();
}

fn unit_row(id: &str, port: u16) -> pfx_fleet::db::UnitRow {
    pfx_fleet::db::UnitRow {
        unit_id: id.into(),
        site: Some("hall".into()),
        host: "127.0.0.1".into(),
        port,
        source: "config".into(),
        version: None,
        txt: None,
        seen_ms: 0,
    }
}

/// `pfx-fleet hold`'s connections: one login per unit carries every later command; a
/// unit whose host key is not pinned is never held; a killed connection and a changed
/// known_hosts are made again; stopping ends them all and leaves no socket.
#[test]
fn held_connections_carry_commands_and_end_with_their_hold() {
    use pfx_fleet::held::{Held, HoldEvent, hold};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    if !can_run_sshd() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (id, authorized) = client_key(dir);
    let a = start_sshd(dir, "a", &authorized);
    let b = start_sshd(dir, "b", &authorized);
    let kh = dir.join("known_hosts");
    // b's port is pinned to a's key: a changed key, which no hold may get past.
    let pins = format!(
        "[127.0.0.1]:{} {}\n[127.0.0.1]:{} {}\n",
        a.port,
        host_key(dir, "a"),
        b.port,
        host_key(dir, "a")
    );
    std::fs::write(&kh, &pins).unwrap();
    let cfg = client(&id, &kh);
    let held_dir = dir.join("held");
    let held = Held::open_in(&held_dir, &cfg, true).unwrap().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel::<HoldEvent>();
    let holder = std::thread::spawn({
        let (held, cfg, stop) = (held.clone(), cfg.clone(), Arc::clone(&stop));
        let units = vec![unit_row("ua", a.port), unit_row("ub", b.port)];
        move || hold(held, &cfg, units, &stop, |e| drop(tx.send(e.clone())))
    });
    let wait_for = |unit: &str, event: &str| -> HoldEvent {
        let t0 = Instant::now();
        loop {
            let left = Duration::from_secs(20).saturating_sub(t0.elapsed());
            match rx.recv_timeout(left) {
                Ok(e) if e.unit == unit && e.event == event => return e,
                Ok(_) => {}
                Err(_) => panic!("no {event} for {unit} within 20 s"),
            }
        }
    };
    wait_for("ua", "held");
    let lost_b = wait_for("ub", "lost");
    assert!(
        lost_b
            .reason
            .as_deref()
            .unwrap_or("")
            .contains("verification failed"),
        "{lost_b:?}"
    );
    assert_eq!(logins(&b), 0, "b let a held connection log in");
    assert!(held.live(&cfg, "127.0.0.1", b.port).is_none());

    // Commands over a's held connection: no login of their own.
    let sock = held
        .live(&cfg, "127.0.0.1", a.port)
        .expect("ua's held connection answers");
    let on = |sock: &Path, cmd: &str| {
        ssh::run_on(
            &cfg.ssh,
            &ssh::ssh_args_held(&cfg, "127.0.0.1", a.port, cmd, sock),
            None,
            Duration::from_secs(30),
            Some(sock),
        )
    };
    for word in ["one", "two"] {
        let r = on(&sock, &format!("echo {word}"));
        assert_eq!((r.exit, r.stdout.trim()), (Some(0), word), "{r:?}");
    }
    assert_eq!(
        logins(&a),
        1,
        "a command over the held connection logged in"
    );

    // Killed (the unit rebooted, say): lost, then held again with a new login.
    // A held master runs in the foreground (no ControlPersist fork, no `[mux]` name).
    let master: i32 = procs_naming(&sock.display().to_string())
        .first()
        .and_then(|p| p.split(':').next()?.parse().ok())
        .expect("the held master runs");
    unsafe { libc::kill(master, libc::SIGKILL) };
    let lost = wait_for("ua", "lost");
    assert_eq!(lost.retry_in_s, Some(2), "{lost:?}");
    wait_for("ua", "held");
    assert_eq!(logins(&a), 2);

    // A changed known_hosts: the old connection ends, a new one under a new name.
    std::fs::write(&kh, format!("{pins}# re-pinned\n")).unwrap();
    let lost = wait_for("ua", "lost");
    assert!(
        lost.reason.as_deref().unwrap_or("").contains("known_hosts"),
        "{lost:?}"
    );
    wait_for("ua", "held");
    let renamed = Held::open_in(&held_dir, &cfg, false).unwrap().unwrap();
    let sock2 = renamed
        .live(&cfg, "127.0.0.1", a.port)
        .expect("ua held under its new name");
    assert_ne!(sock2, sock);
    assert!(!sock.exists(), "the old connection's socket is left");
    let r = on(&sock2, "echo three");
    assert_eq!((r.exit, r.stdout.trim()), (Some(0), "three"), "{r:?}");
    assert_eq!(logins(&a), 3);

    // Stopped: every connection closed, no socket, no process left.
    stop.store(true, Ordering::SeqCst);
    assert_eq!(holder.join().unwrap(), 1);
    wait_for("ua", "closed");
    assert!(!sock2.exists());
    wait_until(
        Duration::from_secs(5),
        "every held master to end with its hold",
        || procs_naming(&held_dir.display().to_string()).is_empty(),
    );
    // And a command with nothing held falls back to its own connection.
    let r = on(&sock2, "echo four");
    assert_eq!((r.exit, r.stdout.trim()), (Some(0), "four"), "{r:?}");
    assert_eq!(logins(&a), 4);
}
