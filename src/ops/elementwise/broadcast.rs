//! The broadcasting engine every binary, ternary and variadic elementwise compute function runs on:
//! NumPy broadcasting of up to a few inputs into one output, as a walk over runs of
//! output elements.
//!
//! A [`Layout`] maps the output's flat index space to each input's. Building it drops the
//! output's size-1 dims and merges neighbouring dims that every input steps through
//! contiguously (or not at all), so equal shapes collapse to one dim, `[n, c] + [c]` to
//! two, and the innermost dim left is a *run*: along it each input either advances by one
//! element or stands still (stride 1 or 0). Compute functions get runs, never single elements, so
//! their inner loops are plain slice loops the compiler vectorizes; the multi-index walk
//! only happens once per run. [`par_runs`] splits the output into chunks for rayon above
//! [`PAR_MIN`] elements; a chunk may begin and end mid-run, so the equal-shape case (one
//! run) still spreads over every thread.
//!
//! [`zip`], [`zip3`], [`expand`] and [`accumulate`] are the drivers compute functions call: each
//! builds the layout, checks every input holds the elements its shape says, and runs a
//! per-element function over the runs. [`par_map`] is the unary map without broadcasting.

use super::vmath::{self, Fun};
use rayon::prelude::*;
use smallvec::{SmallVec, smallvec};

/// Output elements below which a compute function stays on the calling thread: smaller work does
/// not repay rayon's hand-off. Also the smallest chunk a parallel run gets.
pub const PAR_MIN: usize = 1 << 14;

/// Where input `k`'s shape does not broadcast into the output's (or its data is shorter
/// than its shape).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub input: usize,
}

/// Ranks up to this keep a layout on the stack: a compute function call on a small tensor is then
/// free of heap allocation, which a steady-state execution relies on.
const MAX_INLINE_RANK: usize = 8;

/// How `N` inputs map into one output shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout<const N: usize> {
    /// The output's dims after dropping 1s and merging; never empty (a scalar is `[1]`).
    dims: SmallVec<[usize; MAX_INLINE_RANK]>,
    /// Per dim, each input's element stride along it (0 where it broadcasts).
    strides: SmallVec<[[usize; N]; MAX_INLINE_RANK]>,
    /// Elements in the output.
    len: usize,
}

/// One run of output elements: `len` elements from flat output index `out`, where input
/// `k` reads from element `at[k]` stepping by `step[k]` (0 or 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run<const N: usize> {
    pub out: usize,
    pub len: usize,
    pub at: [usize; N],
    pub step: [usize; N],
}

impl<const N: usize> Layout<N> {
    /// The layout of `inputs` broadcast into `out`. Each input must broadcast to `out`
    /// exactly (rank at most `out`'s, each dim equal to the output's or 1).
    pub fn new(out: &[usize], inputs: [&[usize]; N]) -> Result<Self, Mismatch> {
        let rank = out.len();
        // Contiguous strides of every input in the output's coordinates, 0 where the
        // input has a 1 (or no dim at all) against a longer output dim.
        let mut full: SmallVec<[[usize; N]; MAX_INLINE_RANK]> = smallvec![[0; N]; rank];
        for (k, shape) in inputs.iter().enumerate() {
            if shape.len() > rank {
                return Err(Mismatch { input: k });
            }
            let off = rank - shape.len();
            let mut stride = 1usize;
            for i in (0..shape.len()).rev() {
                let (d, o) = (shape[i], out[off + i]);
                if d == o {
                    full[off + i][k] = if d == 1 { 0 } else { stride };
                } else if d != 1 {
                    return Err(Mismatch { input: k });
                }
                stride *= d;
            }
        }
        let len = out.iter().product();
        // Merge from the innermost dim outwards: dim i folds into the run below it when
        // every input's stride along i is the stride below times the dims merged there.
        let mut dims: SmallVec<[usize; MAX_INLINE_RANK]> = SmallVec::new();
        let mut strides: SmallVec<[[usize; N]; MAX_INLINE_RANK]> = SmallVec::new();
        for i in (0..rank).rev() {
            let (d, s) = (out[i], full[i]);
            if d == 1 {
                continue;
            }
            if let (Some(last_d), Some(last_s)) = (dims.last_mut(), strides.last())
                && (0..N).all(|k| s[k] == last_s[k] * *last_d)
            {
                *last_d *= d;
                continue;
            }
            dims.push(d);
            strides.push(s);
        }
        if dims.is_empty() {
            dims.push(1);
            strides.push([0; N]);
        }
        dims.reverse();
        strides.reverse();
        Ok(Layout { dims, strides, len })
    }

