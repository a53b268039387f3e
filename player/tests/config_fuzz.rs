//! Fuzzes the player's YAML parsers on stable Rust: `ShowConfig::from_str` (the show
//! config, from operators, fleet pushes and xLights uploads) and `DeviceProfile::from_str`
//! (a pole generation's profile). Seeds are the show configs in `examples/` and the
//! profiles in `profiles/`; each test then runs 3 000 deterministic YAML mutations: YAML's
//! delimiters (`:` `-` `#` quotes, brackets, braces, anchors, tags, block scalars, newline,
//! tab), indentation changes, lines dropped, doubled and cut, and numbers at the edges (0,
//! -1, huge, 1e309, NaN). About 5 s together in a debug build (the show config reads its
//! profiles from disk on every run). The failing input is printed.
//!
//! Beyond "never panics": a refusal names what is wrong (its message is not empty); an
//! accepted config passes its own validation again, and written back out as YAML it is
//! accepted again, as JSON (how FPP Connect writes it back) and as YAML (a profile comes
//! back equal).

use std::path::{Path, PathBuf};

use pfx_player::config::{ConfigError, DeviceProfile, ShowConfig};

#[path = "../../fuzz/rng.rs"]
#[allow(dead_code)] // each test uses what it needs of it
mod rng;
use rng::Rng;

/// What mutations splice in: YAML's delimiters and values at the edges of every range.
const BITS: &[&str] = &[
    ":",
    ": ",
    "-",
    "- ",
    "#",
    " # x",
    "'",
    "\"",
    "[",
    "]",
    "[]",
    "{",
    "}",
    "{}",
    "&a ",
    "*a",
    "!",
    "!!str ",
    "!!int ",
    "!!float ",
    "!!map ",
    "|",
    "|\n  x",
    ">",
    ">-\n  x",
    "\n",
    "\t",
    "  ",
    "    ",
    ",",
    "?",
    "? ",
    "%",
    "@",
    "`",
    "\\",
    "~",
    "null",
    "0",
    "-0",
    "-1",
    "1",
    "255",
    "256",
    "65535",
    "65536",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999999",
    "1e309",
    "-1e309",
    "1e-400",
    ".nan",
    ".NaN",
    "NaN",
    ".inf",
    "-.inf",
    "0.5",
    "1.0000001",
    "-0.0",
    "0x10",
    "0o17",
    "0b1",
    "1_000",
    "1:30",
    "23:30",
    "24:00",
    "25:61",
    "sunset+1441",
    "sunrise-99999999999",
    "2026-02-30",
    "9999-12-31",
    "true",
    "false",
    "yes",
    "on",
    "",
    "/",
    "/nonexistent",
    "../",
    "..",
    "a/b",
    "eth0",
    "#ffffff",
    "#fff",
    "#gggggg",
    "256.256.256.256:99999",
    "[::1]:80",
    "0.0.0.0:0",
    "239.255.0.1:5568",
    "solid",
    "rainbow",
    "master",
    "remote",
    "unicast",
    "Europe/Berlin",
    "Mars/Olympus",
    "UTC",
    "---\n",
    "...\n",
    "\u{feff}",
    "\0",
    "é",
    "\u{2028}",
];

/// Numbers alone, at the edges of the integer types and of the config's own ranges
/// (universes 1..=63999, sizes 1..=512, priority 0..=200, fps 1..=240, ...), so that two
/// of them together (a high first universe and many pixels) reach the sums.
const NUMBERS: &[&str] = &[
    "0",
    "1",
    "2",
    "-1",
    "127",
    "128",
    "199",
    "200",
    "201",
    "240",
    "241",
    "255",
    "256",
    "510",
    "511",
    "512",
    "513",
    "600",
    "601",
    "1000",
    "1001",
    "3600",
    "10000",
    "10001",
    "32767",
    "32768",
    "63998",
    "63999",
    "64000",
    "65535",
    "65536",
    "100000",
    "1000000",
    "16777216",
    "2147483647",
    "2147483648",
    "4294967295",
    "4294967296",
    "18446744073709551615",
    "18446744073709551616",
    "1e309",
    "-1e309",
    ".nan",
    "0.0",
    "1.5",
    "-0.5",
    "1e-9",
];

