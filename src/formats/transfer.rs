//! The transfers between formats that GE's `base/formats/format_transfers/` implements,
//! and the 5-D ones its TBE kernels define: which pairs exist ([`Transfer::new`]), the
//! destination shape a source shape gives ([`Transfer::dst_shape`]), and the bytes
//! ([`Transfer::run`]).
//!
//! Every layout is described once, as a nest of loops over the plain tensor's logical
//! axes with a stride on the plain side and one on the blocked side ([`strided::Nest`]);
//! the same nest runs one way or the other. Padding is zero: a transfer into a blocked
//! format zeroes its destination before the copy (the NC1HWC0 hot path writes its padding
//! itself). Elements are moved as bytes, so every element type of one size shares a copy.

use super::error::FormatError;
use super::format::{Format, StorageFormat};
use super::nc1hwc0::{self, Dims};
use super::strided::{self, Nest};
use crate::ops::DType;

/// N0 (Ni): the rows of a fractal, 16 on every Ascend core.
pub const NI: usize = 16;

/// C0 as GE chooses it for an element type (`GetCubeSizeByDataType`): 32 for one-byte
/// types (a cube row holds 32 bytes), 16 for every wider type, float32 and int64 included.
pub fn c0_for(dtype: DType) -> usize {
    if dtype.size() == 1 { 32 } else { 16 }
}

/// The blocked layouts a transfer may have on one side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Transpose,
    Nc1hwc0,
    FractalZ,
    FractalZC04,
    C1hwncoc0,
    FractalNz,
    FractalZz,
    Ndc1hwc0,
    FractalZ3d,
}

/// A transfer between two formats for one element type: what GE's `TransFormat` takes,
/// checked once, then run on any number of tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transfer {
    /// The source format.
    pub src: StorageFormat,
    /// The destination format.
    pub dst: StorageFormat,
    /// The element type (only its size matters to the bytes; some transfers refuse types).
    pub dtype: DType,
    /// C0: the source's C0 code, else the destination's, else [`c0_for`] the type
    /// (FRACTAL_Z_C04 always takes the type's).
    pub c0: usize,
    /// FRACTAL_Z's groups: the fractal side's sub-format, 1 when it is 0.
    pub groups: usize,
    family: Family,
    /// From the plain side to the blocked one (for a transpose: always, src is "plain").
    to_blocked: bool,
}

/// The plain formats in 4-D transposes.
const FOUR_D: [Format; 4] = [Format::Nchw, Format::Nhwc, Format::Hwcn, Format::Chwn];

impl Transfer {
    /// The transfer from `src` to `dst` for `dtype`, if GE has it.
    pub fn new(src: StorageFormat, dst: StorageFormat, dtype: DType) -> Result<Self, FormatError> {
        use Format::*;
        let unsupported = || FormatError::Unsupported {
            src: src.to_string(),
            dst: dst.to_string(),
        };
        let family_of = |f: Format| match f {
            Nc1hwc0 => Some(Family::Nc1hwc0),
            FractalZ => Some(Family::FractalZ),
            FractalZC04 => Some(Family::FractalZC04),
            C1hwncoc0 => Some(Family::C1hwncoc0),
            FractalNz => Some(Family::FractalNz),
            FractalZz => Some(Family::FractalZz),
            Ndc1hwc0 => Some(Family::Ndc1hwc0),
            FractalZ3d => Some(Family::FractalZ3d),
            _ => None,
        };
        let (family, to_blocked, plain, blocked) =
            if FOUR_D.contains(&src.primary) && FOUR_D.contains(&dst.primary) {
                if src.primary == dst.primary {
                    return Err(unsupported());
                }
                (Family::Transpose, true, src.primary, dst)
            } else if let Some(f) = family_of(dst.primary) {
                (f, true, src.primary, dst)
            } else if let Some(f) = family_of(src.primary) {
                (f, false, dst.primary, src)
            } else {
                return Err(unsupported());
            };
        let plains: &[Format] = match (family, to_blocked) {
            (Family::Transpose, _) => &FOUR_D,
            (Family::Nc1hwc0, _) => &[Nchw, Nhwc],
            (Family::FractalZ, _) => &[Nchw, Nhwc, Hwcn],
            (Family::FractalZC04, true) => &[Nchw, Hwcn],
            (Family::FractalZC04, false) | (Family::C1hwncoc0, _) => &[Hwcn],
            (Family::FractalNz | Family::FractalZz, _) => &[Nd, Nchw, Nhwc],
            (Family::Ndc1hwc0, _) => &[Ncdhw, Ndhwc],
            (Family::FractalZ3d, _) => &[Dhwcn, Ncdhw, Ndhwc],
        };
        if !plains.contains(&plain) {
            return Err(unsupported());
        }
        if family == Family::C1hwncoc0 && !matches!(dtype, DType::F32 | DType::F16 | DType::I8) {
            return Err(FormatError::DType {
                src: src.to_string(),
                dst: dst.to_string(),
                dtype,
            });
        }
        let c0 = if family == Family::FractalZC04 {
            c0_for(dtype)
        } else {
            src.c0().or(dst.c0()).unwrap_or_else(|| c0_for(dtype))
        };
        let groups = match family {
            Family::FractalZ | Family::FractalZC04 => usize::from(blocked.sub_format.max(1)),
            _ => 1,
        };
        let t = Transfer {
            src,
            dst,
            dtype,
            c0,
            groups,
            family,
            to_blocked,
        };
        if groups > 1 && (family == Family::FractalZC04 || plain == Nhwc) {
            return Err(t.shape_error(format!(
                "{groups} groups are not supported from or to {plain} (GE's transfer ignores them)"
            )));
        }
        Ok(t)
    }

