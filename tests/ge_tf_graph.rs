//! A GE graph as GE holds a TensorFlow-born model: TensorFlow's Pad, Slice, Mod and PRelu
//! (op types ONNX also names, with other meanings), StridedSliceD with its masks, Pack,
//! and GE's elementwise math (Square, Adds, Rsqrt, SquaredDifference). It lowers and runs
//! under every executor to bit-identical outputs, which match the same computation written
//! out here element by element from the prototypes' documented semantics. A
//! ResizeBilinearV2 takes its NCHW or NHWC layout from the tensor descriptors' format.

use rt2::exec::runtime::{ExecutorOptions, ExecutorType, ModelV2Executor};
use rt2::lower::{LowerOptions, lower};
use rt2::npu::device::{Device, DeviceConfig};
use rt2::om::file::{ReadOptions, read};
use rt2::ops::{DType, HostTensor};

fn desc(dtype: &str, dims: &[i64]) -> String {
    let dims: String = dims.iter().map(|d| format!("dim: {d} ")).collect();
    format!("dtype: {dtype} shape {{ {dims}}} layout: \"ND\"")
}

fn attr(key: &str, value: &str) -> String {
    format!("attr {{ key: \"{key}\" value {{ {value} }} }}")
}

fn ints(v: &[i64]) -> String {
    let items: String = v.iter().map(|i| format!("i: {i} ")).collect();
    format!("list {{ {items}val_type: VT_LIST_INT }}")
}

fn op(name: &str, ty: &str, inputs: &[&str], attrs: &[String], out: &[i64]) -> String {
    let ins: String = inputs.iter().map(|i| format!("input: \"{i}\" ")).collect();
    format!(
        "op {{ name: \"{name}\" type: \"{ty}\" {ins}{} output_desc {{ {} }} }}\n",
        attrs.join(" "),
        desc("DT_FLOAT", out)
    )
}

/// A Const of `dtype` with the little-endian `bytes`.
fn konst(name: &str, dtype: &str, dims: &[i64], bytes: &[u8]) -> String {
    let data: String = bytes.iter().map(|b| format!("\\{b:03o}")).collect();
    let value = format!("t {{ desc {{ {} }} data: \"{data}\" }}", desc(dtype, dims));
    format!(
        "op {{ name: \"{name}\" type: \"Const\" {} output_desc {{ {} }} }}\n",
        attr("value", &value),
        desc(dtype, dims)
    )
}

fn i32s(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

const X: [i64; 4] = [2, 3, 4, 4];

fn graph() -> String {
    let mut ops = format!(
        "op {{ name: \"x\" type: \"Data\" {} input_desc {{ {d} }} output_desc {{ {d} }} }}\n",
        attr("index", "i: 0"),
        d = desc("DT_FLOAT", &X)
    );
    // TensorFlow's Pad: a [before, after] row per dim.
    ops += &konst(
        "paddings",
        "DT_INT32",
        &[4, 2],
        &i32s(&[0, 0, 0, 0, 1, 0, 0, 2]),
    );
    ops += &op("pad", "Pad", &["x:0", "paddings:0"], &[], &[2, 3, 5, 6]);
    // TensorFlow's Slice: offsets and a size (-1: to the end).
    ops += &konst("offsets", "DT_INT32", &[4], &i32s(&[0, 1, 0, 3]));
    ops += &konst("size", "DT_INT32", &[4], &i32s(&[-1, 2, 4, 2]));
    ops += &op(
        "slice",
        "Slice",
        &["pad:0", "offsets:0", "size:0"],
        &[],
        &[2, 2, 4, 2],
    );
    // One slope per channel (dim 1), here as many as the last dim has elements.
    ops += &konst("slope", "DT_FLOAT", &[2], &f32s(&[0.5, -2.0]));
    ops += &op(
        "prelu",
        "PRelu",
        &["slice:0", "slope:0"],
        &[],
        &[2, 2, 4, 2],
    );
    ops += &konst("divisor", "DT_FLOAT", &[], &f32s(&[0.75]));
    ops += &op("mod", "Mod", &["prelu:0", "divisor:0"], &[], &[2, 2, 4, 2]);
    // x[1, :, 3::-2, :] as TensorFlow writes it.
    ops += &op(
        "ss",
        "StridedSliceD",
        &["mod:0"],
        &[
            attr("begin", &ints(&[1, 0, 3])),
            attr("end", &ints(&[0, 0, 0])),
            attr("strides", &ints(&[1, 1, -2])),
            attr("end_mask", "i: 6"),
            attr("shrink_axis_mask", "i: 1"),
        ],
        &[2, 2, 2],
    );
    ops += &op("sq", "Square", &["ss:0"], &[], &[2, 2, 2]);
    ops += &op(
        "adds",
        "Adds",
        &["sq:0"],
        &[attr("value", "f: 1.0")],
        &[2, 2, 2],
    );
    ops += &op("rsqrt", "Rsqrt", &["adds:0"], &[], &[2, 2, 2]);
    ops += &op(
        "diff",
        "SquaredDifference",
        &["rsqrt:0", "ss:0"],
        &[],
        &[2, 2, 2],
    );
    ops += &op(
        "pack",
        "Pack",
        &["rsqrt:0", "diff:0"],
        &[attr("axis", "i: 1"), attr("N", "i: 2")],
        &[2, 2, 2, 2],
    );
    ops += &format!(
        "op {{ name: \"out\" type: \"NetOutput\" input: \"pack:0\" input_desc {{ {} }} }}\n",
        desc("DT_FLOAT", &[2, 2, 2, 2])
    );
    format!("name: \"tf\" graph {{ name: \"tf\" input: \"x:0\" output: \"pack:0\"\n{ops}}}\n")
}

fn input() -> Vec<f32> {
    (0..X.iter().product::<i64>())
        .map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.37)
        .collect()
}

