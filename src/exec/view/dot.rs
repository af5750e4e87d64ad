//! Graphviz DOT view of an ExecuteGraph: one cluster per graph, nested clusters for owned
//! subgraphs, node shape and colour by kernel class.
//!
//! The summaries and cut markers of a filtered graph ([`super::filter`]) draw apart: a
//! summary as a 3-D box labelled with its node count, kernel types and first and last
//! member, a cut marker as plain text (`… 3 more`) on a dotted edge. Edges to and from
//! them carry no slot numbers, which they do not have.
//!
//! A node feeding more than eight others is named again in grey (`↑ name`) beside
//! each consumer, where its edges start, instead of sending a fan of long edges across the
//! drawing.

use crate::exec::graph::{ExecuteGraph, KernelAttr, KernelClass, KernelGraph, KernelNode};
use crate::exec::view::filter::{CUT_KERNEL, is_synthetic, synthetic_label};
use crate::exec::view::select::GraphSelect;
use crate::graphview::fold::hubs_of;

/// Escapes `s` for a double-quoted DOT string.
fn dot_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => {}
            c => out.push(c),
        }
    }
    out
}

/// (shape, fill colour) per class: memory, launch and normal kernels differ in both, so
/// they stay apart in greyscale as well as colour.
fn class_style(c: KernelClass) -> (&'static str, &'static str) {
    match c {
        KernelClass::Memory => ("box", "#cfe2ff"),
        KernelClass::Launch => ("hexagon", "#ffd8a8"),
        KernelClass::Normal => ("ellipse", "#e9ecef"),
    }
}

/// Graphviz DOT of the selected graphs: one cluster per graph, nested clusters for owned
/// subgraphs, node shape and colour by kernel class, dashed control edges, data edges
/// labelled `out->in`. Node labels give the kernel type, the node name and, when known,
/// the compute node it was lowered from (`conv1 (Conv)`).
pub fn to_dot(eg: &ExecuteGraph, which: GraphSelect) -> String {
    let mut out = String::new();
    out.push_str(&format!("digraph \"{}\" {{\n", dot_escape(&eg.name)));
    out.push_str("  compound=true;\n  rankdir=TB;\n");
    out.push_str("  node [fontname=\"Helvetica\", fontsize=10, style=filled];\n");
    out.push_str("  edge [fontname=\"Helvetica\", fontsize=8];\n");
    for &kind in which.kinds() {
        let id = format!("g{}", kind as usize);
        let g = eg.graph(kind);
        let label = if g.name.is_empty() || g.name == kind.name() {
            kind.name().to_string()
        } else {
            format!("{}: {}", kind.name(), g.name)
        };
        dot_graph(&mut out, g, &label, &id, 1);
    }
    out.push_str("}\n");
    out
}

fn dot_graph(out: &mut String, g: &KernelGraph, label: &str, id: &str, depth: usize) {
    let pad = "  ".repeat(depth);
    out.push_str(&format!("{pad}subgraph cluster_{id} {{\n"));
    out.push_str(&format!("{pad}  label=\"{}\";\n", dot_escape(label)));
    for (i, n) in g.nodes.iter().enumerate() {
        out.push_str(&format!("{pad}  {id}_n{i} [{}];\n", node_attrs(n)));
    }
    let hubs = hubs(g);
    for i in 0..g.nodes.len() {
        edges_into(out, g, id, i, &hubs, &pad);
    }
    for (i, n) in g.nodes.iter().enumerate() {
        for (s, sub) in n.subgraphs.iter().enumerate() {
            let sub_id = format!("{id}_n{i}_s{s}");
            let sub_name = if sub.name.is_empty() {
                format!("#{s}")
            } else {
                sub.name.clone()
            };
            dot_graph(
                out,
                sub,
                &format!("{}.{sub_name}", n.name),
                &sub_id,
                depth + 1,
            );
        }
    }
    out.push_str(&format!("{pad}}}\n"));
}

