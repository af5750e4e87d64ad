//! `ConvWinograd`: a float32 3x3 convolution of stride 1 whose weights lowering
//! transformed once into Winograd's `U` (conv_winograd.rs), in place of the Conv that
//! would transform them at every launch.
//!
//! Why: a Conv taken by the Winograd kernel spends, per call, 7.5 cycles on each (output,
//! input) channel pair turning its 3x3 weights into the 4x4 `U = G g Gᵀ` and writes the
//! 16 m c floats of `U` before its products read them (a 64 -> 64 layer: 4096 pairs,
//! 256 KB, about a fifth of the layer over a 4 x 32 map). The weights are constant for
//! the model's life, so their transform belongs with the work lowering moves out of
//! execution, as ATC stores Ascend's weights in the Cube unit's fractal formats.
//!
//! Lowering takes a Conv this way ([`prepack_conv`]) when its window is one the kernel
//! takes (`Winograd::tile_for`: from the shapes alone, so the lowered graph is the same
//! on every machine), transforming the weights for the algorithm it chose, F(2x2, 3x3)
//! or F(4x4, 3x3); the op tells them apart by U's shape. A CPU without the vector kernels runs the same transforms in
//! portable code (`conv_winograd::portable`); the results then agree to rounding.

use super::conv::{PARALLEL_ELEMS, bias_values};
use super::conv_winograd::{Tile, Weights, Winograd, portable, transform};
use super::epilogue::Epilogue;
use super::scratch::with_scratch;
use super::window::Window;
use crate::ops::simd::Isa;
use crate::ops::{DType, HostTensor, InferCtx, OpError, Prepack, TensorMeta, TensorMut, TensorRef};

/// The op lowering puts in place of such a Conv (rt2's own, not an ONNX or GE op): X
/// `[N, C, H, W]`, U `[16, M, C]` for F(2x2, 3x3) or `[36, M, C]` for F(4x4, 3x3)
/// (`U_ξ[o][i]` at `(ξ M + o) C + i`), optional B `[M]`,
/// the Conv's attributes (pads or auto_pad; strides and dilations 1; group 1) and its
/// fused activation -> Y `[N, M, H', W']`.
pub const CONV_WINOGRAD: &str = "ConvWinograd";

/// Conv's prepack hook, given the output `out` its inference gives: a float32 Conv by
/// constant weights that the Winograd kernel takes runs as [`CONV_WINOGRAD`] on `U`; a
/// float16/bfloat16 one has its weights widened once (`conv::prepack_half_weight`).
pub fn prepack_conv(ctx: &InferCtx, out: &TensorMeta) -> Option<Prepack> {
    winograd_prepack(ctx, out).or_else(|| super::conv::prepack_half_weight(ctx))
}

/// The [`CONV_WINOGRAD`] prepack of a Conv, if its window, channels and shapes are ones
/// the Winograd kernel takes.
fn winograd_prepack(ctx: &InferCtx, out: &TensorMeta) -> Option<Prepack> {
    if ctx.op != "Conv" {
        return None;
    }
    let [x, w, ..] = ctx.inputs else {
        return None;
    };
    ctx.values.get(1).copied().flatten()?;
    if x.dtype != DType::F32 || w.dtype != DType::F32 || ctx.attr_int("group", 1).ok()? != 1 {
        return None;
    }
    let (xs, ws) = (x.shape.as_deref()?, w.shape.as_deref()?);
    let &[_, c, h, wd] = xs else {
        return None;
    };
    let &[m, wc, 3, 3] = ws else {
        return None;
    };
    if wc != c || xs.iter().any(|&d| d < 1) || m < 1 {
        return None;
    }
    if ctx
        .attr_ints("kernel_shape")
        .ok()?
        .is_some_and(|k| k != [3, 3])
    {
        return None;
    }
    let &[_, _, oh, ow] = out.shape.as_deref()? else {
        return None;
    };
    let dims = |v: &[i64]| {
        v.iter()
            .map(|&d| usize::try_from(d).ok())
            .collect::<Option<Vec<_>>>()
    };
    let win = Window::new(ctx, &dims(&[h, wd])?, &[3, 3], &dims(&[oh, ow])?)
        .ok()?
        .lying_flat();
    let tile = Winograd::tile_for(&win, c as usize, m as usize)?;
    Some(Prepack {
        op: CONV_WINOGRAD,
        input: 1,
        attrs: Vec::new(),
        pack: match tile {
            Tile::F2 => |w| pack_winograd(w, Tile::F2),
            Tile::F4 => |w| pack_winograd(w, Tile::F4),
        },
    })
}

