//! The fuzz targets (`rt2::fuzz`) without a fuzzer: each target over its committed seeds
//! (`fuzz/seeds/<target>/`), the inputs its campaigns found faults with
//! (`fuzz/regressions/<target>/`), and a fixed set of mutations of every seed. This is
//! what CI runs of the fuzzing: the instrumented build alone takes longer than CI's budget
//! for it (docs/FUZZING.md), while these inputs run in the ordinary test build.
//!
//! The mutations are deterministic (a SplitMix64 stream seeded from the seed's name and
//! the mutation's number), so a failure names an input that can be made again:
//! `seed name #k`. `RT2_FUZZ_MUTANTS` sets how many mutants each seed gets (default
//! [`MUTANTS`]); the seeds and regressions always run whole.

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Once;

/// Mutants per seed by default.
const MUTANTS: usize = 12;

/// SplitMix64: the mutations' random stream.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform below `n` (`n` > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// FNV-1a of a name: the start of its mutation stream.
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Numbers a reader must refuse or survive, as text.
const NUMBERS: &[&str] = &[
    "0",
    "-1",
    "-2",
    "65536",
    "4294967296",
    "9223372036854775807",
    "-9223372036854775808",
    "99999999999999999999",
    "1e308",
    "nan",
];

/// Bytes that mean something to a binary reader.
const BYTES: &[u8] = &[0x00, 0x01, 0x7f, 0x80, 0xff, 0x08, 0x0a, 0x12];

/// Mutant `k` of `seed`: one of truncation, bit flips, an interesting byte, a deleted or
/// duplicated range, a huge varint, or a number in the text replaced.
fn mutate(seed: &[u8], name: &str, k: usize) -> Vec<u8> {
    let mut r = Rng(fnv(name) ^ (k as u64).wrapping_mul(0x2545_f491_4f6c_dd1d));
    let mut d = seed.to_vec();
    if d.is_empty() {
        return vec![BYTES[k % BYTES.len()]];
    }
    let at = r.below(d.len());
    match k % 7 {
        0 => d.truncate(at),
        1 => {
            for _ in 0..1 + r.below(4) {
                let i = r.below(d.len());
                d[i] ^= 1 << r.below(8);
            }
        }
        2 => d[at] = BYTES[r.below(BYTES.len())],
        3 => {
            let end = (at + 1 + r.below(64)).min(d.len());
            d.drain(at..end);
        }
        4 => {
            let end = (at + 1 + r.below(256)).min(d.len());
            let chunk = d[at..end].to_vec();
            d.splice(at..at, chunk);
        }
        5 => {
            // A ten-byte varint of all ones: the largest length or count a field can claim.
            d.splice(
                at..at,
                [0xffu8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            );
        }
        _ => {
            let digits: Vec<usize> = (0..d.len()).filter(|&i| d[i].is_ascii_digit()).collect();
            if digits.is_empty() {
                d[at] = d[at].wrapping_add(1);
            } else {
                let start = digits[r.below(digits.len())];
                let end = (start..d.len())
                    .find(|&i| !d[i].is_ascii_digit())
                    .unwrap_or(d.len());
                let n = NUMBERS[r.below(NUMBERS.len())].as_bytes();
                d.splice(start..end, n.iter().copied());
            }
        }
    }
    d
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|it| it.filter_map(|e| Some(e.ok()?.path())).collect())
        .unwrap_or_default();
    v.retain(|p| p.is_file());
    v.sort();
    v
}

fn mutants() -> usize {
    std::env::var("RT2_FUZZ_MUTANTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(MUTANTS)
}

thread_local! {
    /// Whether this thread is running a target, whose panics the list of failures reports.
    static CATCHING: Cell<bool> = const { Cell::new(false) };
}

/// Installs (once) a panic hook that stays silent for a thread running a target and
/// prints as usual otherwise: the tests run in parallel, and a test's own failure must
/// still print.
fn quiet_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !CATCHING.get() {
                default(info);
            }
        }));
    });
}

