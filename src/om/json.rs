//! The JSON view of a `ge.proto.ModelDef`, in the shape `atc --mode=1` writes (GE's
//! `Pb2Json::Message2Json` with enum names).
//!
//! Owns [`to_json`] and [`from_json`], both generic over the prost-reflect descriptors. Must
//! not do IO, must not panic on any input, and must not know GE semantics.
//!
//! Conventions: keys are proto field names in field-number order; repeated fields are
//! arrays; map fields are arrays of `{"key": .., "value": ..}`; enums are value names;
//! bytes are C-escaped strings; a singular float is a string (`"1e-05"`); other numbers are
//! JSON numbers; proto3 scalars equal to their default are left out (oneof members and
//! messages are written when set).
//!
//! Differences from atc, on purpose:
//! - atc drops the fields `output, data_offset, data, workspace, workspace_bytes,
//!   memory_size, weight_size, size, bt, quantize_factor` at any depth. rt2 drops nothing
//!   unless [`JsonOptions::atc_compat`] is set, so that OM -> JSON -> OM is lossless.
//! - atc prints a singular float with `%g` (6 significant digits), which loses precision.
//!   Without `atc_compat`, rt2 uses `%.6g` only when it reads back to the same float and
//!   `%.9g` otherwise; the two agree whenever `%g` is exact.
//! - rt2 does not undo OM attribute-name compression here; that belongs to the OM reader.
//!
//! The reader accepts both rt2's and atc's output and more: enum names or numbers, floats
//! as strings or numbers, integers as numbers or strings, maps as key/value arrays or plain
//! objects, `null` for an absent field.

use prost_reflect::{
    DynamicMessage, FieldDescriptor, Kind, MapKey, MessageDescriptor, ReflectMessage as _, Value,
};
use serde_json::{Map, Number, Value as Json};

use super::error::{OmError, Result};
use super::text::{c_escape_into, format_g, map_key_value, model_descriptor, simple_ftoa};
use crate::proto::ge_ir::ModelDef;

/// Field names `atc --mode=1` leaves out of its JSON at any depth (`kOmBlackFields`).
const ATC_BLACK_FIELDS: &[&str] = &[
    "output",
    "data_offset",
    "data",
    "workspace",
    "workspace_bytes",
    "memory_size",
    "weight_size",
    "size",
    "bt",
    "quantize_factor",
];

/// Deepest JSON nesting the reader follows; keeps hostile input off the end of the stack.
const MAX_DEPTH: usize = 100;

/// How [`to_json`] writes a model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JsonOptions {
    /// Write exactly what `atc --mode=1` writes: drop atc's blacklisted fields and format
    /// singular floats with plain `%g`. The result does not convert back losslessly.
    pub atc_compat: bool,
}

/// Converts `model` to the atc-style JSON value (see the module doc for the conventions).
/// Without `atc_compat`, `from_json(&to_json(m, ..).to_string())` equals `m`.
pub fn to_json(model: &ModelDef, opts: &JsonOptions) -> Json {
    let mut msg = DynamicMessage::new(model_descriptor());
    // Transcoding a prost message into its own descriptor cannot fail.
    let transcoded = msg.transcode_from(model);
    debug_assert!(transcoded.is_ok(), "ModelDef transcodes to its descriptor");
    message_to_json(&msg, opts)
}

fn message_to_json(msg: &DynamicMessage, opts: &JsonOptions) -> Json {
    let mut fields: Vec<FieldDescriptor> = msg.descriptor().fields().collect();
    fields.sort_by_key(|f| f.number());
    let mut obj = Map::new();
    for f in fields {
        if !msg.has_field(&f) || (opts.atc_compat && ATC_BLACK_FIELDS.contains(&f.name())) {
            continue;
        }
        let kind = f.kind();
        let v = match &*msg.get_field(&f) {
            Value::List(items) => Json::Array(
                items
                    .iter()
                    .map(|v| value_to_json(v, &kind, true, opts))
                    .collect(),
            ),
            Value::Map(map) => {
                let Kind::Message(entry) = &kind else {
                    continue;
                };
                let key_kind = entry.map_entry_key_field().kind();
                let value_kind = entry.map_entry_value_field().kind();
                let mut entries: Vec<_> = map.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                Json::Array(
                    entries
                        .into_iter()
                        .map(|(k, v)| {
                            let mut e = Map::new();
                            e.insert(
                                "key".into(),
                                value_to_json(&map_key_value(k), &key_kind, false, opts),
                            );
                            e.insert("value".into(), value_to_json(v, &value_kind, false, opts));
                            Json::Object(e)
                        })
                        .collect(),
                )
            }
            v => value_to_json(v, &kind, false, opts),
        };
        obj.insert(f.name().to_owned(), v);
    }
    Json::Object(obj)
}