    /// The same transfer with FRACTAL_Z's group count set (TransData's `groups`
    /// attribute, when the format carries no sub-format).
    pub fn with_groups(self, groups: usize) -> Result<Self, FormatError> {
        let mut blocked = if self.to_blocked { self.dst } else { self.src };
        blocked.sub_format = u16::try_from(groups).map_err(|_| {
            self.shape_error(format!("{groups} groups do not fit GE's 16-bit sub-format"))
        })?;
        if self.to_blocked {
            Transfer::new(self.src, blocked, self.dtype)
        } else {
            Transfer::new(blocked, self.dst, self.dtype)
        }
    }

    fn shape_error(&self, msg: String) -> FormatError {
        FormatError::Shape {
            src: self.src.to_string(),
            dst: self.dst.to_string(),
            msg,
        }
    }

    /// The format on the plain side (NCHW, ND, HWCN, ...).
    fn plain(&self) -> Format {
        if self.to_blocked {
            self.src.primary
        } else {
            self.dst.primary
        }
    }

    /// The destination shape of `src_shape`, for transfers whose destination follows from
    /// the source (into a blocked format, and the transposes). Out of a blocked format the
    /// plain shape is lost to padding: [`FormatError::Undetermined`].
    pub fn dst_shape(&self, src_shape: &[usize]) -> Result<Vec<usize>, FormatError> {
        if !self.to_blocked {
            return Err(FormatError::Undetermined {
                src: self.src.to_string(),
                dst: self.dst.to_string(),
                src_shape: src_shape.to_vec(),
            });
        }
        self.blocked_shape(src_shape)
    }

    /// Checks that `dst_shape` is the destination of `src_shape`.
    pub fn check_shapes(
        &self,
        src_shape: &[usize],
        dst_shape: &[usize],
    ) -> Result<(), FormatError> {
        let (plain, blocked) = if self.to_blocked {
            (src_shape, dst_shape)
        } else {
            (dst_shape, src_shape)
        };
        let want = self.blocked_shape(plain)?;
        if want != blocked {
            return Err(self.shape_error(format!(
                "shapes {src_shape:?} and {dst_shape:?} do not match: {plain:?} gives {want:?}"
            )));
        }
        Ok(())
    }

    /// The blocked side's shape for the plain side's shape (for a transpose: the
    /// destination's shape).
    fn blocked_shape(&self, plain: &[usize]) -> Result<Vec<usize>, FormatError> {
        let c0 = self.c0;
        let axes = self.axes(plain)?;
        let (n, c, d, h, w) = (axes.n.0, axes.c.0, axes.d.0, axes.h, axes.w);
        let (c1, n1) = (c.div_ceil(c0), n.div_ceil(NI));
        let shape = match self.family {
            Family::Transpose => self
                .dst
                .primary
                .name()
                .chars()
                .map(|a| match a {
                    'N' => n,
                    'C' => c,
                    'H' => h,
                    _ => w,
                })
                .collect(),
            Family::Nc1hwc0 => vec![n, c1, h, w, c0],
            Family::FractalZ if self.groups > 1 => {
                let g = self.grouping(n, c)?;
                vec![g.g_dim * g.c1 * h * w, g.n1, NI, c0]
            }
            Family::FractalZ => vec![c1 * h * w, n1, NI, c0],
            Family::FractalZC04 => vec![(4 * h * w).div_ceil(c0), n1, NI, c0],
            Family::C1hwncoc0 => vec![c1, h, w, n, c0, c0],
            Family::FractalNz | Family::FractalZz => {
                let (batch, rows, cols) = self.matrix(plain)?;
                let mut s = batch.to_vec();
                if self.family == Family::FractalNz {
                    s.extend([cols.div_ceil(c0), rows.div_ceil(NI), NI, c0]);
                } else {
                    s.extend([rows.div_ceil(c0), cols.div_ceil(c0), c0, c0]);
                }
                s
            }
            Family::Ndc1hwc0 => vec![n, d, c1, h, w, c0],
            Family::FractalZ3d => vec![d * c1 * h * w, n1, NI, c0],
        };
        Ok(shape)
    }

