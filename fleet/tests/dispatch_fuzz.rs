//! Fuzzes the two parsers of `pfx-agent dispatch` on stable Rust, with deterministic
//! seeds so a failure reproduces (the failing input is printed):
//!
//! - `parse_command`: `SSH_ORIGINAL_COMMAND`, bytes a holder of the fleet key chooses.
//!   Seeds (every verb, good and bad), then 40 000 mutations (words inserted, dropped,
//!   duplicated, swapped; characters inserted and replaced from an alphabet of white space,
//!   `-`, digits, hex letters, the verb words and the shell's delimiters; numbers at the
//!   edges) and 40 000 commands made of random words (about 600 and 2 900 of them are
//!   accepted; the tests demand 300 and 1 000). About 2 s in a debug build.
//! - `AgentConfig::parse`: the unit's `/etc/pfx/agent.yaml`. Seeds, then 6 000 YAML-aware
//!   mutations each run with and without the test backends (about 3 300 of the 12 000
//!   parses accepted). About 2 s in a debug build.
//!
//! Beyond "never panics", every accepted command must re-render to text that parses to the
//! same verb, may hold nothing but `[a-z0-9-]` words and white space (so no shell
//! delimiter ever reaches a verb), and its numbers must lie in the verb's ranges. Every
//! accepted agent config must hold what `parse` promises to have checked; every refusal
//! must say why.

use pfx_fleet::dispatch::{AgentConfig, Backend, MAX_PUT, MAX_SHOW_FILE, Verb, parse_command};

#[path = "../../fuzz/rng.rs"]
#[allow(dead_code)] // each test uses what it needs of it
mod rng;
use rng::Rng;

const HASH: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// Words a command is made of: the verbs, the flags, numbers at the edges of every range,
/// hashes good and bad, and the shell's delimiters alone and glued on.
const WORDS: &[&str] = &[
    "apply",
    "pause-off",
    "pause-on",
    "status",
    "show",
    "missing",
    "put",
    "activate",
    "--json",
    "--rate-interval-ms",
    "--",
    "-",
    "--json=1",
    "0",
    "1",
    "9",
    "10",
    "11",
    "999",
    "1000",
    "10000",
    "10001",
    "-1",
    "+1",
    "0x10",
    "1e3",
    "00010",
    "268435456",
    "268435457",
    "68719476736",
    "68719476737",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999",
    "999999999999999999999",
    HASH,
    "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde",
    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0",
    "g123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    ";",
    "|",
    "&",
    "&&",
    "$",
    "`",
    "$(id)",
    "`id`",
    ">",
    "<",
    "(",
    ")",
    "'",
    "\"",
    "\\",
    "*",
    "?",
    "~",
    "#",
    "!",
    "{",
    "}",
    "=",
    "id",
    "sh",
    "/bin/sh",
    "--player",
    "/",
    "..",
    "\0",
    "--json;id",
    "status|id",
    "control",
    "blackout",
    "stop",
    "resume",
    "play",
    "brightness",
    "test",
    "walk",
    "red",
    "white",
    "rainbow",
    "--output",
    "--by",
    "alice",
    "Pole_3.b",
    "0.5",
    "4.0",
    "4.01",
    "1.",
    ".5",
    "1..2",
    "nan",
];

/// Characters spliced into a command: white space (ASCII and not), `-`, digits, hex
/// letters, the shell's delimiters, and a few that are none of these.
const CHARS: &[char] = &[
    ' ', '\t', '\n', '\r', '\x0b', '\x0c', '\u{a0}', '\u{2003}', '\u{85}', '-', '0', '1', '5', '9',
    'a', 'b', 'c', 'd', 'e', 'f', 'A', 'F', 'g', 'x', ';', '|', '&', '$', '`', '(', ')', '<', '>',
    '\'', '"', '\\', '*', '?', '~', '#', '!', '{', '}', '[', ']', '=', '%', '\0', '\u{7f}', 'é',
    '\u{fffd}',
];

