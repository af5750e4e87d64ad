//! Golden tests for every transfer: random bytes through [`Transfer::run`] compared with a
//! reference written here from each layout's definition (a naive loop over the blocked
//! tensor's positions with the index formula spelled out, sharing nothing with the
//! kernels), round trips, hand-computed cases and property tests over shapes.

use proptest::prelude::*;

use super::*;
use crate::ops::DType;

/// One element type per element size, and the three C1HWNCoC0 takes.
const DTYPES: [DType; 4] = [DType::I8, DType::F16, DType::F32, DType::I64];

fn f(name: &str) -> StorageFormat {
    StorageFormat::parse(name).unwrap()
}

/// Deterministic bytes, never zero (so a missed copy cannot pass as padding).
fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 255) as u8 + 1
        })
        .collect()
}

/// Row-major index of `at` in `dims`.
fn flat(dims: &[usize], at: &[usize]) -> usize {
    dims.iter().zip(at).fold(0, |i, (&d, &a)| i * d + a)
}

/// Index of a logical (n, c, d, h, w) element in a plain tensor of `format` and `shape`.
fn plain_index(
    format: &str,
    shape: &[usize],
    n: usize,
    c: usize,
    d: usize,
    h: usize,
    w: usize,
) -> usize {
    let at: Vec<usize> = format
        .chars()
        .map(|a| match a {
            'N' => n,
            'C' => c,
            'D' => d,
            'H' => h,
            _ => w,
        })
        .collect();
    flat(shape, &at)
}

/// The extent of axis `a` of a plain `format`, 1 when absent.
fn dim(format: &str, shape: &[usize], a: char) -> usize {
    format.find(a).map_or(1, |i| shape[i])
}