fn pick(rng: &mut Rng) -> &'static str {
    BITS[rng.below(BITS.len())]
}

fn char_floor(s: &str, at: usize) -> usize {
    (0..=at.min(s.len()))
        .rev()
        .find(|&k| s.is_char_boundary(k))
        .unwrap_or(0)
}

fn mutate(rng: &mut Rng, text: &str) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    if lines.is_empty() {
        lines.push(String::new());
    }
    let i = rng.below(lines.len());
    match rng.below(12) {
        9..=11 => {
            // Every number in the file, each with even odds, replaced by one at an edge:
            // the checks that add two values (first universe + universes) are reached.
            for l in &mut lines {
                let Some(k) = l.find(": ") else { continue };
                let v = l[k + 2..].trim();
                if v.parse::<f64>().is_ok() && rng.below(2) == 0 {
                    l.truncate(k + 2);
                    l.push_str(NUMBERS[rng.below(NUMBERS.len())]);
                }
            }
        }
        0 | 1 => {
            // A value replaced by a delimiter or a number at the edges.
            let l = &mut lines[i];
            let key_end = l.find(": ").map_or(l.len(), |k| k + 2);
            l.truncate(key_end);
            l.push_str(pick(rng));
        }
        2 => {
            let l = &mut lines[i];
            let at = char_floor(l, rng.below(l.len() + 1));
            l.insert_str(at, pick(rng));
        }
        3 => {
            lines.remove(i);
        }
        4 => {
            let l = lines[i].clone();
            lines.insert(rng.below(lines.len() + 1), l);
        }
        5 => {
            // Indentation changed: the line moves into, or out of, its mapping or list.
            let pad = ["", " ", "  ", "\t", "   ", "      ", "        "][rng.below(7)];
            let t = lines[i].trim_start().to_string();
            lines[i] = format!("{pad}{t}");
        }
        6 => {
            let l = &mut lines[i];
            let at = char_floor(l, rng.below(l.len() + 1));
            l.truncate(at);
        }
        7 => {
            // One character replaced.
            let l = &mut lines[i];
            if !l.is_empty() {
                let at = char_floor(l, rng.below(l.len()));
                let end = (at + 1..=l.len())
                    .find(|&k| l.is_char_boundary(k))
                    .unwrap_or(l.len());
                let c = [
                    ":", "-", "#", "'", "\"", "[", "{", "&", "*", "!", "|", ">", " ",
                ];
                l.replace_range(at..end, c[rng.below(c.len())]);
            }
        }
        _ => {
            // The whole file cut short: an upload or a write the power interrupted.
            let joined = lines.join("\n");
            let at = char_floor(&joined, rng.below(joined.len() + 1));
            return joined[..at].to_string();
        }
    }
    let mut out = lines.join("\n");
    if rng.below(4) != 0 {
        out.push('\n');
    }
    out
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A refusal names the file and says something about what is wrong.
fn check_error(e: &ConfigError, text: &str) {
    let message = match e {
        ConfigError::Parse { message, .. } | ConfigError::Invalid { message, .. } => message,
        ConfigError::Read { .. } => panic!("a parse from text read a file it was not given: {e}"),
    };
    assert!(
        !message.trim().is_empty(),
        "empty error message ({e:?}) for {text:?}"
    );
}

fn check_show(text: &str, origin: &Path) -> bool {
    let got = std::panic::catch_unwind(|| ShowConfig::from_str(text, origin))
        .unwrap_or_else(|_| panic!("ShowConfig::from_str panicked on {text:?}"));
    let show = match got {
        Ok(s) => s,
        Err(e) => {
            check_error(&e, text);
            return false;
        }
    };
    if let Err(e) = show.config.clone().resolve(origin) {
        panic!("accepted {text:?}, but its own config fails validation: {e}");
    }
    // JSON is how FPP Connect writes the active config back into the store; YAML is how
    // an operator's tool would.
    let json = serde_json::to_string_pretty(&show.config).map_err(|e| e.to_string());
    let yaml = serde_saphyr::to_string(&show.config).map_err(|e| e.to_string());
    for written in [json, yaml] {
        let written = written
            .unwrap_or_else(|e| panic!("accepted {text:?}, but it cannot be written out: {e}"));
        if let Err(e) = ShowConfig::from_str(&written, origin) {
            panic!("accepted {text:?}, written out as {written:?}, refused: {e}");
        }
    }
    true
}