fn seeds() -> Vec<String> {
    let mut v: Vec<String> = [
        "apply pause-off",
        "apply pause-off --json",
        "status",
        "status --json",
        "status --rate-interval-ms 10",
        "status --json --rate-interval-ms 10000",
        "status --rate-interval-ms 1000 --json",
        "show missing",
        "show activate",
        "show status",
        "show",
        "update status",
        "update status --json",
        "update switch now",
        "update switch idle",
        "update switch at 02:30",
        "update switch at 1796176800",
        "update switch at 24:00",
        "update install --force",
        "apply pause-off --json; id",
        "status --rate-interval-ms",
        "control blackout",
        "control blackout --by alice",
        "control stop --by ops-2",
        "control resume",
        "control play evening --by alice",
        "control play Sponsor_2.b",
        "control brightness 0.5 --by alice",
        "control brightness 4",
        "control test id",
        "control test walk --output pole-3 --by alice",
        "control test red --output Pole_3.b",
        "control test rainbow",
        "control blackout; id",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for (size, offset, len) in [
        (100, 10, 90),
        (0, 0, 0),
        (MAX_SHOW_FILE, MAX_SHOW_FILE - MAX_PUT, MAX_PUT),
        (MAX_SHOW_FILE, 0, MAX_PUT + 1),
        (MAX_SHOW_FILE + 1, 0, 1),
        (u64::MAX, u64::MAX, 1),
    ] {
        v.push(format!("show put {HASH} {size} {offset} {len}"));
        v.push(format!("update put {HASH} {size} {offset} {len}"));
    }
    v.push(format!("update install {HASH}"));
    v.push(format!("update install {HASH} --force"));
    v
}

/// The command text that asks for `v`, written the one canonical way.
fn render(v: &Verb) -> String {
    match v {
        Verb::ApplyPauseOff { json } => {
            format!("apply pause-off{}", if *json { " --json" } else { "" })
        }
        Verb::Status {
            json,
            rate_interval_ms,
        } => format!(
            "status{} --rate-interval-ms {rate_interval_ms}",
            if *json { " --json" } else { "" }
        ),
        Verb::ShowMissing => "show missing".into(),
        Verb::ShowPut {
            hash,
            size,
            offset,
            len,
        } => format!("show put {hash} {size} {offset} {len}"),
        Verb::ShowActivate => "show activate".into(),
        Verb::ShowStatus => "show status".into(),
        Verb::Update(u) => {
            use pfx_fleet::updateagent::{SwitchWhen, UpdateVerb};
            match u {
                UpdateVerb::Put {
                    hash,
                    size,
                    offset,
                    len,
                } => format!("update put {hash} {size} {offset} {len}"),
                UpdateVerb::Install { hash, force } => {
                    format!(
                        "update install {hash}{}",
                        if *force { " --force" } else { "" }
                    )
                }
                UpdateVerb::Switch(SwitchWhen::Now) => "update switch now".into(),
                UpdateVerb::Switch(SwitchWhen::Idle) => "update switch idle".into(),
                UpdateVerb::Switch(SwitchWhen::Clock(h, m)) => {
                    format!("update switch at {h:02}:{m:02}")
                }
                UpdateVerb::Switch(SwitchWhen::Unix(t)) => format!("update switch at {t}"),
                UpdateVerb::Status => "update status".into(),
            }
        }
        Verb::Control { action, by } => pfx_fleet::controlagent::render(action, by),
    }
}

/// Runs one command and checks every property; panics (failing the test) with the input.
/// Returns whether it was accepted.
fn check_command(cmd: &str) -> bool {
    let got = std::panic::catch_unwind(|| parse_command(Some(cmd)))
        .unwrap_or_else(|_| panic!("parse_command panicked on {cmd:?}"));
    let v = match got {
        Ok(v) => v,
        Err(e) => {
            assert!(!e.trim().is_empty(), "empty refusal for {cmd:?}");
            return false;
        }
    };
    // Only white space between words made of lower-case letters, digits and `-`: no
    // shell delimiter, quote, NUL or control character is ever part of an accepted word.
    // The one exception: the clock time of `update switch at HH:MM`.
    let clock = matches!(
        v,
        Verb::Update(pfx_fleet::updateagent::UpdateVerb::Switch(
            pfx_fleet::updateagent::SwitchWhen::Clock(..)
        ))
    );
    let cmd_words = if clock {
        cmd.replacen(':', "", 1)
    } else {
        cmd.to_string()
    };
    let cmd = cmd_words.as_str();
    // The other exception: `control`'s playlist and output names (`A-Za-z0-9_.-`) and its
    // brightness factor (a `.`); still no shell delimiter, quote or control character.
    let control = matches!(v, Verb::Control { .. });
    let word_ok = |b: u8| {
        b.is_ascii_lowercase()
            || b.is_ascii_digit()
            || b == b'-'
            || (control && (b.is_ascii_uppercase() || b == b'_' || b == b'.'))
    };
    assert!(
        cmd.chars()
            .all(|c| c.is_ascii_whitespace() || (c.is_ascii() && word_ok(c as u8))),
        "accepted {cmd:?} holds a character outside [a-z0-9-] and white space: {v:?}"
    );
    for w in cmd.split_whitespace() {
        assert!(
            w.bytes().all(word_ok),
            "accepted {cmd:?} has the word {w:?}"
        );
    }
    if let Verb::Control {
        action: pfx_api::control::Action::Brightness { factor },
        ..
    } = &v
    {
        assert!(
            (0.0..=pfx_api::control::MAX_FACTOR).contains(factor),
            "accepted {cmd:?}: factor {factor}"
        );
    }
    match v {
        Verb::ShowPut {
            size, offset, len, ..
        } => {
            assert!(
                size <= MAX_SHOW_FILE
                    && len <= MAX_PUT
                    && offset.checked_add(len).is_some_and(|e| e <= size),
                "accepted {cmd:?}: {v:?} lies outside the file or the limits"
            );
        }
        Verb::Status {
            rate_interval_ms, ..
        } => assert!(
            (10..=10_000).contains(&rate_interval_ms),
            "accepted {cmd:?}: {v:?}"
        ),
        _ => {}
    }
    let again = render(&v);
    assert_eq!(
        parse_command(Some(&again)),
        Ok(v.clone()),
        "accepted {cmd:?} as {v:?}, whose own text {again:?} does not parse back to it"
    );
    true
}

/// One mutation of `s`, at the word or the character level.
fn mutate(rng: &mut Rng, s: &str) -> String {
    let mut words: Vec<String> = s.split(' ').map(str::to_string).collect();
    match rng.below(9) {
        0 => {
            let i = rng.below(words.len() + 1);
            words.insert(i, rng.pick(WORDS).to_string());
        }
        1 if !words.is_empty() => {
            let i = rng.below(words.len());
            words.remove(i);
        }
        2 if !words.is_empty() => {
            let i = rng.below(words.len());
            words[i] = rng.pick(WORDS).to_string();
        }
        3 if !words.is_empty() => {
            let i = rng.below(words.len());
            let w = words[i].clone();
            words.insert(i, w);
        }
        4 if words.len() > 1 => {
            let (i, j) = (rng.below(words.len()), rng.below(words.len()));
            words.swap(i, j);
        }
        5 if !words.is_empty() => {
            // A word glued to a delimiter or a number: `--json;`, `10|`, `$10`.
            let i = rng.below(words.len());
            let w = rng.pick(WORDS);
            if rng.below(2) == 0 {
                words[i].push_str(w);
            } else {
                words[i].insert_str(0, w);
            }
        }
        _ => {
            // Characters: inserted, replaced, or removed anywhere.
            let mut cs: Vec<char> = s.chars().collect();
            for _ in 0..=rng.below(3) {
                let i = rng.below(cs.len() + 1);
                let c = CHARS[rng.below(CHARS.len())];
                match rng.below(3) {
                    0 => cs.insert(i, c),
                    1 if i < cs.len() => cs[i] = c,
                    _ if i < cs.len() => {
                        cs.remove(i);
                    }
                    _ => cs.push(c),
                }
            }
            return cs.into_iter().collect();
        }
    }
    let sep = [" ", "  ", "\t", "\n", " \r\n "];
    let mut out = String::new();
    for (i, w) in words.iter().enumerate() {
        if i > 0 {
            // Mostly one space, sometimes other white space, now and then none at all.
            out.push_str(match rng.below(10) {
                0 => sep[rng.below(sep.len())],
                1 => "",
                _ => " ",
            });
        }
        out.push_str(w);
    }
    out
}

#[test]
fn dispatch_commands_survive_mutation() {
    let mut rng = Rng(0xd15_9a7c);
    let seeds = seeds();
    for s in &seeds {
        check_command(s);
    }
    let mut accepted = 0;
    for _ in 0..40_000 {
        let mut s = seeds[rng.below(seeds.len())].clone();
        for _ in 0..=rng.below(4) {
            s = mutate(&mut rng, &s);
        }
        accepted += usize::from(check_command(&s));
    }
    // Enough accepted that the properties of accepted commands are tested at all.
    eprintln!("mutated commands accepted: {accepted} of 40000");
    assert!(accepted > 300, "only {accepted} of 40000 accepted");
}

#[test]
fn dispatch_commands_of_random_words() {
    let mut rng = Rng(0x5eed_0c0d);
    let mut accepted = 0;
    for _ in 0..40_000 {
        // Mostly a verb first, so the argument checks are what is reached.
        let mut s = String::from(match rng.below(4) {
            0 => "show put",
            1 => "status",
            2 => "apply pause-off",
            _ => "",
        });
        for _ in 0..rng.below(7) {
            s.push(' ');
            s.push_str(rng.pick(WORDS));
        }
        accepted += usize::from(check_command(&s));
    }
    eprintln!("random-word commands accepted: {accepted} of 40000");
    assert!(accepted > 1_000, "only {accepted} of 40000 accepted");
    assert_eq!(parse_command(None).map_err(|e| e.is_empty()), Err(false));
}

/// Every key of agent.yaml, so mutations reach each one's checks.
const FULL: &str = "iface: eth0
lower: /media/root-ro
player: /usr/bin/pfx-player
unit_id: pole-7
image_version_file: /etc/pfx/image-version
profile_url: http://127.0.0.1:8080/profile
systemd: true
audit_log: /var/log/pfx-agent.log
store_root: /var/lib/pfx
store_rate_bytes_per_s: 8388608
store_reserve_bytes: 67108864
player_pidfile: /run/pfx-player.pid
show_confirm_timeout_s: 20
nic_backend: player
";

const TEST_KEYS: &str = "nic_backend: mock
mock_nic_dir: /run/pfx-mock
test_hold_in_write_ms: 50
test_hold_pidfile: /run/hold.pid
test_delay_ms: 5
";

/// What YAML mutations splice in: its delimiters, indentation, and values at the edges.
const YAML_BITS: &[&str] = &[
    ":",
    ": ",
    "-",
    "- ",
    "#",
    " #",
    "'",
    "\"",
    "[",
    "]",
    "{",
    "}",
    "&a ",
    "*a",
    "!",
    "!!str ",
    "!!int ",
    "|",
    ">",
    "\n",
    "\t",
    "  ",
    "    ",
    ",",
    "?",
    "%",
    "@",
    "`",
    "\\",
    "~",
    "null",
    "0",
    "-1",
    "1",
    "9",
    "10",
    "15",
    "65535",
    "65536",
    "599",
    "600",
    "601",
    "18446744073709551615",
    "18446744073709551616",
    "1e309",
    "-1e309",
    ".nan",
    "NaN",
    ".inf",
    "0x10",
    "0o7",
    "1_000",
    "true",
    "false",
    "yes",
    "",
    "/",
    "relative/path",
    "eth0; id",
    "eth0.100",
    "a-very-long-interface-name",
    "mock",
    "player",
    "---\n",
    "...\n",
    "\u{feff}",
    "\0",
    "é",
];

fn mutate_yaml(rng: &mut Rng, text: &str) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    if lines.is_empty() {
        lines.push(String::new());
    }
    let i = rng.below(lines.len());
    match rng.below(8) {
        0 => {
            // The value replaced by something at the edges or a delimiter.
            let l = &mut lines[i];
            let key_end = l.find(':').map_or(0, |k| k + 1);
            l.truncate(key_end);
            l.push(' ');
            l.push_str(rng.pick(YAML_BITS));
        }
        1 => {
            let l = &mut lines[i];
            let at = rng.below(l.len() + 1);
            let at = (0..=at).rev().find(|&k| l.is_char_boundary(k)).unwrap_or(0);
            l.insert_str(at, rng.pick(YAML_BITS));
        }
        2 => {
            lines.remove(i);
        }
        3 => {
            let l = lines[i].clone();
            lines.insert(rng.below(lines.len() + 1), l);
        }
        4 => {
            // Indentation changed: the line moves into or out of a mapping.
            let pad = ["", " ", "  ", "\t", "   "][rng.below(5)];
            let t = lines[i].trim_start().to_string();
            lines[i] = format!("{pad}{t}");
        }
        5 => {
            let l = &mut lines[i];
            let at = rng.below(l.len() + 1);
            let at = (0..=at).rev().find(|&k| l.is_char_boundary(k)).unwrap_or(0);
            l.truncate(at);
        }
        6 => {
            // A test-only key or a stray one.
            let extra = ["test_delay_ms: 1", "mock_nic_dir: /x", "players: /bin/sh"];
            lines.insert(rng.below(lines.len() + 1), extra[rng.below(3)].into());
        }
        _ => {
            // The whole file cut short: a write the power interrupted.
            let joined = lines.join("\n");
            let at = rng.below(joined.len() + 1);
            let at = (0..=at)
                .rev()
                .find(|&k| joined.is_char_boundary(k))
                .unwrap_or(0);
            return joined[..at].to_string();
        }
    }
    let mut out = lines.join("\n");
    if rng.below(4) != 0 {
        out.push('\n');
    }
    out
}

