//! A steady-state execution of a static model allocates nothing: a counting global
//! allocator counts every allocation in the process (host threads, stream workers, compute
//! cores) while a loaded model executes again and again, under each engine (topo-mt's workers included).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rt2::exec::runtime::{ExecutorOptions, ExecutorType, ModelV2Executor};
use rt2::lower::{LowerOptions, lower};
use rt2::npu::device::{Device, DeviceConfig};
use rt2::om::file::{ReadOptions, read};
use rt2::om::onnx::builder::chain_model;
use rt2::ops::{DType, HostTensor};

struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so
// `System`'s guarantees are this allocator's; counting touches only atomics and never
// allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: `alloc`'s contract (a non-zero-sized `layout`) is the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's `ptr` came from this allocator, that is from `System`, with
        // `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller's `ptr` came from `System` (through this allocator) with
        // `layout`, and `new_size` meets `realloc`'s contract, as the caller ensures.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made while `f` runs (every thread counts).
fn allocations(f: impl FnOnce()) -> u64 {
    ALLOCS.store(0, Ordering::SeqCst);
    COUNTING.store(true, Ordering::SeqCst);
    f();
    COUNTING.store(false, Ordering::SeqCst);
    ALLOCS.load(Ordering::SeqCst)
}

#[test]
fn steady_state_execution_allocates_nothing() {
    let onnx = chain_model(60);
    let mut file = read(&onnx, &ReadOptions::default()).expect("imports");
    let model = file.models.swap_remove(0).model;
    let eg = lower(&model, &LowerOptions::default()).expect("lowers");
    let input = HostTensor {
        dtype: DType::F32,
        shape: vec![1, 64],
        data: (0..64)
            .flat_map(|i| (i as f32 * 0.25 - 8.0).to_le_bytes())
            .collect(),
    };
    // The steady state of a device without the sanitizer, which allocates per task by
    // design (its findings, its shadows, each launch's second run).
    let device = Device::new(DeviceConfig {
        check_launch_shapes: false,
        sanitize: None,
        ..DeviceConfig::default()
    });
    let mut reference: Option<Vec<HostTensor>> = None;
    for executor in [
        ExecutorType::Sequential,
        ExecutorType::Topological,
        ExecutorType::TopologicalPriority,
        ExecutorType::TopologicalMultiThread,
    ] {
        let mut ex = ModelV2Executor::create(
            &eg,
            &device,
            ExecutorOptions {
                executor,
                ..ExecutorOptions::default()
            },
        )
        .expect("creates");
        ex.load().expect("loads");
        let mut out = Vec::new();
        // Warm-up: first executions create launch records, staging buffers, cache blocks.
        for _ in 0..3 {
            ex.execute_sync(&[&input], &mut out).expect("runs");
        }
        let n = allocations(|| {
            for _ in 0..10 {
                ex.execute_sync(&[&input], &mut out).expect("runs");
            }
        });
        assert_eq!(
            n,
            0,
            "{}: {n} allocations in 10 steady-state executions",
            executor.name()
        );
        // Shared inputs, bound as they are (`rt2 run`'s loop), allocate nothing either.
        let shared = [Arc::new(input.clone())];
        let mut shared_out = Vec::new();
        ex.execute_sync(&shared, &mut shared_out).expect("runs");
        let n = allocations(|| {
            for _ in 0..10 {
                ex.execute_sync(&shared, &mut shared_out).expect("runs");
            }
        });
        assert_eq!(n, 0, "{}: {n} allocations, shared inputs", executor.name());
        assert_eq!(shared_out, out, "{}: shared inputs", executor.name());
        // The numbers are real: the same under every engine.
        match &reference {
            None => reference = Some(out.clone()),
            Some(r) => assert_eq!(&out, r, "{} differs", executor.name()),
        }
        ex.unload().expect("unloads");
    }
    let out = reference.expect("ran");
    assert_eq!(out[0].shape, vec![1, 64]);
    // x -> (x + 0.5) -> relu -> * 0.99, twenty times, computed here in f32 as the kernels do.
    let x: Vec<f32> = input
        .data
        .chunks(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let want: Vec<f32> = x
        .iter()
        .map(|&v| {
            let mut v = v;
            for i in 0..60 {
                v = match i % 3 {
                    0 => v + 0.5,
                    1 => v.max(0.0),
                    _ => v * 0.99,
                };
            }
            v
        })
        .collect();
    let got: Vec<f32> = out[0]
        .data
        .chunks(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(got, want);
}
