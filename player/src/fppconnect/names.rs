//! What an upload may be called, and the numbers in its headers. Pure: bytes in, a
//! verdict out, so it can be fuzzed and never touches the file system.

use std::fmt;

/// Where an upload goes: FPP's upload directories pfx takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dir {
    Sequences,
    /// Media: kept (so xLights' next push sees it there), never played.
    Music,
    Videos,
}

impl Dir {
    pub fn parse(s: &str) -> Option<Dir> {
        match s {
            "sequences" => Some(Dir::Sequences),
            "music" => Some(Dir::Music),
            "videos" => Some(Dir::Videos),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Dir::Sequences => "sequences",
            Dir::Music => "music",
            Dir::Videos => "videos",
        }
    }
    /// The key an upload is staged under: one name may be a sequence and a song.
    pub(crate) fn key(self, name: &str) -> String {
        match self {
            Dir::Sequences => name.to_string(),
            _ => format!("{}-{name}", self.name()),
        }
    }
}

/// Longest `Upload-Name` accepted, in bytes. ext4 allows 255; staging adds a suffix.
pub const MAX_NAME: usize = 200;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameError {
    Empty,
    TooLong(usize),
    NotUtf8,
    DotDot,
    Slash,
    Nul,
    Control,
    Hidden,
    NotFseq,
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = match self {
            NameError::Empty => "is empty".to_string(),
            NameError::TooLong(n) => format!("is {n} bytes long; at most {MAX_NAME}"),
            NameError::NotUtf8 => "is not UTF-8".into(),
            NameError::DotDot => "contains `..`".into(),
            NameError::Slash => "contains `/` or `\\` (a path, not a file name)".into(),
            NameError::Nul => "contains a NUL byte".into(),
            NameError::Control => "contains a control character".into(),
            NameError::Hidden => "starts with `.`".into(),
            NameError::NotFseq => "does not end in `.fseq` (pfx stores sequences only)".into(),
        };
        write!(f, "file name {m}")
    }
}

/// A sequence file name that is safe to join to a directory: one path component, no
/// `..`, no separators or control bytes, not hidden, UTF-8, ending in `.fseq`.
pub fn check_name(raw: &[u8]) -> Result<&str, NameError> {
    let s = check_plain(raw)?;
    if !s.ends_with(".fseq") || s.len() == ".fseq".len() {
        return Err(NameError::NotFseq);
    }
    Ok(s)
}

/// A media file name (`PATCH /api/file/music`, `videos`): the rules of `check_name`
/// but any suffix.
pub fn check_plain(raw: &[u8]) -> Result<&str, NameError> {
    if raw.is_empty() {
        return Err(NameError::Empty);
    }
    if raw.len() > MAX_NAME {
        return Err(NameError::TooLong(raw.len()));
    }
    if raw.contains(&0) {
        return Err(NameError::Nul);
    }
    let s = std::str::from_utf8(raw).map_err(|_| NameError::NotUtf8)?;
    if s.contains("..") {
        return Err(NameError::DotDot);
    }
    if s.contains('/') || s.contains('\\') {
        return Err(NameError::Slash);
    }
    if s.chars().any(char::is_control) {
        return Err(NameError::Control);
    }
    if s.starts_with('.') {
        return Err(NameError::Hidden);
    }
    Ok(s)
}

/// The sequence named in a URL (`/api/sequence/NAME/meta`), already percent-decoded by
/// the router: FPP accepts it with or without `.fseq`.
pub fn sequence_name(url_name: &str) -> Result<String, NameError> {
    let full = if url_name.ends_with(".fseq") {
        url_name.to_string()
    } else {
        format!("{url_name}.fseq")
    };
    check_name(full.as_bytes()).map(str::to_string)
}

/// A playlist name from a URL: the same rules as a file name, without the suffix.
pub fn playlist_name(raw: &str) -> Result<&str, NameError> {
    if raw.is_empty() {
        return Err(NameError::Empty);
    }
    if raw.len() > MAX_NAME {
        return Err(NameError::TooLong(raw.len()));
    }
    if raw.contains('\0') {
        return Err(NameError::Nul);
    }
    if raw.contains("..") {
        return Err(NameError::DotDot);
    }
    if raw.contains('/') || raw.contains('\\') {
        return Err(NameError::Slash);
    }
    if raw.chars().any(char::is_control) {
        return Err(NameError::Control);
    }
    if raw.starts_with('.') {
        return Err(NameError::Hidden);
    }
    Ok(raw)
}

