//! Graphviz DOT view of a ComputeModel.
//!
//! Every graph is a cluster (the root too, so nested subgraphs draw as nested boxes beside
//! their caller); nodes show name and op type; data edges are labelled with the dtype and
//! shape of the tensor they carry; control edges are dashed; a dotted edge links a
//! control-flow node to each subgraph it calls. Node ids are positional (`g3n17`), so the
//! output is deterministic and any name, however odd, is only ever a quoted label.
//!
//! The summaries and cut markers of a filtered model ([`super::filter`]) draw apart: a
//! summary as a 3-D box labelled with its node count, op types and first and last member,
//! a cut marker as plain text (`… 3 more`) on a dotted edge. Edges to and from them carry
//! no port numbers, which they do not have.
//!
//! A node feeding more than eight others is named again in grey (`↑ name`) beside
//! each consumer, where its edges start, instead of sending a fan of long edges across the
//! drawing.

use std::fmt::Write;

use crate::graphview::fold::hubs_of;
use crate::om::filter::{self, CUT_OP};
use crate::om::graph::{ComputeGraph, ComputeModel, ComputeNode, OutPort, TensorDesc};

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
            let _ = writeln!(self.out, "{pad}  g{gi}n{ni} [{}];", node_attrs(n));
        }
        let hubs = hubs(g);
        for ni in 0..g.nodes.len() {
            self.edges_into(g, gi, ni, &hubs, &pad);
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

    /// Writes the edges into node `ni` of graph `g` (cluster `gi`); one from a hub starts
    /// at a reference to the hub beside `ni`.
    fn edges_into(&mut self, g: &ComputeGraph, gi: usize, ni: usize, hubs: &[bool], pad: &str) {
        let n = &g.nodes[ni];
        let mut refs = Vec::new();
        let mut from = |out: &mut String, s: usize| {
            if !hubs[s] {
                return format!("g{gi}n{s}");
            }
            let id = format!("g{gi}n{s}r{ni}");
            if !refs.contains(&s) {
                refs.push(s);
                let label = quote(&format!("↑ {}", reference(&g.nodes[s])));
                let _ = writeln!(
                    out,
                    "{pad}  {id} [label={label}, shape=plain, style=solid, fontsize=8, fontcolor=\"#7f8c8d\"];"
                );
            }
            id
        };
        // Descriptors of optional inputs left unconnected have no input to match.
        let in_descs = n.data_input_descs();
        for (ii, input) in n.inputs.iter().enumerate() {
            let Some(p) = input else { continue };
            if p.node.index() >= g.nodes.len() {
                continue;
            }
            let desc = g.port_desc(*p).or_else(|| in_descs.get(ii).copied());
            let src = &g.nodes[p.node.index()];
            let seen = |q: &OutPort| q.node == p.node;
            if src.op_type == CUT_OP && n.inputs[..ii].iter().flatten().any(seen) {
                // One dotted edge stands for all that a cut marker feeds a node.
                continue;
            }
            let attrs = if src.op_type == CUT_OP || n.op_type == CUT_OP {
                "style=dotted".to_string()
            } else if filter::is_synthetic(src) || filter::is_synthetic(n) {
                match desc {
                    Some(d) => format!("label={}", quote(&format!("{} {}", d.dtype, d.shape))),
                    None => String::new(),
                }
            } else {
                format!("label={}", quote(&edge_label(p.index, ii, desc)))
            };
            let from = from(&mut self.out, p.node.index());
            let attrs = if attrs.is_empty() {
                String::new()
            } else {
                format!(" [{attrs}]")
            };
            let _ = writeln!(self.out, "{pad}  {from} -> g{gi}n{ni}{attrs};");
        }
        for c in n
            .control_inputs
            .iter()
            .filter(|c| c.index() < g.nodes.len())
        {
            let from = from(&mut self.out, c.index());
            let _ = writeln!(
                self.out,
                "{pad}  {from} -> g{gi}n{ni} [style=dashed, arrowhead=odot];"
            );
        }
    }
}

/// The attributes of a node statement: label and colours by op type.
fn node_attrs(n: &ComputeNode) -> String {
    if let Some(label) = filter::synthetic_label(n) {
        return match n.op_type.as_str() {
            CUT_OP => format!(
                "label={}, shape=plain, style=solid, fontcolor=\"#7f8c8d\"",
                quote(&label)
            ),
            _ => format!(
                "label={}, shape=box3d, style=filled, fillcolor=\"#fff3bf\"",
                quote(&label)
            ),
        };
    }
    let label = format!("{}\n{}", n.name, n.op_type);
    let color = match n.op_type.as_str() {
        "Data" | "RefData" | "AippData" => "#d6eaf8",
        "NetOutput" => "#d5f5e3",
        "Const" | "Constant" => "#fdebd0",
        _ if !n.subgraphs.is_empty() => "#e8daef",
        _ => "#f5f5f5",
    };
    format!("label={}, fillcolor=\"{color}\"", quote(&label))
}

