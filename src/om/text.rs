//! GE IR text dumps: the protobuf text format of a `ge.proto.ModelDef`, as GE writes it in
//! `ge_proto_*.txt` graph dumps (`DUMP_GE_GRAPH`) and reads it back with `ReadProtoFromTextFile`.
//!
//! Owns the text reader ([`parse_text`]), the writer ([`print_text`]) and the C escaping and
//! float formatting that the JSON view shares. Must not do IO, must not panic on any input,
//! and must not know GE semantics (edges, subgraphs): it maps text to protobuf and back.
//!
//! The reader is a byte lexer plus a parser driven by the descriptor pool that writes
//! protobuf wire bytes straight into one buffer, which prost then decodes. Going through
//! prost-reflect's `DynamicMessage` instead allocates a map per message and a value per
//! field, which is several times slower on multi-megabyte dumps.

use std::fmt::Write as _;
use std::sync::OnceLock;

use prost::Message as _;
use prost_reflect::{DynamicMessage, Kind, MapKey, MessageDescriptor, ReflectMessage as _, Value};

use super::error::{OmError, Place, Result};
use crate::proto::ge_ir::ModelDef;

/// Full name of the message a GE dump holds.
pub(crate) const MODEL_DEF: &str = "ge.proto.ModelDef";

/// Deepest message nesting the reader accepts, the default of C++ `TextFormat::Parser`;
/// it keeps hostile input from exhausting the stack.
const MAX_DEPTH: usize = 100;

/// Width of the length prefix reserved before a nested message or string whose length is
/// not known yet. Padded varints are valid protobuf, so the prefix is patched in place
/// instead of moving the body; 5 bytes cover lengths below 32 GiB.
const LEN_PREFIX: usize = 5;

/// The descriptor of `ge.proto.ModelDef` in rt2's descriptor pool.
pub(crate) fn model_descriptor() -> MessageDescriptor {
    crate::proto::descriptor_pool()
        .get_message_by_name(MODEL_DEF)
        .expect("ge_ir.proto is compiled into the descriptor pool")
}

/// Parses a GE text dump (protobuf text format of a `ge.proto.ModelDef`).
///
/// Accepts everything C++ `TextFormat::Print` writes and what `TextFormat::Parse` accepts in
/// common use: optional `:` before `{`, `<...>` delimiters, `#` comments, `;` or `,` after a
/// field, `[a, b]` lists, enum names or numbers, decimal/hex/octal integers, floats with an
/// `f` suffix, `inf`/`nan`, adjacent string literals and C escapes (`\303`, `\x41`, `\u00e9`).
/// Extensions (`[pkg.ext]`) are not supported. A field that is not repeated but given twice
/// is merged the way the binary format merges it (last scalar wins).
///
/// Errors: [`OmError::Text`] with the 1-based line and column (in characters) of the token
/// at fault and what was expected there; unknown fields and enum names are errors.
pub fn parse_text(text: &str) -> Result<ModelDef> {
    let schema = schema();
    let mut p = Parser {
        s: text.as_bytes(),
        pos: 0,
        // Wire bytes are usually a little smaller than the text.
        out: Vec::with_capacity(text.len()),
        schema,
    };
    p.message_body(schema.root, None, 0)?;
    ModelDef::decode(p.out.as_slice()).map_err(|source| OmError::Protobuf {
        place: Place::new("text dump"),
        message: MODEL_DEF,
        source,
    })
}

/// Prints `model` the way C++ `TextFormat::Print` does: 2-space indent, fields in field
/// number order, proto3 scalars equal to their default left out (oneof members and messages
/// are printed when set), map entries sorted by key with both `key` and `value`, enums by
/// name, strings and bytes C-escaped with octal escapes for every byte outside printable
/// ASCII, floats as `SimpleFtoa` writes them. A model without a name starts with `graph {`.
///
/// `parse_text(&print_text(m))` equals `m` for every model.
pub fn print_text(model: &ModelDef) -> String {
    let mut msg = DynamicMessage::new(model_descriptor());
    // Transcoding a prost message into its own descriptor cannot fail; the guard only keeps
    // a broken build from printing silently wrong text in debug builds.
    let transcoded = msg.transcode_from(model);
    debug_assert!(transcoded.is_ok(), "ModelDef transcodes to its descriptor");
    let mut out = String::with_capacity(model.encoded_len() * 2);
    print_message(&mut out, &msg, 0);
    out
}

/// The file name GE gives a graph dump: `ge_proto_%08d_graph_<graph>_<suffix>.txt`.
/// `graph` is the graph id as GE prints it; `suffix` is used as given (GE sanitizes it).
pub fn write_dump_name(index: u32, graph: &str, suffix: &str) -> String {
    format!("ge_proto_{index:08}_graph_{graph}_{suffix}.txt")
}

// ---------------------------------------------------------------------------------------
// Schema tables: the descriptor pool flattened into vectors indexed by message and enum, so
// the parser's hot loop compares byte slices instead of walking descriptors.

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum FieldKind {
    Double,
    Float,
    Int32,
    Int64,
    Uint32,
    Uint64,
    Sint32,
    Sint64,
    Fixed32,
    Fixed64,
    Sfixed32,
    Sfixed64,
    Bool,
    String,
    Bytes,
    Enum(usize),
    Message(usize),
}

impl FieldKind {
    fn wire_type(self) -> u64 {
        match self {
            FieldKind::Double | FieldKind::Fixed64 | FieldKind::Sfixed64 => 1,
            FieldKind::Float | FieldKind::Fixed32 | FieldKind::Sfixed32 => 5,
            FieldKind::String | FieldKind::Bytes | FieldKind::Message(_) => 2,
            _ => 0,
        }
    }
}

struct FieldInfo {
    name: Box<[u8]>,
    number: u32,
    kind: FieldKind,
    repeated: bool,
}

