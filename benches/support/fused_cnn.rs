//! A CNN as GE writes it after fusion, and its NCHW float32 twin, in GE's text form: the
//! network the fused-graph tests check (`tests/ge_fused.rs`) and the float16 benchmark
//! measures (`benches/models.rs`), at the sizes each asks for.
//!
//! The fused form: a float32 input, a Cast to float16 and a TransData to NC1HWC0; every
//! feature map float16 in NC1HWC0, every filter stored as FRACTAL_Z; a stem Conv2D with
//! bias, LeakyRelu and 2x2 max Pooling; residual blocks of Conv2D, LeakyRelu, Conv2D and
//! an Eltwise sum; a TransData back to NCHW, FullyConnection and SoftmaxV2. Outputs: the
//! probabilities and the last map, left in NC1HWC0. The twin is the same network with
//! every tensor NCHW float32 and neither Cast nor TransData. Weights are values exact in
//! float16, so both start from the same numbers; [`Cnn::weights`] is their one source,
//! which the network's ONNX form (`tests/ge_fused.rs`) reads too.

use half::f16;
use rt2::formats::{Format, StorageFormat, storage_shape, transfer};
use rt2::om::onnx::builder::seeded_f32;
use rt2::om::testdata_text::{DumpOp, dump_model, formatted_desc, tensor_desc};
use rt2::om::text::print_text;
use rt2::ops::DType;
use rt2::proto::ge_ir::TensorDescriptor;

/// GE IR's proto dtype numbers and `C_Format` numbers.
const DT_FLOAT: i32 = 1;
const DT_FLOAT16: i32 = 2;
const NCHW: i64 = 0;
const NC1HWC0: i64 = 3;
const FRACTAL_Z: i64 = 4;

/// The network's sizes.
#[derive(Debug, Clone, Copy)]
pub struct Cnn {
    /// The input, NCHW.
    pub input: [i64; 4],
    /// Channels of every map after the stem.
    pub width: i64,
    /// Residual blocks after the pooling.
    pub blocks: usize,
    pub classes: i64,
}

/// Values exact in float16, so both networks start from the same numbers.
pub fn halfway(v: Vec<f32>) -> Vec<f32> {
    v.into_iter().map(|x| f16::from_f32(x).to_f32()).collect()
}

fn usizes(d: &[i64]) -> Vec<usize> {
    d.iter().map(|&v| v as usize).collect()
}

/// `v` as float16 bytes (`fused`) or float32 bytes.
pub fn bytes(v: &[f32], fused: bool) -> Vec<u8> {
    if fused {
        v.iter()
            .flat_map(|&x| f16::from_f32(x).to_le_bytes())
            .collect()
    } else {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }
}

/// `v` (NCHW `dims`) as `to` stores it: the transfer GE's TransData runs.
pub fn stored(v: &[u8], dims: &[i64], to: Format, dtype: DType) -> (Vec<i64>, Vec<u8>) {
    let (from, to) = (StorageFormat::plain(Format::Nchw), StorageFormat::plain(to));
    let shape = storage_shape(from, to, dtype, &usizes(dims)).expect("a storage shape");
    let mut out = vec![0xa5u8; shape.iter().product::<usize>() * dtype.size()];
    transfer((from, &usizes(dims), v), (to, &shape, &mut out), dtype).expect("transfers");
    (shape.iter().map(|&d| d as i64).collect(), out)
}

/// The descriptor of an NCHW tensor of `dims`: as the fused graph stores it (`to`,
/// float16), or plain NCHW float32.
pub fn desc(dims: &[i64], fused: bool, to: Format) -> TensorDescriptor {
    if !fused {
        return tensor_desc(DT_FLOAT, dims, "NCHW");
    }
    if to == Format::Nchw {
        return tensor_desc(DT_FLOAT16, dims, "NCHW");
    }
    let number = match to {
        Format::Nc1hwc0 => NC1HWC0,
        Format::FractalZ => FRACTAL_Z,
        other => panic!("the network stores nothing as {}", other.name()),
    };
    let storage = storage_shape(
        StorageFormat::plain(Format::Nchw),
        StorageFormat::plain(to),
        DType::F16,
        &usizes(dims),
    )
    .expect("a storage shape");
    let storage: Vec<i64> = storage.iter().map(|&d| d as i64).collect();
    formatted_desc(
        DT_FLOAT16,
        &storage,
        to.name(),
        number,
        ("NCHW", NCHW),
        dims,
    )
}

/// A feature map's descriptor: NC1HWC0 in the fused graph.
pub fn map(dims: &[i64], fused: bool) -> TensorDescriptor {
    desc(dims, fused, Format::Nc1hwc0)
}