/// What `AgentConfig::parse` promises an accepted config holds. Returns whether it was
/// accepted.
fn check_agent_config(text: &str, test_backends: bool) -> bool {
    let got = std::panic::catch_unwind(|| AgentConfig::parse(text, test_backends))
        .unwrap_or_else(|_| panic!("AgentConfig::parse panicked on {text:?}"));
    let c = match got {
        Ok(c) => c,
        Err(e) => {
            assert!(!e.trim().is_empty(), "empty refusal for {text:?}");
            return false;
        }
    };
    let why = |what: &str| format!("accepted {text:?} (test_backends {test_backends}): {what}");
    assert!(
        !c.iface.is_empty()
            && c.iface.len() <= 15
            && c.iface
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)),
        "{}",
        why("iface")
    );
    for p in [&c.lower, &c.player, &c.image_version_file, &c.store_root]
        .into_iter()
        .chain(c.player_pidfile.as_ref())
    {
        assert!(
            p.is_absolute(),
            "{}",
            why(&format!("{} is relative", p.display()))
        );
    }
    assert!(c.store_rate_bytes_per_s >= 64 * 1024, "{}", why("rate"));
    assert!(
        (1..=600).contains(&c.show_confirm_timeout_s),
        "{}",
        why("confirm timeout")
    );
    let test_only = c.nic_backend == Backend::Mock
        || c.mock_nic_dir.is_some()
        || c.test_hold_in_write_ms.is_some()
        || c.test_hold_pidfile.is_some()
        || c.test_delay_ms.is_some();
    assert!(test_backends || !test_only, "{}", why("test-only key"));
    assert!(
        c.nic_backend != Backend::Mock || c.mock_nic_dir.is_some(),
        "{}",
        why("mock without a dir")
    );
    if !test_backends {
        // A release build accepts less than a test build, never more.
        assert!(
            AgentConfig::parse(text, true).is_ok(),
            "{}",
            why("test build refuses")
        );
    }
    true
}

#[test]
fn agent_config_survives_mutation() {
    let seeds = [
        String::new(),
        "iface: eth0\n".to_string(),
        FULL.to_string(),
        format!("{FULL}{}", TEST_KEYS.replace("nic_backend: mock\n", "")),
        format!("{}{TEST_KEYS}", FULL.replace("nic_backend: player\n", "")),
        "{iface: eth0, lower: /media/root-ro, systemd: false}\n".to_string(),
    ];
    let mut rng = Rng(0xa9e7_7c0f);
    let mut accepted = 0;
    for s in &seeds {
        check_agent_config(s, false);
        check_agent_config(s, true);
    }
    for _ in 0..6_000 {
        let mut t = seeds[rng.below(seeds.len())].clone();
        for _ in 0..=rng.below(3) {
            t = mutate_yaml(&mut rng, &t);
        }
        accepted += usize::from(check_agent_config(&t, false));
        accepted += usize::from(check_agent_config(&t, true));
    }
    eprintln!("agent configs accepted: {accepted} of 12000 parses");
    assert!(accepted > 1_000, "only {accepted} of 12000 accepted");
}