fn float_number(v: f64, shortest: String) -> Json {
    // Go through the shortest decimal form so 0.1f becomes 0.1, not 0.10000000149011612.
    match shortest.parse::<f64>().ok().and_then(Number::from_f64) {
        Some(n) if v.is_finite() => Json::Number(n),
        _ => Json::String(format_g(v, 17)),
    }
}

fn value_to_json(v: &Value, kind: &Kind, in_list: bool, opts: &JsonOptions) -> Json {
    match v {
        Value::Bool(b) => Json::Bool(*b),
        Value::I32(n) => Json::from(*n),
        Value::I64(n) => Json::from(*n),
        Value::U32(n) => Json::from(*n),
        Value::U64(n) => Json::from(*n),
        Value::F32(f) if in_list => float_number(f64::from(*f), f.to_string()),
        Value::F32(f) if opts.atc_compat => Json::String(format_g(f64::from(*f), 6)),
        Value::F32(f) => Json::String(simple_ftoa(*f)),
        Value::F64(f) => float_number(*f, f.to_string()),
        Value::String(s) => Json::String(s.clone()),
        Value::Bytes(b) => {
            let mut s = String::with_capacity(b.len());
            c_escape_into(&mut s, b);
            Json::String(s)
        }
        Value::EnumNumber(n) => match kind {
            Kind::Enum(e) => match e.get_value(*n) {
                Some(v) => Json::String(v.name().to_owned()),
                None => Json::from(*n),
            },
            _ => Json::from(*n),
        },
        Value::Message(m) => message_to_json(m, opts),
        // Lists and maps never nest directly inside each other in protobuf.
        Value::List(_) | Value::Map(_) => Json::Null,
    }
}

/// Reads a model from rt2's or atc's JSON.
///
/// Errors: JSON that does not parse gives [`OmError::Json`] with path `$` and serde_json's
/// line and column; a value that does not fit the schema, or a key that is not a field,
/// gives the JSON path where it was found, e.g.
/// `$.graph[0].op[3].attr[1].value.i: expected an integer, found "x"`.
pub fn from_json(text: &str) -> Result<ModelDef> {
    let json: Json = serde_json::from_str(text).map_err(|e| OmError::Json {
        path: "$".to_owned(),
        msg: e.to_string(),
    })?;
    let mut path = String::from("$");
    let msg = json_to_message(&json, &model_descriptor(), &mut path, 0)?;
    msg.transcode_to::<ModelDef>().map_err(|e| OmError::Json {
        path: "$".to_owned(),
        msg: e.to_string(),
    })
}