struct MsgInfo {
    full_name: Box<str>,
    fields: Vec<FieldInfo>,
}

struct EnumInfo {
    full_name: Box<str>,
    values: Vec<(Box<[u8]>, i32)>,
}

struct Schema {
    root: usize,
    msgs: Vec<MsgInfo>,
    enums: Vec<EnumInfo>,
}

fn schema() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let mut b = SchemaBuilder::default();
        let root = b.message(&model_descriptor());
        Schema {
            root,
            msgs: b.msgs,
            enums: b.enums,
        }
    })
}

#[derive(Default)]
struct SchemaBuilder {
    msgs: Vec<MsgInfo>,
    enums: Vec<EnumInfo>,
    msg_index: std::collections::HashMap<String, usize>,
    enum_index: std::collections::HashMap<String, usize>,
}

impl SchemaBuilder {
    fn message(&mut self, desc: &MessageDescriptor) -> usize {
        if let Some(&i) = self.msg_index.get(desc.full_name()) {
            return i;
        }
        let index = self.msgs.len();
        self.msg_index.insert(desc.full_name().to_owned(), index);
        self.msgs.push(MsgInfo {
            full_name: desc.full_name().into(),
            fields: Vec::new(),
        });
        let mut fields = Vec::new();
        for f in desc.fields() {
            let kind = match f.kind() {
                Kind::Double => FieldKind::Double,
                Kind::Float => FieldKind::Float,
                Kind::Int32 => FieldKind::Int32,
                Kind::Int64 => FieldKind::Int64,
                Kind::Uint32 => FieldKind::Uint32,
                Kind::Uint64 => FieldKind::Uint64,
                Kind::Sint32 => FieldKind::Sint32,
                Kind::Sint64 => FieldKind::Sint64,
                Kind::Fixed32 => FieldKind::Fixed32,
                Kind::Fixed64 => FieldKind::Fixed64,
                Kind::Sfixed32 => FieldKind::Sfixed32,
                Kind::Sfixed64 => FieldKind::Sfixed64,
                Kind::Bool => FieldKind::Bool,
                Kind::String => FieldKind::String,
                Kind::Bytes => FieldKind::Bytes,
                Kind::Message(m) => FieldKind::Message(self.message(&m)),
                Kind::Enum(e) => {
                    let i = match self.enum_index.get(e.full_name()) {
                        Some(&i) => i,
                        None => {
                            let i = self.enums.len();
                            self.enum_index.insert(e.full_name().to_owned(), i);
                            self.enums.push(EnumInfo {
                                full_name: e.full_name().into(),
                                values: e
                                    .values()
                                    .map(|v| (v.name().as_bytes().into(), v.number()))
                                    .collect(),
                            });
                            i
                        }
                    };
                    FieldKind::Enum(i)
                }
            };
            fields.push(FieldInfo {
                name: f.name().as_bytes().into(),
                number: f.number(),
                kind,
                repeated: f.is_list() || f.is_map(),
            });
        }
        self.msgs[index].fields = fields;
        index
    }
}

// ---------------------------------------------------------------------------------------
// The reader.

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
    out: Vec<u8>,
    schema: &'static Schema,
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reserves a padded length prefix and returns where it starts.
fn begin_len(out: &mut Vec<u8>) -> usize {
    let at = out.len();
    out.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x00]);
    at
}

/// Writes the length of everything after the prefix at `at` into the prefix.
fn end_len(out: &mut [u8], at: usize) {
    let len = (out.len() - at - LEN_PREFIX) as u64;
    for i in 0..LEN_PREFIX - 1 {
        out[at + i] = ((len >> (7 * i)) as u8 & 0x7f) | 0x80;
    }
    out[at + LEN_PREFIX - 1] = (len >> (7 * (LEN_PREFIX - 1))) as u8 & 0x7f;
}

/// What a scalar token turned out to be, before it is fitted to a field's type.
enum Number {
    Int { neg: bool, mag: u64 },
    Float(f64),
}

impl<'a> Parser<'a> {
    /// An error at byte offset `pos`, with line and column counted from the start.
    fn err(&self, pos: usize, msg: impl Into<String>) -> OmError {
        let pos = pos.min(self.s.len());
        let before = &self.s[..pos];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        // Count characters, not bytes: UTF-8 continuation bytes do not start one.
        let column = before[line_start..]
            .iter()
            .filter(|&&b| b & 0xc0 != 0x80)
            .count()
            + 1;
        OmError::Text {
            line,
            column,
            msg: msg.into(),
        }
    }

