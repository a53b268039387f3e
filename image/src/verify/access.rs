//! Who can log in and what the fleet key reaches: sshd, accounts, authorized keys, sudoers, the agent config.

use super::error::{Check, CheckFailed, KeyLineError};
use serde::Serialize;

/// Splits an authorized_keys line into its options and the key. Options are the first
/// field when it does not start with a key type; commas inside double quotes do not split.
pub fn key_line_options(line: &str) -> Result<(Vec<String>, String), KeyLineError> {
    let line = line.trim();
    let is_type =
        |w: &str| w.starts_with("ssh-") || w.starts_with("ecdsa-") || w.starts_with("sk-");
    if is_type(line) {
        return Ok((Vec::new(), line.to_string()));
    }
    let (mut opts, mut cur, mut quoted) = (Vec::new(), String::new(), false);
    let mut rest = None;
    let mut chars = line.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' if quoted => {
                cur.push(c);
                if let Some((_, n)) = chars.next() {
                    cur.push(n);
                }
            }
            '"' => {
                quoted = !quoted;
                cur.push(c);
            }
            ',' if !quoted => opts.push(std::mem::take(&mut cur)),
            ' ' | '\t' if !quoted => {
                rest = Some(line[i..].trim().to_string());
                break;
            }
            _ => cur.push(c),
        }
    }
    opts.push(cur);
    match rest {
        Some(k) if !quoted && is_type(&k) => Ok((opts, k)),
        _ => Err(KeyLineError {
            start: line.chars().take(60).collect(),
        }),
    }
}

/// `(mode, uid)` of a file read back from the image.
pub type Stat = Option<(u32, u32)>;

/// What the image's access files say, read back from the image (see manifest.rs).
#[derive(Debug, Clone, Default)]
pub struct AccessFiles {
    /// sshd's files in the order sshd reads them: the drop-ins (sorted), then sshd_config.
    pub sshd_configs: Vec<(String, String)>,
    pub passwd: String,
    pub group: String,
    pub shadow: String,
    /// (file name = user, text) of every file in the authorized keys directory.
    pub key_files: Vec<(String, String)>,
    /// Paths of root's own key files that exist (must be none).
    pub root_key_files: Vec<String>,
    pub sudoers: String,
    /// (name, text, (mode, uid)) of every file in /etc/sudoers.d.
    pub sudoers_d: Vec<(String, String, Stat)>,
    pub agent_config: Option<(String, Stat)>,
    /// The agent binary carries the test-backends marker (a debug build).
    pub agent_test_build: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FleetAccount {
    pub name: String,
    pub uid: u32,
    pub home: String,
    pub shell: String,
    pub password: String,
    pub groups: Vec<String>,
}

/// Who may log in and what the fleet key can do, as read back from the image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AccessCheck {
    pub login_users: Vec<String>,
    pub permit_root_login: String,
    pub authorized_keys_file: String,
    pub sshd: Vec<(String, String)>,
    pub fleet_account: FleetAccount,
    pub fleet_keys: usize,
    pub key_options: Vec<String>,
    pub forced_command: String,
    pub root_authorized_keys: String,
    pub sudoers_file: String,
    pub sudoers_lines: Vec<String>,
    /// `visudo -c -f` on the file read back (filled by the I/O side).
    pub visudo: String,
    pub agent_config: String,
}

fn config_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
}

