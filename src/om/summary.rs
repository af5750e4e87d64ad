//! Summaries of ComputeModels for people and scripts: inputs, outputs, node counts,
//! op-type histograms, subgraphs. The `inspect` command renders them as a table or JSON.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::om::graph::{AttrValue, ComputeGraph, ComputeModel, OutPort, Shape, TensorDesc};

/// One graph input or output.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TensorSummary {
    pub name: String,
    pub dtype: String,
    /// `-1` for an unknown dim; `[-2]` for an unknown rank.
    pub shape: Vec<i64>,
}

impl TensorSummary {
    fn of(name: String, desc: Option<&TensorDesc>) -> Self {
        match desc {
            Some(d) => TensorSummary {
                name,
                dtype: d.dtype.name().into(),
                shape: d.shape.to_dims(),
            },
            None => TensorSummary {
                name,
                dtype: "undefined".into(),
                shape: Shape::UnknownRank.to_dims(),
            },
        }
    }
}

/// A summary of one model's root graph and everything below it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GraphSummary {
    /// Model index in the file (OM files may hold several).
    pub model: usize,
    pub name: String,
    /// Nodes in this graph and all its subgraphs.
    pub nodes: usize,
    pub inputs: Vec<TensorSummary>,
    pub outputs: Vec<TensorSummary>,
    /// Op type -> node count, over all graphs of the model.
    pub op_types: BTreeMap<String, usize>,
    /// Every subgraph, depth first, by name.
    pub subgraphs: Vec<String>,
    /// Whether any tensor has an unknown dim or rank.
    pub dynamic: bool,
}

/// Summarizes a model.
pub fn summarize(index: usize, model: &ComputeModel) -> GraphSummary {
    let g = &model.root;
    let mut op_types = BTreeMap::new();
    let mut subgraphs = Vec::new();
    g.walk(&mut |sub| {
        if !std::ptr::eq(sub, g) {
            subgraphs.push(sub.name.clone());
        }
        for n in &sub.nodes {
            *op_types.entry(n.op_type.clone()).or_insert(0) += 1;
        }
    });
    GraphSummary {
        model: index,
        name: if g.name.is_empty() {
            model.name.clone()
        } else {
            g.name.clone()
        },
        nodes: g.total_nodes(),
        inputs: graph_inputs(g),
        outputs: graph_outputs(g),
        op_types,
        subgraphs,
        dynamic: model.is_dynamic(),
    }
}

/// The graph's inputs ([`ComputeGraph::input_nodes`]): Data nodes ordered by their
/// `index` attribute, then a partitioned subgraph's PlaceHolders by `peerIndex`.
pub fn graph_inputs(g: &ComputeGraph) -> Vec<TensorSummary> {
    g.input_nodes()
        .into_iter()
        .map(|id| {
            let n = g.node(id);
            TensorSummary::of(
                n.name.clone(),
                n.output_descs.first().or(n.input_descs.first()),
            )
        })
        .collect()
}

/// The graph's outputs: the NetOutput's inputs in order (named by the NetOutput input
/// descriptor's name when it has one, else `producer:index`), or `GraphDef.output`; then
/// a partitioned subgraph's End nodes by `peerIndex`, each named as the End is.
pub fn graph_outputs(g: &ComputeGraph) -> Vec<TensorSummary> {
    let mut outs = own_outputs(g);
    outs.extend(g.end_nodes().into_iter().map(|id| {
        let n = g.node(id);
        let desc = n
            .inputs
            .first()
            .copied()
            .flatten()
            .and_then(|p| g.port_desc(p))
            .or(n.data_input_descs().first().copied());
        TensorSummary::of(n.name.clone(), desc)
    }));
    outs
}

/// The outputs of [`graph_outputs`] but the End nodes.
fn own_outputs(g: &ComputeGraph) -> Vec<TensorSummary> {
    let name_of = |p: &OutPort| {
        let producer = g
            .nodes
            .get(p.node.index())
            .map(|n| n.name.as_str())
            .unwrap_or("?");
        format!("{producer}:{}", p.index)
    };
    if let Some(out) = g.net_output() {
        let out = g.node(out);
        // Input i's descriptor, past those of optional inputs left unconnected.
        let in_descs = out.data_input_descs();
        return out
            .inputs
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let in_desc = in_descs.get(i).copied();
                let name = match (in_desc, p) {
                    (Some(d), _) if !d.name.is_empty() => d.name.clone(),
                    (_, Some(p)) => output_name(g, *p).unwrap_or_else(|| name_of(p)),
                    (_, None) => format!("output{i}"),
                };
                let desc = p.and_then(|p| g.port_desc(p)).or(in_desc);
                TensorSummary::of(name, desc)
            })
            .collect();
    }
    g.outputs
        .iter()
        .map(|p| TensorSummary::of(name_of(p), g.port_desc(*p)))
        .collect()
}

/// The name an output tensor carries on its producer's descriptor, if any.
fn output_name(g: &ComputeGraph, p: OutPort) -> Option<String> {
    let d = g.port_desc(p)?;
    if !d.name.is_empty() {
        return Some(d.name.clone());
    }
    match d.attrs.get("_name") {
        Some(AttrValue::Str(s)) => String::from_utf8(s.clone()).ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::om::DataType;
    use crate::om::graph::ComputeNode;

    #[test]
    fn inputs_by_index_and_outputs_by_name() {
        let mut g = ComputeGraph::new("root");
        let mut b = ComputeNode::new("b", "Data");
        b.attrs.insert("index".into(), AttrValue::Int(1));
        b.output_descs
            .push(TensorDesc::new(DataType::Int64, Shape::Dims(vec![-1])));
        let mut a = ComputeNode::new("a", "Data");
        a.attrs.insert("index".into(), AttrValue::Int(0));
        a.output_descs
            .push(TensorDesc::new(DataType::Float32, Shape::UnknownRank));
        let b = g.add_node(b);
        let a = g.add_node(a);
        let mut out = ComputeNode::new("out", "NetOutput");
        out.inputs = vec![
            Some(OutPort { node: a, index: 0 }),
            Some(OutPort { node: b, index: 0 }),
        ];
        let mut named = TensorDesc::new(DataType::Float32, Shape::UnknownRank);
        named.name = "y".into();
        out.input_descs = vec![named, TensorDesc::default()];
        g.add_node(out);
        let s = summarize(
            0,
            &ComputeModel {
                root: g,
                ..Default::default()
            },
        );
        assert_eq!(
            s.inputs,
            vec![
                TensorSummary {
                    name: "a".into(),
                    dtype: "float32".into(),
                    shape: vec![-2]
                },
                TensorSummary {
                    name: "b".into(),
                    dtype: "int64".into(),
                    shape: vec![-1]
                },
            ]
        );
        assert_eq!(s.outputs[0].name, "y");
        assert_eq!(s.outputs[1].name, "b:0");
        assert_eq!(s.outputs[1].dtype, "int64");
        assert_eq!(s.op_types.get("Data"), Some(&2));
        assert!(s.dynamic);
        assert_eq!(s.nodes, 3);
    }
}