/// The graph's computation, element by element.
fn expected(x: &[f32]) -> Vec<f32> {
    let at = |n: usize, c: usize, h: usize, w: usize| x[((n * 3 + c) * 4 + h) * 4 + w];
    // pad: H gains one row before, W two columns after.
    let pad = |n: usize, c: usize, h: usize, w: usize| {
        if h == 0 || w >= 4 {
            0.0
        } else {
            at(n, c, h - 1, w)
        }
    };
    // slice: channels 1..3, all 5 rows but the last (size 4), columns 3..5.
    let slice = |n: usize, c: usize, h: usize, w: usize| pad(n, c + 1, h, w + 3);
    let slope = [0.5f32, -2.0];
    let prelu = |n, c: usize, h, w| {
        let v = slice(n, c, h, w);
        if v < 0.0 { v * slope[c] } else { v }
    };
    // C's fmod: the sign of the dividend.
    let modv = |n, c, h, w| prelu(n, c, h, w) % 0.75;
    // ss[c][k][w] = mod[1][c][3 - 2k][w].
    let ss = |c: usize, k: usize, w: usize| modv(1, c, 3 - 2 * k, w);
    let mut out = Vec::new();
    for c in 0..2 {
        for part in 0..2 {
            for k in 0..2 {
                for w in 0..2 {
                    let s = ss(c, k, w);
                    let r = 1.0 / (s * s + 1.0).sqrt();
                    out.push(if part == 0 { r } else { (r - s) * (r - s) });
                }
            }
        }
    }
    out
}

/// Runs `file`'s graph on `input` under every executor, checks they agree bit for bit,
/// and gives the first output's shape and values.
fn run_everywhere(file: &rt2::om::file::ModelFile, input: &HostTensor) -> (Vec<i64>, Vec<f32>) {
    let mut first: Option<HostTensor> = None;
    for multi_thread in [false, true] {
        let eg = lower(
            &file.root().model,
            &LowerOptions {
                multi_thread,
                ..LowerOptions::default()
            },
        )
        .expect("lowers");
        let executors: &[ExecutorType] = if multi_thread {
            &[ExecutorType::TopologicalMultiThread]
        } else {
            &[
                ExecutorType::Sequential,
                ExecutorType::Topological,
                ExecutorType::TopologicalPriority,
            ]
        };
        for &executor in executors {
            let device = Device::new(DeviceConfig::default());
            let options = ExecutorOptions {
                executor,
                ..ExecutorOptions::default()
            };
            let mut ex = ModelV2Executor::create(&eg, &device, options).expect("creates");
            ex.load().expect("loads");
            let mut out = Vec::new();
            ex.execute_sync(&[input], &mut out)
                .unwrap_or_else(|e| panic!("{}: {e}", executor.name()));
            match &first {
                None => first = Some(out.swap_remove(0)),
                Some(f) => assert_eq!(f.data, out[0].data, "{}", executor.name()),
            }
        }
    }
    let out = first.expect("ran");
    let values = out
        .data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    (out.shape, values)
}

#[test]
fn a_tensorflow_born_ge_graph_computes_tensorflows_meanings_under_every_executor() {
    let file = read(graph().as_bytes(), &ReadOptions::default()).expect("reads");
    let x = input();
    let tensor = HostTensor {
        dtype: DType::F32,
        shape: X.to_vec(),
        data: f32s(&x).into(),
    };
    let want = expected(&x);
    // The PRelu slopes apply per channel: a slope along the last dim (ONNX's broadcast)
    // would give other values.
    assert!(want.iter().any(|&v| v != 0.0));
    let (shape, got) = run_everywhere(&file, &tensor);
    assert_eq!(shape, [2, 2, 2, 2]);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-6 * w.abs().max(1.0),
            "element {i}: {g} vs {w}"
        );
    }
}