/// For each position of the blocked tensor (row-major over `blocked`), the plain index of
/// the element stored there, `None` for padding. Written from the format definitions.
fn reference_map(
    layout: &str,
    plain: &str,
    shape: &[usize],
    blocked: &[usize],
    c0: usize,
    groups: usize,
) -> Vec<Option<usize>> {
    let total: usize = blocked.iter().product();
    let mut map = vec![None; total];
    // ND has no named axes (its 'D' is not depth); FRACTAL_NZ/ZZ read the shape itself.
    let axis = |a| {
        if plain == "ND" {
            1
        } else {
            dim(plain, shape, a)
        }
    };
    let (n, c, h, w) = (axis('N'), axis('C'), axis('H'), axis('W'));
    let pi = |nn, cc, dd, hh, ww| plain_index(plain, shape, nn, cc, dd, hh, ww);
    match layout {
        // [N, C1, H, W, C0]: c = c1*C0 + c0.
        "NC1HWC0" => {
            for (ni, c1, hi, wi, k) in iter5(blocked) {
                let cc = c1 * c0 + k;
                if cc < c {
                    map[flat(blocked, &[ni, c1, hi, wi, k])] = Some(pi(ni, cc, 0, hi, wi));
                }
            }
        }
        // [N, D, C1, H, W, C0].
        "NDC1HWC0" => {
            for at in iter_all(blocked) {
                let [ni, di, c1, hi, wi, k] = at[..] else {
                    unreachable!()
                };
                let cc = c1 * c0 + k;
                if cc < c {
                    map[flat(blocked, &at)] = Some(pi(ni, cc, di, hi, wi));
                }
            }
        }
        // [D*C1*H*W, N1, 16, C0], the first axis ordered (d, c1, h, w).
        "FRACTAL_Z" | "FRACTAL_Z_3D" if groups <= 1 => {
            let c1s = c.div_ceil(c0);
            for at in iter_all(blocked) {
                let [row, n1, n0, k] = at[..] else {
                    unreachable!()
                };
                let (di, rest) = (row / (c1s * h * w), row % (c1s * h * w));
                let (c1, hwi) = (rest / (h * w), rest % (h * w));
                let (nn, cc) = (n1 * 16 + n0, c1 * c0 + k);
                if nn < n && cc < c {
                    map[flat(blocked, &at)] = Some(pi(nn, cc, di, hwi / w, hwi % w));
                }
            }
        }
        // Grouped: [G*C1*H*W, N1, 16, C0]; group g sits in block g/e at input channel
        // (g%e)*Cin + c and output channel (g%e)*Cout + n.
        "FRACTAL_Z" => {
            let (cin, cout) = (c, n / groups);
            let lcm = |a: usize, b: usize| (1..=a * b).find(|m| m % a == 0 && m % b == 0).unwrap();
            let e = lcm(lcm(cin, c0) / cin, lcm(cout, 16) / cout).min(groups);
            let c1s = (e * cin).div_ceil(c0);
            for at in iter_all(blocked) {
                let [row, n1, n0, k] = at[..] else {
                    unreachable!()
                };
                let (gd, rest) = (row / (c1s * h * w), row % (c1s * h * w));
                let (c1, hwi) = (rest / (h * w), rest % (h * w));
                let (ci, co) = (c1 * c0 + k, n1 * 16 + n0);
                let (e_in, e_out) = (ci / cin, co / cout);
                let g = gd * e + e_in;
                if e_in == e_out && e_in < e && g < groups {
                    let (cc, nn) = (ci % cin, g * cout + co % cout);
                    map[flat(blocked, &at)] = Some(pi(nn, cc, 0, hwi / w, hwi % w));
                }
            }
        }
        // [ceil(4HW/C0), N1, 16, C0]: z = (h*W + w)*4 + c.
        "FRACTAL_Z_C04" => {
            for at in iter_all(blocked) {
                let [z1, n1, n0, k] = at[..] else {
                    unreachable!()
                };
                let z = z1 * c0 + k;
                let (p, cc, nn) = (z / 4, z % 4, n1 * 16 + n0);
                if p < h * w && cc < c && nn < n {
                    map[flat(blocked, &at)] = Some(pi(nn, cc, 0, p / w, p % w));
                }
            }
        }
        // [C1, H, W, N, Co, C0]: only Co == C0 holds c = c1*C0 + c0.
        "C1HWNCoC0" => {
            for at in iter_all(blocked) {
                let [c1, hi, wi, ni, co, k] = at[..] else {
                    unreachable!()
                };
                if co == k && c1 * c0 + k < c {
                    map[flat(blocked, &at)] = Some(pi(ni, c1 * c0 + k, 0, hi, wi));
                }
            }
        }
        // [..., W1, H1, 16, C0] over the last two dims (rows, cols); 1-D is one row.
        "FRACTAL_NZ" | "FRACTAL_ZZ" => {
            let (rows, cols) = match shape {
                [x] => (1, *x),
                [.., r, cl] => (*r, *cl),
                [] => unreachable!(),
            };
            let k = blocked.len();
            for at in iter_all(blocked) {
                let b = flat(&blocked[..k - 4], &at[..k - 4]);
                let (r, col) = if layout == "FRACTAL_NZ" {
                    let [w1, h1, h0, w0] = at[k - 4..] else {
                        unreachable!()
                    };
                    (h1 * 16 + h0, w1 * c0 + w0)
                } else {
                    let [h1, w1, h0, w0] = at[k - 4..] else {
                        unreachable!()
                    };
                    (h1 * c0 + h0, w1 * c0 + w0)
                };
                if r < rows && col < cols {
                    map[flat(blocked, &at)] = Some((b * rows + r) * cols + col);
                }
            }
        }
        // A transpose: the destination's axes are a permutation of the source's.
        _ => {
            for at in iter_all(blocked) {
                let get = |a: char| at[layout.find(a).unwrap()];
                map[flat(blocked, &at)] = Some(pi(get('N'), get('C'), 0, get('H'), get('W')));
            }
        }
    }
    map
}