/// `Upload-Offset` / `Upload-Length`: plain decimal, no sign, no spaces, fits in u64.
pub fn decimal(raw: &[u8]) -> Option<u64> {
    if raw.is_empty() || raw.len() > 20 || !raw.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(raw).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_pass() {
        assert_eq!(check_name(b"Song.fseq"), Ok("Song.fseq"));
        assert_eq!(
            check_name("Jingle Bells – 2026.fseq".as_bytes()),
            Ok("Jingle Bells – 2026.fseq")
        );
        assert_eq!(check_name(b"a.b.fseq"), Ok("a.b.fseq"));
    }

    #[test]
    fn hostile_names_are_refused() {
        let cases: &[(&[u8], NameError)] = &[
            (b"", NameError::Empty),
            (b"../etc/passwd.fseq", NameError::DotDot),
            (b"a..fseq", NameError::DotDot),
            (b"/etc/x.fseq", NameError::Slash),
            (b"dir/x.fseq", NameError::Slash),
            (b"c:\\x.fseq", NameError::Slash),
            (b"x\0.fseq", NameError::Nul),
            (b"x\n.fseq", NameError::Control),
            (b".hidden.fseq", NameError::Hidden),
            (b".fseq", NameError::Hidden),
            (b"song.mp3", NameError::NotFseq),
            (b"\xff\xfe.fseq", NameError::NotUtf8),
        ];
        for (raw, want) in cases {
            assert_eq!(check_name(raw).err().as_ref(), Some(want), "{raw:?}");
        }
        let long = format!("{}.fseq", "a".repeat(MAX_NAME));
        assert!(matches!(
            check_name(long.as_bytes()),
            Err(NameError::TooLong(_))
        ));
        let ok = format!("{}.fseq", "a".repeat(MAX_NAME - 5));
        assert!(check_name(ok.as_bytes()).is_ok());
    }

    #[test]
    fn url_names_get_the_suffix() {
        assert_eq!(sequence_name("Song").as_deref(), Ok("Song.fseq"));
        assert_eq!(sequence_name("Song.fseq").as_deref(), Ok("Song.fseq"));
        assert!(sequence_name("../x").is_err());
    }

    /// The fuzz target's body (fuzz/fuzz_targets/fppconnect_names.rs) on stable, over
    /// deterministic random inputs spelled from the bytes that matter.
    #[test]
    fn random_names_never_escape_the_directory() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let alphabet: &[&[u8]] = &[
            b".",
            b"..",
            b"/",
            b"\\",
            b"\0",
            b"a",
            b".fseq",
            b"fseq",
            b"\n",
            b"\xff",
            b"\xc3\xa9",
            b" ",
        ];
        let dir = std::path::Path::new("/var/lib/pfx/staging");
        for _ in 0..20_000 {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            let mut seed = x.wrapping_mul(0x2545_f491_4f6c_dd1d);
            let mut raw = Vec::new();
            for _ in 0..(seed % 9) {
                seed = seed.rotate_left(7) ^ 0x9e37_79b9_7f4a_7c15;
                raw.extend_from_slice(alphabet[(seed % alphabet.len() as u64) as usize]);
            }
            if let Ok(n) = check_name(&raw) {
                assert_eq!(dir.join(n).parent(), Some(dir), "{raw:?}");
                assert!(!n.contains("..") && !n.contains('/') && !n.contains('\0'));
            }
        }
    }

    #[test]
    fn decimals() {
        assert_eq!(decimal(b"0"), Some(0));
        assert_eq!(decimal(b"16777216"), Some(16_777_216));
        for bad in [
            &b""[..],
            b"-1",
            b"+1",
            b" 1",
            b"1e3",
            b"0x10",
            b"99999999999999999999999",
        ] {
            assert_eq!(decimal(bad), None, "{bad:?}");
        }
    }
}
