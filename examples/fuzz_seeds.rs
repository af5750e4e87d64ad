//! Writes the fuzz targets' seed corpora (`fuzz/seeds/<target>/`, docs/FUZZING.md) from
//! the fixtures: the bundled ONNX models and their test data, the generated OMs and GE IR
//! models of `om::testdata`, the lowering golden files (`tests/lower/`), the capture
//! scripts and the models they save, and `.npy` files of every element type. With
//! `RT2_ONNX_NODE_DATA` set (the ONNX backend node tests, as `.ci/run` sets it), one small
//! model per distinct set of op types is added for the ONNX and pipeline targets, with
//! its first input for the tensor target.
//!
//! ```text
//! tools/fuzz.sh seeds        # or: cargo run --example fuzz_seeds -- fuzz/seeds
//! ```
//!
//! Every seed is a valid input of its target (the targets' round trips hold on it), each
//! at most [`MAX_SEED`] bytes, so the corpus stays a few hundred kilobytes.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use prost::Message;
use rt2::capture::{runner, script};
use rt2::exec::{self, exeg, view};
use rt2::lower::{LowerOptions, lower};
use rt2::om::file::{self, ReadOptions};
use rt2::om::json::{self, JsonOptions};
use rt2::om::om_writer::{OmBuildOptions, build_om};
use rt2::om::onnx::builder::{EncoderBlock, add_chain_model, chain_model, encoder_block_model};
use rt2::om::{ir, testdata, testdata_text, text};
use rt2::ops::{DType, HostTensor};
use rt2::proto::ge_ir::ModelDef;

/// The largest seed written: libFuzzer's `-max_len` for the model targets is 64 KiB.
const MAX_SEED: usize = 48 << 10;

/// The largest ONNX model given to `lower_run` (itself, its OM and its `.exeg`): a larger
/// fixture (SqueezeNet, 15 KB) computes for half a minute per execution in the
/// instrumented build, which libFuzzer reports as a hang.
const MAX_PIPELINE_MODEL: usize = 8 << 10;

/// Node-test models larger than this are left out (the op's coverage is in the small ones).
const MAX_NODE_MODEL: usize = 4 << 10;

struct Seeds {
    root: PathBuf,
    written: usize,
    bytes: usize,
}

impl Seeds {
    /// Writes `data` as seed `name` of `target`, unless it is larger than [`MAX_SEED`].
    fn put(&mut self, target: &str, name: &str, data: &[u8]) {
        if data.len() > MAX_SEED {
            return;
        }
        let dir = self.root.join(target);
        std::fs::create_dir_all(&dir).expect("create the seed folder");
        std::fs::write(dir.join(name), data).expect("write a seed");
        self.written += 1;
        self.bytes += data.len();
    }

    /// A model's every spelling: its GE IR binary, text and JSON, an OM, and its lowered
    /// `.exeg` in both forms; `pipeline` also gives the OM and the `.exeg` to `lower_run`.
    fn model(&mut self, stem: &str, def: &ModelDef, pipeline: bool) {
        self.put("ge_binary", &format!("{stem}.pb"), &def.encode_to_vec());
        self.put(
            "ge_text",
            &format!("{stem}.pbtxt"),
            text::print_text(def).as_bytes(),
        );
        let j = json::to_json(def, &JsonOptions::default()).to_string();
        self.put("ge_json", &format!("{stem}.json"), j.as_bytes());
        if let Ok(om) =
            build_om(def.clone(), &OmBuildOptions::default()).and_then(|om| om.to_bytes())
        {
            self.put("om", &format!("{stem}.om"), &om);
            if pipeline {
                self.put("lower_run", &format!("{stem}.om"), &om);
            }
        }
        let Ok(f) = file::read(&def.encode_to_vec(), &ReadOptions::default()) else {
            return;
        };
        if let Ok(eg) = lower(&f.root().model, &LowerOptions::default()) {
            let bin = exeg::encode(&eg);
            self.put("exeg", &format!("{stem}.exeg"), &bin);
            self.put(
                "exeg",
                &format!("{stem}.exeg.txt"),
                view::to_text(&eg).as_bytes(),
            );
            if pipeline {
                self.put("lower_run", &format!("{stem}.exeg"), &bin);
            }
        }
    }