fn iter_all(dims: &[usize]) -> Vec<Vec<usize>> {
    let mut out = vec![vec![]];
    for &d in dims {
        out = out
            .into_iter()
            .flat_map(|p| {
                (0..d).map(move |i| {
                    let mut q = p.clone();
                    q.push(i);
                    q
                })
            })
            .collect();
    }
    out
}

fn iter5(dims: &[usize]) -> Vec<(usize, usize, usize, usize, usize)> {
    iter_all(dims)
        .into_iter()
        .map(|a| (a[0], a[1], a[2], a[3], a[4]))
        .collect()
}

/// Runs plain -> blocked and back for every dtype, against the reference.
fn check(plain: &str, layout: &str, shape: &[usize]) {
    for &dtype in &DTYPES {
        check_one(plain, layout, shape, dtype);
    }
}

fn check_one(plain: &str, layout: &str, shape: &[usize], dtype: DType) {
    check_as(plain, layout, f(layout), shape, dtype);
}

/// [`check_one`] into NC1HWC0 with a C0 code (`2^(code-1)` channels a block; 0: the
/// dtype's).
fn check_c0(plain: &str, shape: &[usize], dtype: DType, code: u8) {
    let dst = StorageFormat {
        c0_code: code,
        ..f("NC1HWC0")
    };
    check_as(plain, "NC1HWC0", dst, shape, dtype);
}

/// [`check_one`] with the blocked format given as a value (`layout` names its layout for
/// the reference).
fn check_as(plain: &str, layout: &str, dst_f: StorageFormat, shape: &[usize], dtype: DType) {
    let size = dtype.size();
    let src_f = f(plain);
    let t = Transfer::new(src_f, dst_f, dtype).unwrap();
    let blocked = t.dst_shape(shape).unwrap();
    let src = bytes(
        shape.iter().product::<usize>() * size,
        shape.iter().sum::<usize>() as u64,
    );
    let mut dst = vec![0xEE; blocked.iter().product::<usize>() * size];
    t.run(shape, &src, &blocked, &mut dst).unwrap();
    let map = reference_map(
        layout.split(':').next().unwrap(),
        plain,
        shape,
        &blocked,
        t.c0,
        t.groups,
    );
    let mut want = vec![0u8; dst.len()];
    for (b, p) in map.iter().enumerate() {
        if let Some(p) = p {
            want[b * size..][..size].copy_from_slice(&src[p * size..][..size]);
        }
    }
    assert!(
        dst == want,
        "{plain} {shape:?} -> {layout} {blocked:?} ({dtype}) differs from the reference"
    );
    // Back: only transposes and every blocked layout GE reads back.
    let Ok(back_t) = Transfer::new(dst_f, src_f, dtype) else {
        return;
    };
    let mut back = vec![0xEE; src.len()];
    back_t.run(&blocked, &dst, shape, &mut back).unwrap();
    assert!(
        back == src,
        "{layout} {blocked:?} -> {plain} {shape:?} ({dtype}) is not the original"
    );
}

#[test]
fn nc1hwc0_from_nchw_and_nhwc() {
    for shape in [
        [1, 3, 2, 2],
        [2, 17, 3, 5],
        [1, 32, 1, 1],
        [3, 40, 2, 3],
        [1, 1, 7, 9],
    ] {
        check("NCHW", "NC1HWC0", &shape);
        check("NHWC", "NC1HWC0", &[shape[0], shape[2], shape[3], shape[1]]);
    }
}

#[test]
fn nc1hwc0_parallel_path_matches() {
    // Large enough (> 1 MiB of NC1HWC0) for the pool; H*W = 4087 is no multiple of 8.
    check_one("NCHW", "NC1HWC0", &[2, 37, 61, 67], DType::F32);
    check_one("NCHW", "NC1HWC0", &[3, 37, 61, 67], DType::F16);
    check_one("NHWC", "NC1HWC0", &[3, 61, 67, 37], DType::F16);
    check_one("NHWC", "NC1HWC0", &[2, 61, 67, 37], DType::F32);
}

