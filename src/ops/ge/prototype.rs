//! GE's op prototypes: for each GE op type, the contract CANN's `REG_OP(Name)` declares,
//! its inputs (required, optional, dynamic) and outputs in order with the element types
//! each takes, and its attributes with their types and defaults. The facts are kept as text
//! in `prototypes/`, one file per prototype header they were read from, and parsed once.
//!
//! The files' format, a line each:
//!
//! - `#src REPO:PATH@COMMIT`: where the facts below it come from (the header; or Netron's
//!   `om-metadata.json`, which gives names only).
//! - `@Name`: a new op type.
//! - `I name: T...`, `OI`, `DI`: a required, optional or dynamic input and its element
//!   types; `O name: T...`, `DO`: a required or dynamic output.
//! - `R name Type`: a required attribute; `A name Type DEFAULT`: an optional one with its
//!   default as JSON; `A name ?`: an attribute whose type and default are unknown.
//! - `N text`: a note on how a fact is written.
//!
//! Element types are short codes (`F16`, `F32`, `BF16`, `I8`, ... `B` for bool) or
//! `::Group`, one of the `TensorType` groups CANN defines (`::RealNumberType`, ...),
//! expanded here. Attribute types are GE's (`Int`, `Float`, `Bool`, `String`, `Type`,
//! `ListInt`, `ListFloat`, `ListString`, `ListListInt`, `Tensor`, ...).

use std::collections::BTreeMap;
use std::sync::LazyLock;

/// The facts files, with the names they are reported under.
const FILES: &[(&str, &str)] = &[
    ("array_ops", include_str!("prototypes/array_ops.txt")),
    ("image_ops", include_str!("prototypes/image_ops.txt")),
    (
        "elewise_calculation_ops",
        include_str!("prototypes/elewise_calculation_ops.txt"),
    ),
    (
        "matrix_calculation_ops",
        include_str!("prototypes/matrix_calculation_ops.txt"),
    ),
    (
        "nn_batch_norm_ops",
        include_str!("prototypes/nn_batch_norm_ops.txt"),
    ),
    (
        "nn_calculation_ops",
        include_str!("prototypes/nn_calculation_ops.txt"),
    ),
    (
        "nn_detect_ops",
        include_str!("prototypes/nn_detect_ops.txt"),
    ),
    ("nn_norm_ops", include_str!("prototypes/nn_norm_ops.txt")),
    ("quantize_ops", include_str!("prototypes/quantize_ops.txt")),
    (
        "nn_pooling_ops",
        include_str!("prototypes/nn_pooling_ops.txt"),
    ),
    ("ops_math", include_str!("prototypes/ops_math.txt")),
    (
        "nonlinear_fuc_ops",
        include_str!("prototypes/nonlinear_fuc_ops.txt"),
    ),
    ("pad_ops", include_str!("prototypes/pad_ops.txt")),
    ("reduce_ops", include_str!("prototypes/reduce_ops.txt")),
    (
        "selection_ops",
        include_str!("prototypes/selection_ops.txt"),
    ),
    (
        "split_combination_ops",
        include_str!("prototypes/split_combination_ops.txt"),
    ),
    (
        "transformation_ops",
        include_str!("prototypes/transformation_ops.txt"),
    ),
    ("random_ops", include_str!("prototypes/random_ops.txt")),
    ("sparse_ops", include_str!("prototypes/sparse_ops.txt")),
    ("ops_cv", include_str!("prototypes/ops_cv.txt")),
    (
        "data_flow_ops",
        include_str!("prototypes/data_flow_ops.txt"),
    ),
    ("netron", include_str!("prototypes/netron.txt")),
];

/// How an input or output is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortKind {
    Required,
    Optional,
    /// Any number of tensors (`DYNAMIC_INPUT`, `DYNAMIC_OUTPUT`).
    Dynamic,
}

/// One input or output of a prototype.
#[derive(Debug, Clone, PartialEq)]
pub struct Port {
    pub name: &'static str,
    pub kind: PortKind,
    /// Element type codes (`F16`, `F32`, ...), groups expanded; empty where the source
    /// gives none.
    pub dtypes: Vec<&'static str>,
}

