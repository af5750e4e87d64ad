//! Parse throughput of GE text dumps and of the JSON view on a generated multi-megabyte
//! model (`rt2::om::testdata_text::large_model`), reported in bytes per second.

// The allocator the rt2 binary uses, so the numbers are the ones users get.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rt2::om::json::{JsonOptions, from_json, to_json};
use rt2::om::testdata_text::large_model;
use rt2::om::text::{parse_text, print_text};

fn ge_text(c: &mut Criterion) {
    let model = large_model(5000);
    let text = print_text(&model);
    let json = to_json(&model, &JsonOptions::default()).to_string();

    let mut group = c.benchmark_group("ge_text");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.bench_function("parse_text", |b| {
        b.iter(|| parse_text(std::hint::black_box(&text)).expect("dump parses"))
    });
    group.bench_function("print_text", |b| {
        b.iter(|| print_text(std::hint::black_box(&model)))
    });
    group.throughput(Throughput::Bytes(json.len() as u64));
    group.bench_function("from_json", |b| {
        b.iter(|| from_json(std::hint::black_box(&json)).expect("JSON reads"))
    });
    group.finish();
}

criterion_group!(benches, ge_text);
criterion_main!(benches);
