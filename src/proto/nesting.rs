//! How deep a protobuf message nests, found without recursion, before it is decoded.
//!
//! prost decodes a nested message by recursing, once per level. Its own guard is a fixed
//! limit of 100 levels, which real models pass: an ONNX `If` nested in an `If` costs
//! three levels (`GraphProto.node`, `NodeProto.attribute`, `AttributeProto.g`), so a
//! 34-deep nest of branches was refused as "malformed". rt2 builds prost without that
//! limit (its `no-recursion-limit` feature) and bounds the depth here instead: every
//! decode of bytes from a file first walks them with [`check`], which follows the
//! schema's message fields on an explicit stack, so a file nested past [`MAX_NESTING`]
//! levels is refused with [`TooDeep`] and never reaches the recursive decoder, whose
//! stack use is then bounded by the limit.
//!
//! The walk reads tags and lengths only: a message field (known from the descriptor
//! pool) is entered when it is long enough to nest past the limit, anything else skipped
//! by its length, so the walk costs a few field reads per large message. Groups (wire types 3 and 4,
//! which prost also decodes and skips by recursing) count as levels whatever their field.
//! Bytes that are not valid protobuf end the walk without an error: the decoder that
//! follows reports them with its own message.

use std::collections::HashMap;
use std::sync::OnceLock;

use prost_reflect::{DescriptorPool, Kind, MessageDescriptor};

/// The most levels of nested messages a file may have: ten times prost's default, room
/// for a model of 330 nested ONNX `If`s or `Loop`s (real models nest a few), and few
/// enough that decoding them stays well inside a thread's stack.
pub const MAX_NESTING: usize = 1000;

/// A message nested deeper than the limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "nesting deeper than {limit} levels (at byte offset {offset}), more than rt2 decodes; \
     real models nest far less"
)]
pub struct TooDeep {
    pub limit: usize,
    /// Where the first message past the limit starts.
    pub offset: usize,
}

/// For each message of the pool (by its index), which field numbers hold messages, and
/// of which message: built once, so the walk does a table lookup per field, not a
/// descriptor search (a large model has millions of fields).
struct Schema {
    messages: Vec<MessageDescriptor>,
    /// Per message index: field number to the index of its message type.
    fields: Vec<HashMap<u32, usize, foldhash::fast::FixedState>>,
}

fn schema() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    SCHEMA.get_or_init(|| build(super::descriptor_pool()))
}

fn build(pool: &DescriptorPool) -> Schema {
    let messages: Vec<MessageDescriptor> = pool.all_messages().collect();
    let index: HashMap<String, usize> = messages
        .iter()
        .enumerate()
        .map(|(i, m)| (m.full_name().to_string(), i))
        .collect();
    let fields = messages
        .iter()
        .map(|m| {
            m.fields()
                .filter_map(|f| match f.kind() {
                    Kind::Message(sub) => Some((f.number(), index[sub.full_name()])),
                    _ => None,
                })
                .collect()
        })
        .collect();
    Schema { messages, fields }
}

/// Checks that `bytes`, read as the message `message` (a full name, `onnx.ModelProto`),
/// nest at most [`MAX_NESTING`] levels; the top message is level 1.
///
/// # Panics
/// When `message` is not in the schemas of `proto/` (a programming error).
pub fn check(bytes: &[u8], message: &str) -> Result<(), TooDeep> {
    check_within(bytes, message, MAX_NESTING)
}

/// [`check`] with a limit of `limit` levels.
pub fn check_within(bytes: &[u8], message: &str, limit: usize) -> Result<(), TooDeep> {
    let s = schema();
    let top = s
        .messages
        .iter()
        .position(|m| m.full_name() == message)
        .unwrap_or_else(|| panic!("{message} is a message of the schemas in proto/"));
    walk(s, bytes, top, limit)
}

/// What the walk is inside: a length-delimited message (until `end`) or a group (until
/// its end-group tag of `field`).
#[derive(Clone, Copy)]
enum Frame {
    Message { end: usize, message: Option<usize> },
    Group { field: u32 },
}

