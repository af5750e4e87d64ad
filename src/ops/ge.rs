//! GE's own op types, with GE's contract: the input order, attribute names, types and
//! defaults of each op's `REG_OP` prototype (hicann/ops-nn, ops-math and the older `*D` and
//! Caffe-born prototypes of mindspore-ai/graphengine `third_party/fwkacllib/inc/ops/`; each
//! op's source is named where it is registered). These are the types a GE graph dumped
//! after fusion (a ResNet-50 from TensorFlow or Caffe) is written in.
//!
//! Every op computes on the logical (origin) layout, NCHW or ND; an op with a
//! `data_format` of NHWC is computed by permuting its operands to NCHW around the shared
//! kernel ([`layout`]). The math is the library's: convolutions, pools, softmax, GEMM,
//! reductions and data movement run the ONNX ops' kernels, to which a GE op hands its
//! attributes translated to the ONNX names ([`attrs`]), after its own inference has
//! checked them under their GE names. So float16 and bfloat16 compute as those kernels
//! do: GEMM and convolution accumulate in float32, pools, softmax and reductions in
//! float64, and the ops written here (Eltwise, Scale, BNInference, Power) in float32.
//! Aipp, the AI pre-processing ATC inserts after a uint8 model input, has no ONNX
//! counterpart and is computed here from its `aipp` configuration ([`aipp`]).
//!
//! Op types both vocabularies share are one spec each: `MaxPool` (ONNX's `kernel_shape`
//! or TF-born GE's `ksize`, registered here), `LeakyRelu` (ONNX's `alpha`, else GE's
//! `negative_slope`, default 0) and `Cast` (ONNX's `to`, else GE's `dst_type`) in the
//! elementwise family.
//!
//! What GE leaves to quantization (`offset_x`, `offset_w`) is accepted only at its
//! neutral value, and the error says so.

mod activation;
mod aipp;
pub mod alias;
mod arrange;
mod array;
mod attrs;
mod caffe_lstm;
mod conv;
mod convs;
pub mod coverage;
mod deform;
mod detect;
mod eltwise;
mod int8;
mod layout;
pub mod math;
mod matmul;
mod matrix;
mod misc;
mod movement;
mod named;
mod norm;
mod normalize;
mod pool;
mod pools;
pub mod prototype;
mod quant;
mod quants;
mod resize;
mod select;
pub mod shared;
mod stats;
mod table;

pub use attrs::input_format;

use crate::ops::{InferCtx, OpError, OpRegistry, OpSpec, TensorMeta};

/// Registers the family.
pub fn register(reg: &mut OpRegistry) {
    alias::register(reg);
    math::register(reg);
    array::register(reg);
    norm::register(reg);
    resize::register(reg);
    matrix::register(reg);
    arrange::register(reg);
    normalize::register(reg);
    stats::register(reg);
    activation::register(reg);
    convs::register(reg);
    pools::register(reg);
    select::register(reg);
    detect::register(reg);
    quant::register(reg);
    quants::register(reg);
    misc::register(reg);
    caffe_lstm::register(reg);
    named::register(reg);
    deform::register(reg);
    // ops-cv aipp_proto.h / graphengine aipp.h; the configuration is GE's AippOpParams
    reg.add(OpSpec::new("Aipp", aipp::infer_aipp).computes(aipp::aipp));
    // ops-nn conv/conv2d/op_graph/conv2d_proto.h
    reg.add(
        OpSpec::new("Conv2D", conv::infer_conv2d)
            .computes(conv::conv2d)
            .translates(conv::translate_conv2d),
    );
    // graphengine nn_pooling_ops.h (Caffe-born)
    reg.add(
        OpSpec::new("Pooling", pool::infer_pooling)
            .computes(pool::pooling)
            .translates(pool::translate_pooling),
    );
    // ops-nn pooling avg_pool_proto.h / graphengine nn_pooling_ops.h (TF-born); MaxPool is
    // shared with ONNX.
    reg.add(
        OpSpec::new("MaxPool", pool::infer_max_pool)
            .computes(pool::max_pool)
            .translates(pool::translate_tf_pool),
    );
    // ops-nn pooling protos / graphengine nn_pooling_ops.h: what GE's ONNX MaxPool and
    // AveragePool plugins make.
    for name in ["MaxPoolV3", "AvgPoolV2"] {
        reg.add(
            OpSpec::new(name, pool::infer_pool_v2)
                .computes(pool::pool_v2)
                .translates(pool::translate_pool_v2),
        );
    }
    reg.add(
        OpSpec::new("AvgPool", pool::infer_tf_pool)
            .computes(pool::avg_pool)
            .translates(pool::translate_tf_pool),
    );
    // graphengine elewise_calculation_ops.h (Eltwise, Power), nn_norm_ops.h (Scale,
    // BNInference)
    reg.add(OpSpec::new("Eltwise", eltwise::infer_eltwise).computes(eltwise::eltwise));
    reg.add(OpSpec::new("Power", infer_same).computes(eltwise::power));
    reg.add(OpSpec::new("Scale", eltwise::infer_scale).computes(eltwise::scale));
    reg.add(OpSpec::new("BNInference", eltwise::infer_bn).computes(eltwise::bn_inference));
    // graphengine matrix_calculation_ops.h
    reg.add(
        OpSpec::new("FullyConnection", matmul::infer_fully_connection)
            .computes(matmul::fully_connection)
            .translates(matmul::translate_fully_connection)
            .prepacks(matmul::prepack_half_weight),
    );
    reg.add(
        OpSpec::new("MatMulV2", matmul::infer_matmul)
            .computes(matmul::matmul)
            .translates(matmul::translate_matmul)
            .prepacks(matmul::prepack_half_weight),
    );
    // What GE's ONNX MatMul plugin makes: BatchMatMul with MatMulV2's optional bias.
    reg.add(
        OpSpec::new("BatchMatMulV2", matmul::infer_matmul)
            .computes(matmul::matmul)
            .translates(matmul::translate_matmul)
            .prepacks(matmul::prepack_half_weight),
    );
    reg.add(
        OpSpec::new("BatchMatMul", matmul::infer_matmul)
            .computes(matmul::matmul)
            .translates(matmul::translate_matmul)
            .prepacks(matmul::prepack_half_weight),
    );
    // ops-nn softmax_v2 proto / graphengine nn_norm_ops.h
    reg.add(
        OpSpec::new("SoftmaxV2", movement::infer_softmax)
            .computes(movement::softmax_v2)
            .translates(movement::translate_softmax),
    );
    // graphengine split_combination_ops.h, transformation_ops.h, reduce_ops.h
    reg.add(
        OpSpec::new("ConcatD", movement::infer_concat)
            .computes(movement::concat)
            .translates(movement::translate_concat),
    );
    reg.add(
        OpSpec::new("ConcatV2D", movement::infer_concat)
            .computes(movement::concat)
            .translates(movement::translate_concat),
    );
    reg.add(OpSpec::new("SplitD", movement::infer_split).computes(movement::split));
    reg.add(
        OpSpec::new("TransposeD", movement::infer_transpose)
            .computes(movement::transpose)
            .translates(movement::translate_transpose),
    );
    reg.add(
        OpSpec::new("ReduceMeanD", movement::infer_reduce)
            .computes(movement::reduce)
            .translates(movement::translate_reduce),
    );
    reg.add(
        OpSpec::new("ReduceSumD", movement::infer_reduce)
            .computes(movement::reduce)
            .translates(movement::translate_reduce),
    );
}

/// One output like input 0 (Power).
fn infer_same(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    Ok(vec![ctx.inputs[0].clone()])
}

#[cfg(test)]
mod tests;
