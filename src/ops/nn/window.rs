//! Sliding-window geometry shared by convolutions and pools: strides, dilations, the
//! padding before and after each spatial dim (from `pads` or `auto_pad`), with every
//! spatial rank promoted to three.
//!
//! Promotion prepends dims of size 1 (kernel 1, stride 1, no padding), which changes
//! neither the values nor the row-major order, so one loop nest serves 1-D, 2-D and 3-D
//! windows. Output sizes are not computed here: they are the output tensor's, as shape
//! inference (including `ceil_mode`) decided.

use crate::ops::{InferCtx, OpError};

/// Spatial ranks the kernels handle.
pub const MAX_SPATIAL: usize = 3;

/// A window's geometry over three spatial dims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    pub input: [usize; 3],
    pub output: [usize; 3],
    pub kernel: [usize; 3],
    pub stride: [usize; 3],
    pub dilation: [usize; 3],
    /// Padding before each dim (negative only for ConvTranspose's cropped `output_shape`).
    pub pad_begin: [isize; 3],
    pub pad_end: [isize; 3],
}

/// Attribute `name` (default all ones): `n` positive values, as strides and dilations
/// are.
pub(super) fn positive(ctx: &InferCtx, name: &str, n: usize) -> Result<Vec<usize>, OpError> {
    let v = ctx.attr_ints_or(name, 1, n)?;
    if v.len() != n || v.iter().any(|&x| x < 1) {
        return Err(ctx.attr_error(name, format!("needs {n} positive values")));
    }
    Ok(v.iter().map(|&x| x as usize).collect())
}

/// `v` right-aligned in three slots, the leading ones `fill`.
pub fn promote<T: Copy>(v: &[T], fill: T) -> [T; 3] {
    let mut out = [fill; 3];
    out[3 - v.len()..].copy_from_slice(v);
    out
}

impl Window {
    /// Reads `strides`, `dilations`, `pads` and `auto_pad` for a window of `kernel` over
    /// the spatial dims `input`, producing the spatial dims `output`.
    pub fn new(
        ctx: &InferCtx,
        input: &[usize],
        kernel: &[usize],
        output: &[usize],
    ) -> Result<Window, OpError> {
        let n = input.len();
        if n == 0 || n > MAX_SPATIAL || kernel.len() != n || output.len() != n {
            return Err(ctx.compute_error(format!(
                "computes 1 to {MAX_SPATIAL} spatial dims with a kernel of the same rank, not {input:?} with kernel {kernel:?}"
            )));
        }
        let stride = positive(ctx, "strides", n)?;
        let dilation = positive(ctx, "dilations", n)?;
        let mut begin = vec![0isize; n];
        let mut end = vec![0isize; n];
        match ctx.attr_str("auto_pad", "NOTSET")? {
            mode @ ("SAME_UPPER" | "SAME_LOWER") => {
                for i in 0..n {
                    let span = (kernel[i] - 1) * dilation[i] + 1;
                    let need = (output[i].max(1) - 1) * stride[i] + span;
                    let total = need.saturating_sub(input[i]) as isize;
                    let small = total / 2;
                    (begin[i], end[i]) = if mode == "SAME_UPPER" {
                        (small, total - small)
                    } else {
                        (total - small, small)
                    };
                }
            }
            "VALID" => {}
            "NOTSET" | "" => {
                let pads = ctx.attr_ints_or("pads", 0, 2 * n)?;
                if pads.len() != 2 * n || pads.iter().any(|&p| p < 0) {
                    return Err(ctx.attr_error("pads", format!("needs {} values >= 0", 2 * n)));
                }
                for i in 0..n {
                    begin[i] = pads[i] as isize;
                    end[i] = pads[i + n] as isize;
                }
            }
            other => return Err(ctx.attr_error("auto_pad", format!("{other:?} is not a mode"))),
        }
        Ok(Window {
            input: promote(input, 1),
            output: promote(output, 1),
            kernel: promote(kernel, 1),
            stride: promote(&stride, 1),
            dilation: promote(&dilation, 1),
            pad_begin: promote(&begin, 0),
            pad_end: promote(&end, 0),
        })
    }

    pub fn input_len(&self) -> usize {
        self.input.iter().product()
    }
    pub fn output_len(&self) -> usize {
        self.output.iter().product()
    }
    pub fn kernel_len(&self) -> usize {
        self.kernel.iter().product()
    }

    /// The window as the direct float32 kernels address it ([`Flat`]), if it has at
    /// most two spatial dims (the leading promoted one all 1s), a non-empty output,
    /// kernel and strides, at most `max_taps` taps and no negative padding before.
    pub fn flat(&self, max_taps: usize) -> Option<Flat> {
        if self.input[0] != 1
            || self.kernel[0] != 1
            || self.output[0] != 1
            || self.pad_begin[0] != 0
        {
            return None;
        }
        let [_, h, w] = self.input;
        let [_, oh, ow] = self.output;
        let [_, kh, kw] = self.kernel;
        let [_, dh, dw] = self.dilation;
        let [_, sh, sw] = self.stride;
        let taps = kh.checked_mul(kw)?;
        if oh == 0 || ow == 0 || taps == 0 || taps > max_taps || sh == 0 || sw == 0 {
            return None;
        }
        Some(Flat {
            h,
            w,
            oh,
            ow,
            kh,
            kw,
            dh,
            dw,
            sh,
            sw,
            pt: usize::try_from(self.pad_begin[1]).ok()?,
            pl: usize::try_from(self.pad_begin[2]).ok()?,
            taps,
        })
    }