    /// Describes the token at `pos` for "expected X, found Y" messages.
    fn found(&self, pos: usize) -> String {
        match self.s.get(pos) {
            None => "end of input".to_owned(),
            Some(&b) if b.is_ascii_alphanumeric() || b == b'_' => {
                let end = self.s[pos..]
                    .iter()
                    .position(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.')))
                    .map_or(self.s.len(), |n| pos + n);
                format!(
                    "`{}`",
                    String::from_utf8_lossy(&self.s[pos..end.min(pos + 40)])
                )
            }
            Some(&b) if b.is_ascii_graphic() => format!("'{}'", b as char),
            Some(&b) => format!("byte 0x{b:02x}"),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(&b) = self.s.get(self.pos) {
            match b {
                b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c => self.pos += 1,
                b'#' => {
                    while let Some(&c) = self.s.get(self.pos) {
                        if c == b'\n' {
                            break;
                        }
                        self.pos += 1;
                    }
                }
                _ => return,
            }
        }
    }

    fn ident(&mut self) -> Option<&'a [u8]> {
        let s: &'a [u8] = self.s;
        let start = self.pos;
        match s.get(start) {
            Some(b) if b.is_ascii_alphabetic() || *b == b'_' => {}
            _ => return None,
        }
        let mut end = start + 1;
        while let Some(b) = s.get(end) {
            if !(b.is_ascii_alphanumeric() || *b == b'_') {
                break;
            }
            end += 1;
        }
        self.pos = end;
        Some(&s[start..end])
    }

    /// Parses fields until `close` (or the end of input at the top level).
    fn message_body(&mut self, msg: usize, close: Option<u8>, depth: usize) -> Result<()> {
        let schema = self.schema;
        let info = &schema.msgs[msg];
        loop {
            self.skip_ws();
            let Some(c) = self.peek() else {
                return match close {
                    None => Ok(()),
                    Some(c) => Err(self.err(
                        self.pos,
                        format!(
                            "expected a field name or '{}', found end of input",
                            c as char
                        ),
                    )),
                };
            };
            if Some(c) == close {
                self.pos += 1;
                return Ok(());
            }
            let start = self.pos;
            if c == b'[' {
                return Err(self.err(start, "extensions and Any expansions are not supported"));
            }
            let Some(name) = self.ident() else {
                let closing = close.map_or(String::new(), |c| format!(" or '{}'", c as char));
                return Err(self.err(
                    start,
                    format!(
                        "expected a field name{closing}, found {}",
                        self.found(start)
                    ),
                ));
            };
            let Some(field) = info.fields.iter().find(|f| &*f.name == name) else {
                return Err(self.err(
                    start,
                    format!(
                        "unknown field \"{}\" in {}",
                        String::from_utf8_lossy(name),
                        info.full_name
                    ),
                ));
            };
            self.skip_ws();
            if let FieldKind::Message(sub) = field.kind {
                let mut list = false;
                if self.peek() == Some(b':') {
                    self.pos += 1;
                    self.skip_ws();
                    list = self.peek() == Some(b'[');
                }
                if list {
                    self.list(field, start, |p| p.sub_message(field, sub, depth))?;
                } else {
                    self.sub_message(field, sub, depth)?;
                }
            } else {
                if self.peek() != Some(b':') {
                    return Err(self.err(
                        self.pos,
                        format!(
                            "expected ':' after field \"{}\", found {}",
                            String::from_utf8_lossy(name),
                            self.found(self.pos)
                        ),
                    ));
                }
                self.pos += 1;
                self.skip_ws();
                if self.peek() == Some(b'[') {
                    self.list(field, start, |p| p.scalar(field))?;
                } else {
                    self.scalar(field)?;
                }
            }
            self.skip_ws();
            if matches!(self.peek(), Some(b';' | b',')) {
                self.pos += 1;
            }
        }
    }

    /// Parses `[item, item, ...]` for a repeated field; the cursor is on `[`.
    fn list(
        &mut self,
        field: &FieldInfo,
        name_pos: usize,
        mut item: impl FnMut(&mut Self) -> Result<()>,
    ) -> Result<()> {
        if !field.repeated {
            return Err(self.err(
                name_pos,
                format!(
                    "field \"{}\" is not repeated and cannot take a [list]",
                    String::from_utf8_lossy(&field.name)
                ),
            ));
        }
        self.pos += 1;
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            self.skip_ws();
            item(self)?;
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => {
                    return Err(self.err(
                        self.pos,
                        format!("expected ',' or ']', found {}", self.found(self.pos)),
                    ));
                }
            }
        }
    }

    fn tag(&mut self, field: &FieldInfo) {
        put_varint(
            &mut self.out,
            (u64::from(field.number) << 3) | field.kind.wire_type(),
        );
    }

    fn sub_message(&mut self, field: &FieldInfo, sub: usize, depth: usize) -> Result<()> {
        self.skip_ws();
        let close = match self.peek() {
            Some(b'{') => b'}',
            Some(b'<') => b'>',
            _ => {
                return Err(self.err(
                    self.pos,
                    format!(
                        "expected '{{' after message field \"{}\", found {}",
                        String::from_utf8_lossy(&field.name),
                        self.found(self.pos)
                    ),
                ));
            }
        };
        if depth >= MAX_DEPTH {
            return Err(self.err(
                self.pos,
                format!("messages nest deeper than {MAX_DEPTH} levels"),
            ));
        }
        self.pos += 1;
        self.tag(field);
        let at = begin_len(&mut self.out);
        self.message_body(sub, Some(close), depth + 1)?;
        end_len(&mut self.out, at);
        Ok(())
    }

    fn scalar(&mut self, field: &FieldInfo) -> Result<()> {
        let start = self.pos;
        match field.kind {
            FieldKind::String | FieldKind::Bytes => {
                if !matches!(self.peek(), Some(b'"' | b'\'')) {
                    return Err(self.err(
                        start,
                        format!("expected a quoted string, found {}", self.found(start)),
                    ));
                }
                self.tag(field);
                let at = begin_len(&mut self.out);
                // Adjacent literals concatenate, as in C.
                while matches!(self.peek(), Some(b'"' | b'\'')) {
                    self.string_literal()?;
                    self.skip_ws();
                }
                if field.kind == FieldKind::String
                    && std::str::from_utf8(&self.out[at + LEN_PREFIX..]).is_err()
                {
                    return Err(self.err(
                        start,
                        format!(
                            "string field \"{}\" is not valid UTF-8",
                            String::from_utf8_lossy(&field.name)
                        ),
                    ));
                }
                end_len(&mut self.out, at);
                Ok(())
            }
            FieldKind::Enum(e) => {
                let info = &self.schema.enums[e];
                let number = if let Some(name) = self.ident() {
                    match info.values.iter().find(|(n, _)| &**n == name) {
                        Some(&(_, v)) => v,
                        None => {
                            return Err(self.err(
                                start,
                                format!(
                                    "unknown value \"{}\" of enum {}",
                                    String::from_utf8_lossy(name),
                                    info.full_name
                                ),
                            ));
                        }
                    }
                } else {
                    self.int_in_range(i64::from(i32::MIN), i64::from(i32::MAX) as u64, "enum")?
                        as i32
                };
                self.tag(field);
                put_varint(&mut self.out, i64::from(number) as u64);
                Ok(())
            }
            FieldKind::Bool => {
                let v = if let Some(name) = self.ident() {
                    match name {
                        b"true" | b"True" | b"t" => true,
                        b"false" | b"False" | b"f" => false,
                        _ => {
                            return Err(self.err(
                                start,
                                format!("expected true or false, found {}", self.found(start)),
                            ));
                        }
                    }
                } else {
                    self.int_in_range(0, 1, "bool")? != 0
                };
                self.tag(field);
                self.out.push(u8::from(v));
                Ok(())
            }
            FieldKind::Float | FieldKind::Double => {
                let v = match self.number(field.kind == FieldKind::Float)? {
                    Number::Float(f) => f,
                    Number::Int { neg, mag } => {
                        if neg {
                            -(mag as f64)
                        } else {
                            mag as f64
                        }
                    }
                };
                self.tag(field);
                if field.kind == FieldKind::Float {
                    self.out.extend_from_slice(&(v as f32).to_le_bytes());
                } else {
                    self.out.extend_from_slice(&v.to_le_bytes());
                }
                Ok(())
            }
            kind => {
                let (lo, hi, what) = match kind {
                    FieldKind::Int32 | FieldKind::Sint32 | FieldKind::Sfixed32 => {
                        (i64::from(i32::MIN), i32::MAX as u64, "int32")
                    }
                    FieldKind::Uint32 | FieldKind::Fixed32 => (0, u64::from(u32::MAX), "uint32"),
                    FieldKind::Uint64 | FieldKind::Fixed64 => (0, u64::MAX, "uint64"),
                    _ => (i64::MIN, i64::MAX as u64, "int64"),
                };
                let v = self.int_in_range(lo, hi, what)?;
                self.tag(field);
                match kind {
                    FieldKind::Sint32 => {
                        let n = v as i32;
                        put_varint(&mut self.out, u64::from(((n << 1) ^ (n >> 31)) as u32));
                    }
                    FieldKind::Sint64 => {
                        let n = v as i64;
                        put_varint(&mut self.out, ((n << 1) ^ (n >> 63)) as u64);
                    }
                    FieldKind::Fixed32 | FieldKind::Sfixed32 => {
                        self.out.extend_from_slice(&(v as u32).to_le_bytes());
                    }
                    FieldKind::Fixed64 | FieldKind::Sfixed64 => {
                        self.out.extend_from_slice(&v.to_le_bytes());
                    }
                    // int32 and int64 write negatives as 10-byte two's complement varints.
                    _ => put_varint(&mut self.out, v),
                }
                Ok(())
            }
        }
    }

    /// Reads an integer in `lo..=hi` and returns it as its two's complement bits.
    fn int_in_range(&mut self, lo: i64, hi: u64, what: &str) -> Result<u64> {
        let start = self.pos;
        match self.number(false)? {
            Number::Int { neg: false, mag } if mag <= hi => Ok(mag),
            Number::Int { neg: true, mag } if mag <= lo.unsigned_abs() => {
                Ok(0u64.wrapping_sub(mag))
            }
            Number::Int { .. } => Err(self.err(start, format!("{what} value out of range"))),
            Number::Float(_) => Err(self.err(
                start,
                format!(
                    "expected an integer ({what}), found {}",
                    self.found_number(start)
                ),
            )),
        }
    }

    fn found_number(&self, start: usize) -> String {
        format!(
            "`{}`",
            String::from_utf8_lossy(&self.s[start..self.pos.max(start)])
        )
    }

    /// Reads a number token: `-`? then decimal, `0x` hex or `0` octal integers, or floats
    /// (`1.5`, `1e-05`, `2f`, `inf`, `nan`).
    fn number(&mut self, float_f32: bool) -> Result<Number> {
        let start = self.pos;
        let neg = self.peek() == Some(b'-');
        if neg {
            self.pos += 1;
            self.skip_ws();
        }
        let tok_start = self.pos;
        let s = self.s;
        let mut end = tok_start;
        while let Some(&b) = s.get(end) {
            let exp_sign = matches!(b, b'+' | b'-')
                && end > tok_start
                && matches!(s[end - 1], b'e' | b'E')
                && !(s[tok_start..].starts_with(b"0x") || s[tok_start..].starts_with(b"0X"));
            if b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || exp_sign {
                end += 1;
            } else {
                break;
            }
        }
        self.pos = end;
        let tok = &s[tok_start..end];
        let bad = |p: &Self| {
            p.err(
                start,
                format!("expected a number, found {}", p.found(tok_start)),
            )
        };
        if tok.is_empty() {
            return Err(bad(self));
        }
        let text = std::str::from_utf8(tok).map_err(|_| bad(self))?;
        let int = if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
            Some(u64::from_str_radix(hex, 16).map_err(|_| bad(self))?)
        } else if tok.iter().all(u8::is_ascii_digit) {
            if tok.len() > 1 && tok[0] == b'0' {
                Some(u64::from_str_radix(&text[1..], 8).map_err(|_| bad(self))?)
            } else {
                // An all-digit token that overflows u64 is out of range, not malformed.
                Some(
                    text.parse::<u64>()
                        .map_err(|_| self.err(start, "integer out of range"))?,
                )
            }
        } else {
            None
        };
        if let Some(mag) = int {
            return Ok(Number::Int { neg, mag });
        }
        if !tok[0].is_ascii_digit() && tok[0] != b'.' {
            // Only inf, infinity and nan are words that spell numbers.
            let lower = text.to_ascii_lowercase();
            if !matches!(
                lower.as_str(),
                "inf" | "infinity" | "nan" | "inff" | "infinityf" | "nanf"
            ) {
                return Err(bad(self));
            }
        }
        let body = if text.ends_with(['f', 'F']) && !text.eq_ignore_ascii_case("inf") {
            &text[..text.len() - 1]
        } else {
            text
        };
        // Parse floats as f32 directly so the value is correctly rounded to single precision.
        let v = if float_f32 {
            body.parse::<f32>().map(f64::from).map_err(|_| bad(self))?
        } else {
            body.parse::<f64>().map_err(|_| bad(self))?
        };
        Ok(Number::Float(if neg { -v } else { v }))
    }

    /// Copies one quoted literal, unescaped, to the output; the cursor is on the quote.
    fn string_literal(&mut self) -> Result<()> {
        let s = self.s;
        let start = self.pos;
        let quote = s[start];
        self.pos += 1;
        loop {
            let run = self.pos;
            while let Some(&b) = s.get(self.pos) {
                if b == quote || b == b'\\' || b == b'\n' {
                    break;
                }
                self.pos += 1;
            }
            self.out.extend_from_slice(&s[run..self.pos]);
            match s.get(self.pos) {
                Some(&b) if b == quote => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(b'\\') => {
                    let esc = self.pos;
                    self.pos = unescape_one(s, self.pos + 1, &mut self.out)
                        .map_err(|msg| self.err(esc, msg))?;
                }
                _ => return Err(self.err(start, "string literal is not closed on its line")),
            }
        }
    }
}

