//! Graphviz DOT view of a ComputeModel.
//!
//! Every graph is a cluster (the root too, so nested subgraphs draw as nested boxes beside
//! their caller); nodes show name and op type; data edges are labelled with the dtype and
//! shape of the tensor they carry; control edges are dashed; a dotted edge links a
//! control-flow node to each subgraph it calls. Node ids are positional (`g3n17`), so the
//! output is deterministic and any name, however odd, is only ever a quoted label.

use std::fmt::Write;

use crate::om::graph::{ComputeGraph, ComputeModel, TensorDesc};

/// Renders the model as one DOT digraph.
pub fn to_dot(model: &ComputeModel) -> String {
    let mut out = String::new();
    let title = if model.name.is_empty() {
        &model.root.name
    } else {
        &model.name
    };
    let _ = writeln!(out, "digraph {} {{", quote(title));
    out.push_str("  compound=true;\n  rankdir=TB;\n");
    out.push_str("  node [shape=box, style=\"rounded,filled\", fillcolor=\"#f5f5f5\", fontname=\"Helvetica\", fontsize=10];\n");
    out.push_str("  edge [fontname=\"Helvetica\", fontsize=8];\n");
    let mut r = Renderer { out, next_graph: 0 };
    r.graph(&model.root, 1);
    for g in &model.detached {
        r.graph(g, 1);
    }
    r.out.push_str("}\n");
    r.out
}

struct Renderer {
    out: String,
    next_graph: usize,
}

impl Renderer {
    /// Writes a graph cluster and, after it, the clusters of its subgraphs; returns the
    /// graph's number so callers can link to it.
    fn graph(&mut self, g: &ComputeGraph, depth: usize) -> usize {
        let gi = self.next_graph;
        self.next_graph += 1;
        let pad = "  ".repeat(depth);
        let _ = writeln!(self.out, "{pad}subgraph cluster_g{gi} {{");
        let _ = writeln!(self.out, "{pad}  label={};", quote(&g.name));
        let _ = writeln!(self.out, "{pad}  style=rounded; color=\"#7f8c8d\";");
        if g.nodes.is_empty() {
            // An empty cluster is not drawn; an invisible point keeps links to it valid.
            let _ = writeln!(self.out, "{pad}  g{gi}n0 [shape=point, style=invis];");
        }
        for (ni, n) in g.nodes.iter().enumerate() {
            let label = format!("{}\n{}", n.name, n.op_type);
            let color = match n.op_type.as_str() {
                "Data" | "RefData" | "AippData" => "#d6eaf8",
                "NetOutput" => "#d5f5e3",
                "Const" | "Constant" => "#fdebd0",
                _ if !n.subgraphs.is_empty() => "#e8daef",
                _ => "#f5f5f5",
            };
            let _ = writeln!(
                self.out,
                "{pad}  g{gi}n{ni} [label={}, fillcolor=\"{color}\"];",
                quote(&label)
            );
        }
        for (ni, n) in g.nodes.iter().enumerate() {
            for (ii, input) in n.inputs.iter().enumerate() {
                let Some(p) = input else { continue };
                if p.node.index() >= g.nodes.len() {
                    continue;
                }
                let desc = g.port_desc(*p).or_else(|| n.input_descs.get(ii));
                let label = edge_label(p.index, ii, desc);
                let _ = writeln!(
                    self.out,
                    "{pad}  g{gi}n{} -> g{gi}n{ni} [label={}];",
                    p.node.index(),
                    quote(&label)
                );
            }
            for c in &n.control_inputs {
                if c.index() < g.nodes.len() {
                    let _ = writeln!(
                        self.out,
                        "{pad}  g{gi}n{} -> g{gi}n{ni} [style=dashed, arrowhead=odot];",
                        c.index()
                    );
                }
            }
        }
        let _ = writeln!(self.out, "{pad}}}");
        for (ni, n) in g.nodes.iter().enumerate() {
            for (si, sub) in n.subgraphs.iter().enumerate() {
                let sg = self.graph(sub, depth);
                let _ = writeln!(
                    self.out,
                    "{pad}g{gi}n{ni} -> g{sg}n0 [lhead=cluster_g{sg}, style=dotted, color=\"#8e44ad\", label={}];",
                    quote(&format!("subgraph {si}"))
                );
            }
        }
        gi
    }
}

fn edge_label(out_index: u32, in_index: usize, desc: Option<&TensorDesc>) -> String {
    let ports = format!("{out_index}→{in_index}");
    match desc {
        Some(d) => format!("{ports}\n{} {}", d.dtype, d.shape),
        None => ports,
    }
}

/// A DOT double-quoted string.
fn quote(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            '\r' => {}
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::om::DataType;
    use crate::om::graph::{ComputeNode, OutPort, Shape};

    #[test]
    fn clusters_labels_and_control_edges() {
        let mut g = ComputeGraph::new("root");
        let mut x = ComputeNode::new("x\"1", "Data");
        x.output_descs
            .push(TensorDesc::new(DataType::Float32, Shape::Dims(vec![-1, 3])));
        let x = g.add_node(x);
        let mut iff = ComputeNode::new("if", "If");
        iff.inputs.push(Some(OutPort { node: x, index: 0 }));
        iff.control_inputs.push(x);
        iff.subgraphs.push(ComputeGraph::new("then"));
        g.add_node(iff);
        let dot = to_dot(&ComputeModel {
            name: "m".into(),
            root: g,
            ..Default::default()
        });
        assert!(dot.starts_with("digraph \"m\" {"));
        assert!(dot.contains("subgraph cluster_g0 {"));
        assert!(dot.contains("subgraph cluster_g1 {"));
        assert!(dot.contains("label=\"x\\\"1\\nData\""), "{dot}");
        assert!(
            dot.contains("g0n0 -> g0n1 [label=\"0→0\\nfloat32 [-1,3]\"];"),
            "{dot}"
        );
        assert!(dot.contains("g0n0 -> g0n1 [style=dashed"), "{dot}");
        assert!(dot.contains("g0n1 -> g1n0 [lhead=cluster_g1"), "{dot}");
        assert!(dot.trim_end().ends_with('}'));
    }
}