    /// The same window over the same memory with its last dim moved up one, when that
    /// dim is 1 everywhere (input, kernel and output, no padding): GE runs a 1-D
    /// convolution or pool as a 2-D one over `[N, C, L, 1]`, whose `[L, 1]` planes are
    /// laid out exactly as `[1, L]` ones. The row kernels then see one row of L
    /// positions instead of L rows of one, each with its own loop overhead and copy
    /// call. A stride or dilation of the trivial dim changes nothing (it has one
    /// position); the new leading dim gets 1s.
    pub fn lying_flat(self) -> Window {
        let trivial = self.input[2] == 1
            && self.kernel[2] == 1
            && self.output[2] == 1
            && self.pad_begin[2] == 0
            && self.pad_end[2] == 0;
        if !trivial || self.input[0] != 1 || self.kernel[0] != 1 || self.output[0] != 1 {
            return self;
        }
        let up = |v: [usize; 3], fill: usize| [v[0], fill, v[1]];
        let up_pad = |v: [isize; 3]| [v[0], 0, v[1]];
        Window {
            input: up(self.input, 1),
            output: up(self.output, 1),
            kernel: up(self.kernel, 1),
            stride: up(self.stride, 1),
            dilation: up(self.dilation, 1),
            pad_begin: up_pad(self.pad_begin),
            pad_end: up_pad(self.pad_end),
        }
    }

    /// The input coordinate along dim `d` that tap `t` of output coordinate `o` reads,
    /// or `None` in the padding.
    pub fn input_at(&self, d: usize, o: usize, t: usize) -> Option<usize> {
        let i = (o * self.stride[d] + t * self.dilation[d]) as isize - self.pad_begin[d];
        (0..self.input[d] as isize)
            .contains(&i)
            .then_some(i as usize)
    }

    /// For kernel offset `k` along dim `d`: the output positions `lo..hi` whose input
    /// position `o * stride + k * dilation - pad_begin` lies inside the input, and that
    /// position's offset (the input index of output `o` is `o * stride + offset`).
    /// Computing the range once lets the inner loops run without bounds tests.
    pub fn valid_range(&self, d: usize, k: usize) -> (usize, usize, isize) {
        let s = self.stride[d] as isize;
        let off = (k * self.dilation[d]) as isize - self.pad_begin[d];
        let len = self.input[d] as isize;
        let out = self.output[d] as isize;
        let lo = if off >= 0 { 0 } else { (-off + s - 1) / s };
        let hi = if len - off <= 0 {
            0
        } else {
            (len - off - 1) / s + 1
        };
        let (lo, hi) = (lo.min(out), hi.clamp(0, out));
        (lo as usize, hi.max(lo) as usize, off)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(stride: usize, pad: isize, input: usize, output: usize) -> Window {
        Window {
            input: [1, 1, input],
            output: [1, 1, output],
            kernel: [1, 1, 3],
            stride: [1, 1, stride],
            dilation: [1, 1, 1],
            pad_begin: [0, 0, pad],
            pad_end: [0, 0, pad],
        }
    }

    /// A window over `[L, 1]` planes lies flat as one over `[1, L]`; any other keeps
    /// its shape.
    #[test]
    fn a_column_window_lies_flat() {
        let column = Window {
            input: [1, 9, 1],
            output: [1, 4, 1],
            kernel: [1, 3, 1],
            stride: [1, 2, 5],
            dilation: [1, 1, 3],
            pad_begin: [0, 1, 0],
            pad_end: [0, 0, 0],
        };
        let flat = column.clone().lying_flat();
        assert_eq!(
            (flat.input, flat.output, flat.kernel),
            ([1, 1, 9], [1, 1, 4], [1, 1, 3])
        );
        assert_eq!((flat.stride, flat.dilation), ([1, 1, 2], [1, 1, 1]));
        assert_eq!((flat.pad_begin, flat.pad_end), ([0, 0, 1], [0, 0, 0]));
        let padded = Window {
            pad_end: [0, 0, 1],
            ..column
        };
        assert_eq!(padded.lying_flat().input, [1, 9, 1]);
        let wide = window(1, 1, 5, 5);
        assert_eq!(wide.lying_flat().input, [1, 1, 5]);
    }

    #[test]
    fn valid_ranges_skip_the_padding() {
        // Input 5, pad 1, stride 1, output 5: tap 0 reads o - 1, valid for o in 1..5.
        let w = window(1, 1, 5, 5);
        assert_eq!(w.valid_range(2, 0), (1, 5, -1));
        assert_eq!(w.valid_range(2, 1), (0, 5, 0));
        assert_eq!(w.valid_range(2, 2), (0, 4, 1));
        // Stride 2, input 6, pad 1, output 3: tap 0 reads 2o - 1 -> o in 1..3.
        let w = window(2, 1, 6, 3);
        assert_eq!(w.valid_range(2, 0), (1, 3, -1));
        assert_eq!(w.valid_range(2, 2), (0, 3, 1));
    }
}

/// A window over two spatial dims, as the direct float32 convolution kernels address
/// it ([`Window::flat`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flat {
    /// Input height and width.
    pub h: usize,
    pub w: usize,
    /// Output height and width.
    pub oh: usize,
    pub ow: usize,
    /// Kernel height and width.
    pub kh: usize,
    pub kw: usize,
    /// Dilations.
    pub dh: usize,
    pub dw: usize,
    /// Strides.
    pub sh: usize,
    pub sw: usize,
    /// Padding before the input's rows and columns.
    pub pt: usize,
    pub pl: usize,
    /// Kernel elements, `kh * kw`.
    pub taps: usize,
}