    /// An ONNX model: itself for `onnx` and `lower_run`, and its imported GE IR in every
    /// spelling when `spell` is set.
    fn onnx(&mut self, stem: &str, bytes: &[u8], spell: bool) {
        let Ok(f) = file::read(bytes, &ReadOptions::default()) else {
            eprintln!("fuzz_seeds: {stem} does not import; left out");
            return;
        };
        let pipeline = bytes.len() <= MAX_PIPELINE_MODEL;
        self.put("onnx", &format!("{stem}.onnx"), bytes);
        if pipeline {
            self.put("lower_run", &format!("{stem}.onnx"), bytes);
        }
        if spell {
            self.model(stem, &ir::to_model_def(&f.root().model), pipeline);
        }
    }
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The files of `dir` (sorted, so the seeds are the same on every machine).
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|it| it.filter_map(|e| Some(e.ok()?.path())).collect())
        .unwrap_or_default();
    v.sort();
    v
}

fn stem(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

fn fixture_models(s: &mut Seeds, root: &Path) {
    let models = root.join("fixtures/models");
    for p in files(&models) {
        if p.extension().is_some_and(|e| e == "onnx") {
            let name = stem(&p).trim_end_matches(".onnx").to_string();
            s.onnx(&name, &read(&p), true);
        }
    }
    for dir in files(&models).into_iter().filter(|p| p.is_dir()) {
        for p in files(&dir.join("test_data_set_0")) {
            s.put("pb", &format!("{}_{}", stem(&dir), stem(&p)), &read(&p));
        }
    }
    s.onnx("chain6", &chain_model(6), true);
    s.onnx("add_chain3", &add_chain_model(3, 4), true);
    let tiny = EncoderBlock {
        d_model: 8,
        heads: 2,
        ffn: 16,
    };
    s.onnx("encoder_block", &encoder_block_model(tiny, None), true);
}

fn generated_models(s: &mut Seeds) {
    for (name, om) in testdata::all() {
        if let Ok(bytes) = om.to_bytes() {
            s.put("om", &format!("testdata_{name}.om"), &bytes);
        }
    }
    s.model("testdata_model", &testdata::model_def("fuzz"), true);
    s.model(
        "every_variant",
        &testdata_text::every_variant_model(),
        false,
    );
    let eg = exec::testdata::sample();
    s.put("exeg", "sample.exeg", &exeg::encode(&eg));
    s.put("exeg", "sample.exeg.txt", view::to_text(&eg).as_bytes());
}

/// The lowering golden files: GE text models and the `.exeg` text each lowers to.
fn golden_files(s: &mut Seeds, root: &Path) {
    for p in files(&root.join("tests/lower")) {
        let name = stem(&p);
        let bytes = read(&p);
        if name.ends_with(".ge.txt") {
            s.put("ge_text", &name, &bytes);
            s.put("lower_run", &name, &bytes);
        } else if name.ends_with(".exeg.txt") {
            s.put("exeg", &name, &bytes);
            s.put("lower_run", &name, &bytes);
        }
    }
}

/// The capture scripts, and every model they save (`rt2 capture --save`).
fn capture(s: &mut Seeds, root: &Path) {
    for p in files(&root.join("fixtures/capture")) {
        if p.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let name = stem(&p);
        let text = String::from_utf8(read(&p)).expect("a script is UTF-8");
        s.put("capture_script", &name, text.as_bytes());
        let Ok(sc) = script::parse(&text) else {
            continue;
        };
        let Ok((_, session)) = runner::run(&sc) else {
            continue;
        };
        for c in session.captured() {
            let json = serde_json::to_string_pretty(&c.file).expect("a saved model serializes");
            let stem = name.trim_end_matches(".toml");
            s.put(
                "rim_json",
                &format!("{stem}.{}.rim.json", c.name),
                json.as_bytes(),
            );
        }
    }
}

/// `.npy` files: every element type, a scalar, an empty and a 2-D tensor, and the header
/// variants NumPy writes (version 2, Fortran order, big-endian).
fn npy(s: &mut Seeds) {
    for &dtype in DType::ALL {
        for shape in [&[][..], &[0][..], &[2, 3][..]] {
            let n: i64 = shape.iter().product();
            let t = HostTensor {
                dtype,
                shape: shape.to_vec(),
                data: (0..n as usize * dtype.size()).map(|i| i as u8).collect(),
            };
            let bytes = rt2::cmd::npy::write(&t).expect("writes");
            let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
            s.put(
                "npy",
                &format!("{}_{}.npy", dtype.name(), dims.join("x")),
                &bytes,
            );
        }
    }
    let header = |version: u8, dict: &str, data: &[u8]| {
        let mut h = format!("{dict}\n").into_bytes();
        while (h.len() + if version == 1 { 10 } else { 12 }) % 64 != 0 {
            h.insert(h.len() - 1, b' ');
        }
        let mut out = b"\x93NUMPY".to_vec();
        out.extend_from_slice(&[version, 0]);
        if version == 1 {
            out.extend_from_slice(&(h.len() as u16).to_le_bytes());
        } else {
            out.extend_from_slice(&(h.len() as u32).to_le_bytes());
        }
        out.extend_from_slice(&h);
        out.extend_from_slice(data);
        out
    };
    let six: Vec<u8> = (0..24).collect();
    s.put(
        "npy",
        "fortran_f4_2x3.npy",
        &header(
            1,
            "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
            &six,
        ),
    );
    s.put(
        "npy",
        "big_endian_i4_2x3.npy",
        &header(
            1,
            "{'descr': '>i4', 'fortran_order': False, 'shape': (2, 3), }",
            &six,
        ),
    );
    s.put(
        "npy",
        "v2_u2_12.npy",
        &header(
            2,
            "{'descr': '<u2', 'fortran_order': False, 'shape': (12,), }",
            &six,
        ),
    );
    s.put(
        "npy",
        "raw_v2_3x4.npy",
        &header(
            3,
            "{'descr': '|V2', 'fortran_order': False, 'shape': (3, 4), }",
            &six,
        ),
    );
}

/// The ONNX backend node tests: per distinct set of op types, the smallest model that
/// imports, with its first input.
fn node_tests(s: &mut Seeds, dir: &Path) {
    let mut seen = BTreeSet::new();
    let mut cases: Vec<(usize, PathBuf)> = files(dir)
        .into_iter()
        .filter_map(|d| {
            let len = std::fs::metadata(d.join("model.onnx")).ok()?.len() as usize;
            (len <= MAX_NODE_MODEL).then_some((len, d))
        })
        .collect();
    cases.sort();
    for (_, d) in cases {
        let bytes = read(&d.join("model.onnx"));
        let Ok(f) = file::read(&bytes, &ReadOptions::default()) else {
            continue;
        };
        let ops: BTreeSet<String> = f
            .root()
            .model
            .root
            .nodes
            .iter()
            .map(|n| n.op_type.clone())
            .collect();
        if !seen.insert(ops) {
            continue;
        }
        let name = stem(&d);
        s.onnx(&name, &bytes, false);
        let input = d.join("test_data_set_0/input_0.pb");
        if input.exists() {
            s.put("pb", &format!("{name}_input_0.pb"), &read(&input));
        }
    }
}

/// The libFuzzer dictionaries (`fuzz/dicts/<target>.dict`): the words a text format's
/// grammar has (its schema's field and enum value names, the names a file refers to) and
/// the op types a model names, so a mutation can write a word instead of finding it byte
/// by byte.
fn dictionaries(dicts: &Path, seeds: &Path) {
    let pool = rt2::proto::descriptor_pool();
    let names = |package: &str| -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for m in pool.all_messages().filter(|m| m.package_name() == package) {
            out.extend(m.fields().map(|f| f.name().to_string()));
        }
        for e in pool.all_enums().filter(|e| e.package_name() == package) {
            out.extend(e.values().map(|v| v.name().to_string()));
        }
        out
    };
    let ops: BTreeSet<String> = rt2::ops::OpRegistry::new()
        .names()
        .into_iter()
        .map(str::to_string)
        .chain(
            rt2::om::onnx::plugins::PLUGINS
                .iter()
                .flat_map(|p| p.ge.split(", ").map(str::to_string)),
        )
        .collect();
    let kernels: BTreeSet<String> = rt2::exec::kernel_types::KERNEL_TYPES
        .iter()
        .map(|k| k.name.to_string())
        .collect();
    let ge = names("ge.proto");
    let exeg = names("rt2.exeg");
    let quoted = |set: &BTreeSet<String>| -> BTreeSet<String> {
        set.iter().map(|n| format!("\"{n}\"")).collect()
    };
    let text_words = |target: &str| -> BTreeSet<String> {
        // Keys and string values of the seeds: `key =`, `key:`, and `"value"`.
        let mut out = BTreeSet::new();
        for p in files(&seeds.join(target)) {
            let text = String::from_utf8_lossy(&read(&p)).into_owned();
            for w in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if w.len() >= 2 && w.len() <= 32 && !w.bytes().all(|b| b.is_ascii_digit()) {
                    out.insert(w.to_string());
                }
            }
        }
        out
    };
    let with = |mut a: BTreeSet<String>, b: BTreeSet<String>| {
        a.extend(b);
        a
    };
    let dicts_of: Vec<(&str, BTreeSet<String>)> = vec![
        ("ge_text", with(ge.clone(), ops.clone())),
        ("ge_json", with(quoted(&ge), ops.clone())),
        ("exeg", with(with(exeg, kernels), text_words("exeg"))),
        ("onnx", with(names("onnx"), ops.clone())),
        ("lower_run", ops),
        ("capture_script", text_words("capture_script")),
        ("rim_json", quoted(&text_words("rim_json"))),
        (
            "npy",
            [
                "descr",
                "fortran_order",
                "shape",
                "True",
                "False",
                "<f4",
                ">f8",
                "|b1",
                "<V2",
            ]
            .into_iter()
            .map(|w| w.to_string())
            .collect(),
        ),
    ];
    std::fs::create_dir_all(dicts).expect("create the dictionary folder");
    for (target, words) in dicts_of {
        let mut out = format!(
            "# libFuzzer dictionary of target {target}: written by examples/fuzz_seeds.rs\n"
        );
        for w in &words {
            let escaped: String = w
                .bytes()
                .map(|b| match b {
                    b'"' | b'\\' => format!("\\x{b:02x}"),
                    0x20..=0x7e => (b as char).to_string(),
                    _ => format!("\\x{b:02x}"),
                })
                .collect();
            out.push_str(&format!("\"{escaped}\"\n"));
        }
        std::fs::write(dicts.join(format!("{target}.dict")), out).expect("write a dictionary");
    }
}

fn main() {
    let out = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "fuzz/seeds".to_string());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut s = Seeds {
        root: PathBuf::from(out),
        written: 0,
        bytes: 0,
    };
    fixture_models(&mut s, root);
    generated_models(&mut s);
    golden_files(&mut s, root);
    capture(&mut s, root);
    npy(&mut s);
    match std::env::var_os("RT2_ONNX_NODE_DATA") {
        Some(d) => node_tests(&mut s, Path::new(&d)),
        None => eprintln!("fuzz_seeds: RT2_ONNX_NODE_DATA is not set; no node-test seeds"),
    }
    let dicts = s
        .root
        .parent()
        .map_or_else(|| PathBuf::from("dicts"), |p| p.join("dicts"));
    dictionaries(&dicts, &s.root);
    println!(
        "fuzz_seeds: {} seeds, {} bytes, in {}",
        s.written,
        s.bytes,
        s.root.display()
    );
}
