//! Arbitrary bytes as an FSEQ file: open (header, block table, sparse ranges, variable
//! headers) and read frames. Errors are fine; a panic, hang or huge allocation is a bug.
//!
//!   cargo +nightly fuzz run fseq fuzz/corpus/fseq -- -max_total_time=180
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    pfx_fseq::fuzz::fuzz_one(data);
});
