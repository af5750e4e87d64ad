//! Moving elements without looking at them: the copies every data-movement op is built
//! on (Transpose, Slice, Expand, Tile, DepthToSpace as a strided [`View`]; Pad as per-axis
//! index maps).
//!
//! Elements move as fixed-width units (`[u8; 1|2|4|8]`, picked by [`by_width!`]), so one
//! monomorphized loop serves every dtype of that width, and the unit's alignment of 1
//! means any byte slice of the right length can be viewed as units. Nothing here reads a
//! value; every source index is checked against the source before the first copy, so a
//! bad view is a [`MoveError`], never a panic.

use rayon::prelude::*;

/// Outputs of fewer elements than this are copied on one thread: below it, rayon's
/// fork-join costs more than the copy.
pub const PAR_MIN: usize = 16 * 1024;

/// Square tile edge for transposing copies: 32x32 units of up to 8 bytes is 8 KiB per
/// side, which stays in L1 while both the strided and the contiguous side are walked.
const TILE: usize = 32;

/// Why a copy could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MoveError {
    #[error("elements of {0} bytes cannot be moved")]
    Width(usize),
    #[error("{got} bytes are not a whole number of {width}-byte elements")]
    Ragged { got: usize, width: usize },
    #[error("the output holds {got} elements, the view {want}")]
    Length { got: usize, want: usize },
    #[error("the view reads source elements {lo}..={hi}, the source has {len}")]
    OutOfBounds { lo: isize, hi: isize, len: usize },
}

/// Runs `$body` with `$W` bound to the unit type of `$width`-byte elements; `$else` for a
/// width no dtype has.
macro_rules! by_width {
    ($width:expr, $W:ident => $body:expr, $other:ident => $else:expr) => {
        match $width {
            1 => {
                type $W = [u8; 1];
                $body
            }
            2 => {
                type $W = [u8; 2];
                $body
            }
            4 => {
                type $W = [u8; 4];
                $body
            }
            8 => {
                type $W = [u8; 8];
                $body
            }
            $other => $else,
        }
    };
}
pub(crate) use by_width;

/// `bytes` as units of `W`.
pub fn units<W: bytemuck::Pod>(bytes: &[u8]) -> Result<&[W], MoveError> {
    bytemuck::try_cast_slice(bytes).map_err(|_| MoveError::Ragged {
        got: bytes.len(),
        width: std::mem::size_of::<W>(),
    })
}

/// `bytes` as mutable units of `W`.
pub fn units_mut<W: bytemuck::Pod>(bytes: &mut [u8]) -> Result<&mut [W], MoveError> {
    let got = bytes.len();
    bytemuck::try_cast_slice_mut(bytes).map_err(|_| MoveError::Ragged {
        got,
        width: std::mem::size_of::<W>(),
    })
}

/// Row-major strides, in elements, of a contiguous tensor of `shape`.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for k in (0..shape.len().saturating_sub(1)).rev() {
        s[k] = s[k + 1] * shape[k + 1];
    }
    s
}

/// A strided view of a source tensor: element `i` of the row-major walk over `shape`
/// is source element `offset + Σ index_k * strides_k`. A stride may be 0 (Expand,
/// Tile) or negative (Slice with a negative step).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    pub shape: Vec<usize>,
    pub strides: Vec<isize>,
    pub offset: isize,
}

impl View {
    /// A contiguous tensor of `shape`, read in order.
    pub fn contiguous(shape: &[usize]) -> Self {
        View {
            shape: shape.to_vec(),
            strides: strides(shape).into_iter().map(|s| s as isize).collect(),
            offset: 0,
        }
    }

    /// The view with its dims reordered: output dim `k` is this view's dim `perm[k]`.
    /// `perm` must be a permutation of the view's dims.
    pub fn permute(&self, perm: &[usize]) -> Self {
        View {
            shape: perm.iter().map(|&p| self.shape[p]).collect(),
            strides: perm.iter().map(|&p| self.strides[p]).collect(),
            offset: self.offset,
        }
    }

    /// Elements in the view.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The lowest and highest source index the (non-empty) view reads.
    fn span(&self) -> (isize, isize) {
        let (mut lo, mut hi) = (self.offset, self.offset);
        for (&d, &s) in self.shape.iter().zip(&self.strides) {
            let reach = (d as isize - 1) * s;
            if reach < 0 {
                lo += reach;
            } else {
                hi += reach;
            }
        }
        (lo, hi)
    }