/// One attribute of a prototype.
#[derive(Debug, Clone, PartialEq)]
pub struct AttrProto {
    pub name: &'static str,
    /// GE's attribute type, `?` where the source gives none.
    pub ty: &'static str,
    pub required: bool,
    /// The default as JSON text, for an optional attribute whose default is known.
    pub default: Option<&'static str>,
}

/// One op type's contract.
#[derive(Debug, Clone, PartialEq)]
pub struct Prototype {
    pub name: &'static str,
    /// The `#src` the facts came from.
    pub source: &'static str,
    /// The facts file (`nn_calculation_ops`, ..., `netron`).
    pub file: &'static str,
    pub inputs: Vec<Port>,
    pub outputs: Vec<Port>,
    pub attrs: Vec<AttrProto>,
    pub notes: Vec<&'static str>,
}

impl Prototype {
    /// The input count the prototype allows: required inputs at least; every input at
    /// most, or any number with a dynamic input.
    pub fn input_range(&self) -> (usize, Option<usize>) {
        let min = self
            .inputs
            .iter()
            .filter(|p| p.kind == PortKind::Required)
            .count();
        let dynamic = self.inputs.iter().any(|p| p.kind == PortKind::Dynamic);
        (min, (!dynamic).then_some(self.inputs.len()))
    }

    /// Whether the facts come from the op's `REG_OP` (not only Netron's names).
    pub fn from_header(&self) -> bool {
        self.file != "netron"
    }

    pub fn attr(&self, name: &str) -> Option<&AttrProto> {
        self.attrs.iter().find(|a| a.name == name)
    }
}

/// The short element type codes and the names rt2 prints them by (NumPy's where NumPy
/// has the type).
pub const DTYPE_CODES: &[(&str, &str)] = &[
    ("B", "bool"),
    ("F16", "float16"),
    ("F32", "float32"),
    ("F64", "float64"),
    ("BF16", "bfloat16"),
    ("I4", "int4"),
    ("I8", "int8"),
    ("I16", "int16"),
    ("I32", "int32"),
    ("I64", "int64"),
    ("U1", "uint1"),
    ("U8", "uint8"),
    ("U16", "uint16"),
    ("U32", "uint32"),
    ("U64", "uint64"),
    ("STR", "string"),
    ("C32", "complex32"),
    ("C64", "complex64"),
    ("C128", "complex128"),
    ("QI8", "qint8"),
    ("QU8", "quint8"),
    ("QI16", "qint16"),
    ("QU16", "quint16"),
    ("QI32", "qint32"),
    ("VARIANT", "variant"),
    ("RES", "resource"),
];

/// CANN's `TensorType` groups (metadef's `TensorType` documentation), as codes.
const GROUPS: &[(&str, &str)] = &[
    (
        "ALL",
        "B C128 C64 F64 F32 F16 I16 I32 I64 I8 QI16 QI32 QI8 QU16 QU8 RES STR U16 U32 U64 U8 BF16 C32",
    ),
    (
        "BasicType",
        "C128 C64 F64 F32 F16 I16 I32 I64 I8 QI16 QI32 QI8 QU16 QU8 U16 U32 U64 U8 BF16 C32",
    ),
    (
        "NumberType",
        "C128 C64 F64 F32 F16 I16 I32 I64 I8 QI32 QI8 QU8 U16 U32 U64 U8 BF16 C32",
    ),
    (
        "RealNumberType",
        "F64 F32 F16 I16 I32 I64 I8 U16 U32 U64 U8 BF16",
    ),
    ("IntegerDataType", "I16 I32 I64 I8 U16 U32 U64 U8"),
    ("FloatingDataType", "F64 F32 F16"),
    ("IndexNumberType", "I32 I64"),
    ("UnaryDataType", "C128 C64 F64 F32 F16 BF16 C32"),
];