    /// Elements in the output.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Calls `f` for every run covering output elements `start..end`, in order.
    pub fn for_each_run(&self, start: usize, end: usize, mut f: impl FnMut(Run<N>)) {
        if start >= end {
            return;
        }
        let r = self.dims.len();
        let inner = self.dims[r - 1];
        let step = self.strides[r - 1];
        // Unravel `start` once; afterwards the multi-index advances as an odometer.
        let mut idx: SmallVec<[usize; MAX_INLINE_RANK]> = smallvec![0; r];
        let mut rem = start;
        for i in (0..r).rev() {
            idx[i] = rem % self.dims[i];
            rem /= self.dims[i];
        }
        let mut at = [0usize; N];
        for (&x, s) in idx.iter().zip(&self.strides) {
            for (a, &s) in at.iter_mut().zip(s) {
                *a += x * s;
            }
        }
        let mut out = start;
        while out < end {
            let len = (inner - idx[r - 1]).min(end - out);
            f(Run { out, len, at, step });
            out += len;
            if out >= end {
                break;
            }
            // Move to the start of the next run: back to the start of this inner row,
            // then carry through the outer dims.
            for (a, &s) in at.iter_mut().zip(&step) {
                *a -= idx[r - 1] * s;
            }
            idx[r - 1] = 0;
            for i in (0..r - 1).rev() {
                idx[i] += 1;
                for (a, &s) in at.iter_mut().zip(&self.strides[i]) {
                    *a += s;
                }
                if idx[i] < self.dims[i] {
                    break;
                }
                for (a, &s) in at.iter_mut().zip(&self.strides[i]) {
                    *a -= self.dims[i] * s;
                }
                idx[i] = 0;
            }
        }
    }
}

/// Runs `f` over every run of `out`, in parallel chunks when the output is large. `f`
/// gets the run and the part of `out` it covers.
pub fn par_runs<O: Send, const N: usize>(
    layout: &Layout<N>,
    out: &mut [O],
    f: impl Fn(&Run<N>, &mut [O]) + Sync,
) {
    let len = out.len().min(layout.len());
    let out = &mut out[..len];
    if len < 2 * PAR_MIN {
        layout.for_each_run(0, len, |run| f(&run, &mut out[run.out..run.out + run.len]));
        return;
    }
    // A few chunks per thread so an uneven thread finishes with the others.
    let chunk = len.div_ceil(4 * rayon::current_num_threads()).max(PAR_MIN);
    out.par_chunks_mut(chunk).enumerate().for_each(|(c, part)| {
        let start = c * chunk;
        layout.for_each_run(start, start + part.len(), |run| {
            let from = run.out - start;
            f(&run, &mut part[from..from + run.len]);
        });
    });
}

/// `out[i] = f(x[i])`: the unary map every elementwise op without broadcasting runs on,
/// in parallel chunks when large. Both are plain slices zipped, so the loop vectorizes
/// where `f` allows.
pub fn par_map<A: Copy + Sync, O: Send>(x: &[A], out: &mut [O], f: impl Fn(A) -> O + Sync) {
    par_chunks(x, out, |x, out| map_slice(x, out, &f));
}