    /// The same walk with dims of 1 dropped and neighbours that step through the source
    /// as one dim merged, so the copy's inner loop runs as long as the layout allows (a
    /// transpose of the two outer dims of a 4-D tensor becomes one contiguous run per row).
    fn coalesce(&self) -> View {
        let mut shape: Vec<usize> = Vec::with_capacity(self.shape.len());
        let mut strides: Vec<isize> = Vec::with_capacity(self.shape.len());
        for (&d, &s) in self.shape.iter().zip(&self.strides) {
            if d == 1 {
                continue;
            }
            match (shape.last_mut(), strides.last_mut()) {
                (Some(pd), Some(ps)) if *ps == s * d as isize => {
                    *pd *= d;
                    *ps = s;
                }
                _ => {
                    shape.push(d);
                    strides.push(s);
                }
            }
        }
        View {
            shape,
            strides,
            offset: self.offset,
        }
    }
}

/// Copies the elements `view` selects from `src` into `dst`, in row-major order of the
/// view: the one copy behind Transpose, Slice, Expand, Tile and DepthToSpace.
pub fn copy_view(width: usize, src: &[u8], view: &View, dst: &mut [u8]) -> Result<(), MoveError> {
    by_width!(width, W => copy_view_units::<W>(units(src)?, view, units_mut(dst)?),
        w => Err(MoveError::Width(w)))
}

fn copy_view_units<W: Copy + Send + Sync>(
    src: &[W],
    view: &View,
    dst: &mut [W],
) -> Result<(), MoveError> {
    let n = view.len();
    if dst.len() != n {
        return Err(MoveError::Length {
            got: dst.len(),
            want: n,
        });
    }
    if view.is_empty() {
        return Ok(());
    }
    let (lo, hi) = view.span();
    if lo < 0 || hi >= src.len() as isize {
        return Err(MoveError::OutOfBounds {
            lo,
            hi,
            len: src.len(),
        });
    }
    let v = view.coalesce();
    if v.shape.is_empty() {
        dst[0] = src[v.offset as usize];
        return Ok(());
    }
    let row: usize = v.shape[1..].iter().product();
    if n < 2 * PAR_MIN || v.shape[0] < 2 {
        copy_walk(src, &v, dst);
        return Ok(());
    }
    // Each chunk is a range of the outermost dim: a view of its own with a shorter first
    // dim, so the tiled transpose still applies inside a chunk.
    let rows_per_chunk = PAR_MIN.div_ceil(row);
    dst.par_chunks_mut(rows_per_chunk * row)
        .enumerate()
        .for_each(|(c, chunk)| {
            let mut sub = v.clone();
            sub.shape[0] = chunk.len() / row;
            sub.offset += (c * rows_per_chunk) as isize * v.strides[0];
            copy_walk(src, &sub, chunk);
        });
    Ok(())
}

/// One outer dim of a walk: its size, and the step it takes in the source and the output.
#[derive(Clone, Copy)]
struct Axis {
    size: usize,
    src: isize,
    dst: usize,
}

/// Calls `f(src_offset, dst_offset)` for every index of `axes` (row-major), starting at
/// `src0` in the source.
fn walk(axes: &[Axis], src0: isize, mut f: impl FnMut(isize, usize)) {
    if axes.iter().any(|a| a.size == 0) {
        return;
    }
    let mut idx = vec![0usize; axes.len()];
    let (mut s, mut d) = (src0, 0usize);
    loop {
        f(s, d);
        let mut k = axes.len();
        loop {
            if k == 0 {
                return;
            }
            k -= 1;
            idx[k] += 1;
            s += axes[k].src;
            d += axes[k].dst;
            if idx[k] < axes[k].size {
                break;
            }
            s -= axes[k].src * axes[k].size as isize;
            d -= axes[k].dst * axes[k].size;
            idx[k] = 0;
        }
    }
}

/// `dst` (`[cols, rows]`) = the transpose of `src` (`[rows, cols]`), both row-major
/// float32: 8 x 8 blocks at a time where the CPU has AVX2, the edges element by element.
/// For the kernels that turn a small operand around on every call (a convolution's
/// image to channels-last and its product back); it allocates nothing.
///
/// # Panics
/// If either slice holds fewer than `rows * cols` floats.
pub(crate) fn transpose_f32(src: &[f32], rows: usize, cols: usize, dst: &mut [f32]) {
    let (src, dst) = (&src[..rows * cols], &mut dst[..rows * cols]);
    // SAFETY: output row a < cols, unit b < rows, is `dst[a * rows + b]` and reads
    // `src[a + b * cols]`: both inside the slices just cut to rows * cols, which are
    // distinct.
    unsafe {
        transpose_tiles(
            src,
            (0, cols as isize),
            dst,
            (0, rows),
            (cols, rows),
            block_transpose::<f32>(),
        );
    }
}