fn type_name(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

/// Shows a JSON value in an error, cut short so a huge array does not flood the message.
fn show(v: &Json) -> String {
    match v {
        Json::Array(_) | Json::Object(_) => type_name(v).to_owned(),
        _ => {
            let s = v.to_string();
            if s.chars().count() > 60 {
                format!("{}...", s.chars().take(60).collect::<String>())
            } else {
                s
            }
        }
    }
}

fn mismatch(path: &str, expected: &str, found: &Json) -> OmError {
    OmError::Json {
        path: path.to_owned(),
        msg: format!("expected {expected}, found {}", show(found)),
    }
}

fn json_to_message(
    json: &Json,
    desc: &MessageDescriptor,
    path: &mut String,
    depth: usize,
) -> Result<DynamicMessage> {
    if depth >= MAX_DEPTH {
        return Err(OmError::Json {
            path: path.clone(),
            msg: format!("messages nest deeper than {MAX_DEPTH} levels"),
        });
    }
    let Json::Object(obj) = json else {
        return Err(mismatch(
            path,
            &format!("an object ({})", desc.full_name()),
            json,
        ));
    };
    let mut msg = DynamicMessage::new(desc.clone());
    for (key, v) in obj {
        let base = path.len();
        path.push('.');
        path.push_str(key);
        let Some(field) = desc.get_field_by_name(key) else {
            path.truncate(base);
            return Err(OmError::Json {
                path: path.clone(),
                msg: format!("unknown field \"{key}\" in {}", desc.full_name()),
            });
        };
        if !v.is_null() {
            let value = field_value(v, &field, path, depth)?;
            msg.set_field(&field, value);
        }
        path.truncate(base);
    }
    Ok(msg)
}

fn field_value(
    v: &Json,
    field: &FieldDescriptor,
    path: &mut String,
    depth: usize,
) -> Result<Value> {
    let kind = field.kind();
    if field.is_map() {
        let Kind::Message(entry) = &kind else {
            return Err(mismatch(path, "a map", v));
        };
        let key_field = entry.map_entry_key_field();
        let value_field = entry.map_entry_value_field();
        let mut map = std::collections::HashMap::new();
        match v {
            Json::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let base = path.len();
                    path.push_str(&format!("[{i}]"));
                    let Json::Object(e) = item else {
                        return Err(mismatch(path, "a {\"key\", \"value\"} object", item));
                    };
                    if let Some(k) = e.keys().find(|k| *k != "key" && *k != "value") {
                        return Err(OmError::Json {
                            path: path.clone(),
                            msg: format!("unknown field \"{k}\" in a map entry"),
                        });
                    }
                    let key = match e.get("key") {
                        Some(k) if !k.is_null() => {
                            path.push_str(".key");
                            let key = map_key(k, &key_field.kind(), path)?;
                            path.truncate(base + format!("[{i}]").len());
                            key
                        }
                        _ => map_key_default(&key_field.kind()),
                    };
                    let value = match e.get("value") {
                        Some(val) if !val.is_null() => {
                            path.push_str(".value");
                            let value = single(val, &value_field.kind(), path, depth)?;
                            path.truncate(base + format!("[{i}]").len());
                            value
                        }
                        _ => Value::default_value(&value_field.kind()),
                    };
                    map.insert(key, value);
                    path.truncate(base);
                }
            }
            Json::Object(obj) => {
                for (k, val) in obj {
                    let base = path.len();
                    path.push_str(&format!("[{}]", Json::String(k.clone())));
                    let key = map_key(&Json::String(k.clone()), &key_field.kind(), path)?;
                    let value = single(val, &value_field.kind(), path, depth)?;
                    map.insert(key, value);
                    path.truncate(base);
                }
            }
            _ => {
                return Err(mismatch(
                    path,
                    "an array of {\"key\", \"value\"} objects",
                    v,
                ));
            }
        }
        return Ok(Value::Map(map));
    }
    if field.is_list() {
        let Json::Array(items) = v else {
            return Err(mismatch(path, "an array", v));
        };
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let base = path.len();
            path.push_str(&format!("[{i}]"));
            out.push(single(item, &kind, path, depth)?);
            path.truncate(base);
        }
        return Ok(Value::List(out));
    }
    single(v, &kind, path, depth)
}

fn map_key_default(kind: &Kind) -> MapKey {
    match kind {
        Kind::Bool => MapKey::Bool(false),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => MapKey::I32(0),
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => MapKey::I64(0),
        Kind::Uint32 | Kind::Fixed32 => MapKey::U32(0),
        Kind::Uint64 | Kind::Fixed64 => MapKey::U64(0),
        _ => MapKey::String(String::new()),
    }
}