/// Every edge of the register-blocked transposes (8x8 u16, 4x4 u32): H*W below, at and
/// past multiples of 8 and 4, C below, at and past multiples of C0 and of the block, C0 of
/// 4, 8, 16 (the dtypes' own) and 32, every element size.
#[test]
fn nc1hwc0_block_edges() {
    for hw in 1..=19 {
        for c in [1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33] {
            for &dtype in &DTYPES {
                for code in [0, 3, 4, 6] {
                    check_c0("NCHW", &[2, c, 1, hw], dtype, code);
                    check_c0("NHWC", &[2, 1, hw, c], dtype, code);
                }
            }
        }
    }
}

#[test]
fn fractal_z_from_nchw_nhwc_hwcn() {
    for shape in [[1, 1, 1, 1], [17, 3, 2, 2], [32, 33, 3, 1], [5, 16, 1, 3]] {
        check("NCHW", "FRACTAL_Z", &shape);
        check("NHWC", "FRACTAL_Z", &shape);
        check("HWCN", "FRACTAL_Z", &shape);
    }
}

#[test]
fn fractal_z_with_groups() {
    // HWCN [H, W, Cin, Cout*groups] and NCHW [Cout*groups, Cin, H, W].
    for (shape, groups) in [
        ([3, 3, 2, 8], 4),
        ([1, 1, 3, 6], 3),
        ([2, 1, 5, 34], 2),
        ([1, 2, 16, 32], 2),
    ] {
        let layout = format!("FRACTAL_Z:{groups}");
        check("HWCN", &layout, &shape);
        check("NCHW", &layout, &[shape[3], shape[2], shape[0], shape[1]]);
    }
}

#[test]
fn fractal_z_c04() {
    for shape in [[1, 1, 1, 1], [17, 3, 2, 3], [2, 4, 5, 5]] {
        check("NCHW", "FRACTAL_Z_C04", &shape);
        check(
            "HWCN",
            "FRACTAL_Z_C04",
            &[shape[2], shape[3], shape[1], shape[0]],
        );
    }
}

#[test]
fn c1hwncoc0() {
    for dtype in [DType::I8, DType::F16, DType::F32] {
        for shape in [[1, 1, 1, 1], [2, 3, 17, 2], [1, 2, 40, 3]] {
            check_one("HWCN", "C1HWNCoC0", &shape, dtype);
        }
    }
}

#[test]
fn fractal_nz_and_zz() {
    let shapes: [&[usize]; 6] = [
        &[5],
        &[40],
        &[3, 17],
        &[2, 33, 20],
        &[16, 32],
        &[2, 1, 3, 50],
    ];
    for shape in shapes {
        check("ND", "FRACTAL_NZ", shape);
        check("ND", "FRACTAL_ZZ", shape);
    }
    check("NCHW", "FRACTAL_NZ", &[1, 2, 17, 3]);
    check("NHWC", "FRACTAL_ZZ", &[2, 1, 3, 33]);
}

#[test]
fn five_d() {
    for shape in [[1, 3, 2, 2, 2], [2, 17, 1, 3, 2]] {
        check("NCDHW", "NDC1HWC0", &shape);
        check("NDHWC", "NDC1HWC0", &shape);
        check("NCDHW", "FRACTAL_Z_3D", &shape);
        check("NDHWC", "FRACTAL_Z_3D", &shape);
        check("DHWCN", "FRACTAL_Z_3D", &shape);
    }
}

#[test]
fn transposes() {
    let names = ["NCHW", "NHWC", "HWCN", "CHWN"];
    for a in names {
        for b in names {
            if a != b {
                check(a, b, &[2, 3, 4, 5]);
            }
        }
    }
}

