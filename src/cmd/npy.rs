//! NumPy `.npy` tensors: reading one into a [`HostTensor`] and writing one out.
//!
//! The header is parsed and written by the `npyz` crate; the element bytes rt2 handles
//! itself, since a [`HostTensor`] is already little-endian bytes in C order. Reading takes
//! either byte order and C or Fortran order, and gives C order, little-endian.
//!
//! Element types are rt2's ([`DType`]) under NumPy's codes (`f2`, `f4`, `f8`, `i1`..`i8`,
//! `u1`..`u8`, `b1`). NumPy has no code for bfloat16 (`ml_dtypes` saves it as the opaque
//! `V2`), so rt2 writes a bfloat16 tensor as its raw bits, `<u2` (read it back in NumPy with
//! `.view(ml_dtypes.bfloat16)`), and reads a `u2` or `V2` file as bfloat16 where bfloat16
//! is what it expects. Pickled objects, strings, complex numbers and structured types are
//! refused.
//!
//! No IO here: bytes in, bytes out; the caller names the file in errors.

use anyhow::{Context, bail};
use npyz::{DType as NpyDType, Order, TypeChar, TypeStr, WriterBuilder};

use crate::ops::{DType, HostTensor};

/// The NumPy type string rt2 writes for `dtype` (little-endian).
pub fn type_str(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "<f4",
        DType::F16 => "<f2",
        DType::Bf16 => "<u2",
        DType::F64 => "<f8",
        DType::I8 => "|i1",
        DType::I16 => "<i2",
        DType::I32 => "<i4",
        DType::I64 => "<i8",
        DType::U8 => "|u1",
        DType::U16 => "<u2",
        DType::U32 => "<u4",
        DType::U64 => "<u8",
        DType::Bool => "|b1",
    }
}

/// The rt2 type of a NumPy type code and size; `expect` decides the one ambiguous case:
/// two raw bytes (`u2`, `V2`) are bfloat16 where bfloat16 is expected.
fn dtype_of(t: &TypeStr, expect: Option<DType>) -> Option<DType> {
    let size = t.size_field();
    Some(match (t.type_char(), size) {
        (TypeChar::Uint | TypeChar::RawData, 2) if expect == Some(DType::Bf16) => DType::Bf16,
        (TypeChar::Float, 2) => DType::F16,
        (TypeChar::Float, 4) => DType::F32,
        (TypeChar::Float, 8) => DType::F64,
        (TypeChar::Int, 1) => DType::I8,
        (TypeChar::Int, 2) => DType::I16,
        (TypeChar::Int, 4) => DType::I32,
        (TypeChar::Int, 8) => DType::I64,
        (TypeChar::Uint, 1) => DType::U8,
        (TypeChar::Uint, 2) => DType::U16,
        (TypeChar::Uint, 4) => DType::U32,
        (TypeChar::Uint, 8) => DType::U64,
        (TypeChar::Bool, 1) => DType::Bool,
        _ => return None,
    })
}

/// Whether `bytes` start with the `.npy` magic.
pub fn is_npy(bytes: &[u8]) -> bool {
    bytes.starts_with(b"\x93NUMPY")
}

/// Reads a `.npy` file's bytes. `expect` is the element type the tensor is for, if known:
/// it only settles what a two-byte raw type means (see the module doc); a file of another
/// type is still read as that type, for the caller to judge.
pub fn read(bytes: &[u8], expect: Option<DType>) -> anyhow::Result<HostTensor> {
    if !is_npy(bytes) {
        bail!("not a .npy file (no \\x93NUMPY magic)");
    }
    let header_at = check_header_length(bytes)?;
    let file = npyz::NpyFile::new(bytes).map_err(|e| header_error(&bytes[header_at..], &e))?;
    let NpyDType::Plain(ts) = file.dtype() else {
        bail!("a structured or array element type, not one rt2 computes on");
    };
    let dtype = dtype_of(&ts, expect).ok_or_else(|| {
        anyhow::anyhow!(
            "element type {ts} is not one rt2 computes on (rt2's: {})",
            DType::ALL
                .iter()
                .map(|d| d.name())
                .collect::<Vec<_>>()
                .join(", ")
        )
    })?;
    let shape: Vec<i64> = file
        .shape()
        .iter()
        .map(|&d| i64::try_from(d).map_err(|_| anyhow::anyhow!("dim {d} is too large")))
        .collect::<anyhow::Result<_>>()?;
    let fortran = file.order() == Order::Fortran;
    let big_endian = ts.endianness() == npyz::Endianness::Big;
    let need = dtype
        .tensor_bytes(&shape)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| anyhow::anyhow!("shape {shape:?} is too large"))?;
    let data: &[u8] = file.into_inner();
    if data.len() != need {
        bail!(
            "{} bytes of data after the header, shape {shape:?} of {dtype} needs {need}",
            data.len()
        );
    }
    // The tensor's bytes are a copy of the file's: asked of the allocator first, so a
    // host that cannot hold both is an error, not an abort.
    let mut data = host_copy(data)?;
    let size = dtype.size();
    if big_endian && size > 1 {
        for e in data.chunks_exact_mut(size) {
            e.reverse();
        }
    }
    if fortran && shape.len() > 1 {
        data = fortran_to_c(&data, &shape, size)?;
    }
    Ok(HostTensor {
        dtype,
        shape,
        data: data.into(),
    })
}