/// A line the facts parser refused: the file, the line number and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FactsError {
    pub file: &'static str,
    pub line: usize,
    pub problem: String,
}

fn dtypes(tokens: std::str::SplitWhitespace<'static>) -> Result<Vec<&'static str>, String> {
    let mut out: Vec<&'static str> = Vec::new();
    let mut push = |code: &'static str| -> Result<(), String> {
        let known = DTYPE_CODES.iter().find(|(c, _)| *c == code);
        let (code, _) = known.ok_or_else(|| format!("unknown element type {code:?}"))?;
        if !out.contains(code) {
            out.push(code);
        }
        Ok(())
    };
    for t in tokens {
        match t.strip_prefix("::") {
            Some(group) => {
                let (_, codes) = GROUPS
                    .iter()
                    .find(|(g, _)| *g == group)
                    .ok_or_else(|| format!("unknown type group {group:?}"))?;
                codes.split_whitespace().try_for_each(&mut push)?;
            }
            None => push(t)?,
        }
    }
    Ok(out)
}

/// Parses one facts file.
fn parse_file(file: &'static str, text: &'static str) -> Result<Vec<Prototype>, FactsError> {
    let mut out: Vec<Prototype> = Vec::new();
    let mut source = "";
    for (k, line) in text.lines().enumerate() {
        let err = |problem: String| FactsError {
            file,
            line: k + 1,
            problem,
        };
        let line = line.trim_end();
        if line.trim().is_empty() {
            continue;
        }
        if let Some(src) = line.strip_prefix("#src ") {
            source = src.trim();
            continue;
        }
        if let Some(name) = line.strip_prefix('@') {
            out.push(Prototype {
                name: name.trim(),
                source,
                file,
                inputs: Vec::new(),
                outputs: Vec::new(),
                attrs: Vec::new(),
                notes: Vec::new(),
            });
            continue;
        }
        let op = out
            .last_mut()
            .ok_or_else(|| err("a fact before the first @op".into()))?;
        let (tag, rest) = line
            .split_once(' ')
            .ok_or_else(|| err(format!("{line:?} is not a fact")))?;
        match tag {
            "I" | "OI" | "DI" | "O" | "DO" => {
                let (name, types) = rest
                    .split_once(':')
                    .ok_or_else(|| err(format!("{tag} {rest:?}: no ':' after the name")))?;
                let kind = match tag {
                    "OI" => PortKind::Optional,
                    "DI" | "DO" => PortKind::Dynamic,
                    _ => PortKind::Required,
                };
                let port = Port {
                    name: name.trim(),
                    kind,
                    dtypes: dtypes(types.split_whitespace()).map_err(err)?,
                };
                if tag.ends_with('I') {
                    op.inputs.push(port);
                } else {
                    op.outputs.push(port);
                }
            }
            "R" => {
                let mut it = rest.split_whitespace();
                let (Some(name), Some(ty), None) = (it.next(), it.next(), it.next()) else {
                    return Err(err(format!("R {rest:?}: expected a name and a type")));
                };
                op.attrs.push(AttrProto {
                    name,
                    ty,
                    required: true,
                    default: None,
                });
            }
            "A" => {
                let mut it = rest.splitn(3, ' ');
                let (Some(name), Some(ty)) = (it.next(), it.next()) else {
                    return Err(err(format!("A {rest:?}: expected a name and a type")));
                };
                let default = it.next().map(str::trim);
                if let Some(d) = default
                    && serde_json::from_str::<serde_json::Value>(d).is_err()
                {
                    return Err(err(format!("A {name}: default {d:?} is not JSON")));
                }
                if ty != "?" && default.is_none() {
                    return Err(err(format!(
                        "A {name}: an optional attribute needs its default"
                    )));
                }
                op.attrs.push(AttrProto {
                    name,
                    ty,
                    required: false,
                    default,
                });
            }
            "N" => op.notes.push(rest.trim()),
            other => return Err(err(format!("unknown fact {other:?}"))),
        }
    }
    Ok(out)
}