    /// The batch dims, rows and columns of a FRACTAL_NZ/ZZ transfer's plain side: a 1-D
    /// tensor is one row.
    fn matrix<'s>(&self, plain: &'s [usize]) -> Result<(&'s [usize], usize, usize), FormatError> {
        match plain {
            [] => Err(self.shape_error("a scalar has no matrix to tile".into())),
            [cols] => Ok((&[], 1, *cols)),
            [batch @ .., rows, cols] => Ok((batch, *rows, *cols)),
        }
    }

    /// The logical axes of the plain side: each axis's extent and stride (in elements).
    fn axes(&self, plain: &[usize]) -> Result<Axes, FormatError> {
        let format = self.plain();
        if matches!(self.family, Family::FractalNz | Family::FractalZz) {
            if format != Format::Nd && plain.len() != 4 {
                return Err(self.shape_error(format!("{format} needs 4 dims, got {plain:?}")));
            }
            let (batch, rows, cols) = self.matrix(plain)?;
            let b = batch.iter().product();
            return Ok(Axes {
                n: (b, rows * cols),
                c: (1, 0),
                d: (1, 0),
                hw: (rows * cols, 1),
                h: rows,
                w: cols,
            });
        }
        let letters = format.name();
        if plain.len() != letters.len() {
            return Err(self.shape_error(format!(
                "{format} needs {} dims, got {plain:?}",
                letters.len()
            )));
        }
        let mut stride = 1;
        let mut strides = [0usize; 5];
        for (i, &dim) in plain.iter().enumerate().rev() {
            strides[i] = stride;
            stride = stride.checked_mul(dim).ok_or_else(|| {
                self.shape_error(format!(
                    "shape {plain:?} has more elements than memory holds"
                ))
            })?;
        }
        let axis = |a: char| letters.find(a).map_or((1, 0), |i| (plain[i], strides[i]));
        let (h, w) = (axis('H'), axis('W'));
        if self.family == Family::FractalZC04 && axis('C').0 > 4 {
            return Err(self.shape_error(format!(
                "FRACTAL_Z_C04 holds at most 4 channels, {format} {plain:?} has {}",
                axis('C').0
            )));
        }
        Ok(Axes {
            n: axis('N'),
            c: axis('C'),
            d: axis('D'),
            // H comes right before W in every plain format, so H*W is one axis.
            hw: (h.0 * w.0, w.1),
            h: h.0,
            w: w.0,
        })
    }

    /// FRACTAL_Z's grouping of `n` output and `c` input channels (GE's e-multiplier rule).
    fn grouping(&self, n: usize, c: usize) -> Result<Grouping, FormatError> {
        let groups = self.groups;
        if c == 0 || n == 0 || !n.is_multiple_of(groups) {
            return Err(self.shape_error(format!(
                "{groups} groups need a positive N divisible by them and a positive C, got N={n}, C={c}"
            )));
        }
        let (cin, cout, c0) = (c, n / groups, self.c0);
        let e = lcm(lcm(cin, c0) / cin, lcm(cout, NI) / cout).min(groups);
        Ok(Grouping {
            cin,
            cout,
            e,
            c1: (e * cin).div_ceil(c0),
            g_dim: groups.div_ceil(e),
            n1: (e * cout).div_ceil(NI),
        })
    }

    /// Converts `src` (of `src_shape`) into `dst` (of `dst_shape`). Every byte of `dst` is
    /// written: elements, and zero in the padding.
    pub fn run(
        &self,
        src_shape: &[usize],
        src: &[u8],
        dst_shape: &[usize],
        dst: &mut [u8],
    ) -> Result<(), FormatError> {
        self.check_shapes(src_shape, dst_shape)?;
        let size = self.dtype.size();
        let bytes = |shape: &[usize]| shape.iter().product::<usize>() * size;
        if src.len() != bytes(src_shape) || dst.len() != bytes(dst_shape) {
            return Err(self.shape_error(format!(
                "buffers of {} and {} bytes for shapes {src_shape:?} and {dst_shape:?} of {}",
                src.len(),
                dst.len(),
                self.dtype
            )));
        }
        match size {
            1 => self.run_sized::<1>(src_shape, dst_shape, src, dst),
            2 => self.run_sized::<2>(src_shape, dst_shape, src, dst),
            4 => self.run_sized::<4>(src_shape, dst_shape, src, dst),
            _ => self.run_sized::<8>(src_shape, dst_shape, src, dst),
        }
    }

    fn run_sized<const N: usize>(
        &self,
        src_shape: &[usize],
        dst_shape: &[usize],
        src: &[u8],
        dst: &mut [u8],
    ) -> Result<(), FormatError> {
        let plain = if self.to_blocked {
            src_shape
        } else {
            dst_shape
        };
        let a = self.axes(plain)?;
        if self.family == Family::Nc1hwc0 {
            let dims = Dims {
                c: a.c.0,
                hw: a.hw.0,
                c0: self.c0,
            };
            let channels_last = self.plain() == Format::Nhwc;
            if self.to_blocked {
                nc1hwc0::to_nc1hwc0::<N>(dims, channels_last, src, dst);
            } else {
                nc1hwc0::from_nc1hwc0::<N>(dims, channels_last, src, dst);
            }
            return Ok(());
        }
        if self.to_blocked && self.family != Family::Transpose {
            dst.fill(0);
        }
        if self.family == Family::FractalZ && self.groups > 1 {
            let g = self.grouping(a.n.0, a.c.0)?;
            self.run_grouped::<N>(&a, &g, src, dst);
            return Ok(());
        }
        let nest = self.nest(&a);
        strided::run::<N>(&nest, self.to_blocked, (0, 0), src, dst);
        Ok(())
    }

    /// The loops of this transfer's layout, outermost first.
    fn nest(&self, a: &Axes) -> Nest {
        let c0 = self.c0;
        let mut nest = Nest::default();
        match self.family {
            Family::Transpose => {
                let mut stride = 1;
                let mut loops = Vec::new();
                for letter in self.dst.primary.name().chars().rev() {
                    let (len, s) = match letter {
                        'N' => a.n,
                        'C' => a.c,
                        'H' => (a.h, a.hw.1 * a.w),
                        _ => (a.w, a.hw.1),
                    };
                    loops.push((len, s, stride));
                    stride *= len;
                }
                for (len, s, d) in loops.into_iter().rev() {
                    nest.push(len, s, d);
                }
            }
            Family::Nc1hwc0 | Family::Ndc1hwc0 => {
                let (c1, hw) = (a.c.0.div_ceil(c0), a.hw.0);
                nest.push(a.n.0, a.n.1, a.d.0 * c1 * hw * c0);
                nest.push(a.d.0, a.d.1, c1 * hw * c0);
                let outer = nest.push(c1, a.c.1 * c0, hw * c0);
                nest.push(hw, a.hw.1, c0);
                let inner = nest.push(c0, a.c.1, 1);
                nest.split(outer, inner, a.c.0);
            }
            Family::FractalZ | Family::FractalZ3d => {
                let (c1, hw, n1) = (a.c.0.div_ceil(c0), a.hw.0, a.n.0.div_ceil(NI));
                let fractals = n1 * NI * c0;
                nest.push(a.d.0, a.d.1, c1 * hw * fractals);
                let c_out = nest.push(c1, a.c.1 * c0, hw * fractals);
                nest.push(hw, a.hw.1, fractals);
                let n_out = nest.push(n1, a.n.1 * NI, NI * c0);
                let n_in = nest.push(NI, a.n.1, c0);
                let c_in = nest.push(c0, a.c.1, 1);
                nest.split(c_out, c_in, a.c.0);
                nest.split(n_out, n_in, a.n.0);
            }
            Family::FractalZC04 => {
                // A fractal row holds C0/4 positions of 4 channels each.
                let q = c0 / 4;
                let n1 = a.n.0.div_ceil(NI);
                let hw_out = nest.push(a.hw.0.div_ceil(q), a.hw.1 * q, n1 * NI * c0);
                let n_out = nest.push(n1, a.n.1 * NI, NI * c0);
                let n_in = nest.push(NI, a.n.1, c0);
                let hw_in = nest.push(q, a.hw.1, 4);
                nest.push(a.c.0, a.c.1, 1);
                nest.split(hw_out, hw_in, a.hw.0);
                nest.split(n_out, n_in, a.n.0);
            }
            Family::C1hwncoc0 => {
                let (c1, hw, n) = (a.c.0.div_ceil(c0), a.hw.0, a.n.0);
                let outer = nest.push(c1, a.c.1 * c0, hw * n * c0 * c0);
                nest.push(hw, a.hw.1, n * c0 * c0);
                nest.push(n, a.n.1, c0 * c0);
                // Only the diagonal Co == C0 holds elements.
                let inner = nest.push(c0, a.c.1, c0 + 1);
                nest.split(outer, inner, a.c.0);
            }
            Family::FractalNz => {
                let (rows, cols) = (a.h, a.w);
                let (w1, h1) = (cols.div_ceil(c0), rows.div_ceil(NI));
                nest.push(a.n.0, a.n.1, w1 * h1 * NI * c0);
                let w_out = nest.push(w1, c0, h1 * NI * c0);
                let h_out = nest.push(h1, NI * cols, NI * c0);
                let h_in = nest.push(NI, cols, c0);
                let w_in = nest.push(c0, 1, 1);
                nest.split(h_out, h_in, rows);
                nest.split(w_out, w_in, cols);
            }
            Family::FractalZz => {
                let (rows, cols) = (a.h, a.w);
                let (h1, w1) = (rows.div_ceil(c0), cols.div_ceil(c0));
                nest.push(a.n.0, a.n.1, h1 * w1 * c0 * c0);
                let h_out = nest.push(h1, c0 * cols, w1 * c0 * c0);
                let w_out = nest.push(w1, c0, c0 * c0);
                let h_in = nest.push(c0, cols, c0);
                let w_in = nest.push(c0, 1, 1);
                nest.split(h_out, h_in, rows);
                nest.split(w_out, w_in, cols);
            }
        }
        nest
    }

    /// Grouped FRACTAL_Z: group `g` goes to block `g / e`, at input channel offset
    /// `(g % e) * Cin` and output channel offset `(g % e) * Cout` within it.
    fn run_grouped<const N: usize>(&self, a: &Axes, g: &Grouping, src: &[u8], dst: &mut [u8]) {
        let (c0, hw) = (self.c0, a.hw.0);
        let row = g.n1 * NI * c0;
        let mut nest = Nest::default();
        nest.push(hw, a.hw.1, row);
        nest.push(g.cout, a.n.1, c0);
        for group in 0..self.groups {
            let (block, e_val) = (group / g.e, group % g.e);
            for c in 0..g.cin {
                let ci = e_val * g.cin + c;
                let plain = group * g.cout * a.n.1 + c * a.c.1;
                let blocked =
                    block * g.c1 * hw * row + (ci / c0) * hw * row + e_val * g.cout * c0 + ci % c0;
                strided::run::<N>(&nest, self.to_blocked, (plain, blocked), src, dst);
            }
        }
    }
}