/// A header npyz refused, on one line: the header's text (its start) and, when the
/// parser said where, the column; npyz's own message is a multi-line parser dump.
fn header_error(header: &[u8], e: &std::io::Error) -> anyhow::Error {
    let text = String::from_utf8_lossy(header);
    let text = text.lines().next().unwrap_or("").trim_end();
    let shown: String = text.chars().take(80).collect();
    let more = if shown.len() < text.len() { "..." } else { "" };
    let msg = e.to_string();
    // pest's dump points at the fault as ` --> LINE:COLUMN`.
    let column = msg
        .split_once("--> ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .and_then(|at| at.split_once(':'))
        .map(|(_, col)| format!(" at column {col}"));
    anyhow::anyhow!(
        "the header {shown:?}{more} is not a NumPy header (a Python dict of 'descr', \
         'fortran_order' and 'shape'){}",
        column.unwrap_or_default()
    )
}

/// Checks the header length a file claims against the bytes it has, before the header is
/// read (a reader would otherwise set aside what the file claims, up to 4 GiB): version 1
/// stores it in two bytes after the magic and version, versions 2 and 3 in four. Gives
/// where the header starts.
fn check_header_length(bytes: &[u8]) -> anyhow::Result<usize> {
    let Some(&major) = bytes.get(6) else {
        bail!("the file ends inside the magic");
    };
    let (at, width) = match major {
        1 => (8, 2),
        2 | 3 => (8, 4),
        v => bail!("format version {v} is not 1, 2 or 3"),
    };
    let Some(field) = bytes.get(at..at + width) else {
        bail!("the file ends before the header length");
    };
    let claimed = field
        .iter()
        .rev()
        .fold(0u64, |n, &b| (n << 8) | u64::from(b));
    let left = (bytes.len() - at - width) as u64;
    if claimed > left {
        bail!("the header claims {claimed} bytes, the file has {left} after the length");
    }
    if claimed > MAX_HEADER {
        bail!("the header is {claimed} bytes; NumPy reads at most {MAX_HEADER}");
    }
    check_header_text(&bytes[at + width..at + width + claimed as usize])?;
    Ok(at + width)
}

/// The longest header read: NumPy's own limit (`max_header_size`), set there because
/// parsing a Python literal of any length is a denial of service.
const MAX_HEADER: u64 = 10_000;

/// The deepest brackets nest in a header read. NumPy's have at most three levels (a
/// structured type's list of fields, a field, a sub-array's shape); `npyz`'s parser of
/// the header's Python literal backtracks, taking time exponential in the depth of
/// unclosed brackets (a header of twelve `{` took a minute).
const MAX_NESTING: usize = 4;

/// Checks what `npyz` would choke on in the header text before it parses it: brackets
/// that nest deeper than [`MAX_NESTING`] or do not balance, a string that does not end
/// (what follows it is then as slow to parse as brackets), and a shape whose dims
/// multiply beyond 64 bits (`npyz` computes the strides in `u64`, which overflows).
fn check_header_text(header: &[u8]) -> anyhow::Result<()> {
    let mut open = Vec::new();
    let mut quote = None;
    let mut escaped = false;
    for &b in header {
        match (quote, b) {
            (Some(_), _) if escaped => escaped = false,
            (Some(_), b'\\') => escaped = true,
            (Some(q), _) if b == q => quote = None,
            (Some(_), _) => {}
            (None, b'\'' | b'"') => quote = Some(b),
            (None, b'{' | b'[' | b'(') => {
                open.push(b);
                if open.len() > MAX_NESTING {
                    bail!("the header's brackets nest more than {MAX_NESTING} deep");
                }
            }
            (None, b'}' | b']' | b')') => {
                let want = match b {
                    b'}' => b'{',
                    b']' => b'[',
                    _ => b'(',
                };
                if open.pop() != Some(want) {
                    bail!("the header's brackets do not balance");
                }
            }
            _ => {}
        }
    }
    if quote.is_some() {
        bail!("the header has a string that does not end");
    }
    if !open.is_empty() {
        bail!("the header's brackets do not balance");
    }
    if let Some(dims) = shape_dims(header)
        && !dims_fit(&dims)
    {
        bail!("shape {dims:?} has more elements than 64 bits count");
    }
    Ok(())
}

/// The dims of the header's `'shape': (...)`, when it has one that reads as integers.
fn shape_dims(header: &[u8]) -> Option<Vec<u64>> {
    let text = std::str::from_utf8(header).ok()?;
    let at = text.find("'shape'").or_else(|| text.find("\"shape\""))?;
    let rest = text[at + 7..].trim_start().strip_prefix(':')?.trim_start();
    let inner = rest.strip_prefix('(')?.split_once(')')?.0;
    inner
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| d.parse().ok())
        .collect()
}