/// Decodes the C escape that starts at `s[i]` (just after the backslash), appends the bytes
/// it stands for to `out` and returns the index after it. Shared with the JSON reader.
pub(crate) fn unescape_one(
    s: &[u8],
    i: usize,
    out: &mut Vec<u8>,
) -> std::result::Result<usize, String> {
    let Some(&c) = s.get(i) else {
        return Err("escape at end of input".to_owned());
    };
    let simple = match c {
        b'n' => Some(b'\n'),
        b't' => Some(b'\t'),
        b'r' => Some(b'\r'),
        b'a' => Some(0x07),
        b'b' => Some(0x08),
        b'f' => Some(0x0c),
        b'v' => Some(0x0b),
        b'\\' | b'\'' | b'"' | b'?' => Some(c),
        _ => None,
    };
    if let Some(b) = simple {
        out.push(b);
        return Ok(i + 1);
    }
    let hex_digits = |from: usize, max: usize| -> (u32, usize) {
        let mut v = 0u32;
        let mut j = from;
        while j < from + max {
            match s.get(j).and_then(|b| (*b as char).to_digit(16)) {
                Some(d) => v = v * 16 + d,
                None => break,
            }
            j += 1;
        }
        (v, j)
    };
    match c {
        b'0'..=b'7' => {
            let mut v = 0u32;
            let mut j = i;
            while j < i + 3 && matches!(s.get(j), Some(b'0'..=b'7')) {
                v = v * 8 + u32::from(s[j] - b'0');
                j += 1;
            }
            // C++ keeps the low byte of \400..\777; so does rt2.
            out.push(v as u8);
            Ok(j)
        }
        b'x' | b'X' => {
            let (v, j) = hex_digits(i + 1, 2);
            if j == i + 1 {
                return Err("\\x escape without hex digits".to_owned());
            }
            out.push(v as u8);
            Ok(j)
        }
        b'u' | b'U' => {
            let n = if c == b'u' { 4 } else { 8 };
            let (mut v, mut j) = hex_digits(i + 1, n);
            if j != i + 1 + n {
                return Err(format!("\\{} escape needs {n} hex digits", c as char));
            }
            // A UTF-16 surrogate pair written as two \u escapes is one character.
            if (0xd800..0xdc00).contains(&v)
                && s.get(j) == Some(&b'\\')
                && s.get(j + 1) == Some(&b'u')
            {
                let (lo, k) = hex_digits(j + 2, 4);
                if k == j + 6 && (0xdc00..0xe000).contains(&lo) {
                    v = 0x10000 + ((v - 0xd800) << 10) + (lo - 0xdc00);
                    j = k;
                }
            }
            let ch = char::from_u32(v).ok_or_else(|| format!("invalid code point U+{v:04X}"))?;
            let mut buf = [0u8; 4];
            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
            Ok(j)
        }
        _ => Err(format!("invalid escape \\{}", (c as char).escape_default())),
    }
}