/// `U` (`[ξs, m, c]`, ξs the tile's positions) of a float32 `[m, c, 3, 3]` weight.
fn pack_winograd(w: &HostTensor, tile: Tile) -> Option<HostTensor> {
    let &[m, c, 3, 3] = w.shape.as_slice() else {
        return None;
    };
    let (mu, cu) = (usize::try_from(m).ok()?, usize::try_from(c).ok()?);
    if w.dtype != DType::F32 {
        return None;
    }
    let floats = super::gemm::widen_floats(w)?;
    if floats.len() != mu.checked_mul(cu)?.checked_mul(9)? {
        return None;
    }
    let u = transform(&floats, mu, cu, tile);
    Some(HostTensor {
        dtype: DType::F32,
        shape: vec![tile.positions() as i64, m, c],
        data: bytemuck::cast_slice(&u).to_vec().into(),
    })
}

/// ConvWinograd's compute: each image by the Winograd kernel from `U`, or, on a CPU
/// without its vector kernels, by the same transforms in portable code.
pub fn conv_winograd(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let (x, u) = (&inputs[0], &inputs[1]);
    let y_shape = outputs[0].shape;
    if x.rank() != 4 || u.rank() != 3 || y_shape.len() != 4 {
        return Err(ctx.input_error(
            1,
            format!("weights {:?} do not fit input {:?}", u.shape, x.shape),
        ));
    }
    let (c, m) = (x.shape[1], y_shape[1]);
    let tile = Tile::of_positions(u.shape[0]).filter(|_| u.shape[1..] == [m, c]);
    let Some(tile) = tile else {
        return Err(ctx.input_error(
            1,
            format!("is {:?}; want [16, {m}, {c}] or [36, {m}, {c}]", u.shape),
        ));
    };
    let win = Window::new(ctx, &x.shape[2..], &[3, 3], &y_shape[2..])?.lying_flat();
    // What lowering made is such a window; a graph written otherwise is refused here, not
    // computed as one (the kernels size their planes from these).
    let fits = (1..3).all(|d| {
        let padded = win.input[d] as isize + win.pad_begin[d] + win.pad_end[d];
        win.pad_begin[d] >= 0 && win.pad_end[d] >= 0 && padded == win.output[d] as isize + 2
    });
    if win.kernel != [1, 3, 3] || win.stride != [1; 3] || win.dilation != [1; 3] || !fits {
        return Err(ctx.compute_error(format!(
            "computes 3x3 windows of stride and dilation 1 over 2-D maps, each output the \
             padded input less 2; not input {:?}, output {y_shape:?}, strides {:?}, \
             dilations {:?}",
            x.shape, win.stride, win.dilation
        )));
    }
    let (xv, uv) = (x.slice::<f32>()?, u.slice::<f32>()?);
    let bias = bias_values::<f32>(ctx, inputs.get(2), m)?;
    let epilogue = Epilogue::read(ctx)?;
    let y = outputs[0].slice_mut::<f32>()?;
    let (ilen, olen) = (win.input_len(), win.output_len());
    if y.is_empty() {
        return Ok(());
    }
    let parallel = y.len() * c * 9 >= PARALLEL_ELEMS;
    let plan = Isa::detect().and_then(|isa| Winograd::plan(&win, c, m, tile, isa, parallel));
    for (n, out) in y.chunks_mut(m * olen).enumerate() {
        let xn = &xv[n * c * ilen..][..c * ilen];
        match &plan {
            Some(p) => with_scratch(p.scratch_len(false), |scratch: &mut [f32]| {
                p.run(xn, Weights::Transformed(uv), bias, epilogue, scratch, out);
            }),
            None => portable(&win, c, m, tile, xn, uv, bias, epilogue, out),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::conv_winograd::{Tile, Winograd, portable, transform};
    use super::super::epilogue::{ACTIVATION_ATTR, Epilogue};
    use super::super::window::Window;
    use super::CONV_WINOGRAD;
    use crate::ops::simd::Isa;
    use crate::ops::testing::{
        assert_close, assert_close_to_scale, run_f32_with_shape, seeded as values, test_attrs,
    };
    use crate::ops::{Attr, DType, HostTensor, InferCtx, OpRegistry, Tensor, TensorMeta};

    /// Windows the kernel takes: the CRNN's 64 -> 64 over 4 x 32 with a Relu, an odd map
    /// under asymmetric pads (tiles and columns of the rounding), a batch of two, a
    /// `valid` window, and a map the Conv takes F(4x4, 3x3) for.
    fn cases() -> Vec<([usize; 4], usize, [i64; 4], bool)> {
        vec![
            ([1, 64, 4, 32], 64, [1, 1, 1, 1], true),
            ([1, 24, 15, 61], 16, [1, 1, 1, 2], true),
            ([1, 16, 13, 29], 24, [2, 0, 1, 2], false),
            ([2, 20, 9, 30], 16, [1, 1, 1, 1], true),
            ([1, 16, 18, 34], 17, [0, 0, 0, 0], false),
        ]
    }

    /// Runs `check` on each case with its weights and the Conv's output.
    fn with_conv(check: impl Fn(([usize; 4], usize, [i64; 4], bool), &[f32], &[f32])) {
        for case @ (x, m, pads, relu) in cases() {
            let w = values(m * x[1] * 9, 2);
            let conv = run(
                "Conv",
                x,
                m,
                pads,
                relu,
                Tensor::from_vec(&[m, x[1], 3, 3], &w),
            );
            check(case, &w, &conv);
        }
    }

    /// Runs `op` with the case's input, `w` and a bias; its output.
    fn run(op: &str, x: [usize; 4], m: usize, pads: [i64; 4], relu: bool, w: Tensor) -> Vec<f32> {
        let mut attrs = vec![("pads", Attr::Ints(pads.to_vec()))];
        if relu {
            attrs.push((ACTIVATION_ATTR, Attr::Str("Relu".into())));
        }
        let xs = Tensor::from_vec(&x, &values(x.iter().product(), 1));
        let b = Tensor::from_vec(&[m], &values(m, 3));
        run_f32_with_shape(op, &attrs, &[xs, w, b]).1
    }

    /// The weights transformed at lowering give the bits of the Conv that transforms
    /// them at its launch: the same operations in the same order, then the same kernel.
    /// Transformed for the other algorithm, they give its results (the op tells the two
    /// apart by U's shape), to F(4x4, 3x3)'s rounding.
    #[test]
    fn transformed_weights_give_the_convs_bits() {
        with_conv(|(x, m, pads, relu), w, conv| {
            let c = x[1];
            for tile in [Tile::F2, Tile::F4] {
                let u = Tensor::from_vec(&[tile.positions(), m, c], &transform(w, m, c, tile));
                let packed = run(CONV_WINOGRAD, x, m, pads, relu, u);
                match Isa::detect() {
                    Some(_) if Some(tile) == chosen(x, m, pads) => {
                        let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                        assert_eq!(bits(&packed), bits(conv), "{x:?} -> {m}");
                    }
                    _ => assert_close_to_scale(&packed, conv, 2e-5),
                }
            }
        });
    }

    /// The algorithm the Conv of a case runs.
    fn chosen(x: [usize; 4], m: usize, pads: [i64; 4]) -> Option<Tile> {
        Winograd::tile_for(&window(x, pads), x[1], m)
    }

    /// A case's window.
    fn window([_, _, h, wd]: [usize; 4], pads: [i64; 4]) -> Window {
        let (oh, ow) = (
            h + (pads[0] + pads[2]) as usize - 2,
            wd + (pads[1] + pads[3]) as usize - 2,
        );
        let attrs = test_attrs(&[("pads", Attr::Ints(pads.to_vec()))]);
        let metas = [TensorMeta::new(DType::F32, &[1])];
        let ctx = InferCtx {
            op: "Conv",
            inputs: &metas,
            values: &[],
            attrs: &attrs,
            outputs: 1,
        };
        Window::new(&ctx, &[h, wd], &[3, 3], &[oh, ow])
            .unwrap()
            .lying_flat()
    }

    /// The portable path, which a CPU without the vector kernels runs, agrees with them
    /// (and so with the definition, which the Conv's tests hold them to) to rounding:
    /// elementwise for F(2x2, 3x3), within 2e-5 of the largest magnitude where F(4x4,
    /// 3x3) is either side. Its output starts poisoned: every element must be written.
    #[test]
    fn portable_winograd_agrees_with_the_kernels() {
        with_conv(|(x, m, pads, relu), w, want| {
            let [n, c, h, wd] = x;
            let win = window(x, pads);
            let [_, oh, ow] = win.output;
            assert!(chosen(x, m, pads).is_some(), "{x:?} -> {m}");
            let (xv, b) = (values(x.iter().product(), 1), values(m, 3));
            let e = relu.then_some(Epilogue::Clip {
                lo: 0.0,
                hi: f32::INFINITY,
            });
            for tile in [Tile::F2, Tile::F4] {
                let u = transform(w, m, c, tile);
                let mut got = vec![f32::NAN; n * m * oh * ow];
                for (i, out) in got.chunks_mut(m * oh * ow).enumerate() {
                    let xi = &xv[i * c * h * wd..][..c * h * wd];
                    portable(&win, c, m, tile, xi, &u, Some(&b), e, out);
                }
                match (tile, chosen(x, m, pads)) {
                    (Tile::F2, Some(Tile::F2)) => assert_close(&got, want),
                    _ => assert_close_to_scale(&got, want, 2e-5),
                }
            }
        });
    }

    /// A ConvWinograd written with a window lowering never makes (a stride, an output
    /// that is not the padded input less 2), or with a U of neither algorithm's shape, is
    /// an error, not a result.
    #[test]
    fn other_windows_are_refused() {
        use crate::ops::testing::try_run;
        let (x, m) = ([1, 16, 8, 32], 16);
        let xs = Tensor::from_vec(&x, &values(16 * 8 * 32, 1));
        let u = Tensor::from_vec(&[16, m, 16], &values(16 * m * 16, 2));
        let pads = [("pads", Attr::Ints(vec![1; 4]))];
        let ok = try_run(CONV_WINOGRAD, &pads, &[xs.clone(), u.clone()], 1);
        assert_eq!(ok.map(|y| y[0].shape.clone()).unwrap(), [1, 16, 8, 32]);
        let strided = [pads[0].clone(), ("strides", Attr::Ints(vec![2, 2]))];
        let err = try_run(CONV_WINOGRAD, &strided, &[xs.clone(), u], 1).unwrap_err();
        assert!(err.to_string().contains("stride and dilation 1"), "{err}");
        // U of 36 positions is F(4x4, 3x3)'s; of 25, no algorithm's.
        let u = Tensor::from_vec(&[36, m, 16], &values(36 * m * 16, 2));
        let ok = try_run(CONV_WINOGRAD, &pads, &[xs.clone(), u], 1);
        assert_eq!(ok.map(|y| y[0].shape.clone()).unwrap(), [1, 16, 8, 32]);
        let u = Tensor::from_vec(&[25, m, 16], &values(25 * m * 16, 2));
        let err = try_run(CONV_WINOGRAD, &pads, &[xs, u], 1).unwrap_err();
        assert!(err.to_string().contains("[36, M, 16]"), "{err}");
    }

    /// A ConvWinograd on a map and channel counts lowering never hands the kernel (one
    /// channel each way, a 3 x 5 map: one group of tiles, mostly the rounding's) still
    /// computes the Conv, by either algorithm.
    #[test]
    fn small_maps_and_single_channels_compute() {
        let pads = [("pads", Attr::Ints(vec![1; 4]))];
        let w = values(9, 2);
        let x = Tensor::from_vec(&[1, 1, 3, 5], &values(15, 1));
        let conv = Tensor::from_vec(&[1, 1, 3, 3], &w);
        let want = run_f32_with_shape("Conv", &pads, &[x.clone(), conv]).1;
        for tile in [Tile::F2, Tile::F4] {
            let u = Tensor::from_vec(&[tile.positions(), 1, 1], &transform(&w, 1, 1, tile));
            let got = run_f32_with_shape(CONV_WINOGRAD, &pads, &[x.clone(), u]).1;
            assert_close_to_scale(&got, &want, 2e-5);
        }
    }

    /// Lowering's hook (Conv's, as registered): ConvWinograd for a float32 3x3 Conv of stride 1 by constant
    /// weights over a map the kernel takes, decided from the shapes alone (U for
    /// F(4x4, 3x3) where its products are fewer enough); a strided, a
    /// grouped, a too small or a weight known only at run time keeps the Conv; float16
    /// keeps its widening.
    #[test]
    fn conv_prepacks_where_the_kernel_takes_it() {
        let weight = |dtype, m: usize, c: usize| HostTensor {
            dtype,
            shape: vec![m as i64, c as i64, 3, 3],
            data: vec![0; m * c * 9 * dtype.size()].into(),
        };
        let plan = |dtype, x: &[i64], m, attrs: &[(&str, Attr)], known: bool| {
            let w = weight(dtype, m, x[1] as usize);
            let metas = [TensorMeta::new(dtype, x), TensorMeta::new(dtype, &w.shape)];
            let attrs = test_attrs(attrs);
            let values = [None, known.then_some(&w)];
            let ctx = InferCtx {
                op: "Conv",
                inputs: &metas,
                values: &values,
                attrs: &attrs,
                outputs: 1,
            };
            let hook = OpRegistry::new()
                .get("Conv")
                .and_then(|s| s.prepack)
                .unwrap();
            hook(&ctx).map(|p| (p.op, (p.pack)(&w).map(|u| u.shape)))
        };
        let pads = [("pads", Attr::Ints(vec![1; 4]))];
        let f32 = DType::F32;
        let packed = Some((CONV_WINOGRAD, Some(vec![16, 64, 48])));
        assert_eq!(plan(f32, &[1, 48, 4, 32], 64, &pads, true), packed);
        // 16 x 64 outputs: 64 tiles of 4x4 on 36 positions against 256 of 2x2 on 16.
        let packed = Some((CONV_WINOGRAD, Some(vec![36, 64, 48])));
        assert_eq!(plan(f32, &[1, 48, 16, 64], 64, &pads, true), packed);
        // 8 x 32: 32 tiles of 4x4 (half of them the rounding's) against 64 of 2x2.
        let packed = Some((CONV_WINOGRAD, Some(vec![16, 64, 48])));
        assert_eq!(plan(f32, &[1, 48, 8, 32], 64, &pads, true), packed);
        let strided = [pads[0].clone(), ("strides", Attr::Ints(vec![2, 2]))];
        assert_eq!(plan(f32, &[1, 48, 8, 64], 64, &strided, true), None);
        let grouped = [pads[0].clone(), ("group", Attr::Int(2))];
        assert_eq!(plan(f32, &[1, 48, 4, 32], 64, &grouped, true), None);
        // 2 x 32 outputs: 16 tiles, fewer than the kernel takes.
        assert_eq!(plan(f32, &[1, 64, 2, 32], 64, &pads, true), None);
        assert_eq!(plan(f32, &[1, 48, 4, 32], 64, &pads, false), None);
        let half = plan(DType::F16, &[1, 48, 4, 32], 64, &pads, true);
        assert_eq!(half, Some(("Conv", Some(vec![64, 48, 3, 3]))));
    }
}
