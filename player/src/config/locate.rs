//! Where a key path such as `outputs[1].profile` is in a YAML text, so that an error found
//! after parsing (a value out of range, a profile that does not exist) can name the line
//! as the parser's own errors do. Pure: text in, position out.

use granit_parser::{Event, Parser};

/// One open mapping or sequence and the key path that leads to it.
struct Open {
    path: String,
    kind: Kind,
}

enum Kind {
    /// `key`: the key whose value comes next; None when the next node is a key.
    Map {
        key: Option<String>,
    },
    Seq {
        next: usize,
    },
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// The line (1-based) and column (1-based) of the key, or the list item, that `key_path`
/// names (`fps`, `content.playlist`, `outputs[0].profile`). When the path is not in the text
/// (a key left out), the deepest part of it that is: `outputs[0]` for a missing
/// `outputs[0].start_channel`. None when not even the first part is there, or the text does
/// not parse up to it.
pub fn locate(text: &str, key_path: &str) -> Option<(usize, usize)> {
    let mut best: Option<(usize, (usize, usize))> = None;
    let mut note = |p: &str, at: (usize, usize)| -> bool {
        if p == key_path {
            return true;
        }
        let below = key_path
            .strip_prefix(p)
            .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['));
        if below && best.is_none_or(|(len, _)| p.len() > len) {
            best = Some((p.len(), at));
        }
        false
    };
    let mut stack: Vec<Open> = Vec::new();
    for item in Parser::new_from_str(text) {
        // A syntax error: the parser's own message names its line; keep what was found.
        let Ok((event, span)) = item else { break };
        let at = (span.start.line(), span.start.col() + 1);
        let opens = match &event {
            Event::MappingStart(..) => Some(Kind::Map { key: None }),
            Event::SequenceStart(..) => Some(Kind::Seq { next: 0 }),
            Event::Scalar(..) | Event::Alias(_) => None,
            Event::MappingEnd | Event::SequenceEnd => {
                stack.pop();
                continue;
            }
            _ => continue,
        };
        // The path of this node when it is a value or an item; a key gives its path to
        // the value after it.
        let path = match stack.last_mut() {
            None => Some(String::new()),
            Some(Open {
                path,
                kind: Kind::Seq { next },
            }) => {
                let p = format!("{path}[{next}]");
                *next += 1;
                if note(&p, at) {
                    return Some(at);
                }
                Some(p)
            }
            Some(Open {
                path,
                kind: Kind::Map { key },
            }) => match key.take() {
                Some(k) => Some(join(path, &k)),
                None => {
                    // A key. A mapping or list used as a key (YAML allows it) gets a name
                    // no key path can have, so nothing under it is mistaken for a match.
                    let k = match &event {
                        Event::Scalar(s, ..) => s.to_string(),
                        _ => "?".to_string(),
                    };
                    let p = join(path, &k);
                    *key = Some(k);
                    if note(&p, at) {
                        return Some(at);
                    }
                    opens.as_ref().map(|_| "\u{0}".to_string())
                }
            },
        };
        if let (Some(kind), Some(path)) = (opens, path) {
            stack.push(Open { path, kind });
        }
    }
    best.map(|(_, at)| at)
}

/// The key path an error message starts with (`outputs[0].profile` of
/// `outputs[0].profile: nope: no profile named ...`), if it starts with one.
pub fn key_path_of(message: &str) -> Option<&str> {
    let (head, _) = message.split_once(": ")?;
    let ok = !head.is_empty()
        && head
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.[]-".contains(&b));
    ok.then_some(head)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHOW: &str = "\
# a show
interface: eth0
fps: 1000
outputs:
  - name: a
    profile: gen3
  - name: b
    profile: nope
content:
  playlist:
    - pattern: rainbow
      seconds: -1
sacn: {sync_universe: 70000}
";

    #[test]
    fn keys_values_and_items_are_found_by_path() {
        assert_eq!(locate(SHOW, "interface"), Some((2, 1)));
        assert_eq!(locate(SHOW, "fps"), Some((3, 1)));
        assert_eq!(locate(SHOW, "outputs"), Some((4, 1)));
        assert_eq!(locate(SHOW, "outputs[0]"), Some((5, 5)));
        assert_eq!(locate(SHOW, "outputs[1].profile"), Some((8, 5)));
        assert_eq!(locate(SHOW, "outputs[1].name"), Some((7, 5)));
        assert_eq!(locate(SHOW, "content.playlist[0].seconds"), Some((12, 7)));
        assert_eq!(locate(SHOW, "sacn.sync_universe"), Some((13, 8)));
    }

    #[test]
    fn a_missing_key_falls_back_to_the_deepest_part_that_is_there() {
        assert_eq!(locate(SHOW, "outputs[1].start_channel"), Some((7, 5)));
        assert_eq!(locate(SHOW, "content.playlist[3].fseq"), Some((10, 3)));
        // `out` is a prefix of `outputs` as text, not as a path.
        assert_eq!(locate(SHOW, "out"), None);
        assert_eq!(locate(SHOW, "schedule"), None);
        assert_eq!(locate("", "fps"), None);
    }

    #[test]
    fn values_are_not_taken_for_keys() {
        // `eth0` is interface's value, not a key; after a nested value, the next node of
        // the outer mapping is a key again.
        let t = "interface: fps\nsync:\n  role: remote\nfps: 60\n";
        assert_eq!(locate(t, "fps"), Some((4, 1)));
        assert_eq!(locate(t, "sync.role"), Some((3, 3)));
        assert_eq!(locate(t, "eth0"), None);
    }

    #[test]
    fn complex_keys_and_broken_text_do_not_confuse_it() {
        let t = "? [fps]\n: 1\nfps: 2\n";
        assert_eq!(locate(t, "fps"), Some((3, 1)));
        // Found before the syntax error: kept; after it: not found, no panic.
        let t = "fps: 1\noutputs: [\n";
        assert_eq!(locate(t, "fps"), Some((1, 1)));
        assert_eq!(locate(t, "outputs[0].name"), Some((2, 1)));
        assert_eq!(locate("a: [}\nfps: 1\n", "fps"), None);
    }

    /// Mutations of SHOW over YAML's delimiters: never a panic, and a position found is
    /// inside the text. 5,000 texts (about a second in a debug build).
    #[test]
    fn mutated_texts_never_panic_and_positions_stay_inside() {
        const ALPHABET: &[u8] = b":-#'\"[]{}&*!|>?,%@` \t\n\r0123456789abcxyz.\\";
        let paths = [
            "fps",
            "outputs[1].profile",
            "content.playlist[0].seconds",
            "a.b",
        ];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..5_000 {
            let mut t = SHOW.as_bytes().to_vec();
            for _ in 0..1 + next() % 4 {
                let i = (next() % t.len() as u64) as usize;
                let c = ALPHABET[(next() % ALPHABET.len() as u64) as usize];
                match next() % 3 {
                    0 => t[i] = c,
                    1 => t.insert(i, c),
                    _ => t.truncate(i),
                }
                if t.is_empty() {
                    t.push(c);
                }
            }
            let text = String::from_utf8_lossy(&t);
            // YAML breaks lines at CR, LF and CRLF alike.
            let lines = text.replace("\r\n", "\n").split(['\n', '\r']).count();
            for p in paths {
                if let Some((l, c)) = locate(&text, p) {
                    assert!(l >= 1 && l <= lines && c >= 1, "{p} at {l}:{c} in {text:?}");
                }
            }
        }
    }

    #[test]
    fn the_key_path_is_the_message_head() {
        assert_eq!(
            key_path_of("outputs[0].profile: nope: no profile"),
            Some("outputs[0].profile")
        );
        assert_eq!(key_path_of("fps: 1000 is outside 1..=240"), Some("fps"));
        assert_eq!(key_path_of("no key here"), None);
        assert_eq!(key_path_of("the file: has words"), None);
        assert_eq!(key_path_of(": x"), None);
    }
}