/// Which nodes feed more than [`HUB_FANOUT`](crate::graphview::fold::HUB_FANOUT) distinct
/// nodes of the graph. Such a producer (a constant shared by a thousand nodes, a stream
/// every launch takes) is named again beside each consumer, where the edge starts, rather
/// than drawn with edges across the whole drawing: Graphviz spends minutes laying out such
/// fans, and they say little the names do not.
fn hubs(g: &ComputeGraph) -> Vec<bool> {
    let edges = g.nodes.iter().enumerate().flat_map(|(i, n)| {
        let data = n.inputs.iter().flatten().map(|p| p.node.index());
        data.chain(n.control_inputs.iter().map(|c| c.index()))
            .map(move |s| (s, i))
    });
    hubs_of(g.nodes.len(), edges)
}

/// How a reference names a hub: by its name, or a summary by its first and last member.
fn reference(n: &ComputeNode) -> String {
    match filter::synthetic_label(n) {
        Some(label) => label.lines().last().unwrap_or_default().to_string(),
        None => n.name.clone(),
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

    #[test]
    fn summaries_and_cut_markers_draw_apart() {
        // a feeds b twice, b feeds c.
        let mut g = ComputeGraph::new("g");
        let a = g.add_node(ComputeNode::new("a", "Data"));
        let mut b = ComputeNode::new("b", "Add");
        b.inputs = vec![Some(OutPort { node: a, index: 0 }); 2];
        let b = g.add_node(b);
        let mut c = ComputeNode::new("c", "Relu");
        c.inputs = vec![Some(OutPort { node: b, index: 0 })];
        g.add_node(c);
        let m = ComputeModel {
            name: "m".into(),
            root: g,
            ..Default::default()
        };
        let around = filter::ViewFilter {
            around: Some("c".into()),
            depth: 1,
            ..Default::default()
        };
        let dot = to_dot(&filter::filter(&m, &around).unwrap());
        assert!(
            dot.contains("g0n0 [label=\"… 1 more\", shape=plain"),
            "{dot}"
        );
        assert_eq!(dot.matches("g0n0 -> g0n1").count(), 1, "one edge: {dot}");
        assert!(dot.contains("g0n0 -> g0n1 [style=dotted];"), "{dot}");
        assert!(dot.contains("g0n1 -> g0n2 [label=\"0→0\"];"), "{dot}");
        let fold = filter::ViewFilter {
            max_nodes: Some(2),
            ..Default::default()
        };
        let dot = to_dot(&filter::filter(&m, &fold).unwrap());
        assert!(
            dot.contains("g0n1 [label=\"2 nodes\\nAdd ×1, Relu ×1\\nb … c\", shape=box3d"),
            "{dot}"
        );
        assert_eq!(dot.matches("g0n0 -> g0n1").count(), 1, "one edge: {dot}");
        assert!(dot.contains("g0n0 -> g0n1;"), "{dot}");
    }

    #[test]
    fn hubs_are_named_beside_each_consumer() {
        let mut g = ComputeGraph::new("g");
        let c = g.add_node(ComputeNode::new("c", "Const"));
        for i in 0..9 {
            let mut n = ComputeNode::new(format!("n{i}"), "Add");
            n.inputs = vec![Some(OutPort { node: c, index: 0 }); 2];
            g.add_node(n);
        }
        let model = |g: ComputeGraph| ComputeModel {
            name: "m".into(),
            root: g,
            ..Default::default()
        };
        let dot = to_dot(&model(g.clone()));
        assert!(dot.contains("g0n0r1 [label=\"↑ c\", shape=plain"), "{dot}");
        assert_eq!(dot.matches("g0n0r1 -> g0n1 ").count(), 2, "{dot}");
        assert!(dot.contains("g0n0r9 -> g0n9 "), "{dot}");
        assert!(!dot.contains("g0n0 -> "), "{dot}");
        // Eight consumers make no hub.
        g.nodes.pop();
        let dot = to_dot(&model(g));
        assert!(dot.contains("g0n0 -> g0n8 "), "{dot}");
        assert!(!dot.contains("g0n0r"), "{dot}");
    }
}