/// Refuses an image whose fleet key could reach anything but the agent's dispatcher: a
/// shell, a pty, forwarding, another account, root, or a wider sudo. Pure.
///
/// One piece on purpose (over 100 lines, allowed in `scripts/long-functions`): one walk
/// over what decides who logs in (sshd's effective settings, the accounts, the keys,
/// sudoers, the agent config) that collects every problem, each check reading the same
/// parsed settings and account list; split, each step would take and return all of them.
pub fn check_access(f: &AccessFiles) -> Result<AccessCheck, CheckFailed> {
    use crate::plan::{
        AUTHORIZED_KEYS_DIR, FLEET_USER, FORCED_COMMAND, SUDOERS_ENV, SUDOERS_FILE, SUDOERS_GRANT,
    };
    let mut errors: Vec<String> = Vec::new();

    // sshd: the first value of a keyword wins, across the files in reading order.
    let mut sshd: Vec<(String, String)> = Vec::new();
    for (path, text) in &f.sshd_configs {
        for line in config_lines(text) {
            let (k, v) = line
                .split_once(|c: char| c.is_whitespace() || c == '=')
                .map(|(k, v)| (k, v.trim_start_matches([' ', '\t', '=']).trim()))
                .unwrap_or((line, ""));
            let k = k.to_ascii_lowercase();
            if k == "include" {
                continue;
            }
            if k == "match" {
                errors.push(format!(
                    "{path}: a Match block ({line:?}) could override the fleet account's settings"
                ));
                continue;
            }
            if !sshd.iter().any(|(have, _)| *have == k) {
                sshd.push((k, v.to_string()));
            }
        }
    }
    let get = |k: &str| sshd.iter().find(|(h, _)| h == k).map(|(_, v)| v.as_str());
    let want_keys_file = format!("{AUTHORIZED_KEYS_DIR}/%u");
    for (k, want) in [
        ("permitrootlogin", "no"),
        ("passwordauthentication", "no"),
        ("kbdinteractiveauthentication", "no"),
        ("allowusers", FLEET_USER),
        ("authorizedkeysfile", want_keys_file.as_str()),
        ("disableforwarding", "yes"),
        ("permittty", "no"),
        ("permituserrc", "no"),
    ] {
        match get(k) {
            Some(v) if v == want => {}
            v => errors.push(format!("sshd: {k} is {v:?}, must be {want:?}")),
        }
    }
    for k in [
        "authorizedkeyscommand",
        "authorizedprincipalsfile",
        "authorizedprincipalscommand",
        "trustedusercakeys",
        "forcecommand",
        "allowgroups",
    ] {
        if let Some(v) = get(k).filter(|v| !v.eq_ignore_ascii_case("none")) {
            errors.push(format!(
                "sshd: {k} {v:?} opens a way in beside the fleet keys"
            ));
        }
    }
    if get("permituserenvironment").is_some_and(|v| v != "no") {
        errors.push("sshd: permituserenvironment must be no".into());
    }

    // The account: present, not root, no password, in no group.
    let pw: Vec<Vec<&str>> = f.passwd.lines().map(|l| l.split(':').collect()).collect();
    for e in pw
        .iter()
        .filter(|e| e.len() > 2 && e[2] == "0" && e[0] != "root")
    {
        errors.push(format!("/etc/passwd: {} has uid 0", e[0]));
    }
    let account = match pw
        .iter()
        .find(|e| e.first() == Some(&FLEET_USER) && e.len() >= 7)
    {
        None => {
            errors.push(format!("/etc/passwd has no {FLEET_USER} account"));
            None
        }
        Some(e) => {
            let uid: u32 = e[2].parse().unwrap_or(0);
            let gid = e[3];
            if uid == 0 || gid == "0" {
                errors.push(format!(
                    "{FLEET_USER} has uid {} gid {gid}: it must not be root",
                    e[2]
                ));
            }
            let password = f
                .shadow
                .lines()
                .map(|l| l.split(':').collect::<Vec<_>>())
                .find(|s| s.first() == Some(&FLEET_USER))
                .and_then(|s| s.get(1).map(|p| p.to_string()));
            match password.as_deref() {
                Some(p) if p.starts_with('*') || p.starts_with('!') => {}
                p => errors.push(format!(
                    "/etc/shadow: {FLEET_USER}'s password field is {:?}: it must have no password (* or !)",
                    p.map(|p| if p.is_empty() { "" } else { "(a hash)" })
                )),
            }
            let groups: Vec<String> = f
                .group
                .lines()
                .map(|l| l.split(':').collect::<Vec<_>>())
                .filter(|g| g.len() >= 4 && g[3].split(',').any(|m| m == FLEET_USER))
                .map(|g| g[0].to_string())
                .collect();
            if !groups.is_empty() {
                errors.push(format!(
                    "{FLEET_USER} is a member of {groups:?}: it must be in no group"
                ));
            }
            Some(FleetAccount {
                name: FLEET_USER.into(),
                uid,
                home: e[5].into(),
                shell: e[6].into(),
                password: password.unwrap_or_default(),
                groups,
            })
        }
    };

    // The keys: only the fleet account has any, every one restricted to the dispatcher.
    let mut fleet_keys = 0;
    let mut key_options: Vec<String> = Vec::new();
    const ALLOWED: &[&str] = &[
        "restrict",
        "no-port-forwarding",
        "no-agent-forwarding",
        "no-x11-forwarding",
        "no-pty",
        "no-user-rc",
    ];
    for (user, text) in &f.key_files {
        if user != FLEET_USER {
            errors.push(format!(
                "{AUTHORIZED_KEYS_DIR}/{user}: only {FLEET_USER} may have keys"
            ));
            continue;
        }
        for line in config_lines(text) {
            let opts = match key_line_options(line) {
                Ok((o, _)) => o,
                Err(e) => {
                    errors.push(format!("{AUTHORIZED_KEYS_DIR}/{user}: {e}"));
                    continue;
                }
            };
            fleet_keys += 1;
            let want_cmd = format!("command=\"{FORCED_COMMAND}\"");
            if !opts.iter().any(|o| o == "restrict") {
                errors.push(format!("{AUTHORIZED_KEYS_DIR}/{user}: key {fleet_keys} lacks `restrict` (pty, forwarding, agent, ~/.ssh/rc would be open)"));
            }
            if opts
                .iter()
                .filter(|o| o.to_ascii_lowercase().starts_with("command="))
                .count()
                != 1
                || !opts.contains(&want_cmd)
            {
                errors.push(format!("{AUTHORIZED_KEYS_DIR}/{user}: key {fleet_keys} must force exactly {want_cmd} (got {opts:?})"));
            }
            for o in &opts {
                let lower = o.to_ascii_lowercase();
                let fine = ALLOWED.contains(&lower.as_str())
                    || *o == want_cmd
                    || lower.starts_with("from=")
                    || lower.starts_with("expiry-time=");
                if !fine {
                    errors.push(format!(
                        "{AUTHORIZED_KEYS_DIR}/{user}: key option {o:?} widens what the key can do"
                    ));
                }
                if !key_options.contains(o) {
                    key_options.push(o.clone());
                }
            }
        }
    }
    for p in &f.root_key_files {
        errors.push(format!("{p} exists: root must have no authorized keys"));
    }

    // sudo: exactly the one grant, in exactly one file.
    for line in config_lines(&f.sudoers) {
        if line
            .split(|c: char| !c.is_ascii_alphanumeric() && c != '-' && c != '_')
            .any(|w| w == FLEET_USER)
        {
            errors.push(format!("/etc/sudoers mentions {FLEET_USER}: {line:?}"));
        }
    }
    let name = SUDOERS_FILE.rsplit('/').next().unwrap_or(SUDOERS_FILE);
    let mut sudoers_lines = Vec::new();
    for (n, text, stat) in &f.sudoers_d {
        if n == "README" {
            continue;
        }
        if n != name {
            errors.push(format!(
                "/etc/sudoers.d/{n}: only {SUDOERS_FILE} may be there"
            ));
            continue;
        }
        match stat {
            Some((0o440, 0)) => {}
            s => errors.push(format!("{SUDOERS_FILE}: mode/uid {s:?}, must be 0440 root")),
        }
        sudoers_lines = config_lines(text).map(str::to_string).collect();
        if sudoers_lines != [SUDOERS_ENV, SUDOERS_GRANT] {
            errors.push(format!("{SUDOERS_FILE} must hold exactly {SUDOERS_ENV:?} and {SUDOERS_GRANT:?}, holds {sudoers_lines:?}"));
        }
    }
    if sudoers_lines.is_empty() && !f.sudoers_d.iter().any(|(n, ..)| n == name) {
        errors.push(format!(
            "{SUDOERS_FILE} missing: the dispatcher could not run as root"
        ));
    }

    // The agent's own settings: root's, and never the test backends.
    let agent_config = match &f.agent_config {
        None => {
            errors.push("/etc/pfx/agent.yaml missing".into());
            String::new()
        }
        Some((text, stat)) => {
            if !matches!(stat, Some((m, 0)) if m & 0o022 == 0) {
                errors.push(format!(
                    "/etc/pfx/agent.yaml: mode/uid {stat:?}: must be root's, not writable by others"
                ));
            }
            for line in config_lines(text) {
                let k = line.split(':').next().unwrap_or("").trim();
                if k.starts_with("test_")
                    || k == "mock_nic_dir"
                    || (k == "nic_backend" && !line.ends_with("player"))
                {
                    errors.push(format!(
                        "/etc/pfx/agent.yaml: {line:?} is for the test suite only"
                    ));
                }
            }
            text.clone()
        }
    };
    if f.agent_test_build {
        errors.push(
            "/usr/bin/pfx-agent is a test (debug) build: it could use the mock NIC backend".into(),
        );
    }

    match account {
        Some(fleet_account) if errors.is_empty() => Ok(AccessCheck {
            login_users: get("allowusers")
                .unwrap_or("")
                .split_whitespace()
                .map(str::to_string)
                .collect(),
            permit_root_login: get("permitrootlogin").unwrap_or("").into(),
            authorized_keys_file: get("authorizedkeysfile").unwrap_or("").into(),
            sshd: sshd.clone(),
            fleet_account,
            fleet_keys,
            key_options,
            forced_command: FORCED_COMMAND.into(),
            root_authorized_keys: "absent".into(),
            sudoers_file: SUDOERS_FILE.into(),
            sudoers_lines,
            visudo: String::new(),
            agent_config,
        }),
        _ => Err(CheckFailed::new(Check::Access, errors)),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::config::Resolved;
    use crate::plan::*;

    // The plan's files, read back as verify reads them: what an image built from the plan
    // holds, so check_access is tried on the real thing and on each fault added to it.

    pub(crate) const PASSWD: &str = "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n\
        _apt:x:42:65534::/nonexistent:/usr/sbin/nologin\nmessagebus:x:100:102::/nonexistent:/usr/sbin/nologin\n\
        systemd-network:x:998:998:systemd Network Management:/:/usr/sbin/nologin\n";
    pub(crate) const GROUP: &str = "root:x:0:\ndaemon:x:1:\nadm:x:4:\nsudo:x:27:\nshadow:x:42:\nmessagebus:x:102:\nsystemd-network:x:998:\n";
    pub(crate) const SHADOW: &str = "root:*:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n";
    const SSHD_CONFIG: &str = "# Debian's\nInclude /etc/ssh/sshd_config.d/*.conf\nKbdInteractiveAuthentication no\nUsePAM yes\n\
        X11Forwarding yes\nPrintMotd no\nAcceptEnv LANG LC_*\nSubsystem sftp /usr/lib/openssh/sftp-server\n";
    const SUDOERS: &str = "Defaults\tenv_reset\nDefaults\tuse_pty\nroot\tALL=(ALL:ALL) ALL\n%sudo\tALL=(ALL:ALL) ALL\n@includedir /etc/sudoers.d\n";
    pub(crate) const KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGxfleetkeyfleetkey op@host";

    pub(crate) fn planned(keys: &[&str]) -> Plan {
        let config = crate::config::parse(
            "target: vm-arm64\nshow: show.yaml\n",
            std::path::Path::new("t.yaml"),
        )
        .unwrap();
        let r = Resolved {
            config,
            source: "t.yaml".into(),
            mirror: "http://deb.debian.org/debian".into(),
            show: "show.yaml".into(),
            profiles: vec![],
            authorized_keys: keys.iter().map(|k| k.to_string()).collect(),
            update_cert: None,
            version: PFX_VERSION.into(),
        };
        plan(&r, b"show".to_vec(), vec![])
    }

    /// What verify would read from an image built from this plan.
    fn read_back(p: &Plan) -> AccessFiles {
        let get = |path: &str| {
            p.files
                .iter()
                .find(|f| f.path == path)
                .map(|f| (String::from_utf8(f.contents.clone()).unwrap(), (f.mode, 0)))
        };
        let (passwd, group, shadow, _) = add_fleet_account(PASSWD, GROUP, SHADOW, None).unwrap();
        AccessFiles {
            sshd_configs: vec![
                (SSHD_DROPIN.into(), get(SSHD_DROPIN).unwrap().0),
                ("/etc/ssh/sshd_config".into(), SSHD_CONFIG.into()),
            ],
            passwd,
            group,
            shadow,
            key_files: get(&format!("{AUTHORIZED_KEYS_DIR}/{FLEET_USER}"))
                .map(|(t, _)| vec![(FLEET_USER.to_string(), t)])
                .unwrap_or_default(),
            root_key_files: get("/root/.ssh/authorized_keys")
                .map(|_| vec!["/root/.ssh/authorized_keys".to_string()])
                .unwrap_or_default(),
            sudoers: SUDOERS.into(),
            sudoers_d: vec![("README".into(), "# read me\n".into(), Some((0o440, 0))), {
                let (t, st) = get(SUDOERS_FILE).unwrap();
                ("pfx-agent".into(), t, Some(st))
            }],
            agent_config: get(AGENT_CONFIG_FILE).map(|(t, st)| (t, Some(st))),
            agent_test_build: false,
        }
    }

    #[test]
    fn the_fleet_key_reaches_only_the_dispatcher() {
        let p = planned(&[KEY]);
        assert!(p.packages.iter().any(|x| x == "sudo"));
        assert!(!p.files.iter().any(|f| f.path.starts_with("/root/")));
        let a = check_access(&read_back(&p)).unwrap();
        assert_eq!(a.login_users, vec!["pfx"]);
        assert_eq!(a.permit_root_login, "no");
        assert_eq!(a.fleet_keys, 1);
        assert_eq!(
            a.key_options,
            vec![
                "restrict".to_string(),
                "command=\"/usr/bin/sudo -n /usr/bin/pfx-agent dispatch\"".to_string()
            ]
        );
        assert_eq!(a.fleet_account.uid, 101, "lowest free system id");
        assert_eq!(a.fleet_account.password, "*");
        assert!(a.fleet_account.groups.is_empty());
        assert_eq!(a.root_authorized_keys, "absent");
        assert_eq!(
            a.sudoers_lines.last().map(String::as_str),
            Some(SUDOERS_GRANT)
        );
        // No keys at all is also a closed image (nobody logs in).
        assert_eq!(
            check_access(&read_back(&planned(&[]))).unwrap().fleet_keys,
            0
        );
    }

    #[test]
    fn an_image_that_lets_the_fleet_key_reach_a_shell_is_refused() {
        let p = planned(&[KEY]);
        type Fault = fn(&mut AccessFiles);
        let cases: Vec<(&str, Fault, &str)> = vec![
            (
                "no restrict",
                |f| f.key_files[0].1 = f.key_files[0].1.replace("restrict,", ""),
                "lacks `restrict`",
            ),
            (
                "no forced command",
                |f| f.key_files[0].1 = format!("restrict {KEY}\n"),
                "must force exactly",
            ),
            (
                "another command",
                |f| {
                    f.key_files[0].1 = f.key_files[0]
                        .1
                        .replace("pfx-agent dispatch", "pfx-agent dispatch; sh")
                },
                "must force exactly",
            ),
            (
                "a second command",
                |f| {
                    f.key_files[0].1 = f.key_files[0]
                        .1
                        .replace("restrict,", "restrict,command=\"/bin/sh\",")
                },
                "must force exactly",
            ),
            (
                "pty re-enabled",
                |f| f.key_files[0].1 = f.key_files[0].1.replace("restrict,", "restrict,pty,"),
                "\"pty\" widens",
            ),
            (
                "forwarding re-enabled",
                |f| {
                    f.key_files[0].1 = f.key_files[0]
                        .1
                        .replace("restrict,", "restrict,port-forwarding,permitopen=\"*:*\",")
                },
                "widens",
            ),
            (
                "a plain second key",
                |f| f.key_files[0].1.push_str(&format!("{KEY}\n")),
                "lacks `restrict`",
            ),
            (
                "root has keys",
                |f| f.root_key_files.push("/root/.ssh/authorized_keys".into()),
                "root must have no authorized keys",
            ),
            (
                "root key file in the key dir",
                |f| f.key_files.push(("root".into(), format!("{KEY}\n"))),
                "only pfx may have keys",
            ),
            (
                "root login allowed",
                |f| {
                    f.sshd_configs[0].1 = f.sshd_configs[0]
                        .1
                        .replace("PermitRootLogin no", "PermitRootLogin prohibit-password")
                },
                "permitrootlogin",
            ),
            (
                "root allowed to log in",
                |f| {
                    f.sshd_configs[0].1 = f.sshd_configs[0]
                        .1
                        .replace("AllowUsers pfx", "AllowUsers pfx root")
                },
                "allowusers",
            ),
            (
                "keys from home",
                |f| f.sshd_configs[0].1 = f.sshd_configs[0].1.replace("AuthorizedKeysFile", "#"),
                "authorizedkeysfile",
            ),
            (
                "an earlier drop-in wins",
                |f| {
                    f.sshd_configs.insert(
                        0,
                        (
                            "/etc/ssh/sshd_config.d/00.conf".into(),
                            "PermitRootLogin yes\n".into(),
                        ),
                    )
                },
                "permitrootlogin",
            ),
            (
                "a Match block",
                |f| {
                    f.sshd_configs[1]
                        .1
                        .push_str("Match User pfx\n  PermitTTY yes\n")
                },
                "Match block",
            ),
            (
                "keys from a command",
                |f| {
                    f.sshd_configs[1]
                        .1
                        .push_str("AuthorizedKeysCommand /bin/keys\n")
                },
                "authorizedkeyscommand",
            ),
            (
                "wider sudo",
                |f| f.sudoers_d[1].1 = "pfx ALL=(ALL) NOPASSWD: ALL\n".into(),
                "must hold exactly",
            ),
            (
                "sudo with any arguments",
                |f| f.sudoers_d[1].1 = f.sudoers_d[1].1.replace("dispatch", "*"),
                "must hold exactly",
            ),
            (
                "a second sudoers file",
                |f| {
                    f.sudoers_d.push((
                        "extra".into(),
                        "pfx ALL=(ALL) ALL\n".into(),
                        Some((0o440, 0)),
                    ))
                },
                "only /etc/sudoers.d/pfx-agent",
            ),
            (
                "sudoers writable",
                |f| f.sudoers_d[1].2 = Some((0o666, 0)),
                "0440",
            ),
            (
                "main sudoers names pfx",
                |f| f.sudoers.push_str("pfx ALL=(ALL) ALL\n"),
                "mentions pfx",
            ),
            (
                "in the sudo group",
                |f| f.group = f.group.replace("sudo:x:27:", "sudo:x:27:pfx"),
                "member of",
            ),
            (
                "a password",
                |f| f.shadow = f.shadow.replace("pfx:*:", "pfx:$6$salt$hash:"),
                "no password",
            ),
            (
                "a second uid 0",
                |f| f.passwd.push_str("toor:x:0:0::/root:/bin/sh\n"),
                "uid 0",
            ),
            ("no account", |f| f.passwd = PASSWD.into(), "no pfx account"),
            (
                "the mock NIC",
                |f| {
                    f.agent_config
                        .as_mut()
                        .unwrap()
                        .0
                        .push_str("nic_backend: mock\n")
                },
                "test suite only",
            ),
            (
                "a test hook",
                |f| {
                    f.agent_config
                        .as_mut()
                        .unwrap()
                        .0
                        .push_str("test_delay_ms: 1\n")
                },
                "test suite only",
            ),
            (
                "agent config writable",
                |f| f.agent_config.as_mut().unwrap().1 = Some((0o666, 0)),
                "not writable",
            ),
            (
                "a test build of the agent",
                |f| f.agent_test_build = true,
                "test (debug) build",
            ),
        ];
        for (name, fault, want) in cases {
            let mut f = read_back(&p);
            fault(&mut f);
            let e = check_access(&f).expect_err(name).to_string();
            assert!(e.contains(want), "{name}: {e}");
        }
    }

    #[test]
    fn key_options_split_outside_quotes() {
        let (o, k) = key_line_options(&format!(
            "restrict,command=\"a, b\",from=\"10.0.0.0/8\" {KEY}"
        ))
        .unwrap();
        assert_eq!(
            o,
            vec!["restrict", "command=\"a, b\"", "from=\"10.0.0.0/8\""]
        );
        assert!(k.starts_with("ssh-ed25519 "));
        assert!(key_line_options(KEY).unwrap().0.is_empty());
        assert!(key_line_options("restrict,command=\"x").is_err());
    }
}
