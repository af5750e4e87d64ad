//! TransData's hot pair, NCHW to NC1HWC0 and back, for float16 and float32 at a
//! ResNet-stage shape ([8, 64, 56, 56]) and a deep one ([1, 256, 28, 28]), beside a plain
//! `copy_from_slice` of the same bytes. Target (docs/PERFORMANCE.md): within 2x of the copy.
//!
//! Buffers are allocated once; the loop runs `Transfer::run` only (no allocation inside).
//! `cargo bench --bench transdata`.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use criterion::{Criterion, Throughput};
use rt2::formats::{Format, StorageFormat, Transfer};
use rt2::ops::DType;

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let nchw = StorageFormat::plain(Format::Nchw);
    let nc1hwc0 = StorageFormat::plain(Format::Nc1hwc0);
    for shape in [[8usize, 64, 56, 56], [1, 256, 28, 28]] {
        for dtype in [DType::F16, DType::F32] {
            let to = Transfer::new(nchw, nc1hwc0, dtype).expect("a supported transfer");
            let back = Transfer::new(nc1hwc0, nchw, dtype).expect("a supported transfer");
            let blocked = to.dst_shape(&shape).expect("a valid shape");
            let bytes = shape.iter().product::<usize>() * dtype.size();
            let src: Vec<u8> = (0..bytes).map(|i| (i % 251) as u8).collect();
            let mut mid = vec![0u8; blocked.iter().product::<usize>() * dtype.size()];
            let mut out = vec![0u8; bytes];
            let mut g = c.benchmark_group(format!("{shape:?} {dtype}"));
            g.throughput(Throughput::Bytes(bytes as u64));
            g.bench_function("copy_from_slice", |b| b.iter(|| out.copy_from_slice(&src)));
            g.bench_function("NCHW->NC1HWC0", |b| {
                b.iter(|| to.run(&shape, &src, &blocked, &mut mid).expect("runs"))
            });
            g.bench_function("NC1HWC0->NCHW", |b| {
                b.iter(|| back.run(&blocked, &mid, &shape, &mut out).expect("runs"))
            });
            g.finish();
        }
    }
}