crate::ops::simd::per_isa! {
    /// `out[i] = f(x[i])` over one chunk, in a function of its own compiled for the widest
    /// vectors this CPU has.
    ///
    /// Why it is shaped so: inlined into rayon's fold, the loop reloaded `f`'s captures
    /// after every store (the compiler could not tell `out` from them) and so ran scalar,
    /// with a branch per element for a select such as LeakyRelu's or Clip's: 5.5 ns an
    /// element on random signs, 30-40x ONNX Runtime. Called here, `out` is a `noalias`
    /// parameter, and AVX2 or AVX-512 gives 8 or 16 lanes where the baseline target has
    /// SSE2's 4. Callers pass `move` closures: a value captured by reference and read
    /// under a condition (LeakyRelu's slope) becomes a masked gather per vector. No FMA is
    /// enabled, so the results are those of the plain loop, bit for bit, on every
    /// instruction set.
    pub(crate) fn map_slice<A, O, F>(x: &[A], out: &mut [O], f: &F)
        where [A: Copy, F: Fn(A) -> O] => map_slice_any
}

#[inline(always)]
fn map_slice_any<A: Copy, O, F: Fn(A) -> O>(x: &[A], out: &mut [O], f: &F) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = f(v);
    }
}

/// `map` over matching chunks of `x` and `out`: the whole slices on this thread when
/// small, else in parallel chunks of at least [`PAR_MIN`] elements, about four per
/// thread. The split [`par_map`] and [`par_map_half`] share.
fn par_chunks<A: Sync, O: Send>(x: &[A], out: &mut [O], map: impl Fn(&[A], &mut [O]) + Sync) {
    if out.len() < 2 * PAR_MIN {
        map(x, out);
    } else {
        let chunk = out
            .len()
            .div_ceil(4 * rayon::current_num_threads())
            .max(PAR_MIN);
        out.par_chunks_mut(chunk)
            .zip(x.par_chunks(chunk))
            .for_each(|(o, x)| map(x, o));
    }
}

/// Elements of a half-precision block widened on the stack at a time: 1 KiB of f32,
/// well inside L1 beside the block's input and output.
const HALF_BLOCK: usize = 256;

/// `out[i] = f(x[i])` computed in f32 for a 16-bit float type, in the chunks
/// [`par_map`] would take: each block of [`HALF_BLOCK`] elements is widened to f32 on the
/// stack in one slice conversion (F16C's `vcvtph2ps` for float16), mapped there, where
/// `f` vectorizes as any f32 loop, and rounded back in one conversion. The scalar
/// conversions of a per-element map cost more than most formulas; rounding is the same
/// (round to nearest, ties to even), so the result is bit for bit that of the
/// per-element map.
pub fn par_map_half<H: HalfSlice>(x: &[H], out: &mut [H], f: impl Fn(f32) -> f32 + Sync) {
    par_half_blocks(x, out, |wide, mapped| map_slice(wide, mapped, &f));
}

/// float32 to a 16-bit float type in [`par_map`]'s chunks, each converted as a whole slice
/// (F16C's `vcvtps2ph` for float16 where the CPU has it): Cast's fast pair, rounding as
/// the element-by-element conversion does.
pub fn par_narrow<H: HalfSlice>(x: &[f32], out: &mut [H]) {
    par_chunks(x, out, |x, out| H::narrow(x, out));
}

/// A 16-bit float type to float32, as [`par_narrow`] the other way.
pub fn par_widen<H: HalfSlice>(x: &[H], out: &mut [f32]) {
    par_chunks(x, out, |x, out| H::widen(x, out));
}

/// The block walk [`par_map_half`] and [`par_map_half_fun`] share: each block of
/// [`HALF_BLOCK`] elements widened to f32 on the stack, `map(widened, mapped)`, and the
/// mapped block rounded back.
fn par_half_blocks<H: HalfSlice>(x: &[H], out: &mut [H], map: impl Fn(&[f32], &mut [f32]) + Sync) {
    par_chunks(x, out, |x, out| {
        let mut wide = [0f32; HALF_BLOCK];
        let mut mapped = [0f32; HALF_BLOCK];
        for (o, x) in out.chunks_mut(HALF_BLOCK).zip(x.chunks(HALF_BLOCK)) {
            let (w, m) = (&mut wide[..o.len()], &mut mapped[..o.len()]);
            H::widen(x, w);
            map(w, m);
            H::narrow(m, o);
        }
    });
}

