//! Bytes from the network as an HTTP/1.1 response: `pfx_api::http::parse_response`, the
//! parser behind `pfx-player profile`, the agent's `/profile` read and the pole API.
//! Errors are fine; a panic, hang or huge allocation is a bug.
//!
//! Each input is parsed twice: as it is, and spelled in an alphabet of the bytes and
//! words that steer the parser (CR, LF, ':', ';', ',', space, hex digits, status lines,
//! header names, `chunked` in several cases), so short inputs reach the chunk decoder.
//!
//!   cargo +nightly fuzz run http_response -- -max_total_time=120
#![no_main]

#[allow(dead_code, unused_imports)]
#[path = "../../api/src/http.rs"]
mod http;

/// What one input byte stands for in the second parse (byte % len).
const ALPHABET: &[&[u8]] = &[
    b"\r", b"\n", b"\r\n", b"\r\n\r\n", b":", b": ", b";", b",", b" ", b"\t",
    b"0", b"1", b"2", b"3", b"4", b"5", b"6", b"7", b"8", b"9",
    b"a", b"b", b"c", b"d", b"e", b"f", b"A", b"B", b"C", b"D", b"E", b"F",
    b"x", b"z", b"-", b"\xff", b"\x00",
    b"HTTP/1.1 ", b"HTTP/1.0 ", b"200 OK", b"503", b"HTTP/2 ",
    b"Transfer-Encoding", b"transfer-encoding", b"chunked", b"CHUNKED", b"Chunked",
    b"gzip", b"Content-Length", b"content-length", b"Host",
    b"ffffffffffffffff", b"10000000000000000", b"18446744073709551615",
];

fn spell(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() * 2);
    for &b in data {
        out.extend_from_slice(ALPHABET[b as usize % ALPHABET.len()]);
    }
    out
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    for raw in [data.to_vec(), spell(data)] {
        if let Ok(r) = http::parse_response(&raw) {
            // A body is never longer than what came in.
            assert!(r.body.len() <= raw.len());
        }
    }
});