fn map_key(v: &Json, kind: &Kind, path: &str) -> Result<MapKey> {
    Ok(match single(v, kind, &mut path.to_owned(), 0)? {
        Value::Bool(b) => MapKey::Bool(b),
        Value::I32(n) => MapKey::I32(n),
        Value::I64(n) => MapKey::I64(n),
        Value::U32(n) => MapKey::U32(n),
        Value::U64(n) => MapKey::U64(n),
        Value::String(s) => MapKey::String(s),
        _ => return Err(mismatch(path, "a map key", v)),
    })
}

/// Reads an integer given as a JSON number or a decimal string.
fn integer(v: &Json, path: &str) -> Result<i128> {
    let n = match v {
        Json::Number(n) => n
            .as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from)),
        Json::String(s) => s.trim().parse::<i128>().ok(),
        _ => None,
    };
    n.ok_or_else(|| mismatch(path, "an integer", v))
}

fn ranged<T: TryFrom<i128>>(v: &Json, path: &str, what: &str) -> Result<T> {
    let n = integer(v, path)?;
    T::try_from(n).map_err(|_| OmError::Json {
        path: path.to_owned(),
        msg: format!("{n} is out of range for {what}"),
    })
}

fn float(v: &Json, path: &str) -> Result<f64> {
    match v {
        Json::Number(n) => n.as_f64(),
        Json::String(s) => {
            let s = s.trim();
            s.parse::<f64>()
                .ok()
                .or_else(|| s.strip_suffix(['f', 'F'])?.parse().ok())
        }
        _ => None,
    }
    .ok_or_else(|| mismatch(path, "a number", v))
}

fn single(v: &Json, kind: &Kind, path: &mut String, depth: usize) -> Result<Value> {
    Ok(match kind {
        Kind::Message(m) => Value::Message(json_to_message(v, m, path, depth + 1)?),
        Kind::Bool => match v {
            Json::Bool(b) => Value::Bool(*b),
            Json::String(s) if s == "true" => Value::Bool(true),
            Json::String(s) if s == "false" => Value::Bool(false),
            _ => return Err(mismatch(path, "a boolean", v)),
        },
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => Value::I32(ranged(v, path, "int32")?),
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => Value::I64(ranged(v, path, "int64")?),
        Kind::Uint32 | Kind::Fixed32 => Value::U32(ranged(v, path, "uint32")?),
        Kind::Uint64 | Kind::Fixed64 => Value::U64(ranged(v, path, "uint64")?),
        Kind::Float => {
            let f = float(v, path)?;
            // A string keeps float precision only if read straight into f32.
            let f32v = match v {
                Json::String(s) => s.trim().parse::<f32>().unwrap_or(f as f32),
                _ => f as f32,
            };
            Value::F32(f32v)
        }
        Kind::Double => Value::F64(float(v, path)?),
        Kind::String => match v {
            Json::String(s) => Value::String(s.clone()),
            _ => return Err(mismatch(path, "a string", v)),
        },
        Kind::Bytes => match v {
            Json::String(s) => Value::Bytes(c_unescape(s, path)?.into()),
            _ => return Err(mismatch(path, "a string", v)),
        },
        Kind::Enum(e) => match v {
            Json::String(s) => match e.get_value_by_name(s) {
                Some(val) => Value::EnumNumber(val.number()),
                None => match s.trim().parse::<i32>() {
                    Ok(n) => Value::EnumNumber(n),
                    Err(_) => {
                        return Err(OmError::Json {
                            path: path.clone(),
                            msg: format!("unknown value {} of enum {}", show(v), e.full_name()),
                        });
                    }
                },
            },
            Json::Number(_) => Value::EnumNumber(ranged(v, path, "an enum")?),
            _ => return Err(mismatch(path, "an enum name or number", v)),
        },
    })
}