/// Runs target `name` over its seeds, its regressions and the seeds' mutants; fails
/// listing every input that panicked.
fn check(name: &str) {
    let target = rt2::fuzz::TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| *t)
        .unwrap_or_else(|| panic!("no target {name}"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let seeds = files(&root.join("seeds").join(name));
    assert!(!seeds.is_empty(), "{name}: no seeds in fuzz/seeds/{name}");
    let mut inputs: Vec<(String, Vec<u8>)> = Vec::new();
    for p in seeds
        .iter()
        .chain(&files(&root.join("regressions").join(name)))
    {
        let file = p.file_name().unwrap().to_string_lossy().into_owned();
        inputs.push((file, std::fs::read(p).unwrap()));
    }
    let n = mutants();
    let mut failed = Vec::new();
    let mut runs = 0;
    quiet_panics();
    for (file, bytes) in &inputs {
        let variants = std::iter::once((file.clone(), bytes.clone())).chain(
            (0..if seeds.iter().any(|p| p.ends_with(file)) {
                n
            } else {
                0
            })
                .map(|k| (format!("{file} #{k}"), mutate(bytes, file, k))),
        );
        for (label, data) in variants {
            runs += 1;
            CATCHING.set(true);
            let result = catch_unwind(AssertUnwindSafe(|| target(&data)));
            CATCHING.set(false);
            if let Err(e) = result {
                let msg = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failed.push(format!("{label}: {msg}"));
            }
        }
    }
    assert!(
        failed.is_empty(),
        "{name}: {} of {runs} inputs panicked:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

#[test]
fn mutants_are_deterministic_and_differ() {
    let seed = b"graph { name: \"g\" op { type: \"Add\" } dims: 128 }";
    for k in 0..14 {
        assert_eq!(mutate(seed, "s", k), mutate(seed, "s", k), "mutant {k}");
    }
    let differ = (0..14).filter(|&k| mutate(seed, "s", k) != seed).count();
    assert!(
        differ >= 12,
        "only {differ} of 14 mutants differ from the seed"
    );
    assert!(mutate(seed, "s", 0).len() < seed.len(), "a truncation");
}

#[test]
fn every_target_has_a_test_here() {
    let here = include_str!("fuzz_corpus.rs");
    for (name, _) in rt2::fuzz::TARGETS {
        assert!(
            here.contains(&format!("fn {name}() {{")),
            "target {name} has no test in tests/fuzz_corpus.rs"
        );
    }
}

/// CI does not build `fuzz/` (docs/FUZZING.md), so this keeps it in step with
/// `rt2::fuzz`: every target has its libFuzzer binary calling it, a `[[bin]]` entry, a
/// place in `tools/fuzz.sh`'s list, and nothing else is there.
#[test]
fn the_libfuzzer_package_has_every_target() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("fuzz/Cargo.toml")).unwrap();
    let script = std::fs::read_to_string(root.join("tools/fuzz.sh")).unwrap();
    let list = script
        .lines()
        .find_map(|l| l.strip_prefix("TARGETS=("))
        .and_then(|l| l.strip_suffix(')'))
        .expect("tools/fuzz.sh lists its targets");
    let names: Vec<&str> = rt2::fuzz::TARGETS.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        list.split(' ').collect::<Vec<_>>(),
        names,
        "tools/fuzz.sh TARGETS"
    );
    let bins = files(&root.join("fuzz/fuzz_targets"));
    assert_eq!(
        bins.len(),
        names.len(),
        "fuzz/fuzz_targets holds one file per target"
    );
    for name in names {
        let src = std::fs::read_to_string(root.join(format!("fuzz/fuzz_targets/{name}.rs")))
            .unwrap_or_else(|e| panic!("fuzz/fuzz_targets/{name}.rs: {e}"));
        assert!(
            src.contains(&format!("rt2::fuzz::{name}(data)")),
            "fuzz/fuzz_targets/{name}.rs calls rt2::fuzz::{name}"
        );
        assert!(
            manifest.contains(&format!(
                "name = \"{name}\"\npath = \"fuzz_targets/{name}.rs\""
            )),
            "fuzz/Cargo.toml has a [[bin]] for {name}"
        );
    }
}

#[test]
fn om() {
    check("om");
}

#[test]
fn ge_binary() {
    check("ge_binary");
}

#[test]
fn ge_text() {
    check("ge_text");
}

#[test]
fn ge_json() {
    check("ge_json");
}

#[test]
fn onnx() {
    check("onnx");
}

#[test]
fn exeg() {
    check("exeg");
}

#[test]
fn rim_json() {
    check("rim_json");
}

#[test]
fn capture_script() {
    check("capture_script");
}

#[test]
fn npy() {
    check("npy");
}

#[test]
fn pb() {
    check("pb");
}

#[test]
fn lower_run() {
    check("lower_run");
}