#[test]
fn hand_computed_nchw_to_nc1hwc0() {
    // NCHW [1,3,2,2] float16 holding 0..12: position p of channel c is c*4 + p. In
    // NC1HWC0 [1,1,2,2,16] position p's 16 channels are 32 bytes at p*32.
    let src: Vec<u8> = (0u16..12).flat_map(half_bits).collect();
    let mut dst = vec![0xFF; 4 * 16 * 2];
    let t = Transfer::new(f("NCHW"), f("NC1HWC0"), DType::F16).unwrap();
    assert_eq!(t.dst_shape(&[1, 3, 2, 2]).unwrap(), [1, 1, 2, 2, 16]);
    t.run(&[1, 3, 2, 2], &src, &[1, 1, 2, 2, 16], &mut dst)
        .unwrap();
    let mut want = vec![0u8; 128];
    for p in 0..4 {
        for c in 0..3u16 {
            want[p * 32 + c as usize * 2..][..2].copy_from_slice(&half_bits(c * 4 + p as u16));
        }
    }
    assert_eq!(dst, want);
    assert_eq!(&dst[..8], &[0, 0, 4, 0, 8, 0, 0, 0]);
}

fn half_bits(v: u16) -> [u8; 2] {
    v.to_le_bytes()
}

#[test]
fn hand_computed_nd_to_fractal_nz() {
    // ND [2,3] int8, C0 32: one fractal of 16 rows x 32 columns; row r holds r*3..r*3+3.
    let src: Vec<u8> = (1..=6).collect();
    let t = Transfer::new(f("ND"), f("FRACTAL_NZ"), DType::I8).unwrap();
    let shape = t.dst_shape(&[2, 3]).unwrap();
    assert_eq!(shape, [1, 1, 16, 32]);
    let mut dst = vec![0xFF; 512];
    t.run(&[2, 3], &src, &shape, &mut dst).unwrap();
    assert_eq!(&dst[..3], &[1, 2, 3]);
    assert_eq!(&dst[32..35], &[4, 5, 6]);
    assert_eq!(dst.iter().filter(|&&b| b != 0).count(), 6);
}

#[test]
fn c0_follows_the_dtype_or_the_code() {
    assert_eq!(c0_for(DType::F16), 16);
    assert_eq!(c0_for(DType::F32), 16);
    assert_eq!(c0_for(DType::I64), 16);
    assert_eq!(c0_for(DType::I8), 32);
    assert_eq!(c0_for(DType::U8), 32);
    // A C0 code of 3 says C0 = 4.
    let dst = StorageFormat {
        c0_code: 3,
        ..f("NC1HWC0")
    };
    let t = Transfer::new(f("NCHW"), dst, DType::F16).unwrap();
    assert_eq!(t.dst_shape(&[1, 6, 1, 1]).unwrap(), [1, 2, 1, 1, 4]);
    check_coded();
}

fn check_coded() {
    let dst = StorageFormat {
        c0_code: 3,
        ..f("NC1HWC0")
    };
    let t = Transfer::new(f("NCHW"), dst, DType::F32).unwrap();
    let src = bytes(6 * 4 * 2, 9);
    let mut out = vec![0xEE; 2 * 4 * 2 * 4];
    t.run(&[1, 6, 1, 2], &src, &[1, 2, 1, 2, 4], &mut out)
        .unwrap();
    let map = reference_map("NC1HWC0", "NCHW", &[1, 6, 1, 2], &[1, 2, 1, 2, 4], 4, 1);
    for (b, p) in map.iter().enumerate() {
        let want = p.map_or([0; 4], |p| src[p * 4..][..4].try_into().unwrap());
        assert_eq!(out[b * 4..][..4], want);
    }
}