// ---------------------------------------------------------------------------------------
// The writer.

fn print_message(out: &mut String, msg: &DynamicMessage, indent: usize) {
    let desc = msg.descriptor();
    let mut fields: Vec<_> = desc.fields().collect();
    fields.sort_by_key(|f| f.number());
    for f in fields {
        if !msg.has_field(&f) {
            continue;
        }
        let kind = f.kind();
        match &*msg.get_field(&f) {
            Value::List(items) => {
                for item in items {
                    print_value(out, f.name(), &kind, item, indent);
                }
            }
            Value::Map(map) => {
                let Kind::Message(entry) = &kind else {
                    continue;
                };
                let key_kind = entry.map_entry_key_field().kind();
                let value_kind = entry.map_entry_value_field().kind();
                let mut entries: Vec<_> = map.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                for (key, value) in entries {
                    pad(out, indent);
                    out.push_str(f.name());
                    out.push_str(" {\n");
                    print_value(out, "key", &key_kind, &map_key_value(key), indent + 2);
                    print_value(out, "value", &value_kind, value, indent + 2);
                    pad(out, indent);
                    out.push_str("}\n");
                }
            }
            value => print_value(out, f.name(), &kind, value, indent),
        }
    }
}

pub(crate) fn map_key_value(key: &MapKey) -> Value {
    match key {
        MapKey::Bool(v) => Value::Bool(*v),
        MapKey::I32(v) => Value::I32(*v),
        MapKey::I64(v) => Value::I64(*v),
        MapKey::U32(v) => Value::U32(*v),
        MapKey::U64(v) => Value::U64(*v),
        MapKey::String(v) => Value::String(v.clone()),
    }
}

