//! Writing protobuf wire bytes by hand, for the encoders that skip prost's generated structs
//! on their hot paths (`exec::wire` for `.exeg` nodes, `om::model_writer` for GE IR ops).
//!
//! Each function writes what prost writes for the same field: a proto3 scalar is left out
//! when it is zero, a repeated or `oneof` one never is, and a nested message's length
//! comes first. [`put_message`] writes a message whose length is not known in advance
//! without sizing it twice (prost's `encoded_len` visits every nested level again at each
//! level above it): it leaves one byte for the length, writes the body, and moves the
//! body up only when its length needs more than that byte.

use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint};

/// A length-delimited field: `bytes`, `string`, or a message already encoded.
#[inline]
pub fn put_len_delimited(out: &mut Vec<u8>, tag: u32, body: &[u8]) {
    encode_key(tag, WireType::LengthDelimited, out);
    encode_varint(body.len() as u64, out);
    out.extend_from_slice(body);
}

/// A proto3 singular `string` or `bytes` field: left out when empty.
#[inline]
pub fn put_bytes(out: &mut Vec<u8>, tag: u32, body: &[u8]) {
    if !body.is_empty() {
        put_len_delimited(out, tag, body);
    }
}

/// A proto3 singular varint field (`int64`, `uint32`, `bool`, an enum; a negative `int64`
/// or enum as its two's complement, ten bytes): left out when zero.
#[inline]
pub fn put_varint(out: &mut Vec<u8>, tag: u32, v: u64) {
    if v != 0 {
        put_varint_always(out, tag, v);
    }
}

/// A varint field written even when zero (a `oneof` member).
#[inline]
pub fn put_varint_always(out: &mut Vec<u8>, tag: u32, v: u64) {
    encode_key(tag, WireType::Varint, out);
    encode_varint(v, out);
}

/// A packed repeated varint field (`repeated int64`, `repeated bool`): left out when empty.
#[inline]
pub fn put_packed_varints(out: &mut Vec<u8>, tag: u32, values: impl Iterator<Item = u64> + Clone) {
    let len: usize = values.clone().map(encoded_len_varint).sum();
    if len == 0 {
        return;
    }
    encode_key(tag, WireType::LengthDelimited, out);
    encode_varint(len as u64, out);
    for v in values {
        encode_varint(v, out);
    }
}

/// A packed repeated `float` field: left out when empty.
#[inline]
pub fn put_packed_floats(out: &mut Vec<u8>, tag: u32, values: &[f32]) {
    if values.is_empty() {
        return;
    }
    encode_key(tag, WireType::LengthDelimited, out);
    encode_varint(4 * values.len() as u64, out);
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

/// A message field whose body `body` appends to `out`; the length goes in front of it
/// afterwards (see the module docs). Written even when the body is empty, as prost writes
/// a message field that is set.
#[inline]
pub fn put_message(out: &mut Vec<u8>, tag: u32, body: impl FnOnce(&mut Vec<u8>)) {
    encode_key(tag, WireType::LengthDelimited, out);
    let at = out.len();
    out.push(0);
    body(out);
    let len = out.len() - at - 1;
    if len < 0x80 {
        out[at] = len as u8;
        return;
    }
    // Widen the one byte left for the length to the varint's width, then write the varint
    // into that space in place: no scratch buffer on a path taken once per large message.
    let width = encoded_len_varint(len as u64);
    out.resize(out.len() + width - 1, 0);
    out.copy_within(at + 1..at + 1 + len, at + width);
    let mut head: &mut [u8] = &mut out[at..at + width];
    encode_varint(len as u64, &mut head);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::ge_ir::{ShapeDef, TensorDef, TensorDescriptor};
    use proptest::prelude::*;
    use prost::Message;

    proptest! {
        /// A message of any length, nested, comes out as prost writes it.
        #[test]
        fn put_message_agrees_with_prost(
            dims in prop::collection::vec(any::<i64>(), 0..40),
            name in "[a-z]{0,200}",
            data in prop::collection::vec(any::<u8>(), 0..300),
        ) {
            let desc = TensorDescriptor {
                name: name.clone(),
                shape: Some(ShapeDef { dim: dims.clone() }),
                ..TensorDescriptor::default()
            };
            let t = TensorDef { desc: Some(desc), data: data.clone().into() };
            let mut ours = Vec::new();
            put_message(&mut ours, 1, |out| {
                put_message(out, 1, |out| {
                    put_bytes(out, 1, name.as_bytes());
                    put_message(out, 3, |out| {
                        put_packed_varints(out, 1, dims.iter().map(|&d| d as u64));
                    });
                });
                put_bytes(out, 2, &data);
            });
            let mut theirs = Vec::new();
            prost::encoding::message::encode(1, &t, &mut theirs);
            prop_assert_eq!(ours, theirs);
        }

        #[test]
        fn packed_floats_agree_with_prost(f in prop::collection::vec(any::<f32>(), 0..50)) {
            let l = crate::proto::ge_ir::attr_def::ListValue { f: f.clone(), ..Default::default() };
            let mut ours = Vec::new();
            put_packed_floats(&mut ours, 4, &f);
            prop_assert_eq!(ours, l.encode_to_vec());
        }
    }
}