#[test]
fn format_values_round_trip() {
    let v = StorageFormat::from_int(0x0301_0004).unwrap();
    assert_eq!(v.primary, Format::FractalZ);
    assert_eq!(v.sub_format, 0x0100);
    assert_eq!(v.c0(), Some(4));
    assert_eq!(v.to_int(), 0x0301_0004);
    assert_eq!(StorageFormat::parse("FRACTAL_Z:16").unwrap().sub_format, 16);
    assert_eq!(
        StorageFormat::parse("FORMAT_NC1HWC0").unwrap().primary,
        Format::Nc1hwc0
    );
    assert_eq!(f("FRACTAL_Z:16").to_string(), "FRACTAL_Z:16");
    assert!(StorageFormat::from_int(0x1000_0000).is_err());
    assert!(StorageFormat::from_int(-1).is_err());
    assert!(StorageFormat::from_int(99).is_err());
    assert!(StorageFormat::parse("FRACTAL_Z:x").is_err());
    for &p in Format::ALL {
        assert_eq!(Format::from_number(p as u8), Some(p));
        assert_eq!(Format::from_name(p.name()), Some(p));
    }
}

#[test]
fn refusals() {
    let err = |s: &str, d: &str, dtype, shape: &[usize]| {
        Transfer::new(f(s), f(d), dtype)
            .and_then(|t| t.dst_shape(shape))
            .unwrap_err()
            .to_string()
    };
    assert!(err("ND", "NC1HWC0", DType::F16, &[1]).contains("no transfer from ND to NC1HWC0"));
    assert!(err("NCHW", "NCHW", DType::F16, &[1]).contains("no transfer"));
    assert!(err("HWCN", "C1HWNCoC0", DType::I64, &[1, 1, 1, 1]).contains("does not take int64"));
    assert!(err("NCHW", "FRACTAL_Z_C04", DType::F16, &[1, 5, 1, 1]).contains("at most 4"));
    assert!(err("NHWC", "FRACTAL_Z:2", DType::F16, &[2, 1, 1, 1]).contains("groups"));
    assert!(err("NCHW", "FRACTAL_Z:3", DType::F16, &[4, 1, 1, 1]).contains("divisible"));
    assert!(err("NCHW", "NC1HWC0", DType::F16, &[1, 2, 3]).contains("needs 4 dims"));
    assert!(err("NC1HWC0", "NCHW", DType::F16, &[1, 1, 1, 1, 16]).contains("must be given"));
    assert!(err("FRACTAL_Z_C04", "NCHW", DType::F16, &[1]).contains("no transfer"));
    let t = Transfer::new(f("NC1HWC0"), f("NCHW"), DType::F16).unwrap();
    let e = t
        .run(&[1, 1, 1, 1, 16], &[0; 32], &[1, 17, 1, 1], &mut [0; 34])
        .unwrap_err();
    assert!(e.to_string().contains("do not match"), "{e}");
    let e = t
        .run(&[1, 1, 1, 1, 16], &[0; 31], &[1, 3, 1, 1], &mut [0; 6])
        .unwrap_err();
    assert!(e.to_string().contains("bytes"), "{e}");
}

#[test]
fn empty_tensors() {
    for shape in [[0, 3, 2, 2], [2, 0, 2, 2], [2, 3, 0, 2]] {
        check("NCHW", "NC1HWC0", &shape);
        check("NCHW", "FRACTAL_Z", &shape);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn nchw_nc1hwc0_any_shape(n in 1usize..3, c in 1usize..70, h in 1usize..6, w in 1usize..6, k in 0usize..4) {
        check_one("NCHW", "NC1HWC0", &[n, c, h, w], DTYPES[k]);
        check_one("NHWC", "NC1HWC0", &[n, h, w, c], DTYPES[k]);
    }

    #[test]
    fn nchw_nc1hwc0_any_c0(
        n in 1usize..3,
        c in 1usize..80,
        h in 1usize..7,
        w in 1usize..21,
        k in 0usize..4,
        code in prop::sample::select(vec![0u8, 3, 4, 5, 6]),
    ) {
        check_c0("NCHW", &[n, c, h, w], DTYPES[k], code);
        check_c0("NHWC", &[n, h, w, c], DTYPES[k], code);
    }

    #[test]
    fn nd_fractal_nz_any_shape(dims in proptest::collection::vec(1usize..40, 1..4), k in 0usize..4) {
        check_one("ND", "FRACTAL_NZ", &dims, DTYPES[k]);
    }
}