/// Whether the product of the non-zero dims fits in 64 bits (what `npyz`'s strides need;
/// a zero dim does not make the others any less absurd).
fn dims_fit(dims: &[u64]) -> bool {
    dims.iter()
        .filter(|&&d| d != 0)
        .try_fold(1u64, |n, &d| n.checked_mul(d))
        .is_some()
}

/// The most dims a `.npy` file of rt2's holds: NumPy's own limit (`NPY_MAXDIMS` of NumPy
/// 2), which every reader of the file takes.
const MAX_RANK: usize = 64;

/// Reorders elements stored column-major (first axis fastest) into row-major.
fn fortran_to_c(data: &[u8], shape: &[i64], size: usize) -> anyhow::Result<Vec<u8>> {
    // With no elements a dim may be huge beside a 0, and the strides would overflow; with
    // some, every partial product of the dims is at most their count, which fits.
    if data.is_empty() {
        return Ok(Vec::new());
    }
    let dims: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
    // The Fortran stride of each axis, in elements.
    let mut strides = vec![1usize; dims.len()];
    for k in 1..dims.len() {
        strides[k] = strides[k - 1] * dims[k - 1];
    }
    let mut out = Vec::new();
    out.try_reserve_exact(data.len())
        .map_err(|_| too_large(data.len()))?;
    let mut index = vec![0usize; dims.len()];
    for _ in 0..data.len() / size.max(1) {
        let at: usize = index.iter().zip(&strides).map(|(i, s)| i * s).sum();
        out.extend_from_slice(&data[at * size..(at + 1) * size]);
        // Row-major increment: last axis fastest.
        for k in (0..dims.len()).rev() {
            index[k] += 1;
            if index[k] < dims[k] {
                break;
            }
            index[k] = 0;
        }
    }
    Ok(out)
}

/// A copy of `data` whose memory is asked of the allocator first.
fn host_copy(data: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    out.try_reserve_exact(data.len())
        .map_err(|_| too_large(data.len()))?;
    out.extend_from_slice(data);
    Ok(out)
}

fn too_large(bytes: usize) -> anyhow::Error {
    anyhow::anyhow!("{bytes} bytes of data are more than the host's memory can hold")
}