/// Every facts file parsed; an op type given twice is an error.
pub fn parse_all() -> Result<BTreeMap<&'static str, Prototype>, FactsError> {
    let mut all = BTreeMap::new();
    for &(file, text) in FILES {
        for p in parse_file(file, text)? {
            if let Some(first) = all.get(p.name) {
                let first: &Prototype = first;
                return Err(FactsError {
                    file,
                    line: 0,
                    problem: format!("{} is also in {}", p.name, first.file),
                });
            }
            all.insert(p.name, p);
        }
    }
    Ok(all)
}

static PROTOTYPES: LazyLock<BTreeMap<&'static str, Prototype>> = LazyLock::new(|| {
    // The facts are compiled in; `the_facts_parse` proves they parse.
    parse_all().unwrap_or_else(|e| panic!("GE prototype facts: {e:?}"))
});

/// Every prototype rt2 knows, by op type.
pub fn prototypes() -> &'static BTreeMap<&'static str, Prototype> {
    &PROTOTYPES
}

/// The prototype of `op_type`, if rt2 knows it.
pub fn prototype(op_type: &str) -> Option<&'static Prototype> {
    PROTOTYPES.get(op_type)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_facts_parse() {
        let all = parse_all().unwrap();
        assert!(all.len() >= 450, "{}", all.len());
        let from_headers = all.values().filter(|p| p.from_header()).count();
        assert!(from_headers >= 360, "{from_headers}");
        for p in all.values() {
            assert!(!p.source.is_empty(), "{} has no source", p.name);
        }
    }

    #[test]
    fn known_contracts() {
        let conv = prototype("Conv2D").unwrap();
        let names: Vec<&str> = conv.inputs.iter().map(|p| p.name).collect();
        assert_eq!(names, ["x", "filter", "bias", "offset_w"]);
        assert_eq!(conv.input_range(), (2, Some(4)));
        assert!(conv.attr("strides").unwrap().required);
        assert_eq!(conv.attr("data_format").unwrap().default, Some("\"NHWC\""));
        assert_eq!(conv.attr("dilations").unwrap().default, Some("[1,1,1,1]"));
        assert_eq!(conv.inputs[0].dtypes, ["F16", "F32", "I8", "BF16"]);
        let mm = prototype("MatMulV2").unwrap();
        assert_eq!(mm.attr("transpose_x1").unwrap().default, Some("false"));
        assert_eq!(
            prototype("SoftmaxV2")
                .unwrap()
                .attr("axes")
                .unwrap()
                .default,
            Some("[-1]")
        );
        assert!(
            prototype("Cast")
                .unwrap()
                .attr("dst_type")
                .unwrap()
                .required
        );
        let concat = prototype("ConcatV2D").unwrap();
        assert_eq!(concat.input_range().1, None, "a dynamic input");
        // A group expands to its types.
        let ge = prototype("GreaterEqual").unwrap();
        assert!(ge.inputs[0].dtypes.contains(&"BF16"));
        assert!(ge.inputs[0].dtypes.contains(&"U64"));
        assert!(!prototype("Activation").unwrap().from_header());
        // A type whose header was found after Netron named it: the header's facts alone.
        let nms = prototype("NonMaxSuppressionV6").unwrap();
        assert!(nms.from_header());
        assert_eq!(nms.input_range(), (2, Some(5)));
        assert_eq!(nms.inputs[2].name, "max_output_size");
    }

    #[test]
    fn bad_facts_name_the_line() {
        let e = parse_file("t", "@Op\nI x: F99\n").unwrap_err();
        assert_eq!(
            (e.line, e.problem.as_str()),
            (2, "unknown element type \"F99\"")
        );
        let e = parse_file("t", "I x: F16\n").unwrap_err();
        assert_eq!(e.line, 1);
        let e = parse_file("t", "@Op\nA axis Int\n").unwrap_err();
        assert!(e.problem.contains("needs its default"), "{e:?}");
        let e = parse_file("t", "@Op\nA axis Int [1,\n").unwrap_err();
        assert!(e.problem.contains("not JSON"), "{e:?}");
    }
}