fn walk(s: &Schema, bytes: &[u8], top: usize, limit: usize) -> Result<(), TooDeep> {
    let mut stack = vec![Frame::Message {
        end: bytes.len(),
        message: Some(top),
    }];
    let mut at = 0usize;
    loop {
        let Some(&frame) = stack.last() else {
            return Ok(());
        };
        if let Frame::Message { end, .. } = frame
            && at >= end
        {
            stack.pop();
            if stack.is_empty() {
                return Ok(());
            }
            continue;
        }
        // Not protobuf: the decoder will say why.
        let Some(key) = varint(bytes, &mut at) else {
            return Ok(());
        };
        let (field, wire) = ((key >> 3) as u32, key & 7);
        match wire {
            0 => {
                if varint(bytes, &mut at).is_none() {
                    return Ok(());
                }
            }
            1 => at += 8,
            5 => at += 4,
            2 => {
                let Some(len) = varint(bytes, &mut at).and_then(|l| usize::try_from(l).ok()) else {
                    return Ok(());
                };
                let start = at;
                let Some(end) = start.checked_add(len).filter(|&e| e <= bytes.len()) else {
                    return Ok(());
                };
                let inner = match frame {
                    Frame::Message {
                        message: Some(m), ..
                    } => s.fields[m].get(&field).copied(),
                    _ => None,
                };
                match inner {
                    // Each level inside costs at least two bytes (a tag and a length, or
                    // a group's start and end), so a message too short to reach the limit
                    // is skipped whole: only the few large messages of a file (its graphs)
                    // are walked, not each of its million small ones.
                    Some(_) if stack.len() + 1 + len / 2 <= limit => at = end,
                    Some(sub) => {
                        if stack.len() >= limit {
                            return Err(TooDeep {
                                limit,
                                offset: start,
                            });
                        }
                        stack.push(Frame::Message {
                            end,
                            message: Some(sub),
                        });
                    }
                    None => at = end,
                }
            }
            3 => {
                if stack.len() >= limit {
                    return Err(TooDeep { limit, offset: at });
                }
                stack.push(Frame::Group { field });
            }
            4 => match frame {
                Frame::Group { field: open } if open == field => {
                    stack.pop();
                }
                _ => return Ok(()),
            },
            _ => return Ok(()),
        }
    }
}

/// A base-128 varint at `*at`, advancing past it; `None` when the bytes end or it runs
/// past ten bytes.
fn varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..70).step_by(7) {
        let b = *bytes.get(*at)?;
        *at += 1;
        v |= u64::from(b & 0x7f).checked_shl(shift).unwrap_or(0);
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    use crate::proto::onnx::{AttributeProto, GraphProto, ModelProto, NodeProto};

    /// A model whose graph nests `depth` `If`s, each in its parent's `then_branch`.
    fn nested(depth: usize) -> Vec<u8> {
        let mut g = GraphProto::default();
        for _ in 0..depth {
            g = GraphProto {
                node: vec![NodeProto {
                    op_type: Some("If".into()),
                    attribute: vec![AttributeProto {
                        name: Some("then_branch".into()),
                        g: Some(g),
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            };
        }
        ModelProto {
            graph: Some(g),
            ..Default::default()
        }
        .encode_to_vec()
    }

    #[test]
    fn levels_are_counted_through_the_schemas_message_fields() {
        // ModelProto, then 3 levels per If, then the innermost GraphProto.
        let b = nested(10);
        let levels = 1 + 1 + 3 * 10;
        assert_eq!(check_within(&b, "onnx.ModelProto", levels), Ok(()));
        let e = check_within(&b, "onnx.ModelProto", levels - 1).unwrap_err();
        assert_eq!(e.limit, levels - 1);
        assert!(e.offset > 0 && e.offset <= b.len());
        // Strings and bytes fields are skipped, not entered, whatever they hold.
        let t = crate::proto::onnx::TensorProto {
            raw_data: Some(nested(50).into()),
            ..Default::default()
        };
        assert_eq!(
            check_within(&t.encode_to_vec(), "onnx.TensorProto", 2),
            Ok(())
        );
    }

    #[test]
    fn a_valid_50_deep_nest_decodes_and_a_deep_one_is_refused() {
        let b = nested(50);
        assert_eq!(check(&b, "onnx.ModelProto"), Ok(()));
        assert!(
            ModelProto::decode(&b[..]).is_ok(),
            "no recursion limit of 100"
        );
        // 100,000 levels of groups in an unknown field, which prost skips by recursing:
        // refused before any decoder sees them.
        let mut deep = Vec::new();
        for _ in 0..100_000 {
            deep.push((15 << 3) | 3);
        }
        let e = check(&deep, "onnx.ModelProto").unwrap_err();
        assert_eq!(e.limit, MAX_NESTING);
    }

    #[test]
    fn bytes_that_are_not_protobuf_are_left_to_the_decoder() {
        for b in [&[0xff; 12][..], &[0x0a, 0x7f], &[0x3a, 0x05, 0x0a], &[0x0c]] {
            assert_eq!(check(b, "onnx.ModelProto"), Ok(()));
        }
    }
}