/// The `.npy` bytes of `t`: a version 1.0 header (C order, little-endian) and the data.
pub fn write(t: &HostTensor) -> anyhow::Result<Vec<u8>> {
    if t.shape.len() > MAX_RANK {
        bail!(
            "rank {} is more than a .npy file holds (NumPy's limit: {MAX_RANK})",
            t.shape.len()
        );
    }
    let ts: TypeStr = type_str(t.dtype)
        .parse()
        .map_err(|e| anyhow::anyhow!("type string {}: {e}", type_str(t.dtype)))?;
    let shape: Vec<u64> = t
        .shape
        .iter()
        .map(|&d| u64::try_from(d).map_err(|_| anyhow::anyhow!("negative dim {d}")))
        .collect::<anyhow::Result<_>>()?;
    if !dims_fit(&shape) {
        bail!("shape {shape:?} has more elements than a .npy file counts");
    }
    let mut out = Vec::with_capacity(t.data.len() + 128);
    npyz::WriteOptions::new_header_only()
        .dtype(NpyDType::Plain(ts))
        .shape(&shape)
        .writer(&mut out)
        .write_header_only()
        .context("writing the .npy header")?;
    out.extend_from_slice(&t.data);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tensor of `dtype` and `shape` whose bytes count up, so reordering shows.
    fn counting(dtype: DType, shape: &[i64]) -> HostTensor {
        let n = dtype.tensor_bytes(shape).unwrap() as usize;
        let data = (0..n)
            .map(|i| {
                if dtype == DType::Bool {
                    (i % 2) as u8
                } else {
                    i as u8
                }
            })
            .collect();
        HostTensor {
            dtype,
            shape: shape.to_vec(),
            data,
        }
    }

    #[test]
    fn round_trip_per_dtype() {
        for &dtype in DType::ALL {
            for shape in [&[][..], &[0], &[5], &[2, 3, 4]] {
                let t = counting(dtype, shape);
                let bytes = write(&t).unwrap();
                assert!(is_npy(&bytes));
                assert_eq!(bytes.len() % 64, t.data.len() % 64, "the header pads to 64");
                let back = read(&bytes, Some(dtype)).unwrap();
                assert_eq!(back, t, "{dtype} {shape:?}");
            }
        }
    }

    #[test]
    fn header_is_numpys() {
        let t = HostTensor {
            dtype: DType::F32,
            shape: vec![2, 3],
            data: vec![0; 24].into(),
        };
        let bytes = write(&t).unwrap();
        let text = String::from_utf8_lossy(&bytes[10..]);
        assert!(text.contains("'descr': '<f4'"), "{text}");
        assert!(text.contains("'fortran_order': False"), "{text}");
        assert!(text.contains("'shape': (2, 3"), "{text}");
    }

    /// A file with `descr` and `fortran_order` as given, and `data` after the header.
    fn file(descr: &str, fortran: bool, shape: &str, data: &[u8]) -> Vec<u8> {
        let order = if fortran { "True" } else { "False" };
        let h = format!("{{'descr': '{descr}', 'fortran_order': {order}, 'shape': {shape}, }}");
        with_header(h, data)
    }

    /// A version 1.0 file of header text `h` (padded as NumPy pads it) and `data`.
    fn with_header(mut h: String, data: &[u8]) -> Vec<u8> {
        while !(10 + h.len() + 1).is_multiple_of(64) {
            h.push(' ');
        }
        h.push('\n');
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        b.extend_from_slice(&(h.len() as u16).to_le_bytes());
        b.extend_from_slice(h.as_bytes());
        b.extend_from_slice(data);
        b
    }

    #[test]
    fn big_endian_and_fortran_order_read_as_c_little_endian() {
        let be = file(">i4", false, "(2,)", &[0, 0, 0, 1, 0, 0, 1, 0]);
        let t = read(&be, None).unwrap();
        assert_eq!(t.dtype, DType::I32);
        assert_eq!(t.data, [1, 0, 0, 0, 0, 1, 0, 0]);
        // [[0, 1, 2], [3, 4, 5]] stored column by column: 0 3 1 4 2 5.
        // No elements beside a 0: nothing to reorder. Dims whose non-zero product
        // overflows are refused wherever the 0 is (npyz's strides would overflow on
        // them, in one order or the other).
        let f = file("|u1", true, "(0, 4611686018427387904, 2)", &[]);
        assert_eq!(read(&f, None).unwrap().data, Vec::<u8>::new());
        for shape in ["(0, 4611686018427387904, 4)", "(4611686018427387904, 4, 0)"] {
            let f = file("|u1", true, shape, &[]);
            let msg = format!("{:#}", read(&f, None).unwrap_err());
            assert!(msg.contains("more elements than 64 bits count"), "{msg}");
        }
        let f = file("|u1", true, "(2, 3)", &[0, 3, 1, 4, 2, 5]);
        let t = read(&f, None).unwrap();
        assert_eq!(t.shape, [2, 3]);
        assert_eq!(t.data, [0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn bfloat16_is_raw_two_bytes_where_expected() {
        let raw = file("<u2", false, "(1,)", &[0x80, 0x3f]);
        assert_eq!(read(&raw, None).unwrap().dtype, DType::U16);
        assert_eq!(read(&raw, Some(DType::Bf16)).unwrap().dtype, DType::Bf16);
        let void = file("|V2", false, "(1,)", &[0x80, 0x3f]);
        assert_eq!(read(&void, Some(DType::Bf16)).unwrap().dtype, DType::Bf16);
        assert!(read(&void, None).is_err());
    }

    #[test]
    fn bad_files_are_errors() {
        let e = |b: &[u8]| format!("{:#}", read(b, None).unwrap_err());
        assert!(e(b"PK\x03\x04").contains("not a .npy file"));
        assert!(e(&file("<c8", false, "(1,)", &[0; 8])).contains("not one rt2 computes on"));
        assert!(e(&file("|O", false, "(1,)", &[0; 8])).contains("not one rt2 computes on"));
        assert!(e(&file("<f4", false, "(2,)", &[0; 7])).contains("7 bytes of data"));
        assert!(e(&file("<f4", false, "(2,)", &[0; 9])).contains("9 bytes of data"));
        let full = file("<f4", false, "(2,)", &[0; 8]);
        for cut in [6, 9, 20, 60] {
            assert!(read(&full[..cut], None).is_err(), "cut at {cut}");
        }
        // A version-2 header claiming 4 GiB is refused before anything is set aside.
        let mut huge = b"\x93NUMPY\x02\x00".to_vec();
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        huge.extend_from_slice(b"{'descr': '<f4'}");
        let msg = e(&huge);
        assert!(msg.contains("claims 4294967295 bytes"), "{msg}");
        assert!(e(b"\x93NUMPY\x09\x00\x10\x00").contains("version 9"));
        // A header that is not a Python dict: one line naming it and the column, not
        // the parser's multi-line dump.
        let msg = e(&with_header("{'descr': <f4}".into(), &[0; 8]));
        assert!(!msg.contains('\n'), "{msg}");
        assert!(
            msg.contains("the header \"{'descr': <f4}\" is not a NumPy header"),
            "{msg}"
        );
        assert!(msg.contains("at column 11"), "{msg}");
        assert!(e(b"").contains("not a .npy file"));
    }

    /// Found by the fuzz targets `npy` and `pb` (docs/FUZZING.md).
    #[test]
    fn headers_npyz_chokes_on_are_refused_first() {
        let e = |b: &[u8]| format!("{:#}", read(b, None).unwrap_err());
        // Twelve unclosed braces took npyz's header parser a minute.
        let deep = file("|u1", false, &format!("{}(1,)", "{".repeat(12)), &[0]);
        assert!(e(&deep).contains("nest more than 4 deep"), "{}", e(&deep));
        let open = file("|u1", false, "((1,)", &[0]);
        assert!(e(&open).contains("do not balance"), "{}", e(&open));
        // Braces after a string that never ends slowed the parser as much.
        let unended = file(
            "|u1",
            false,
            &format!("(1,), 'x': '{}", "{".repeat(12)),
            &[0],
        );
        assert!(e(&unended).contains("does not end"), "{}", e(&unended));
        // Dims whose product overflows u64 overflowed npyz's strides (a panic in debug
        // builds), even beside a zero dim.
        let huge = file("|u1", false, "(0, 4294967296, 4294967296)", &[]);
        assert!(
            e(&huge).contains("more elements than 64 bits"),
            "{}",
            e(&huge)
        );
        let t = HostTensor {
            dtype: DType::U8,
            shape: vec![0, 1 << 32, 1 << 32],
            data: vec![].into(),
        };
        assert!(format!("{:#}", write(&t).unwrap_err()).contains("more elements"));
        // What NumPy writes still reads: brackets in a quoted string, a 1-tuple.
        let ok = file("|u1", false, "(3,)", &[1, 2, 3]);
        assert_eq!(read(&ok, None).unwrap().shape, [3]);
        assert_eq!(
            shape_dims(b"{'shape': (2, 0, 5), 'descr': '(['}"),
            Some(vec![2, 0, 5])
        );
        assert!(check_header_text(b"{'descr': '(([[{{', 'shape': ()}").is_ok());
    }

    #[test]
    fn a_rank_numpy_cannot_hold_is_an_error_not_a_panic() {
        let t = HostTensor {
            dtype: DType::F32,
            shape: vec![1; 100_000],
            data: vec![0; 4].into(),
        };
        let msg = format!("{:#}", write(&t).unwrap_err());
        assert!(msg.contains("rank 100000"), "{msg}");
        let ok = HostTensor {
            shape: vec![1; MAX_RANK],
            ..t
        };
        let back = read(&write(&ok).unwrap(), None).unwrap();
        assert_eq!(back.shape.len(), MAX_RANK);
    }
}
