//! Bytes from an `Upload-Name` header and the numbers beside it: the FPP Connect name and
//! number checks (`player/src/fppconnect/names.rs`, std only). A name that passes must be
//! one plain path component, so joining it to the staging directory stays inside it.
//!
//!   cargo +nightly fuzz run fppconnect_names -- -max_total_time=120
#![no_main]

#[allow(dead_code)]
#[path = "../../player/src/fppconnect/names.rs"]
mod names;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(n) = names::check_name(data) {
        let dir = std::path::Path::new("/var/lib/pfx/staging");
        let p = dir.join(n);
        assert_eq!(p.parent(), Some(dir));
        assert!(!n.contains("..") && !n.contains('/') && !n.contains('\0'));
        assert!(n.len() <= names::MAX_NAME && n.ends_with(".fseq"));
    }
    if let Some(v) = names::decimal(data) {
        let parsed = std::str::from_utf8(data).ok().and_then(|s| s.parse::<u64>().ok());
        assert_eq!(parsed, Some(v));
    }
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = names::sequence_name(s);
        let _ = names::playlist_name(s);
    }
});