/// ResizeBilinearV2 of one [1, 2, 1, 2] tensor to size [1, 4] with half-pixel centers,
/// its layout told only by the tensor descriptors' format, as GE's graphs tell it.
fn resize_graph(layout: &str, out: &[i64]) -> String {
    let d = |dims: &[i64]| desc("DT_FLOAT", dims).replace("\"ND\"", &format!("\"{layout}\""));
    let x = d(&[1, 2, 1, 2]);
    let mut ops = format!(
        "op {{ name: \"x\" type: \"Data\" {} input_desc {{ {x} }} output_desc {{ {x} }} }}\n",
        attr("index", "i: 0"),
    );
    ops += &konst("size", "DT_INT32", &[2], &i32s(&[1, 4]));
    ops += &format!(
        "op {{ name: \"resize\" type: \"ResizeBilinearV2\" input: \"x:0\" input: \"size:0\" \
         {} input_desc {{ {x} }} input_desc {{ {} }} output_desc {{ {} }} }}\n",
        attr("half_pixel_centers", "b: true"),
        desc("DT_INT32", &[2]),
        d(out),
    );
    ops += &format!(
        "op {{ name: \"out\" type: \"NetOutput\" input: \"resize:0\" input_desc {{ {} }} }}\n",
        d(out)
    );
    format!("name: \"r\" graph {{ name: \"r\" input: \"x:0\" output: \"resize:0\"\n{ops}}}\n")
}

/// The same bytes resize along other dims when the descriptors say NCHW than when they
/// say NHWC: lowering carries the tensor's format to the op.
#[test]
fn resize_takes_its_layout_from_the_tensor_format() {
    let x = HostTensor {
        dtype: DType::F32,
        shape: vec![1, 2, 1, 2],
        data: f32s(&[10.0, 20.0, -1.0, 1.0]).into(),
    };
    // NCHW: two channels of one row of two pixels, each row resized 2 -> 4 at
    // -0.25, 0.25, 0.75, 1.25.
    let file = read(
        resize_graph("NCHW", &[1, 2, 1, 4]).as_bytes(),
        &ReadOptions::default(),
    )
    .expect("reads");
    let (shape, y) = run_everywhere(&file, &x);
    assert_eq!(shape, [1, 2, 1, 4]);
    assert_eq!(y, [10.0, 12.5, 17.5, 20.0, -1.0, -0.5, 0.5, 1.0]);
    // NHWC: two rows of one pixel of two channels; H 2 -> 1 samples halfway between the
    // rows, W 1 -> 4 repeats the pixel.
    let file = read(
        resize_graph("NHWC", &[1, 1, 4, 2]).as_bytes(),
        &ReadOptions::default(),
    )
    .expect("reads");
    let (shape, y) = run_everywhere(&file, &x);
    assert_eq!(shape, [1, 1, 4, 2]);
    assert_eq!(y, [4.5, 10.5, 4.5, 10.5, 4.5, 10.5, 4.5, 10.5]);
}

/// GE's LRN is TensorFlow's: `x / (bias + alpha sum x^2)^beta` over the `2 depth_radius +
/// 1` channels around each (alpha not divided by the window, as ONNX's is), computed
/// under every executor against the sum written out.
#[test]
fn ge_lrn_sums_over_its_radius_with_an_undivided_alpha() {
    let dims = [1i64, 4, 1, 2];
    let mut ops = format!(
        "op {{ name: \"x\" type: \"Data\" {} input_desc {{ {d} }} output_desc {{ {d} }} }}\n",
        attr("index", "i: 0"),
        d = desc("DT_FLOAT", &dims)
    );
    let lrn_attrs = [
        attr("depth_radius", "i: 1"),
        attr("alpha", "f: 0.5"),
        attr("beta", "f: 0.75"),
        attr("bias", "f: 2.0"),
    ];
    ops += &op("lrn", "LRN", &["x:0"], &lrn_attrs, &dims);
    ops += &format!(
        "op {{ name: \"out\" type: \"NetOutput\" input: \"lrn:0\" input_desc {{ {} }} }}\n",
        desc("DT_FLOAT", &dims)
    );
    let text =
        format!("name: \"l\" graph {{ name: \"l\" input: \"x:0\" output: \"lrn:0\"\n{ops}}}\n");
    let file = read(text.as_bytes(), &ReadOptions::default()).expect("reads");
    let x = [1.0f32, -2.0, 0.5, 3.0, -1.5, 0.25, 2.0, -0.75];
    let input = HostTensor {
        dtype: DType::F32,
        shape: dims.to_vec(),
        data: f32s(&x).into(),
    };
    let (shape, y) = run_everywhere(&file, &input);
    assert_eq!(shape, dims);
    // x[c][w] = x[c * 2 + w]; channels c-1..=c+1 within 0..4.
    for c in 0..4usize {
        for w in 0..2usize {
            let sum: f64 = (c.saturating_sub(1)..=(c + 1).min(3))
                .map(|k| f64::from(x[k * 2 + w]).powi(2))
                .sum();
            let want = f64::from(x[c * 2 + w]) / (2.0 + 0.5 * sum).powf(0.75);
            let got = f64::from(y[c * 2 + w]);
            assert!(
                (got - want).abs() <= 1e-6 * want.abs().max(1.0),
                "{c},{w}: {got} vs {want}"
            );
        }
    }
}
