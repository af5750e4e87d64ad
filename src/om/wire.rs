//! Reading a binary `ge.proto.ModelDef` fast: straight to a typed ComputeModel, op by op,
//! with the work spread over the cores.
//!
//! Nearly all of a large ComputeGraph's bytes are its ops (`GraphDef.op`, field 6), and
//! ops decode independently. This reader walks the two outer message levels by hand,
//! collecting each op's byte range, decodes everything else with prost as usual, then
//! takes each op through decode, attribute decompression, weight resolution and
//! conversion before the next, in parallel. Doing all of it per op means the memory of a
//! decoded op is reused at once for the next instead of the whole graph being held twice,
//! as GE IR and typed, at its peak: on a large graph that halves the memory touched, and
//! fresh memory is most of the cost. [`decode_model_def`] gives the plain `ModelDef`. The result is exactly what `ModelDef::decode` gives; when
//! the outer levels do not scan, the plain decoder runs and reports the fault. Untrusted
//! lengths are checked against the remaining bytes before use.

use prost::Message;
use prost::bytes::Buf;
use prost::encoding::{WireType, decode_key, decode_varint};
use rayon::prelude::*;

use crate::om::compress::Decompressor;
use crate::om::ir;
use crate::om::{ComputeModel, OmError, Place, Result, compress, weights};
use crate::proto::ge_ir::{GraphDef, ModelDef, OpDef};

/// Below this many bytes a plain decode is faster than splitting the work.
const PARALLEL_THRESHOLD: usize = 1 << 20;

const MODEL_GRAPH: u32 = 7;
const GRAPH_OP: u32 = 6;

/// Reads a binary ModelDef into a typed model: attribute compression is undone and, when
/// `weights` (an OM's WEIGHTS_DATA) is given, Const weights are resolved from it. `place`
/// names where the bytes come from in errors.
pub fn read_model(
    bytes: &[u8],
    weights: Option<&bytes::Bytes>,
    place: &Place,
) -> Result<ComputeModel> {
    read_model_in_file(bytes, weights, place, None).map(|(model, _)| model)
}

/// [`read_model`] for one model of an OM: `root` is the dictionary of a partitioned root
/// model, which a sub-model's attribute names are restored with instead of its own
/// ([`compress::decompress_in_file`]). Also returns the model's own tables (`None` when it
/// has none or `root` was given), for the caller to hand on when this is the root.
pub fn read_model_in_file(
    bytes: &[u8],
    weights: Option<&bytes::Bytes>,
    place: &Place,
    root: Option<&Decompressor>,
) -> Result<(ComputeModel, Option<Decompressor>)> {
    crate::om::error::check_nesting(bytes, "ge.proto.ModelDef", place)?;
    let decode_err = |source| OmError::Protobuf {
        place: place.clone(),
        message: "ge.proto.ModelDef",
        source,
    };
    let Some((model_rest, graphs)) = split(bytes) else {
        // The outer levels do not scan: the plain decoder finds and reports the fault.
        let mut def = ModelDef::decode(bytes).map_err(decode_err)?;
        let own = compress::decompress_in_file(&mut def, root)?;
        if let Some(w) = weights {
            weights::resolve_weights(&mut def, w)?;
        }
        return Ok((ir::from_model_def(def)?, own));
    };
    let mut model = ModelDef::decode(model_rest.as_slice()).map_err(decode_err)?;
    let own = Decompressor::for_model(&mut model, root)?;
    let decompressor = root.or(own.as_ref());
    let mut pending = Vec::with_capacity(graphs.len());
    for (rest, ops) in graphs {
        let mut graph = GraphDef::decode(rest.as_slice()).map_err(decode_err)?;
        if let Some(d) = decompressor {
            d.graph_attrs(&mut graph)?;
        }
        let nodes = ir::pending_nodes(ops, |bytes: &[u8]| {
            let mut op = OpDef::decode(bytes).map_err(decode_err)?;
            if let Some(d) = decompressor {
                d.op(&mut op, &graph.name)?;
            }
            if let Some(w) = weights {
                weights::resolve_op(&mut op, &graph.name, w)?;
            }
            Ok(op)
        })?;
        pending.push(ir::pending_graph(graph, nodes));
    }
    Ok((ir::assemble(model, pending)?, own))
}

/// Decodes a ModelDef as `ModelDef::decode` does; large ones are decoded in parallel.
pub fn decode_model_def(bytes: &[u8]) -> Result<ModelDef, prost::DecodeError> {
    if bytes.len() < PARALLEL_THRESHOLD {
        return ModelDef::decode(bytes);
    }
    match split(bytes) {
        Some((model_rest, graphs)) => decode_split(&model_rest, graphs),
        None => ModelDef::decode(bytes),
    }
}

/// A graph's fields other than its ops, re-encoded verbatim, and its ops' bytes.
type SplitGraph<'a> = (Vec<u8>, Vec<&'a [u8]>);