/// `out[i] = fun(x[i])` on float32 with the vector math, in [`par_map`]'s chunks.
pub fn par_map_fun(fun: Fun, x: &[f32], out: &mut [f32]) -> bool {
    par_chunks(x, out, |x, out| vmath::map(fun, x, out));
    true
}

/// [`par_map_fun`] for a 16-bit float type, through float32 blocks as
/// [`par_map_half`].
pub fn par_map_half_fun<H: HalfSlice>(fun: Fun, x: &[H], out: &mut [H]) -> bool {
    par_half_blocks(x, out, |wide, mapped| vmath::map(fun, wide, mapped));
    true
}

/// A 16-bit float type whose slices convert to and from f32 as a whole.
pub trait HalfSlice: Copy + Send + Sync {
    fn widen(x: &[Self], out: &mut [f32]);
    fn narrow(x: &[f32], out: &mut [Self]);
}

impl HalfSlice for half::f16 {
    #[inline]
    fn widen(x: &[Self], out: &mut [f32]) {
        half::slice::HalfFloatSliceExt::convert_to_f32_slice(x, out);
    }
    #[inline]
    fn narrow(x: &[f32], out: &mut [Self]) {
        half::slice::HalfFloatSliceExt::convert_from_f32_slice(out, x);
    }
}

impl HalfSlice for half::bf16 {
    #[inline]
    fn widen(x: &[Self], out: &mut [f32]) {
        half::slice::HalfFloatSliceExt::convert_to_f32_slice(x, out);
    }
    #[inline]
    fn narrow(x: &[f32], out: &mut [Self]) {
        half::slice::HalfFloatSliceExt::convert_from_f32_slice(out, x);
    }
}

fn check_len<T>(input: usize, data: &[T], shape: &[usize]) -> Result<(), Mismatch> {
    if data.len() < shape.iter().product() {
        return Err(Mismatch { input });
    }
    Ok(())
}

/// Whether `a` and `b` are the same dims but for leading 1s (the same elements in the same
/// order): concrete dims here, and the dims of metas when a compute function is specialized.
pub(super) fn same_dims<D: Copy + PartialEq + From<u8>>(a: &[D], b: &[D]) -> bool {
    let one = D::from(1);
    let strip = |s: &[D]| s.iter().position(|&d| d != one).map_or(0, |k| s.len() - k);
    let (na, nb) = (strip(a), strip(b));
    // Compared element by element: slice equality calls `memcmp`, which costs more than
    // these few dims.
    na == nb && a[a.len() - na..].iter().eq(&b[b.len() - nb..])
}

/// One run of a binary compute function: `o[t] = f(a[t * sa], b[t * sb])` for `step = [sa, sb]`,
/// each stride 0 or 1. One loop per stride pair, each a plain zip over slices with any
/// broadcast operand hoisted, so the compiler vectorizes all four. Shared by [`zip`] and
/// the compute functions specialized at load (`binary::specialize_arithmetic`), which must write
/// what `zip` writes bit for bit.
#[inline(always)]
pub(super) fn zip_run<A: Copy, B: Copy, O>(
    o: &mut [O],
    a: &[A],
    b: &[B],
    step: [usize; 2],
    f: &impl Fn(A, B) -> O,
) {
    let n = o.len();
    match step {
        [1, 1] => {
            for ((o, &x), &y) in o.iter_mut().zip(&a[..n]).zip(&b[..n]) {
                *o = f(x, y);
            }
        }
        [0, 1] => {
            let x = a[0];
            for (o, &y) in o.iter_mut().zip(&b[..n]) {
                *o = f(x, y);
            }
        }
        [1, 0] => {
            let y = b[0];
            for (o, &x) in o.iter_mut().zip(&a[..n]) {
                *o = f(x, y);
            }
        }
        _ => {
            let (x, y) = (a[0], b[0]);
            o.fill_with(|| f(x, y));
        }
    }
}