/// A plain tensor's descriptor.
pub fn nchw(dims: &[i64], fused: bool) -> TensorDescriptor {
    desc(dims, fused, Format::Nchw)
}

/// A Const of NCHW `dims` holding `v`, stored as `to` in the fused graph.
pub fn konst(name: &str, v: &[f32], dims: &[i64], fused: bool, to: Format) -> DumpOp {
    let data = bytes(v, fused);
    let data = if fused && to != Format::Nchw {
        stored(&data, dims, to, DType::F16).1
    } else {
        data
    };
    let d = desc(dims, fused, to);
    DumpOp::new(name, "Const")
        .value(d.clone(), data)
        .out_desc(d)
}

/// One of the network's weights: its name (the Const's in GE's text, the initializer's
/// in ONNX), NCHW dims and values.
#[derive(Debug, Clone, PartialEq)]
pub struct Weight {
    pub name: String,
    pub dims: Vec<i64>,
    pub values: Vec<f32>,
}

impl Cnn {
    /// Every weight, seeded in this order: `w0` `[width, C, 3, 3]` and `b0` `[width]` of
    /// the stem; `w{b}a`, `w{b}b` `[width, width, 3, 3]` of block `b` (from 1); `wfc`
    /// `[classes, width * H/2 * W/2]` and `bfc` `[classes]`. Values exact in float16.
    pub fn weights(&self) -> Vec<Weight> {
        let (c, k) = (self.input[1], self.width);
        let pooled = self.pooled();
        let features: i64 = pooled[1..].iter().product();
        // He-like scale for a 3x3 conv over `k` channels, halved: the sums stay well
        // inside float16 through every block.
        let scale = 0.5 * (2.0 / (9 * k) as f32).sqrt();
        let mut shapes = vec![
            ("w0".to_string(), vec![k, c, 3, 3], 0.3),
            ("b0".to_string(), vec![k], 0.1),
        ];
        for b in 1..=self.blocks {
            shapes.push((format!("w{b}a"), vec![k, k, 3, 3], scale));
            shapes.push((format!("w{b}b"), vec![k, k, 3, 3], scale));
        }
        shapes.push(("wfc".into(), vec![self.classes, features], 0.2));
        shapes.push(("bfc".into(), vec![self.classes], 0.1));
        shapes
            .into_iter()
            .zip(1u64..)
            .map(|((name, dims, scale), seed)| {
                let count = dims.iter().product::<i64>() as usize;
                let values = halfway(seeded_f32(count, seed, scale));
                Weight { name, dims, values }
            })
            .collect()
    }

    /// The map after the stem's pooling, and of every block: `[N, width, H/2, W/2]`.
    pub fn pooled(&self) -> [i64; 4] {
        let [n, _, h, w] = self.input;
        [n, self.width, h / 2, w / 2]
    }

    /// The probabilities' shape as FullyConnection gives it: `[N, classes]`, or
    /// `[1, classes, 1, 1]` for one image.
    pub fn probs(&self) -> Vec<i64> {
        match self.input[0] {
            1 => vec![1, self.classes, 1, 1],
            n => vec![n, self.classes],
        }
    }