/// The model's fields other than its graphs, re-encoded verbatim, and its graphs; `None`
/// when the two outer levels are not well-formed protobuf.
fn split(bytes: &[u8]) -> Option<(Vec<u8>, Vec<SplitGraph<'_>>)> {
    let mut model_rest = Vec::new();
    let mut graphs = Vec::new();
    for (field, raw, payload) in fields(bytes)? {
        if field == MODEL_GRAPH {
            let mut graph_rest = Vec::new();
            let mut ops = Vec::new();
            for (gfield, graw, gpayload) in fields(payload?)? {
                match (gfield, gpayload) {
                    (GRAPH_OP, Some(op)) => ops.push(op),
                    _ => graph_rest.extend_from_slice(graw),
                }
            }
            graphs.push((graph_rest, ops));
        } else {
            model_rest.extend_from_slice(raw);
        }
    }
    Some((model_rest, graphs))
}

fn decode_split(
    model_rest: &[u8],
    graphs: Vec<SplitGraph<'_>>,
) -> Result<ModelDef, prost::DecodeError> {
    let mut model = ModelDef::decode(model_rest)?;
    // Decoding is allocation-bound; chunks of ops keep each task long enough to amortize
    // the scheduling, and the order of ops is kept.
    let decoded: Vec<Result<GraphDef, prost::DecodeError>> = graphs
        .into_par_iter()
        .map(|(rest, ops)| {
            let mut g = GraphDef::decode(rest.as_slice())?;
            g.op = ops
                .par_chunks(256)
                .map(|c| {
                    c.iter()
                        .map(|op| OpDef::decode(*op))
                        .collect::<Result<Vec<_>, _>>()
                })
                .collect::<Result<Vec<_>, _>>()?
                .into_iter()
                .flatten()
                .collect();
            Ok(g)
        })
        .collect();
    model.graph = decoded.into_iter().collect::<Result<_, _>>()?;
    Ok(model)
}

/// The fields of one message level: (field number, the whole field's bytes, and the
/// payload when it is length-delimited).
type Field<'a> = (u32, &'a [u8], Option<&'a [u8]>);

fn fields(bytes: &[u8]) -> Option<Vec<Field<'_>>> {
    let mut out = Vec::new();
    let mut buf = bytes;
    while buf.has_remaining() {
        let start = bytes.len() - buf.len();
        let (field, wire) = decode_key(&mut buf).ok()?;
        let payload = match wire {
            WireType::Varint => {
                decode_varint(&mut buf).ok()?;
                None
            }
            WireType::SixtyFourBit => {
                buf = buf.get(8..)?;
                None
            }
            WireType::ThirtyTwoBit => {
                buf = buf.get(4..)?;
                None
            }
            WireType::LengthDelimited => {
                let len = usize::try_from(decode_varint(&mut buf).ok()?).ok()?;
                let p = buf.get(..len)?;
                buf = &buf[len..];
                Some(p)
            }
            // ge.proto uses no groups; let the plain decoder judge such bytes.
            WireType::StartGroup | WireType::EndGroup => return None,
        };
        let end = bytes.len() - buf.len();
        out.push((field, &bytes[start..end], payload));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::om::ir::PARALLEL_NODES;
    use crate::om::testdata_text::large_model;

    fn plain(bytes: &[u8], weights: Option<&bytes::Bytes>) -> ComputeModel {
        let mut def = ModelDef::decode(bytes).unwrap();
        compress::decompress(&mut def).unwrap();
        if let Some(w) = weights {
            weights::resolve_weights(&mut def, w).unwrap();
        }
        ir::from_model_def(def).unwrap()
    }

    #[test]
    fn read_model_matches_decode_then_convert() {
        // Large enough to convert ops in parallel.
        let bytes = large_model(PARALLEL_NODES + 100).encode_to_vec();
        let fast = read_model(&bytes, None, &Place::offset(0)).unwrap();
        assert_eq!(fast.root.nodes.len(), PARALLEL_NODES + 100);
        assert_eq!(fast, plain(&bytes, None));
        // A compressed OM with weights in WEIGHTS_DATA.
        let om = crate::om::testdata::compressed_om();
        let m = &om.models[0];
        let def = m.partition(crate::om::PartitionType::ModelDef).unwrap();
        let fast = read_model(def, m.weights(), &Place::offset(0)).unwrap();
        assert_eq!(fast, plain(def, m.weights()));
        assert!(
            fast.root
                .nodes
                .iter()
                .any(|n| n.attrs.contains_key("index")),
            "names are decompressed"
        );
    }

    #[test]
    fn read_model_errors_name_the_place() {
        let bytes = large_model(10).encode_to_vec();
        let e = read_model(
            &bytes[..bytes.len() - 3],
            None,
            &Place::new("partition 1 (MODEL_DEF)"),
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("partition 1 (MODEL_DEF): malformed protobuf"),
            "{e}"
        );
    }

    #[test]
    fn same_model_as_a_plain_decode() {
        let m = large_model(2_000);
        let bytes = m.encode_to_vec();
        assert!(
            bytes.len() > PARALLEL_THRESHOLD,
            "the test exercises the parallel path"
        );
        assert_eq!(decode_model_def(&bytes).unwrap(), m);
    }

    #[test]
    fn truncations_are_errors_like_a_plain_decode() {
        let bytes = large_model(2_000).encode_to_vec();
        for cut in [PARALLEL_THRESHOLD, bytes.len() / 2, bytes.len() - 1] {
            assert!(decode_model_def(&bytes[..cut]).is_err(), "cut at {cut}");
            assert!(ModelDef::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
    }
}