/// `out = f(a, b)` with `a` and `b` broadcast into `out_shape`.
pub fn zip<A: Copy + Sync, B: Copy + Sync, O: Send>(
    (a, a_shape): (&[A], &[usize]),
    (b, b_shape): (&[B], &[usize]),
    (out, out_shape): (&mut [O], &[usize]),
    f: impl Fn(A, B) -> O + Sync,
) -> Result<(), Mismatch> {
    check_len(0, a, a_shape)?;
    check_len(1, b, b_shape)?;
    let run = |o: &mut [O], i: usize, j: usize, step: [usize; 2]| {
        zip_run(o, &a[i..], &b[j..], step, &f);
    };
    // Small outputs whose operands are whole (the output's shape) or one element: one run
    // without building a layout, which costs more than such a compute function's work.
    let len: usize = out_shape.iter().product();
    if len < 2 * PAR_MIN && len <= out.len() {
        let whole_a = same_dims(a_shape, out_shape);
        let whole_b = same_dims(b_shape, out_shape);
        let one = |s: &[usize]| s.iter().product::<usize>() == 1;
        if (whole_a || one(a_shape)) && (whole_b || one(b_shape)) {
            if len > 0 {
                run(&mut out[..len], 0, 0, [whole_a as usize, whole_b as usize]);
            }
            return Ok(());
        }
        // One operand whole, the other a row the output repeats (a bias over the last
        // axes, `[.., N] + [N]`, after every MatMul of a transformer's Linear layers):
        // a run per row without a layout, whose per-run walk cost more than the adds
        // (6.3 us for `[1, 128, 128] + [128]` against 3.6 us for two whole operands).
        let row = |s: &[usize]| {
            let dims = &s[s.iter().position(|&d| d != 1).unwrap_or(s.len())..];
            let fits =
                dims.len() < out_shape.len() && out_shape[out_shape.len() - dims.len()..] == *dims;
            let n: usize = dims.iter().product();
            (fits && n > 1).then_some(n)
        };
        match (whole_a, whole_b) {
            (true, false) if let Some(n) = row(b_shape) => {
                for (i, o) in out[..len].chunks_mut(n).enumerate() {
                    run(o, i * n, 0, [1, 1]);
                }
                return Ok(());
            }
            (false, true) if let Some(n) = row(a_shape) => {
                for (i, o) in out[..len].chunks_mut(n).enumerate() {
                    run(o, 0, i * n, [1, 1]);
                }
                return Ok(());
            }
            _ => {}
        }
    }
    let layout = Layout::new(out_shape, [a_shape, b_shape])?;
    par_runs(&layout, out, |r, o| run(o, r.at[0], r.at[1], r.step));
    Ok(())
}

/// `out = f(a, b, c)` with all three broadcast into `out_shape` (Where).
pub fn zip3<A: Copy + Sync, B: Copy + Sync, C: Copy + Sync, O: Send>(
    (a, a_shape): (&[A], &[usize]),
    (b, b_shape): (&[B], &[usize]),
    (c, c_shape): (&[C], &[usize]),
    (out, out_shape): (&mut [O], &[usize]),
    f: impl Fn(A, B, C) -> O + Sync,
) -> Result<(), Mismatch> {
    check_len(0, a, a_shape)?;
    check_len(1, b, b_shape)?;
    check_len(2, c, c_shape)?;
    let layout = Layout::new(out_shape, [a_shape, b_shape, c_shape])?;
    par_runs(&layout, out, |r, o| {
        let ([i, j, k], [si, sj, sk]) = (r.at, r.step);
        for (t, o) in o.iter_mut().enumerate() {
            *o = f(a[i + t * si], b[j + t * sj], c[k + t * sk]);
        }
    });
    Ok(())
}

