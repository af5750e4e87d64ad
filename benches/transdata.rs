//! TransData's hot pairs, NCHW and NHWC to NC1HWC0 and back, for float16 and float32 at a
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
    let nc1hwc0 = StorageFormat::plain(Format::Nc1hwc0);
    for [n, ch, h, w] in [[8usize, 64, 56, 56], [1, 256, 28, 28]] {
        for dtype in [DType::F16, DType::F32] {
            let bytes = n * ch * h * w * dtype.size();
            let src: Vec<u8> = (0..bytes).map(|i| (i % 251) as u8).collect();
            let mut out = vec![0u8; bytes];
            let mut g = c.benchmark_group(format!("{:?} {dtype}", [n, ch, h, w]));
            g.throughput(Throughput::Bytes(bytes as u64));
            g.bench_function("copy_from_slice", |b| b.iter(|| out.copy_from_slice(&src)));
            for (name, plain, shape) in [
                ("NCHW", Format::Nchw, [n, ch, h, w]),
                ("NHWC", Format::Nhwc, [n, h, w, ch]),
            ] {
                let plain = StorageFormat::plain(plain);
                let to = Transfer::new(plain, nc1hwc0, dtype).expect("a supported transfer");
                let back = Transfer::new(nc1hwc0, plain, dtype).expect("a supported transfer");
                let blocked = to.dst_shape(&shape).expect("a valid shape");
                let mut mid = vec![0u8; blocked.iter().product::<usize>() * dtype.size()];
                g.bench_function(format!("{name}->NC1HWC0"), |b| {
                    b.iter(|| to.run(&shape, &src, &blocked, &mut mid).expect("runs"))
                });
                g.bench_function(format!("NC1HWC0->{name}"), |b| {
                    b.iter(|| back.run(&blocked, &mid, &shape, &mut out).expect("runs"))
                });
            }
            g.finish();
        }
    }
}