/// A transposing copy: `rows` output rows of `len` units, row `a` at `d + a * row_step`,
/// its unit `b` source unit `s + a + b * step`. In square tiles of [`TILE`] (element by
/// element, either the reads or the writes would miss the cache on every step), each
/// tile's whole 8 x 8 blocks through `blocks` where given, its edges unit by unit.
///
/// # Safety
/// Every source unit named lies in `src` and every output unit in `dst`, the two
/// distinct; `blocks` is `block_transpose::<W>()`.
unsafe fn transpose_tiles<W: Copy>(
    src: &[W],
    (s, step): (isize, isize),
    dst: &mut [W],
    (d, row_step): (usize, usize),
    (rows, len): (usize, usize),
    blocks: Option<BlockFn>,
) {
    // Output rows `a` of columns `b` of one tile, element by element.
    let units =
        |dst: &mut [W], a_range: std::ops::Range<usize>, b_range: std::ops::Range<usize>| {
            for a in a_range {
                let (sa, da) = (s + a as isize, d + a * row_step);
                for b in b_range.clone() {
                    dst[da + b] = src[(sa + b as isize * step) as usize];
                }
            }
        };
    for a0 in (0..rows).step_by(TILE) {
        for b0 in (0..len).step_by(TILE) {
            let (a1, b1) = ((a0 + TILE).min(rows), (b0 + TILE).min(len));
            let Some(block) = blocks else {
                units(dst, a0..a1, b0..b1);
                continue;
            };
            // The tile's whole 8 x 8 blocks in registers, the edges unit by unit.
            let (a8, b8) = (a0 + (a1 - a0) / 8 * 8, b0 + (b1 - b0) / 8 * 8);
            for a in (a0..a8).step_by(8) {
                for b in (b0..b8).step_by(8) {
                    // SAFETY: the block's source units (a + i, b + r) for i, r in 0..8
                    // are at `s + a + i + (b + r) * step`, inside `src`, and its output
                    // units at `d + (a + i) * row_step + b + r`, inside `dst` (this
                    // function's contract); `blocks` is `Some` only for 4-byte units on
                    // a CPU with AVX2.
                    unsafe {
                        let from = src.as_ptr().offset(s + a as isize + b as isize * step);
                        let to = dst.as_mut_ptr().add(d + a * row_step + b);
                        block(from.cast(), step, to.cast(), row_step);
                    }
                }
            }
            units(dst, a0..a1, b8..b1);
            units(dst, a8..a1, b0..b8);
        }
    }
}

/// Transposes the 8 x 8 block of 4-byte units whose rows are `src_step` units apart
/// (each row 8 contiguous units) into 8 rows `dst_step` apart.
type BlockFn = unsafe fn(*const f32, isize, *mut f32, usize);

