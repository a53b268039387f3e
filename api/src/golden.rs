//! Helpers for the golden-JSON tests of the player and the fleet (not for the binaries).
//!
//! The golden files in `api/tests/golden/` hold the JSON exactly as the producing side
//! prints it (`to_string_pretty`, as `nic --json` and the agent print). `/profile` goes
//! over the wire compact; its golden file is the same document pretty-printed, and
//! `minify` turns it back into the wire bytes. Run a test with `PFX_UPDATE_GOLDEN=1` to
//! write the file instead of comparing (then review the diff: it is a user-visible change).

use std::path::PathBuf;

/// `api/tests/golden/NAME`.
pub fn path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
}

/// The golden file's text; panics naming the file when it cannot be read (tests only).
pub fn read(name: &str) -> String {
    let p = path(name);
    match std::fs::read_to_string(&p) {
        Ok(t) => t,
        Err(e) => panic!("golden file {}: {e}", p.display()),
    }
}

/// Compares `actual` with the golden file `name` byte for byte, or writes it when
/// `PFX_UPDATE_GOLDEN=1`. Panics with both texts on a difference (tests only).
pub fn check(name: &str, actual: &str) {
    let p = path(name);
    if std::env::var_os("PFX_UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        if let Err(e) = std::fs::write(&p, actual) {
            panic!("writing golden file {}: {e}", p.display());
        }
        return;
    }
    let want = read(name);
    assert!(
        want == actual,
        "{} differs from what was produced (PFX_UPDATE_GOLDEN=1 rewrites it; a change \
         here is a change on the wire)\n--- golden\n{want}\n--- produced\n{actual}",
        p.display()
    );
}

/// The JSON text without whitespace outside strings: the compact form serde_json writes.
pub fn minify(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    let (mut in_str, mut esc) = (false, false);
    for c in json.chars() {
        if in_str {
            out.push(c);
            if esc {
                esc = false;
            } else if c == '\\' {
                esc = true;
            } else if c == '"' {
                in_str = false;
            }
        } else if c == '"' {
            in_str = true;
            out.push(c);
        } else if !c.is_whitespace() {
            out.push(c);
        }
    }
    out
}

/// Replaces the value of the first `"key":` in compact JSON with `value` (JSON text), for
/// fields that differ on every run (uptime, CPU time). Panics when the key is absent.
pub fn mask(compact: &str, key: &str, value: &str) -> String {
    let pat = format!("\"{key}\":");
    let Some(at) = compact.find(&pat) else {
        panic!("{key:?} is not in {compact}");
    };
    let start = at + pat.len();
    let rest = &compact[start..];
    let len = if rest.starts_with('"') {
        let mut esc = false;
        let mut end = rest.len();
        for (i, c) in rest.char_indices().skip(1) {
            if esc {
                esc = false;
            } else if c == '\\' {
                esc = true;
            } else if c == '"' {
                end = i + 1;
                break;
            }
        }
        end
    } else {
        rest.find([',', '}', ']']).unwrap_or(rest.len())
    };
    format!("{}{value}{}", &compact[..start], &rest[len..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minify_keeps_strings() {
        assert_eq!(
            minify("{\n  \"a b\": [1, 2],\n  \"c\": \"x \\\" y\"\n}"),
            "{\"a b\":[1,2],\"c\":\"x \\\" y\"}"
        );
    }

    #[test]
    fn mask_numbers_and_strings() {
        let t = r#"{"a":1.25,"h":"no \"frame\" yet","b":{"c":null}}"#;
        assert_eq!(
            mask(t, "a", "0.0"),
            r#"{"a":0.0,"h":"no \"frame\" yet","b":{"c":null}}"#
        );
        assert_eq!(
            mask(t, "h", "\"ok\""),
            r#"{"a":1.25,"h":"ok","b":{"c":null}}"#
        );
        assert_eq!(
            mask(t, "c", "7"),
            r#"{"a":1.25,"h":"no \"frame\" yet","b":{"c":7}}"#
        );
    }
}