/// `out = f(x)` with `x` broadcast into `out_shape`.
pub fn expand<A: Copy + Sync, O: Send>(
    (x, x_shape): (&[A], &[usize]),
    (out, out_shape): (&mut [O], &[usize]),
    f: impl Fn(A) -> O + Sync,
) -> Result<(), Mismatch> {
    check_len(0, x, x_shape)?;
    let layout = Layout::new(out_shape, [x_shape])?;
    par_runs(&layout, out, |r, o| {
        let (i, n) = (r.at[0], r.len);
        if r.step[0] == 1 {
            for (o, &v) in o.iter_mut().zip(&x[i..i + n]) {
                *o = f(v);
            }
        } else {
            let v = x[i];
            for o in o.iter_mut() {
                *o = f(v);
            }
        }
    });
    Ok(())
}

/// `acc = f(acc, x)` with `x` broadcast into `acc`'s shape: one step of a variadic fold.
pub fn accumulate<A: Copy + Sync, O: Copy + Send>(
    (acc, acc_shape): (&mut [O], &[usize]),
    (x, x_shape): (&[A], &[usize]),
    f: impl Fn(O, A) -> O + Sync,
) -> Result<(), Mismatch> {
    check_len(1, x, x_shape)?;
    let layout = Layout::new(acc_shape, [x_shape])?;
    par_runs(&layout, acc, |r, o| {
        let (i, n) = (r.at[0], r.len);
        if r.step[0] == 1 {
            for (o, &v) in o.iter_mut().zip(&x[i..i + n]) {
                *o = f(*o, v);
            }
        } else {
            let v = x[i];
            for o in o.iter_mut() {
                *o = f(*o, v);
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values every map must keep exact: NaN, zeros of both signs, infinities,
    /// subnormals, values either side of the selects' thresholds.
    fn specials(n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| match i % 13 {
                0 => f32::NAN,
                1 => -0.0,
                2 => 0.0,
                3 => f32::INFINITY,
                4 => f32::NEG_INFINITY,
                5 => f32::from_bits(1),
                6 => 6.0,
                7 => -f32::from_bits(0x0070_0000),
                k => ((i * 31 + k) as f32 * 0.37).sin() * 8.0,
            })
            .collect()
    }

    /// The vector maps give the plain loop's bits: selects on a captured value (Clip's
    /// optional bounds, LeakyRelu's slope, read only under a condition), lengths that
    /// leave every remainder of a vector, and the half-precision blocks.
    #[test]
    fn maps_give_the_plain_loops_bits() {
        let alpha = 0.1f32;
        let (lo, hi) = (Some(0.0f32), None::<f32>);
        let leaky = move |v: f32| if v < 0.0 { alpha * v } else { v };
        let clip = move |v: f32| crate::ops::elementwise::binary::clamp(v, lo, hi);
        let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        for n in [0, 1, 15, 16, 17, 63, 1000, 2 * PAR_MIN + 3] {
            let x = specials(n);
            for f in [&leaky as &(dyn Fn(f32) -> f32 + Sync), &clip] {
                let want: Vec<f32> = x.iter().map(|&v| f(v)).collect();
                let mut got = vec![f32::NAN; n];
                par_map(&x, &mut got, f);
                assert_eq!(bits(&got), bits(&want), "n {n}");
            }
            let h: Vec<half::f16> = x.iter().map(|&v| half::f16::from_f32(v)).collect();
            let want: Vec<u16> = h
                .iter()
                .map(|&v| half::f16::from_f32(leaky(v.to_f32())).to_bits())
                .collect();
            let mut got = vec![half::f16::NAN; n];
            par_map_half(&h, &mut got, leaky);
            assert_eq!(got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want);
        }
    }

    fn runs<const N: usize>(l: &Layout<N>, start: usize, end: usize) -> Vec<Run<N>> {
        let mut v = Vec::new();
        l.for_each_run(start, end, |r| v.push(r));
        v
    }

    /// Every output element's input offsets, the slow way, for comparison.
    fn naive(out: &[usize], input: &[usize]) -> Vec<usize> {
        let n: usize = out.iter().product();
        let off = out.len() - input.len();
        (0..n)
            .map(|mut flat| {
                let mut idx = vec![0; out.len()];
                for i in (0..out.len()).rev() {
                    idx[i] = flat % out[i];
                    flat /= out[i];
                }
                let mut at = 0;
                for (i, &d) in input.iter().enumerate() {
                    at = at * d + if d == 1 { 0 } else { idx[off + i] };
                }
                at
            })
            .collect()
    }

    fn expand<const N: usize>(l: &Layout<N>, k: usize) -> Vec<usize> {
        let mut v = Vec::new();
        l.for_each_run(0, l.len(), |r| {
            v.extend((0..r.len).map(|j| r.at[k] + j * r.step[k]));
        });
        v
    }

    /// A row the output repeats, on either side of a non-commutative op, with leading
    /// ones or a block of rows: each element takes its own position in the row.
    #[test]
    fn rows_repeat_along_the_leading_dims() {
        let a: Vec<f32> = (0..24).map(|v| v as f32).collect();
        let rows: Vec<f32> = (0..12).map(|v| 100.0 * v as f32).collect();
        let shape = [2, 3, 4];
        let mut out = vec![f32::NAN; 24];
        for b_shape in [&[4][..], &[1, 4], &[1, 1, 4], &[3, 4]] {
            let n: usize = b_shape.iter().product();
            let b = &rows[..n];
            zip((&a, &shape), (b, b_shape), (&mut out, &shape), |x, y| x - y).unwrap();
            let want: Vec<f32> = (0..24).map(|i| a[i] - b[i % n]).collect();
            assert_eq!(out, want, "{b_shape:?}");
            zip((b, b_shape), (&a, &shape), (&mut out, &shape), |x, y| x - y).unwrap();
            let want: Vec<f32> = (0..24).map(|i| b[i % n] - a[i]).collect();
            assert_eq!(out, want, "{b_shape:?} first");
        }
        // A column does not repeat as a row: the layout broadcasts it.
        zip(
            (&a, &shape),
            (&rows[..3], &[3, 1]),
            (&mut out, &shape),
            |x, y| x - y,
        )
        .unwrap();
        let want: Vec<f32> = (0..24).map(|i| a[i] - rows[i / 4 % 3]).collect();
        assert_eq!(out, want);
    }

    #[test]
    fn equal_shapes_are_one_run() {
        let l = Layout::new(&[2, 3, 4], [&[2, 3, 4], &[2, 3, 4]]).unwrap();
        assert_eq!(
            runs(&l, 0, 24),
            [Run {
                out: 0,
                len: 24,
                at: [0, 0],
                step: [1, 1]
            }]
        );
        // A chunk starting mid-way starts mid-run.
        assert_eq!(runs(&l, 10, 13)[0].at, [10, 10]);
    }

    #[test]
    fn scalars_and_rank_differences() {
        let l = Layout::new(&[2, 3], [&[2, 3], &[]]).unwrap();
        assert_eq!(runs(&l, 0, 6).len(), 1);
        assert_eq!(runs(&l, 0, 6)[0].step, [1, 0]);
        let l = Layout::new(&[], [&[], &[1]]);
        assert!(l.is_err(), "an input of higher rank than the output");
        let l = Layout::new(&[], [&[], &[]]).unwrap();
        assert_eq!(runs(&l, 0, 1)[0].len, 1);
    }

    #[test]
    fn size_one_dims_broadcast_and_merge() {
        for (out, a, b) in [
            (&[2, 3, 4][..], &[3, 1][..], &[2, 1, 4][..]),
            (&[4, 5], &[4, 1], &[1, 5]),
            (&[2, 1, 3], &[1, 1, 3], &[2, 1, 1]),
            (&[3, 2, 2], &[3, 2, 2], &[2]),
            (&[1, 1], &[1], &[1, 1]),
        ] {
            let l = Layout::new(out, [a, b]).unwrap();
            assert_eq!(expand(&l, 0), naive(out, a), "{out:?} {a:?}");
            assert_eq!(expand(&l, 1), naive(out, b), "{out:?} {b:?}");
            // Any split into chunks gives the same walk.
            let n = l.len();
            let mut pieces = Vec::new();
            for (s, e) in [(0, 5), (5, 7), (7, n)] {
                l.for_each_run(s.min(n), e.min(n), |r| {
                    pieces.extend((0..r.len).map(|j| r.at[1] + j * r.step[1]))
                });
            }
            assert_eq!(pieces, naive(out, b));
        }
        // [3, 2, 2] against [2]: the trailing dims stay separate (b repeats every 2).
        let l = Layout::new(&[3, 2, 2], [&[3, 2, 2], &[2]]).unwrap();
        assert_eq!(l.dims.as_slice(), [6, 2]);
    }

    #[test]
    fn mismatches_name_the_input() {
        assert_eq!(
            Layout::new(&[2, 3], [&[2, 3], &[2]]),
            Err(Mismatch { input: 1 })
        );
        assert_eq!(Layout::new(&[2, 3], [&[4, 3]]), Err(Mismatch { input: 0 }));
    }

    #[test]
    fn empty_outputs_have_no_runs() {
        let l = Layout::new(&[0, 3], [&[0, 3], &[1, 3]]).unwrap();
        assert!(l.is_empty());
        assert!(runs(&l, 0, 0).is_empty());
        let mut out: Vec<u8> = Vec::new();
        par_runs(&l, &mut out, |_, _| panic!("no runs"));
    }

    #[test]
    fn parallel_chunks_cover_the_output_once() {
        let n = 5 * PAR_MIN + 3;
        let l = Layout::new(&[n], [&[n]]).unwrap();
        let mut out = vec![0usize; n];
        par_runs(&l, &mut out, |r, o| {
            for (j, x) in o.iter_mut().enumerate() {
                *x += r.at[0] + j + 1;
            }
        });
        assert!(out.iter().enumerate().all(|(i, &x)| x == i + 1));
    }

    #[test]
    fn zip_equals_the_naive_broadcast_on_the_shortcut_shapes_and_others() {
        // Whole operands (leading 1s or not), one-element operands, and shapes that take
        // the layout.
        let cases: &[(&[usize], &[usize], &[usize])] = &[
            (&[1, 16], &[16], &[1, 16]),
            (&[16], &[1, 1, 16], &[1, 1, 16]),
            (&[2, 3], &[1], &[2, 3]),
            (&[], &[2, 3], &[2, 3]),
            (&[1, 1], &[], &[1, 1]),
            (&[2, 3], &[3], &[2, 3]),
            (&[2, 1], &[1, 3], &[2, 3]),
            (&[0, 3], &[3], &[0, 3]),
        ];
        for &(sa, sb, so) in cases {
            let na: usize = sa.iter().product();
            let nb: usize = sb.iter().product();
            let a: Vec<f32> = (0..na).map(|i| i as f32 + 1.0).collect();
            let b: Vec<f32> = (0..nb).map(|i| 100.0 * (i as f32 + 1.0)).collect();
            let mut out = vec![0f32; so.iter().product()];
            zip((&a, sa), (&b, sb), (&mut out, so), |x, y| x + y).unwrap();
            let want: Vec<f32> = naive(so, sa)
                .into_iter()
                .zip(naive(so, sb))
                .map(|(i, j)| a[i] + b[j])
                .collect();
            assert_eq!(out, want, "{sa:?} + {sb:?} -> {so:?}");
        }
    }
}