/// The 8 x 8 block transpose for units of `W` on this CPU: 4-byte units (float32, the
/// `K` of an attention's `Q Kᵀ`) where the CPU has AVX2; `None` otherwise. Element by
/// element, a transposing copy took 0.7 ns a unit (an encoder's `[4, 128, 32]` key
/// transposed: 11 us); in registers, eight loads, 24 shuffles and eight stores move 64.
/// The units are moved as bits: no arithmetic touches them.
fn block_transpose<W>() -> Option<BlockFn> {
    #[cfg(target_arch = "x86_64")]
    if std::mem::size_of::<W>() == 4 && crate::ops::simd::Isa::detect().is_some() {
        return Some(x86::transpose8);
    }
    None
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// See [`super::BlockFn`].
    ///
    /// # Safety
    /// The CPU has AVX2; the 8 rows of 8 floats at `src + r * src_step` are readable, the
    /// 8 rows of 8 at `dst + i * dst_step` writable, and the two do not overlap.
    pub(super) unsafe fn transpose8(
        src: *const f32,
        src_step: isize,
        dst: *mut f32,
        dst_step: usize,
    ) {
        // SAFETY: this function's contract: AVX2 is present, and every load and store
        // below addresses one of the rows it names.
        unsafe { transpose8_avx(src, src_step, dst, dst_step) }
    }

    /// # Safety
    /// As [`transpose8`].
    #[target_feature(enable = "avx2")]
    unsafe fn transpose8_avx(src: *const f32, src_step: isize, dst: *mut f32, dst_step: usize) {
        // SAFETY: AVX2 is this CPU's and the rows are the caller's (the contract).
        unsafe {
            let r = |i: isize| _mm256_loadu_ps(src.offset(i * src_step));
            let (r0, r1, r2, r3) = (r(0), r(1), r(2), r(3));
            let (r4, r5, r6, r7) = (r(4), r(5), r(6), r(7));
            // Pairs of rows interleaved, then pairs of pairs, then the 128-bit halves.
            let t0 = _mm256_unpacklo_ps(r0, r1);
            let t1 = _mm256_unpackhi_ps(r0, r1);
            let t2 = _mm256_unpacklo_ps(r2, r3);
            let t3 = _mm256_unpackhi_ps(r2, r3);
            let t4 = _mm256_unpacklo_ps(r4, r5);
            let t5 = _mm256_unpackhi_ps(r4, r5);
            let t6 = _mm256_unpacklo_ps(r6, r7);
            let t7 = _mm256_unpackhi_ps(r6, r7);
            let s0 = _mm256_shuffle_ps::<0x44>(t0, t2);
            let s1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
            let s2 = _mm256_shuffle_ps::<0x44>(t1, t3);
            let s3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
            let s4 = _mm256_shuffle_ps::<0x44>(t4, t6);
            let s5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
            let s6 = _mm256_shuffle_ps::<0x44>(t5, t7);
            let s7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
            let out = [
                _mm256_permute2f128_ps::<0x20>(s0, s4),
                _mm256_permute2f128_ps::<0x20>(s1, s5),
                _mm256_permute2f128_ps::<0x20>(s2, s6),
                _mm256_permute2f128_ps::<0x20>(s3, s7),
                _mm256_permute2f128_ps::<0x31>(s0, s4),
                _mm256_permute2f128_ps::<0x31>(s1, s5),
                _mm256_permute2f128_ps::<0x31>(s2, s6),
                _mm256_permute2f128_ps::<0x31>(s3, s7),
            ];
            for (i, v) in out.into_iter().enumerate() {
                _mm256_storeu_ps(dst.add(i * dst_step), v);
            }
        }
    }
}

/// Copies a coalesced, non-empty, bounds-checked view on this thread.
fn copy_walk<W: Copy>(src: &[W], v: &View, dst: &mut [W]) {
    let r = v.shape.len();
    let out_strides = strides(&v.shape);
    let (len, step) = (v.shape[r - 1], v.strides[r - 1]);
    // A transposing view (the inner output dim strides the source while an outer dim
    // walks it contiguously) is copied in square tiles: element by element, either the
    // reads or the writes would miss the cache on every step.
    let tiled = step != 0 && step != 1 && len >= TILE / 4;
    if let Some(j) = (0..r - 1).find(|&k| tiled && v.strides[k] == 1 && v.shape[k] >= TILE / 4) {
        let axes: Vec<Axis> = (0..r - 1)
            .filter(|&k| k != j)
            .map(|k| Axis {
                size: v.shape[k],
                src: v.strides[k],
                dst: out_strides[k],
            })
            .collect();
        let (rows, row_step) = (v.shape[j], out_strides[j]);
        let blocks = block_transpose::<W>();
        walk(&axes, v.offset, |s, d| {
            // SAFETY: the units this walk step names are units of the view, inside `src`
            // (the caller checked the view's span), and output units below `dst.len()`;
            // `src` and `dst` are distinct slices.
            unsafe { transpose_tiles(src, (s, step), dst, (d, row_step), (rows, len), blocks) }
        });
        return;
    }
    let axes: Vec<Axis> = (0..r - 1)
        .map(|k| Axis {
            size: v.shape[k],
            src: v.strides[k],
            dst: out_strides[k],
        })
        .collect();
    walk(&axes, v.offset, |s, d| {
        let out = &mut dst[d..d + len];
        match step {
            1 => out.copy_from_slice(&src[s as usize..s as usize + len]),
            0 => out.fill(src[s as usize]),
            _ => {
                for (i, o) in out.iter_mut().enumerate() {
                    *o = src[(s + i as isize * step) as usize];
                }
            }
        }
    });
}