/// The logical axes of a plain tensor, each `(extent, stride)`; an axis the format lacks
/// has extent 1. For FRACTAL_NZ/ZZ, `n` is the flattened batch and `h`, `w` the matrix.
#[derive(Debug, Clone, Copy)]
struct Axes {
    n: (usize, usize),
    c: (usize, usize),
    d: (usize, usize),
    hw: (usize, usize),
    h: usize,
    w: usize,
}

/// FRACTAL_Z's grouping: per group `cin` inputs and `cout` outputs, `e` groups per
/// fractal block, `g_dim` blocks of `c1` C0-blocks and `n1` fractal columns.
#[derive(Debug, Clone, Copy)]
struct Grouping {
    cin: usize,
    cout: usize,
    e: usize,
    c1: usize,
    g_dim: usize,
    n1: usize,
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

fn lcm(a: usize, b: usize) -> usize {
    a / gcd(a, b) * b
}

/// The destination shape of a transfer from `src` to `dst` of a `dtype` tensor of
/// `shape`: see [`Transfer::dst_shape`].
pub fn storage_shape(
    src: StorageFormat,
    dst: StorageFormat,
    dtype: DType,
    shape: &[usize],
) -> Result<Vec<usize>, FormatError> {
    Transfer::new(src, dst, dtype)?.dst_shape(shape)
}

/// Converts the bytes of a `dtype` tensor of `src_shape` in format `src` into `dst_bytes`,
/// a tensor of `dst_shape` in format `dst`: see [`Transfer::run`].
pub fn transfer(
    (src, src_shape, src_bytes): (StorageFormat, &[usize], &[u8]),
    (dst, dst_shape, dst_bytes): (StorageFormat, &[usize], &mut [u8]),
    dtype: DType,
) -> Result<(), FormatError> {
    Transfer::new(src, dst, dtype)?.run(src_shape, src_bytes, dst_shape, dst_bytes)
}