/// Writes the edges into node `i` of graph `g` (cluster `id`); one from a hub starts at a
/// reference to the hub beside node `i`.
fn edges_into(out: &mut String, g: &KernelGraph, id: &str, i: usize, hubs: &[bool], pad: &str) {
    let n = &g.nodes[i];
    let mut refs = Vec::new();
    let mut from = |out: &mut String, s: usize| {
        if !hubs[s] {
            return format!("{id}_n{s}");
        }
        let rid = format!("{id}_n{s}_r{i}");
        if !refs.contains(&s) {
            refs.push(s);
            out.push_str(&format!(
                "{pad}  {rid} [label=\"↑ {}\", shape=plain, style=solid, fontsize=8, fontcolor=\"#7f8c8d\"];\n",
                dot_escape(&reference(&g.nodes[s]))
            ));
        }
        rid
    };
    for (slot, v) in n.inputs.iter().enumerate() {
        // Edges to nodes that do not exist would make Graphviz invent them; the loader's
        // checks report such references instead.
        let Some(src) = g.nodes.get(v.node.index()) else {
            continue;
        };
        if src.kernel == CUT_KERNEL && n.inputs[..slot].iter().any(|q| q.node == v.node) {
            // One dotted edge stands for all that a cut marker feeds a node.
            continue;
        }
        let attrs = if src.kernel == CUT_KERNEL || n.kernel == CUT_KERNEL {
            " [style=dotted]".to_string()
        } else if is_synthetic(src) || is_synthetic(n) {
            String::new()
        } else {
            format!(" [label=\"{}->{slot}\"]", v.output)
        };
        let from = from(out, v.node.index());
        out.push_str(&format!("{pad}  {from} -> {id}_n{i}{attrs};\n"));
    }
    for c in n
        .control_inputs
        .iter()
        .filter(|c| c.index() < g.nodes.len())
    {
        let from = from(out, c.index());
        out.push_str(&format!("{pad}  {from} -> {id}_n{i} [style=dashed];\n"));
    }
}

/// Which nodes feed more than [`HUB_FANOUT`](crate::graphview::fold::HUB_FANOUT) distinct
/// nodes of the graph. Such a producer (the stream and allocator every launch takes) is
/// named again beside each consumer, where the edge starts, rather than drawn with edges
/// across the whole drawing: Graphviz spends minutes laying out such fans, and they say
/// little the names do not.
fn hubs(g: &KernelGraph) -> Vec<bool> {
    let len = g.nodes.len();
    hubs_of(
        len,
        (0..len).flat_map(|i| g.predecessors(i).map(move |s| (s, i))),
    )
}

/// How a reference names a hub: by its name, or a summary by its first and last member.
fn reference(n: &KernelNode) -> String {
    match synthetic_label(n) {
        Some(label) => label.lines().last().unwrap_or_default().to_string(),
        None => n.name.to_string(),
    }
}