fn pad(out: &mut String, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
}

fn print_value(out: &mut String, name: &str, kind: &Kind, value: &Value, indent: usize) {
    pad(out, indent);
    out.push_str(name);
    match value {
        Value::Message(m) => {
            out.push_str(" {\n");
            print_message(out, m, indent + 2);
            pad(out, indent);
            out.push_str("}\n");
        }
        Value::Bool(v) => {
            let _ = writeln!(out, ": {v}");
        }
        Value::I32(v) => {
            let _ = writeln!(out, ": {v}");
        }
        Value::I64(v) => {
            let _ = writeln!(out, ": {v}");
        }
        Value::U32(v) => {
            let _ = writeln!(out, ": {v}");
        }
        Value::U64(v) => {
            let _ = writeln!(out, ": {v}");
        }
        Value::F32(v) => {
            let _ = writeln!(out, ": {}", simple_ftoa(*v));
        }
        Value::F64(v) => {
            let _ = writeln!(out, ": {}", simple_dtoa(*v));
        }
        Value::String(v) => {
            out.push_str(": \"");
            c_escape_into(out, v.as_bytes());
            out.push_str("\"\n");
        }
        Value::Bytes(v) => {
            out.push_str(": \"");
            c_escape_into(out, v);
            out.push_str("\"\n");
        }
        Value::EnumNumber(n) => {
            let name = match kind {
                Kind::Enum(e) => e.get_value(*n).map(|v| v.name().to_owned()),
                _ => None,
            };
            let _ = writeln!(out, ": {}", name.unwrap_or_else(|| n.to_string()));
        }
        // Lists and maps never nest directly inside each other in protobuf.
        Value::List(_) | Value::Map(_) => out.push_str(": []\n"),
    }
}

/// Appends `bytes` escaped the way C++ `CEscape` does: `\n \r \t \" \' \\` by name and every
/// other byte outside printable ASCII as a 3-digit octal escape, UTF-8 included.
pub(crate) fn c_escape_into(out: &mut String, bytes: &[u8]) {
    for &b in bytes {
        match b {
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            b'"' => out.push_str("\\\""),
            b'\'' => out.push_str("\\'"),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(b as char),
            _ => {
                out.push('\\');
                out.push((b'0' + (b >> 6)) as char);
                out.push((b'0' + ((b >> 3) & 7)) as char);
                out.push((b'0' + (b & 7)) as char);
            }
        }
    }
}