/// Undoes C escaping (`CEscape`) of a bytes field.
fn c_unescape(s: &str, path: &str) -> Result<Vec<u8>> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' {
            i = super::text::unescape_one(b, i + 1, &mut out).map_err(|msg| OmError::Json {
                path: path.to_owned(),
                msg,
            })?;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::om::testdata_text::{every_variant_model, large_model};
    use crate::proto::ge_ir::attr_def::Value as V;
    use proptest::prelude::*;
    use serde_json::json;

    const RT2: JsonOptions = JsonOptions { atc_compat: false };
    const ATC: JsonOptions = JsonOptions { atc_compat: true };

    fn json_err(text: &str) -> (String, String) {
        match from_json(text) {
            Err(OmError::Json { path, msg }) => (path, msg),
            other => panic!("expected a JSON error, got {other:?}"),
        }
    }

    #[test]
    fn every_variant_round_trips() {
        let m = every_variant_model();
        let text = to_json(&m, &RT2).to_string();
        assert_eq!(from_json(&text).expect("rt2 JSON reads back"), m);
        let pretty = serde_json::to_string_pretty(&to_json(&m, &RT2)).expect("serializes");
        assert_eq!(from_json(&pretty).expect("pretty JSON reads back"), m);
    }

    #[test]
    fn large_model_round_trips() {
        let m = large_model(500);
        assert_eq!(
            from_json(&to_json(&m, &RT2).to_string()).expect("reads back"),
            m
        );
    }

    #[test]
    fn shape_follows_atc() {
        let m = every_variant_model();
        let j = to_json(&m, &RT2);
        assert_eq!(j["name"], "model");
        assert!(j.get("attr_groups").is_some());
        let op = &j["graph"][0]["op"][0];
        assert_eq!(op["type"], "If");
        assert_eq!(op["input"], json!(["data:0", "", "other:-1"]));
        let attrs = op["attr"].as_array().expect("map is an array");
        let find = |k: &str| &attrs.iter().find(|e| e["key"] == k).expect("key")["value"];
        assert_eq!(attrs[0]["key"], "");
        assert_eq!(find("")["i"], 0);
        assert_eq!(find("c_f")["f"], "1e-05");
        assert_eq!(find("c_f_inf")["f"], "-inf");
        assert_eq!(find("c_f_zero")["f"], "0");
        assert_eq!(find("d_b")["b"], false);
        assert_eq!(find("e_bt")["bt"], "\\336\\255\\276\\357\\000");
        assert_eq!(
            find("f_list")["list"]["f"],
            json!([0.5, -2.25, 123456790.0, "inf"])
        );
        assert_eq!(find("f_list")["list"]["val_type"], "VT_LIST_DATA_TYPE");
        assert_eq!(find("h_td")["td"]["dtype"], "DT_BF16");
        assert_eq!(find("h_td")["td"]["size"], 1i64 << 33);
        assert_eq!(
            find("i_t")["t"]["data"],
            "\\000\\001\\177\\200\\303\\251\\\"\\\\\\n\\377"
        );
        assert_eq!(find("o_empty"), &json!({}));
        // Field-number order, as protobuf reflection lists fields.
        let keys: Vec<_> = op.as_object().expect("object").keys().take(4).collect();
        assert_eq!(keys, ["name", "type", "input", "attr"]);
    }

    #[test]
    fn atc_compat_drops_black_fields_at_any_depth() {
        let m = every_variant_model();
        let text = to_json(&m, &ATC).to_string();
        for field in ATC_BLACK_FIELDS {
            assert!(!text.contains(&format!("\"{field}\":")), "{field} left in");
        }
        let full = to_json(&m, &RT2).to_string();
        for field in ["output", "data_offset", "data", "workspace", "size", "bt"] {
            assert!(full.contains(&format!("\"{field}\":")), "{field} dropped");
        }
        // %g keeps 6 digits in atc mode; rt2 keeps the float exact.
        let mut m = ModelDef::default();
        m.attr.insert(
            "x".into(),
            crate::proto::ge_ir::AttrDef {
                value: Some(V::F(123456789.0)),
            },
        );
        assert_eq!(to_json(&m, &ATC)["attr"][0]["value"]["f"], "1.23457e+08");
        assert_eq!(to_json(&m, &RT2)["attr"][0]["value"]["f"], "123456792");
    }

    #[test]
    fn reads_atc_variants() {
        let text = r#"{
            "version": "3",
            "graph": [{
                "name": "g",
                "op": [{
                    "name": "a", "id": "7",
                    "attr": {"k": {"f": 0.25}, "s": {"s": "caf\\303\\251"}},
                    "output_desc": [{"dtype": 4, "shape": {"dim": [1, "2"]}, "layout": null}],
                    "input_desc": [{"dtype": "DT_FLOAT16", "has_out_attr": true}]
                }],
                "attr": [{"key": "e", "value": {"list": {"val_type": "VT_LIST_INT", "i": [1]}}},
                         {"value": {"f": "1e-05"}}]
            }]
        }"#;
        let m = from_json(text).expect("atc-style JSON reads");
        assert_eq!(m.version, 3);
        let g = &m.graph[0];
        let op = &g.op[0];
        assert_eq!(op.id, 7);
        assert_eq!(op.attr["k"].value, Some(V::F(0.25)));
        assert_eq!(op.attr["s"].value, Some(V::S("café".as_bytes().to_vec())));
        assert_eq!(op.output_desc[0].dtype, 4);
        assert_eq!(
            op.output_desc[0].shape.as_ref().map(|s| s.dim.clone()),
            Some(vec![1, 2])
        );
        assert_eq!(op.input_desc[0].dtype, 2);
        assert_eq!(g.attr[""].value, Some(V::F(1e-5)));
        assert!(matches!(&g.attr["e"].value, Some(V::List(l)) if l.i == [1] && l.val_type == 2));
    }

    #[test]
    fn schema_errors_name_the_path() {
        let text = r#"{"graph": [{"op": [{}, {}, {}, {"attr": [
            {"key": "a", "value": {"i": 1}}, {"key": "b", "value": {"i": "x"}}]}]}]}"#;
        let (path, msg) = json_err(text);
        assert_eq!(
            format!("{path}: {msg}"),
            "$.graph[0].op[3].attr[1].value.i: expected an integer, found \"x\""
        );
        assert_eq!(
            json_err(r#"{"graph": [{"colour": 1}]}"#),
            (
                "$.graph[0]".to_owned(),
                "unknown field \"colour\" in ge.proto.GraphDef".to_owned()
            )
        );
        let (path, msg) =
            json_err(r#"{"graph": [{"op": [{"input_desc": [{"dtype": "DT_NOPE"}]}]}]}"#);
        assert_eq!(path, "$.graph[0].op[0].input_desc[0].dtype");
        assert!(msg.contains("unknown value \"DT_NOPE\""), "{msg}");
        assert_eq!(
            json_err(r#"{"version": -1}"#).1,
            "-1 is out of range for uint32"
        );
        assert_eq!(
            json_err(r#"{"graph": {}}"#).1,
            "expected an array, found an object"
        );
        assert_eq!(
            json_err(r#"[]"#).1,
            "expected an object (ge.proto.ModelDef), found an array"
        );
        assert!(
            json_err(r#"{"attr": [{"key": "k", "value": {"s": "\\q"}}]}"#)
                .1
                .contains("invalid escape")
        );
    }

    #[test]
    fn broken_json_reports_line_and_column() {
        let (path, msg) = json_err("{\n  \"name\": \"m\",\n  \"graph\": [}\n");
        assert_eq!(path, "$");
        assert!(msg.contains("line 3 column 13"), "{msg}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn random_text_never_panics(s in "\\PC{0,200}") {
            let _ = from_json(&s);
        }

        #[test]
        fn truncated_json_never_panics(cut in 0usize..4000) {
            let text = to_json(&every_variant_model(), &RT2).to_string();
            let mut end = cut.min(text.len());
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            let _ = from_json(&text[..end]);
        }

        #[test]
        fn mutated_json_never_panics(at in 0usize..4000, b in 0u8..128) {
            let mut bytes = to_json(&every_variant_model(), &RT2).to_string().into_bytes();
            let at = at % bytes.len();
            bytes[at] = b;
            if let Ok(s) = std::str::from_utf8(&bytes) {
                let _ = from_json(s);
            }
        }
    }
}