/// Copies `src` (a contiguous tensor of `src_shape`) into `dst`, where output position
/// `i` along axis `k` reads source index `maps[k][i]`, or writes `fill` where any axis
/// maps to `None`: Pad in every mode, as one walk.
pub fn copy_mapped(
    width: usize,
    src: &[u8],
    src_shape: &[usize],
    maps: &[Vec<Option<usize>>],
    fill: &[u8],
    dst: &mut [u8],
) -> Result<(), MoveError> {
    by_width!(width, W => {
        let fill = units::<W>(fill)?.first().copied().unwrap_or_else(<W as bytemuck::Zeroable>::zeroed);
        copy_mapped_units::<W>(units(src)?, src_shape, maps, fill, units_mut(dst)?)
    }, w => Err(MoveError::Width(w)))
}

/// A stretch of an output row: copied from the source row, or filled.
#[derive(Clone, Copy)]
enum Run {
    Copy { dst: usize, src: usize, len: usize },
    Fill { dst: usize, len: usize },
}

fn copy_mapped_units<W: Copy + Send + Sync>(
    src: &[W],
    src_shape: &[usize],
    maps: &[Vec<Option<usize>>],
    fill: W,
    dst: &mut [W],
) -> Result<(), MoveError> {
    let out_shape: Vec<usize> = maps.iter().map(Vec::len).collect();
    let n: usize = out_shape.iter().product();
    if dst.len() != n || maps.len() != src_shape.len() {
        return Err(MoveError::Length {
            got: dst.len(),
            want: n,
        });
    }
    let in_len: usize = src_shape.iter().product();
    if src.len() < in_len {
        return Err(MoveError::OutOfBounds {
            lo: 0,
            hi: in_len as isize - 1,
            len: src.len(),
        });
    }
    for (m, &d) in maps.iter().zip(src_shape) {
        if let Some(&i) = m.iter().flatten().find(|&&i| i >= d) {
            return Err(MoveError::OutOfBounds {
                lo: 0,
                hi: i as isize,
                len: d,
            });
        }
    }
    if n == 0 {
        return Ok(());
    }
    let Some(inner) = maps.last() else {
        dst[0] = src[0];
        return Ok(());
    };
    // The inner map is the same for every row: turn it into runs once, so each row is a
    // few copy_from_slice and fill calls.
    let mut runs: Vec<Run> = Vec::new();
    for (i, &m) in inner.iter().enumerate() {
        match (runs.last_mut(), m) {
            (Some(Run::Copy { src: s, len, .. }), Some(j)) if *s + *len == j => *len += 1,
            (Some(Run::Fill { len, .. }), None) => *len += 1,
            (_, Some(j)) => runs.push(Run::Copy {
                dst: i,
                src: j,
                len: 1,
            }),
            (_, None) => runs.push(Run::Fill { dst: i, len: 1 }),
        }
    }
    let row = inner.len();
    let r = maps.len();
    let src_strides = strides(src_shape);
    let copy_rows = |first_row: usize, rows: &mut [W]| {
        for (k, out) in rows.chunks_exact_mut(row).enumerate() {
            // Which source row this output row reads, if every outer axis maps in.
            let mut rest = first_row + k;
            let mut base = Some(0usize);
            for a in (0..r - 1).rev() {
                let i = rest % out_shape[a];
                rest /= out_shape[a];
                base = base.zip(maps[a][i]).map(|(b, j)| b + j * src_strides[a]);
            }
            let Some(base) = base else {
                out.fill(fill);
                continue;
            };
            for run in &runs {
                match *run {
                    Run::Copy { dst, src: s, len } => {
                        out[dst..dst + len].copy_from_slice(&src[base + s..base + s + len])
                    }
                    Run::Fill { dst, len } => out[dst..dst + len].fill(fill),
                }
            }
        }
    };
    let rows_per_chunk = PAR_MIN.div_ceil(row);
    if n < 2 * PAR_MIN {
        copy_rows(0, dst);
    } else {
        dst.par_chunks_mut(rows_per_chunk * row)
            .enumerate()
            .for_each(|(c, chunk)| copy_rows(c * rows_per_chunk, chunk));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view_of(src: &[u32], v: &View) -> Result<Vec<u32>, MoveError> {
        let mut out = vec![0u32; v.len()];
        copy_view(
            4,
            bytemuck::cast_slice(src),
            v,
            bytemuck::cast_slice_mut(&mut out),
        )?;
        Ok(out)
    }

    #[test]
    fn views_transpose_reverse_and_broadcast() {
        let x: Vec<u32> = (0..6).collect();
        let t = View::contiguous(&[2, 3]).permute(&[1, 0]);
        assert_eq!(view_of(&x, &t).unwrap(), [0, 3, 1, 4, 2, 5]);
        let rev = View {
            shape: vec![3],
            strides: vec![-2],
            offset: 5,
        };
        assert_eq!(view_of(&x, &rev).unwrap(), [5, 3, 1]);
        let bcast = View {
            shape: vec![2, 3],
            strides: vec![0, 1],
            offset: 0,
        };
        assert_eq!(view_of(&x[..3], &bcast).unwrap(), [0, 1, 2, 0, 1, 2]);
        let past = View {
            shape: vec![3],
            strides: vec![3],
            offset: 0,
        };
        assert!(matches!(
            view_of(&x, &past),
            Err(MoveError::OutOfBounds { hi: 6, .. })
        ));
    }

    #[test]
    fn large_transposes_match_the_definition() {
        // Big enough for tiles and for several parallel chunks.
        let (n, c, h, w) = (2usize, 33, 40, 37);
        let x: Vec<u32> = (0..(n * c * h * w) as u32).collect();
        let nhwc = View::contiguous(&[n, c, h, w]).permute(&[0, 2, 3, 1]);
        let got = view_of(&x, &nhwc).unwrap();
        let mut k = 0;
        for a in 0..n {
            for y in 0..h {
                for z in 0..w {
                    for ch in 0..c {
                        assert_eq!(got[k] as usize, ((a * c + ch) * h + y) * w + z);
                        k += 1;
                    }
                }
            }
        }
    }

    /// A float32 matrix turned around by `transpose_f32`: whole blocks, edges of every
    /// width, a single unit, into an output one longer whose last unit must stay poisoned.
    #[test]
    fn float_transposes_match_the_definition() {
        for (rows, cols) in [(1, 1), (8, 8), (3, 17), (16, 9), (49, 512), (13, 24)] {
            let src: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
            let mut dst = vec![f32::NAN; rows * cols + 1];
            super::transpose_f32(&src, rows, cols, &mut dst);
            for i in 0..rows {
                for j in 0..cols {
                    assert_eq!(
                        dst[j * rows + i],
                        src[i * cols + j],
                        "{rows}x{cols} ({i}, {j})"
                    );
                }
            }
            assert!(
                dst[rows * cols].is_nan(),
                "{rows}x{cols}: wrote past the end"
            );
        }
    }

    /// Transposes of the last two axes (an attention's key), of 4-byte units through the
    /// 8 x 8 register blocks and their edges, every unit moved as bits (NaN payloads
    /// among them), into an output poisoned beforehand.
    #[test]
    fn block_transposes_move_every_unit_as_bits() {
        for (b, r, c) in [(4usize, 128, 32), (3, 37, 45), (1, 8, 8), (2, 9, 70)] {
            let x: Vec<u32> = (0..(b * r * c) as u32)
                .map(|i| {
                    if i % 7 == 3 {
                        0x7FC0_0000 | i
                    } else {
                        i.wrapping_mul(2_654_435_761)
                    }
                })
                .collect();
            let v = View::contiguous(&[b, r, c]).permute(&[0, 2, 1]);
            let mut got = vec![0xDEAD_BEEFu32; v.len()];
            copy_view(
                4,
                bytemuck::cast_slice(&x),
                &v,
                bytemuck::cast_slice_mut(&mut got),
            )
            .unwrap();
            for k in 0..b {
                for j in 0..c {
                    for i in 0..r {
                        let want = x[(k * r + i) * c + j];
                        assert_eq!(
                            got[(k * c + j) * r + i],
                            want,
                            "[{b}, {r}, {c}] ({k}, {j}, {i})"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn mapped_copies_fill_and_reflect() {
        let x: Vec<u8> = vec![1, 2, 3, 4];
        let maps = vec![
            vec![None, Some(0), Some(1)],
            vec![Some(1), Some(0), Some(1)],
        ];
        let mut out = vec![0u8; 9];
        copy_mapped(1, &x, &[2, 2], &maps, &[9], &mut out).unwrap();
        assert_eq!(out, [9, 9, 9, 2, 1, 2, 4, 3, 4]);
        let bad = vec![vec![Some(2)], vec![Some(0)]];
        assert!(copy_mapped(1, &x, &[2, 2], &bad, &[0], &mut out[..1]).is_err());
    }
}