    /// The network in GE text form: `fused` (float16, NC1HWC0 maps, FRACTAL_Z filters,
    /// Cast and TransData) or its NCHW float32 twin.
    pub fn text(&self, fused: bool) -> String {
        let [n, c, h, w] = self.input;
        let x = self.input;
        let stem_map = [n, self.width, h, w];
        let pooled = self.pooled();
        let probs = self.probs();
        let fz = Format::FractalZ;
        let weights = self.weights();
        // The Const of weight `name`, stored as `to` in the fused graph.
        let weight = |name: &str, to: Format| {
            let w = weights
                .iter()
                .find(|w| w.name == name)
                .expect("a weight of the network");
            konst(name, &w.values, &w.dims, fused, to)
        };
        let conv = |name: &str, x: &str, f: &str, b: Option<&str>, xd: &[i64], wd: &[i64]| {
            let yd = [xd[0], wd[0], xd[2], xd[3]];
            let mut op = DumpOp::new(name, "Conv2D").input(x).input(f);
            if let Some(b) = b {
                op = op.input(b);
            }
            op = op
                .attr_ints("strides", &[1, 1, 1, 1])
                .attr_ints("pads", &[1, 1, 1, 1])
                .attr_ints("dilations", &[1, 1, 1, 1])
                .attr_s("data_format", "NCHW")
                .in_desc(map(xd, fused))
                .in_desc(desc(wd, fused, fz));
            if b.is_some() {
                op = op.in_desc(nchw(&[wd[0]], fused));
            }
            op.out_desc(map(&yd, fused))
        };
        let lrelu = |name: &str, x: &str, d: &[i64]| {
            DumpOp::new(name, "LeakyRelu")
                .input(x)
                .attr_f("negative_slope", 0.1)
                .in_desc(map(d, fused))
                .out_desc(map(d, fused))
        };
        let mut ops = vec![
            DumpOp::new("x", "Data")
                .attr_i("index", 0)
                .out_desc(tensor_desc(DT_FLOAT, &x, "NCHW")),
        ];
        let mut at = "x:0".to_string();
        if fused {
            ops.push(
                DumpOp::new("cast", "Cast")
                    .input("x:0")
                    .attr_i("dst_type", 1)
                    .in_desc(tensor_desc(DT_FLOAT, &x, "NCHW"))
                    .out_desc(nchw(&x, true)),
            );
            ops.push(
                DumpOp::new("td_in", "TransData")
                    .input("cast:0")
                    .attr_s("src_format", "NCHW")
                    .attr_s("dst_format", "NC1HWC0")
                    .in_desc(nchw(&x, true))
                    .out_desc(map(&x, true)),
            );
            at = "td_in:0".into();
        }
        let stem_w = [self.width, c, 3, 3];
        ops.extend([
            weight("w0", fz),
            weight("b0", Format::Nchw),
            conv("conv0", &at, "w0:0", Some("b0:0"), &x, &stem_w),
            lrelu("lrelu0", "conv0:0", &stem_map),
            DumpOp::new("pool", "Pooling")
                .input("lrelu0:0")
                .attr_i("mode", 0)
                .attr_ints("window", &[2, 2])
                .attr_ints("stride", &[2, 2])
                .attr_ints("pad", &[0, 0, 0, 0])
                .in_desc(map(&stem_map, fused))
                .out_desc(map(&pooled, fused)),
        ]);
        at = "pool:0".into();
        let block_w = [self.width, self.width, 3, 3];
        for b in 1..=self.blocks {
            let (wa, wb) = (format!("w{b}a"), format!("w{b}b"));
            let (ca, la, cb, sum) = (
                format!("conv{b}a"),
                format!("lrelu{b}"),
                format!("conv{b}b"),
                format!("sum{b}"),
            );
            ops.extend([
                weight(&wa, fz),
                conv(&ca, &at, &format!("{wa}:0"), None, &pooled, &block_w),
                lrelu(&la, &format!("{ca}:0"), &pooled),
                weight(&wb, fz),
                conv(
                    &cb,
                    &format!("{la}:0"),
                    &format!("{wb}:0"),
                    None,
                    &pooled,
                    &block_w,
                ),
                DumpOp::new(&sum, "Eltwise")
                    .input(&at)
                    .input(&format!("{cb}:0"))
                    .attr_i("mode", 1)
                    .attr_i("N", 2)
                    .in_desc(map(&pooled, fused))
                    .in_desc(map(&pooled, fused))
                    .out_desc(map(&pooled, fused)),
            ]);
            at = format!("{sum}:0");
        }
        let last = at.clone();
        if fused {
            ops.push(
                DumpOp::new("td_out", "TransData")
                    .input(&at)
                    .attr_s("src_format", "NC1HWC0")
                    .attr_s("dst_format", "NCHW")
                    .in_desc(map(&pooled, true))
                    .out_desc(nchw(&pooled, true)),
            );
            at = "td_out:0".into();
        }
        let features: i64 = pooled[1..].iter().product();
        let fc_w = [self.classes, features];
        ops.extend([
            weight("wfc", Format::Nchw),
            weight("bfc", Format::Nchw),
            DumpOp::new("fc", "FullyConnection")
                .input(&at)
                .input("wfc:0")
                .input("bfc:0")
                .attr_i("num_output", self.classes)
                .in_desc(nchw(&pooled, fused))
                .in_desc(nchw(&fc_w, fused))
                .in_desc(nchw(&[self.classes], fused))
                .out_desc(nchw(&probs, fused)),
            DumpOp::new("softmax", "SoftmaxV2")
                .input("fc:0")
                .attr_ints("axes", &[1])
                .in_desc(nchw(&probs, fused))
                .out_desc(nchw(&probs, fused)),
            // The second output stays as the device holds it: NC1HWC0 in the fused graph.
            DumpOp::new("out", "NetOutput")
                .input("softmax:0")
                .input(&last)
                .in_desc(nchw(&probs, fused))
                .in_desc(map(&pooled, fused)),
        ]);
        print_text(&dump_model("fused", ops))
    }
}
