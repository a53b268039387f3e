//! Steady-state decode allocates nothing: after one pass over the file (buffers reach
//! their largest block), a second pass through the Prefetcher, decoder thread included,
//! makes no heap allocation. Counted by a global allocator in this test binary only.

#[path = "common/fseq_writer.rs"]
mod fseq_writer;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use fseq_writer::{Spec, frames, write};
use pfx_player::source::fseq::{FseqFile, Prefetcher};

struct Counting;
static ALLOCS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn pass(p: &mut Prefetcher, frames: u32) {
    for n in 0..frames {
        assert!(
            p.wait_for(n, Duration::from_secs(5)).is_some(),
            "frame {n}: {:?}",
            p.error()
        );
    }
}

#[test]
fn second_pass_allocates_nothing() {
    for spec in [
        Spec::default(),
        Spec {
            compression: 2,
            ..Spec::default()
        },
        Spec {
            compression: 0,
            sparse_ranges: vec![(40, 20), (0, 10)],
            ..Spec::default()
        },
    ] {
        let fr = frames(150, 30);
        let f = FseqFile::open_bytes("alloc.fseq", write(&spec, &fr)).unwrap();
        let mut p = Prefetcher::spawn(f, 8);
        pass(&mut p, 150);
        // Loop restart: the seek and the whole second pass must not allocate.
        let before = ALLOCS.load(Ordering::Relaxed);
        pass(&mut p, 150);
        let during = ALLOCS.load(Ordering::Relaxed) - before;
        assert_eq!(
            during, 0,
            "compression {} allocated {during} times in a steady pass",
            spec.compression
        );
    }
}
