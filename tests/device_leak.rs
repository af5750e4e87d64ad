//! A device gives back its memory: a global allocator keeps the count of live heap bytes
//! while devices with streams are made and dropped one after another, as a server or a
//! fuzzer makes them. (The `rim_json` fuzz target found the stream workers' rayon pools
//! keeping some 7 KB each for good; docs/FUZZING.md.) One test in its own binary, so no
//! other test allocates while it counts.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering};

use rt2::npu::device::{Device, DeviceConfig};

struct Live;

static LIVE: AtomicI64 = AtomicI64::new(0);

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so
// `System`'s guarantees are this allocator's; counting touches only an atomic and never
// allocates.
unsafe impl GlobalAlloc for Live {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: `alloc`'s contract (a non-zero-sized `layout`) is the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: the caller's `ptr` came from this allocator, that is from `System`, with
        // `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        // SAFETY: the caller's `ptr` came from `System` (through this allocator) with
        // `layout`, and `new_size` meets `realloc`'s contract, as the caller ensures.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Live = Live;

/// A device with a second stream, used and dropped (its workers are joined on drop).
fn use_a_device(compute_threads: usize) {
    let d = Device::new(DeviceConfig {
        compute_threads,
        ..DeviceConfig::default()
    });
    let s = d.create_stream();
    d.synchronize(s).unwrap();
    d.destroy_stream(s).unwrap();
}

#[test]
fn devices_made_and_dropped_give_their_memory_back() {
    for threads in [1, 2] {
        // The first devices set up what a process keeps once (thread-locals, statics).
        for _ in 0..5 {
            use_a_device(threads);
        }
        let before = LIVE.load(Ordering::SeqCst);
        for _ in 0..100 {
            use_a_device(threads);
        }
        let per_device = (LIVE.load(Ordering::SeqCst) - before) / 100;
        // Each kept about 14 KB (two streams) before the fix; a few bytes of noise remain.
        assert!(
            per_device < 512,
            "{per_device} bytes stay behind per device of {threads} compute threads"
        );
    }
}