/// The attributes of a node statement: label, shape and colour.
fn node_attrs(n: &KernelNode) -> String {
    if let Some(label) = synthetic_label(n) {
        return match &*n.kernel {
            CUT_KERNEL => format!(
                "label=\"{}\", shape=plain, style=solid, fontcolor=\"#7f8c8d\"",
                dot_escape(&label)
            ),
            _ => format!(
                "label=\"{}\", shape=box3d, fillcolor=\"#fff3bf\"",
                dot_escape(&label)
            ),
        };
    }
    let (shape, fill) = class_style(n.class);
    let mut text = format!("{}\n{}", n.kernel, n.name);
    if let Some(o) = n.origin.as_ref().filter(|o| !o.node.is_empty()) {
        text.push_str(&format!("\n{} ({})", o.node, o.op_type));
    }
    // A tensor whose memory is not in the format the op means (lowering writes these
    // only then): storage format, origin format and shape.
    if let Some(f) = n.attrs.get("_format").and_then(KernelAttr::as_int) {
        let origin = n.attr_int("_origin_format").unwrap_or(f);
        text.push_str(&format!("\nformat {f}, origin {origin}"));
        if let Some(KernelAttr::Ints(s)) = n.attrs.get("_origin_shape") {
            text.push_str(&format!(" {s:?}"));
        }
    }
    format!(
        "label=\"{}\", shape={shape}, fillcolor=\"{fill}\"",
        dot_escape(&text)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::testdata::sample;

    #[test]
    fn dot_has_clusters_shapes_and_edge_styles() {
        let dot = to_dot(&sample(), GraphSelect::All);
        assert!(dot.starts_with("digraph \"sample\" {\n"));
        for cluster in [
            "subgraph cluster_g0 {",
            "subgraph cluster_g1 {",
            "subgraph cluster_g2 {",
            "subgraph cluster_g1_n6_s0 {",
            "subgraph cluster_g1_n6_s1 {",
            "label=\"if.then\";",
            "label=\"Main: main\";",
        ] {
            assert!(dot.contains(cluster), "{cluster} missing in\n{dot}");
        }
        assert!(dot.contains(
            "g1_n2 [label=\"AllocMemHbm\\nconv1_out\\nconv1 (Conv)\", shape=box, fillcolor=\"#cfe2ff\"];"
        ));
        assert!(
            dot.contains("g1_n3 [label=\"LaunchKernelWithHandle\\nconv1_launch\", shape=hexagon")
        );
        assert!(dot.contains("g1_n0 [label=\"Data\\nx\", shape=ellipse"));
        assert!(dot.contains("g1_n3 -> g1_n5 [style=dashed];"));
        assert!(dot.contains("g1_n4 -> g1_n3 [label=\"0->3\"];"));
        assert!(dot.contains("g1_n6_s0_n0 -> g1_n6_s0_n1 [label=\"0->0\"];"));
        assert_eq!(dot, to_dot(&sample(), GraphSelect::All));

        let main = to_dot(&sample(), GraphSelect::Main);
        assert!(main.contains("cluster_g1 ") && !main.contains("cluster_g0 "));
    }

    #[test]
    fn dot_escapes_quotes() {
        let mut eg = sample();
        eg.name = "a\"b\\c".into();
        eg.main.nodes[0].name = "say \"hi\"".into();
        let dot = to_dot(&eg, GraphSelect::Main);
        assert!(dot.starts_with("digraph \"a\\\"b\\\\c\" {"));
        assert!(dot.contains("label=\"Data\\nsay \\\"hi\\\"\""));
    }

    #[test]
    fn dot_renders_with_graphviz() {
        use std::io::Write;
        use std::process::{Command, Stdio};
        let dot = to_dot(&sample(), GraphSelect::All);
        let child = Command::new("dot")
            .arg("-Tsvg")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => {
                assert!(
                    std::env::var_os("RT2_REQUIRE_DOT").is_none(),
                    "RT2_REQUIRE_DOT is set but dot does not run: {e}"
                );
                return;
            }
        };
        child
            .stdin
            .take()
            .expect("piped stdin")
            .write_all(dot.as_bytes())
            .expect("writing to dot");
        let out = child.wait_with_output().expect("waiting for dot");
        assert!(
            out.status.success(),
            "dot failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("<svg"));
    }

    #[test]
    fn hubs_are_named_beside_each_consumer() {
        use crate::exec::graph::ValueRef;
        use crate::exec::kernel_types::exec_node;
        let mut eg = ExecuteGraph::default();
        let s = eg.main.add(exec_node("stream", "InnerData"));
        for i in 0..9 {
            let mut n = exec_node(format!("n{i}").as_str(), "Data");
            n.inputs.push(ValueRef { node: s, output: 0 });
            eg.main.add(n);
        }
        let dot = to_dot(&eg, GraphSelect::Main);
        assert!(
            dot.contains("g1_n0_r1 [label=\"↑ stream\", shape=plain"),
            "{dot}"
        );
        assert!(dot.contains("g1_n0_r9 -> g1_n9 [label=\"0->0\"];"), "{dot}");
        assert!(!dot.contains("g1_n0 -> "), "{dot}");
    }
}