fn check_profile(text: &str, origin: &Path) -> bool {
    let got = std::panic::catch_unwind(|| DeviceProfile::from_str(text, origin))
        .unwrap_or_else(|_| panic!("DeviceProfile::from_str panicked on {text:?}"));
    let p = match got {
        Ok(p) => p,
        Err(e) => {
            check_error(&e, text);
            return false;
        }
    };
    // What the profile promises the output stage: at least one pixel, a frame shape.
    assert!(p.pixels >= 1, "accepted {text:?} with no pixels");
    assert!(
        !p.frame_datagrams().is_empty(),
        "accepted {text:?}: no datagrams"
    );
    let written = serde_saphyr::to_string(&p)
        .unwrap_or_else(|e| panic!("accepted {text:?}, but it cannot be written out: {e}"));
    match DeviceProfile::from_str(&written, origin) {
        Ok(q) => assert_eq!(q, p, "accepted {text:?}; written out as {written:?}"),
        Err(e) => panic!("accepted {text:?}, written out as {written:?}, refused: {e}"),
    }
    true
}

/// The examples that are show configs (the others are image and fleet files).
const SHOWS: &[&str] = &[
    "demo.yaml",
    "scheduled-show.yaml",
    "show.yaml",
    "sync-master.yaml",
    "sync-remote.yaml",
    "unit-show.yaml",
];

#[test]
fn show_configs_survive_mutation() {
    let dir = repo().join("examples");
    let seeds: Vec<(String, PathBuf)> = SHOWS
        .iter()
        .map(|n| {
            let p = dir.join(n);
            (std::fs::read_to_string(&p).expect("example"), p)
        })
        .collect();
    let mut rng = Rng(0xc0f1_9a11);
    let mut accepted = 0;
    for (text, origin) in &seeds {
        check_show(text, origin);
    }
    for _ in 0..3_000 {
        let (text, origin) = &seeds[rng.below(seeds.len())];
        let mut t = text.clone();
        for _ in 0..=rng.below(3) {
            t = mutate(&mut rng, &t);
        }
        accepted += usize::from(check_show(&t, origin));
    }
    // The mutations must not all be refused at once, or the properties above test nothing.
    assert!(
        accepted > 300,
        "only {accepted} of 3000 mutated shows accepted"
    );
}

#[test]
fn profiles_survive_mutation() {
    let dir = repo().join("profiles");
    let mut seeds: Vec<(String, PathBuf)> = std::fs::read_dir(&dir)
        .expect("profiles/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .map(|p| (std::fs::read_to_string(&p).expect("profile"), p))
        .collect();
    seeds.sort();
    assert!(seeds.len() >= 3, "{seeds:?}");
    // The sACN profile near the top of the universe range: one more number at an edge
    // (many pixels, small universes) reaches the sum that must not overflow.
    let high = seeds
        .iter()
        .find(|(t, _)| t.contains("first_universe: 1\n"))
        .map(|(t, p)| {
            (
                t.replace("first_universe: 1\n", "first_universe: 63990\n"),
                p.clone(),
            )
        })
        .expect("an sACN profile");
    seeds.push(high);
    let mut rng = Rng(0x9f0f_11e5);
    let mut accepted = 0;
    for (text, origin) in &seeds {
        assert!(check_profile(text, origin), "{} refused", origin.display());
    }
    for _ in 0..3_000 {
        let (text, origin) = &seeds[rng.below(seeds.len())];
        let mut t = text.clone();
        for _ in 0..=rng.below(3) {
            t = mutate(&mut rng, &t);
        }
        accepted += usize::from(check_profile(&t, origin));
    }
    assert!(
        accepted > 150,
        "only {accepted} of 3000 mutated profiles accepted"
    );
}