/// `printf("%.{precision}g", v)` as glibc writes it.
pub(crate) fn format_g(v: f64, precision: usize) -> String {
    if v.is_nan() {
        return "nan".to_owned();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    let p = precision.max(1);
    if v == 0.0 {
        return if v.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    let sci = format!("{:.*e}", p - 1, v);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if exp < -4 || exp >= p as i32 {
        let mantissa = trim_fraction(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.unsigned_abs())
    } else {
        let decimals = (p as i32 - 1 - exp).max(0) as usize;
        trim_fraction(&format!("{v:.decimals$}")).to_owned()
    }
}

fn trim_fraction(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// A float as protobuf's `SimpleFtoa` writes it: `%.6g` if that reads back to the same
/// float, else `%.9g`; NaN as `nan` whatever its sign.
pub(crate) fn simple_ftoa(v: f32) -> String {
    if v.is_nan() {
        return "nan".to_owned();
    }
    let short = format_g(f64::from(v), 6);
    if short.parse::<f32>().ok() == Some(v) {
        short
    } else {
        format_g(f64::from(v), 9)
    }
}

/// A double as protobuf's `SimpleDtoa` writes it: `%.15g`, else `%.17g`.
pub(crate) fn simple_dtoa(v: f64) -> String {
    if v.is_nan() {
        return "nan".to_owned();
    }
    let short = format_g(v, 15);
    if short.parse::<f64>().ok() == Some(v) {
        short
    } else {
        format_g(v, 17)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::om::testdata_text::{every_variant_model, large_model};
    use crate::proto::ge_ir::attr_def::Value as V;
    use proptest::prelude::*;

    /// A GE-style dump as C++ `TextFormat::Print` writes it: subgraphs, a control edge, an
    /// unconnected input, list attrs, tensor descs and a Const tensor whose bytes are not UTF-8.
    const GOLDEN: &str = r#"graph {
  name: "partition0_rank1_new_sub_graph1"
  input: "PlaceHolder0:0"
  output: "If0:0"
  op {
    name: "PlaceHolder0"
    type: "PlaceHolder"
    attr {
      key: "anchorIndex"
      value {
        i: 0
      }
    }
    attr {
      key: "epsilon"
      value {
        f: 1e-05
      }
    }
    output_desc {
      name: "y"
      dtype: DT_FLOAT
      shape {
        dim: 1
        dim: -1
        dim: 224
      }
      layout: "NCHW"
      attr {
        key: "origin_shape"
        value {
          list {
            i: 1
            i: -1
            i: 224
            val_type: VT_LIST_INT
          }
        }
      }
      device_type: "NPU"
      real_dim_cnt: 3
    }
  }
  op {
    name: "Const0"
    type: "Const"
    attr {
      key: "value"
      value {
        t {
          desc {
            dtype: DT_UINT8
            shape {
              dim: 4
            }
            layout: "ND"
          }
          data: "\303\251\000\377"
        }
      }
    }
  }
  op {
    name: "If0"
    type: "If"
    input: "PlaceHolder0:0"
    input: "Const0:0"
    input: ""
    input: "Const0:-1"
    attr {
      key: "T"
      value {
        dt: 0
      }
    }
    attr {
      key: "_input_name_key"
      value {
        list {
          s: "cond"
          s: "input"
          val_type: VT_LIST_STRING
        }
      }
    }
    attr {
      key: "flag"
      value {
        b: true
      }
    }
    attr {
      key: "scales"
      value {
        list {
          f: 0.5
          f: 0.1
          f: 123456792
          f: -inf
          val_type: VT_LIST_FLOAT
        }
      }
    }
    attr {
      key: "tag"
      value {
        s: "caf\303\251 \"q\" \\n\t"
      }
    }
    id: 2
    stream_id: 1
    subgraph_name: "then_branch"
    subgraph_name: "else_branch"
  }
}
graph {
  name: "then_branch"
  op {
    name: "sub_data"
    type: "Data"
    attr {
      key: "_parent_node_index"
      value {
        i: 1
      }
    }
  }
}
graph {
  name: "else_branch"
}
"#;

    fn attr<'a>(op: &'a crate::proto::ge_ir::OpDef, key: &str) -> &'a V {
        op.attr[key].value.as_ref().expect("attr has a value")
    }

    #[test]
    fn golden_dump_parses_to_values() {
        let m = parse_text(GOLDEN).expect("golden parses");
        assert_eq!(m.name, "");
        assert_eq!(m.graph.len(), 3);
        let g = &m.graph[0];
        assert_eq!(g.name, "partition0_rank1_new_sub_graph1");
        assert_eq!(g.input, ["PlaceHolder0:0"]);
        assert_eq!(g.output, ["If0:0"]);
        let ph = &g.op[0];
        assert_eq!(attr(ph, "anchorIndex"), &V::I(0));
        assert_eq!(attr(ph, "epsilon"), &V::F(1e-5));
        let y = &ph.output_desc[0];
        assert_eq!(
            (y.name.as_str(), y.dtype, y.layout.as_str()),
            ("y", 1, "NCHW")
        );
        assert_eq!(
            y.shape.as_ref().map(|s| s.dim.clone()),
            Some(vec![1, -1, 224])
        );
        assert_eq!(y.real_dim_cnt, 3);
        let V::List(l) = y.attr["origin_shape"].value.as_ref().expect("value") else {
            panic!("origin_shape is a list")
        };
        assert_eq!((l.i.as_slice(), l.val_type), (&[1, -1, 224][..], 2));
        let V::T(t) = attr(&g.op[1], "value") else {
            panic!("value is a tensor")
        };
        assert_eq!(t.data[..], [0xc3, 0xa9, 0x00, 0xff]);
        assert_eq!(t.desc.as_ref().map(|d| d.dtype), Some(4));
        let op = &g.op[2];
        assert_eq!(op.input, ["PlaceHolder0:0", "Const0:0", "", "Const0:-1"]);
        assert_eq!(attr(op, "T"), &V::Dt(0));
        assert_eq!(attr(op, "flag"), &V::B(true));
        let V::List(l) = attr(op, "_input_name_key") else {
            panic!("list")
        };
        assert_eq!(l.s, [b"cond".to_vec(), b"input".to_vec()]);
        let V::List(l) = attr(op, "scales") else {
            panic!("list")
        };
        assert_eq!(l.f, [0.5, 0.1, 123456789.0, f32::NEG_INFINITY]);
        assert_eq!(
            attr(op, "tag"),
            &V::S("café \"q\" \\n\t".as_bytes().to_vec())
        );
        assert_eq!((op.id, op.stream_id), (2, 1));
        assert_eq!(op.subgraph_name, ["then_branch", "else_branch"]);
        assert_eq!(
            m.graph[1].op[0].attr["_parent_node_index"].value,
            Some(V::I(1))
        );
        assert_eq!(m.graph[2].name, "else_branch");
    }

    #[test]
    fn golden_dump_prints_back_identically() {
        let m = parse_text(GOLDEN).expect("golden parses");
        assert_eq!(print_text(&m), GOLDEN);
    }

    #[test]
    fn every_variant_round_trips() {
        let m = every_variant_model();
        let text = print_text(&m);
        assert_eq!(parse_text(&text).expect("printed text parses"), m);
        // Printing is a fixed point once the text came from the printer.
        assert_eq!(print_text(&parse_text(&text).expect("parses")), text);
    }

    #[test]
    fn large_generated_dump_round_trips() {
        let m = large_model(5000);
        let text = print_text(&m);
        assert!(text.len() > 1 << 20, "dump is {} bytes", text.len());
        assert_eq!(parse_text(&text).expect("large dump parses"), m);
    }

    #[test]
    fn parser_accepts_what_text_format_parse_accepts() {
        let text = "# leading comment\n\
            name: 'm' ; version: 0x10, custom_version: \"a\" 'b'\n\
            graph < name: \"g\" op: [ { name: \"x\" id: -5 }, < name: 'y' > ] >\n\
            graph { op { input_desc { dtype: 7 shape { dim: [1, 2, 010] } reuse_input: t } \n\
            attr: { key: \"f\" value { f: -1.5e+2f } } attr { key: \"n\" value: { f: nan } }\n\
            attr { key: \"u\" value { s: \"\\u00e9\\x41\\101\\'\\\"\" } } } }\n";
        let m = parse_text(text).expect("lenient text parses");
        assert_eq!(
            (m.name.as_str(), m.version, m.custom_version.as_str()),
            ("m", 16, "ab")
        );
        let ops = &m.graph[0].op;
        assert_eq!(
            (ops[0].name.as_str(), ops[0].id, ops[1].name.as_str()),
            ("x", -5, "y")
        );
        let op = &m.graph[1].op[0];
        let d = &op.input_desc[0];
        assert_eq!(d.dtype, 7);
        assert!(d.reuse_input);
        assert_eq!(d.shape.as_ref().map(|s| s.dim.clone()), Some(vec![1, 2, 8]));
        assert_eq!(op.attr["f"].value, Some(V::F(-150.0)));
        assert!(matches!(op.attr["n"].value, Some(V::F(f)) if f.is_nan()));
        assert_eq!(op.attr["u"].value, Some(V::S("éAA'\"".as_bytes().to_vec())));
    }

    fn text_err(text: &str) -> (usize, usize, String) {
        match parse_text(text) {
            Err(OmError::Text { line, column, msg }) => (line, column, msg),
            other => panic!("expected a text error, got {other:?}"),
        }
    }

    #[test]
    fn syntax_error_names_line_and_column() {
        let (line, column, msg) = text_err("graph {\n  name: \"g\"\n  op {\n    name \"x\"\n");
        assert_eq!((line, column), (4, 10), "{msg}");
        assert!(msg.contains("expected ':'"), "{msg}");
        let (line, column, msg) = text_err("graph {\n  op {\n  }\n");
        assert_eq!((line, column), (4, 1), "{msg}");
        assert!(msg.contains("found end of input"), "{msg}");
        let (line, column, msg) = text_err("graph { name: \"é\" op { id: 1.5 } }");
        assert_eq!((line, column), (1, 28), "{msg}");
        assert!(msg.contains("expected an integer"), "{msg}");
    }

    #[test]
    fn unknown_field_is_an_error() {
        let (line, column, msg) = text_err("graph {\n  op {\n    colour: 3\n  }\n}\n");
        assert_eq!((line, column), (3, 5));
        assert_eq!(msg, "unknown field \"colour\" in ge.proto.OpDef");
    }

    #[test]
    fn bad_enum_name_is_an_error() {
        let (line, column, msg) = text_err("graph { op { input_desc { dtype: DT_FLOAT99 } } }");
        assert_eq!((line, column), (1, 34));
        assert_eq!(
            msg,
            "unknown value \"DT_FLOAT99\" of enum ge.proto.DataType"
        );
    }

    #[test]
    fn other_errors() {
        assert!(text_err("version: -1").2.contains("out of range"));
        assert!(text_err("name: \"abc").2.contains("not closed"));
        assert!(text_err("name: \"\\303\"").2.contains("UTF-8"));
        assert!(text_err("name: \"\\q\"").2.contains("invalid escape"));
        assert!(text_err("name: [\"a\"]").2.contains("not repeated"));
        assert!(text_err("[ext.x]: 1").2.contains("not supported"));
        let deep = format!(
            "graph {{ {}",
            "op { attr { key: \"k\" value { g { ".repeat(40)
        );
        assert!(text_err(&deep).2.contains("nest deeper"));
    }

    #[test]
    fn float_formatting_matches_simple_ftoa() {
        for (v, s) in [
            (1e-5f32, "1e-05"),
            (0.1, "0.1"),
            (1e6, "1e+06"),
            (123456.0, "123456"),
            (123456789.0, "123456792"),
            (-0.5, "-0.5"),
            (3.4028235e38, "3.40282347e+38"),
            (f32::INFINITY, "inf"),
            (f32::NAN, "nan"),
        ] {
            assert_eq!(simple_ftoa(v), s, "{v}");
        }
        assert_eq!(format_g(0.0001, 6), "0.0001");
        assert_eq!(format_g(100000.0, 6), "100000");
        assert_eq!(simple_dtoa(0.1), "0.1");
    }

    #[test]
    fn dump_name_follows_ge() {
        assert_eq!(
            write_dump_name(26, "3", "afterUBMatch"),
            "ge_proto_00000026_graph_3_afterUBMatch.txt"
        );
    }

    /// Release-build throughput: `cargo test --release --lib om::text::tests::parse_speed
    /// -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn parse_speed() {
        let text = print_text(&large_model(5000));
        let t = std::time::Instant::now();
        let runs = 10;
        for _ in 0..runs {
            std::hint::black_box(parse_text(&text).expect("parses"));
        }
        let mbs = (text.len() * runs) as f64 / t.elapsed().as_secs_f64() / 1e6;
        let desc = model_descriptor();
        let t = std::time::Instant::now();
        let dm = DynamicMessage::parse_text_format(desc, &text).expect("prost-reflect parses");
        let m: ModelDef = dm.transcode_to().expect("transcodes");
        let reflect = text.len() as f64 / t.elapsed().as_secs_f64() / 1e6;
        std::hint::black_box(m);
        println!(
            "{} bytes: rt2 {mbs:.0} MB/s, prost-reflect {reflect:.0} MB/s",
            text.len()
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn random_text_never_panics(s in "\\PC{0,200}") {
            let _ = parse_text(&s);
        }

        #[test]
        fn random_tokens_never_panic(s in "[a-z_{}<>:;,\\[\\]\"'\\\\0-9 .\\-#\n]{0,120}") {
            let _ = parse_text(&s);
        }

        #[test]
        fn truncated_dump_never_panics(cut in 0usize..GOLDEN.len()) {
            let mut end = cut;
            while !GOLDEN.is_char_boundary(end) {
                end -= 1;
            }
            let _ = parse_text(&GOLDEN[..end]);
        }

        #[test]
        fn mutated_dump_never_panics(at in 0usize..GOLDEN.len(), b in 0u8..128) {
            let mut bytes = GOLDEN.as_bytes().to_vec();
            bytes[at] = b;
            if let Ok(s) = std::str::from_utf8(&bytes) {
                let _ = parse_text(s);
            }
        }
    }
}
