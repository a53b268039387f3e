//! Bytes from the network as a MultiSync datagram: `pfx_multisync::packet`, what a
//! unit's sync thread reads from port 32320. A refused datagram is fine; a panic, or a
//! packet that does not survive being written back, is a bug.
//!
//!   cargo +nightly fuzz run multisync -- -max_total_time=120
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    pfx_multisync::packet::fuzz_one(data);
});
