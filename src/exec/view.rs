//! Views of an ExecuteGraph: Graphviz DOT, a readable JSON, and a text form that reads
//! back exactly (the protobuf text format of the `.exeg` file message).
//!
//! Every view is deterministic: ids are positional (graph path and node index), attributes
//! come in name order, and nothing depends on addresses or hash order. The views only
//! format; they touch no files and the terminal (that is `cmd`'s job).

use prost::Message;
use prost_reflect::text_format::FormatOptions;
use prost_reflect::{DynamicMessage, MessageDescriptor};
use serde_json::{Value, json};

use crate::exec::exeg::{ExegError, from_file, to_file};
use crate::exec::graph::{ExecAttr, ExecGraph, ExecNode, ExecuteGraph, GraphKind, KernelClass};
use crate::proto::exeg as pb;

/// Which graphs a view shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphSelect {
    Init,
    Main,
    DeInit,
    All,
}

impl GraphSelect {
    /// The graphs selected, in Init, Main, DeInit order.
    pub fn kinds(self) -> &'static [GraphKind] {
        match self {
            GraphSelect::Init => &[GraphKind::Init],
            GraphSelect::Main => &[GraphKind::Main],
            GraphSelect::DeInit => &[GraphKind::DeInit],
            GraphSelect::All => &GraphKind::ALL,
        }
    }

    /// From the CLI's `--graph` value: `init`, `main`, `deinit` or `all`.
    pub fn from_name(s: &str) -> Option<Self> {
        match s {
            "init" => Some(GraphSelect::Init),
            "main" => Some(GraphSelect::Main),
            "deinit" => Some(GraphSelect::DeInit),
            "all" => Some(GraphSelect::All),
            _ => None,
        }
    }
}

// ---------------------------------------------------------------------------------------
// DOT

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

fn dot_graph(out: &mut String, g: &ExecGraph, label: &str, id: &str, depth: usize) {
    let pad = "  ".repeat(depth);
    out.push_str(&format!("{pad}subgraph cluster_{id} {{\n"));
    out.push_str(&format!("{pad}  label=\"{}\";\n", dot_escape(label)));
    let len = g.nodes.len();
    for (i, n) in g.nodes.iter().enumerate() {
        let (shape, fill) = class_style(n.class);
        let mut text = format!("{}\n{}", n.kernel, n.name);
        if let Some(o) = n.origin.as_ref().filter(|o| !o.node.is_empty()) {
            text.push_str(&format!("\n{} ({})", o.node, o.op_type));
        }
        out.push_str(&format!(
            "{pad}  {id}_n{i} [label=\"{}\", shape={shape}, fillcolor=\"{fill}\"];\n",
            dot_escape(&text)
        ));
    }
    for (i, n) in g.nodes.iter().enumerate() {
        for (slot, v) in n.inputs.iter().enumerate() {
            // Edges to nodes that do not exist would make Graphviz invent them; the
            // loader's checks report such references instead.
            if v.node.index() < len {
                out.push_str(&format!(
                    "{pad}  {id}_n{} -> {id}_n{i} [label=\"{}->{slot}\"];\n",
                    v.node.0, v.output
                ));
            }
        }
        for c in &n.control_inputs {
            if c.index() < len {
                out.push_str(&format!(
                    "{pad}  {id}_n{} -> {id}_n{i} [style=dashed];\n",
                    c.0
                ));
            }
        }
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

// ---------------------------------------------------------------------------------------
// JSON

/// A readable JSON view of the selected graphs: model name, flags, resources, model IO,
/// then `graphs` keyed by `Init`/`Main`/`DeInit`, each with its nodes (every field, input
/// references with the source node's name, typed attributes) and free/launch relations.
pub fn to_json(eg: &ExecuteGraph, which: GraphSelect) -> Value {
    let io = |ios: &[crate::exec::graph::ModelIo]| -> Value {
        ios.iter()
            .map(|io| {
                json!({
                    "name": io.name,
                    "dtype": io.dtype.map(|d| d.name()),
                    "shape": io.shape,
                })
            })
            .collect()
    };
    let mut graphs = serde_json::Map::new();
    for &kind in which.kinds() {
        graphs.insert(kind.name().to_string(), json_graph(eg.graph(kind)));
    }
    json!({
        "name": eg.name,
        "multi_thread": eg.multi_thread,
        "resources": {
            "streams": eg.resources.streams,
            "events": eg.resources.events,
            "notifies": eg.resources.notifies,
        },
        "inputs": io(&eg.inputs),
        "outputs": io(&eg.outputs),
        "graphs": graphs,
    })
}

fn json_graph(g: &ExecGraph) -> Value {
    let name_of = |i: usize| g.nodes.get(i).map(|n| n.name.as_str());
    let nodes: Vec<Value> = g
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| json_node(i, n, &name_of))
        .collect();
    let rel: Vec<Value> = g
        .free_launch
        .iter()
        .map(|(f, l)| {
            json!({
                "free": f.0, "free_name": name_of(f.index()),
                "launch": l.0, "launch_name": name_of(l.index()),
            })
        })
        .collect();
    json!({ "name": g.name, "nodes": nodes, "free_launch": rel })
}

fn json_node<'a>(i: usize, n: &ExecNode, name_of: &impl Fn(usize) -> Option<&'a str>) -> Value {
    let inputs: Vec<Value> = n
        .inputs
        .iter()
        .map(|v| json!({"node": v.node.0, "output": v.output, "name": name_of(v.node.index())}))
        .collect();
    let control: Vec<Value> = n
        .control_inputs
        .iter()
        .map(|c| json!({"node": c.0, "name": name_of(c.index())}))
        .collect();
    let mut attrs = serde_json::Map::new();
    for (k, a) in &n.attrs {
        attrs.insert(k.clone(), json_attr(a));
    }
    json!({
        "id": i,
        "name": n.name.as_str(),
        "kernel": n.kernel,
        "class": n.class.name(),
        "inputs": inputs,
        "outputs": n.outputs,
        "control_inputs": control,
        "attrs": attrs,
        "origin": n.origin.as_ref().map(|o| json!({
            "graph": o.graph.as_str(), "node": o.node.as_str(), "op_type": o.op_type.as_str(), "index": o.index,
        })),
        "priority": n.priority,
        "subgraphs": n.subgraphs.iter().map(json_graph).collect::<Vec<_>>(),
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `{"type": ..., "value": ...}`; bytes and tensor data as lowercase hex. Non-finite floats
/// become `null` (JSON has no NaN); the text form keeps them exactly.
fn json_attr(a: &ExecAttr) -> Value {
    let (ty, value) = match a {
        ExecAttr::Int(i) => ("int", json!(i)),
        ExecAttr::Ints(v) => ("ints", json!(v)),
        ExecAttr::Float(f) => ("float", json!(f)),
        ExecAttr::Floats(v) => ("floats", json!(v)),
        ExecAttr::Bool(b) => ("bool", json!(b)),
        ExecAttr::Str(s) => ("str", json!(s)),
        ExecAttr::Strs(v) => ("strs", json!(v)),
        ExecAttr::Bytes(b) => ("bytes", json!(hex(b))),
        ExecAttr::DType(d) => ("dtype", json!(d.name())),
        ExecAttr::DTypes(v) => (
            "dtypes",
            json!(
                v.iter()
                    .map(|d| d.map_or("", |d| d.name()))
                    .collect::<Vec<_>>()
            ),
        ),
        ExecAttr::Tensor(t) => (
            "tensor",
            json!({"dtype": t.dtype.name(), "shape": t.shape, "data": hex(&t.data)}),
        ),
    };
    json!({"type": ty, "value": value})
}

// ---------------------------------------------------------------------------------------
// Text form

/// The descriptor of `rt2.exeg.ExecuteGraphFile`. build.rs compiles proto/exeg.proto into
/// the same descriptor set as the generated code, so the lookup depends on the build, never
/// on input.
fn file_descriptor() -> MessageDescriptor {
    crate::proto::descriptor_pool()
        .get_message_by_name("rt2.exeg.ExecuteGraphFile")
        .expect("build.rs puts exeg.proto in the descriptor set")
}

/// The protobuf text format of the `.exeg` file message, pretty-printed with fields in
/// schema order; [`from_text`] reads it back to an equal graph.
pub fn to_text(eg: &ExecuteGraph) -> String {
    let file = to_file(eg);
    let mut dm = DynamicMessage::new(file_descriptor());
    // Re-decoding our own encoding cannot fail: the descriptor is the schema prost-build
    // generated `file` from.
    if dm.merge(file.encode_to_vec().as_slice()).is_err() {
        debug_assert!(false, "descriptor and generated type disagree");
        return String::new();
    }
    let opts = FormatOptions::new()
        .pretty(true)
        .print_message_fields_in_index_order(true);
    let mut text = dm.to_text_format_with_options(&opts);
    text.push('\n');
    text
}

/// Reads the text form back, runs the same conversion and checks as [`crate::exec::decode`]
/// does. Syntax errors carry the 1-based line and column.
pub fn from_text(text: &str) -> Result<ExecuteGraph, ExegError> {
    // prost-reflect's text parser recurses once per nesting level without a limit; bound it
    // first so that no input can overflow the stack. The binary decoder's own limit (100
    // messages) rejects anything deeper than a real graph needs anyway.
    if let Some(offset) = too_deep(text, MAX_TEXT_DEPTH) {
        let (line, column) = line_column(text, offset);
        return Err(ExegError::TooDeep {
            line,
            column,
            limit: MAX_TEXT_DEPTH,
        });
    }
    let dm = DynamicMessage::parse_text_format(file_descriptor(), text).map_err(|source| {
        let (line, column) = error_position(text, &source);
        ExegError::Text {
            line,
            column,
            source,
        }
    })?;
    let file = dm
        .transcode_to::<pb::ExecuteGraphFile>()
        .map_err(|source| ExegError::Malformed { source })?;
    from_file(file)
}

/// Brackets (`{`, `<`, `[`) the text form may nest.
const MAX_TEXT_DEPTH: usize = 400;

/// Byte offset of the first bracket nested deeper than `limit`, skipping string literals
/// and `#` comments.
fn too_deep(text: &str, limit: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'{' | b'<' | b'[' => {
                depth += 1;
                if depth > limit {
                    return Some(i);
                }
            }
            b'}' | b'>' | b']' => depth = depth.saturating_sub(1),
            b'#' => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            q @ (b'"' | b'\'') => {
                i += 1;
                while i < bytes.len() && bytes[i] != q && bytes[i] != b'\n' {
                    if bytes[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Line and column (1-based, columns in characters) of a text-format parse error: the
/// start of its first labelled span (prost-reflect reports spans as a miette diagnostic),
/// or the end of the text for "end of input" errors, which have none.
fn error_position(text: &str, err: &prost_reflect::text_format::ParseError) -> (usize, usize) {
    use miette::Diagnostic;
    let offset = err
        .labels()
        .and_then(|mut l| l.next())
        .map(|l| l.offset())
        .unwrap_or(text.len());
    line_column(text, offset)
}

/// 1-based line and character column of byte `offset` in `text` (clamped to the text).
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::testdata::sample;
    use proptest::prelude::*;

    #[test]
    fn text_round_trips_exactly() {
        let eg = sample();
        let text = to_text(&eg);
        assert!(
            text.starts_with("magic: \"rt2.exeg\"\nformat_version: 3\n"),
            "{text}"
        );
        assert!(text.contains("class: KERNEL_CLASS_LAUNCH"));
        assert_eq!(from_text(&text).unwrap(), eg);
        assert_eq!(to_text(&eg), text);
        assert_eq!(to_text(&from_text(&text).unwrap()), text);
        let empty = ExecuteGraph::default();
        assert_eq!(from_text(&to_text(&empty)).unwrap(), empty);
    }

    #[test]
    fn text_may_omit_the_end_marker() {
        let text = "magic: \"rt2.exeg\"\nformat_version: 2\nname: \"m\"\n";
        assert_eq!(from_text(text).unwrap().name, "m");
    }

    #[test]
    fn text_syntax_errors_give_line_and_column() {
        let text = "magic: \"rt2.exeg\"\nformat_version: 2\nmain {\n  nodes { nme: \"x\" }\n}\n";
        let err = from_text(text).unwrap_err();
        assert!(
            matches!(
                err,
                ExegError::Text {
                    line: 4,
                    column: 11,
                    ..
                }
            ),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "text form line 4, column 11: field 'nme' not found for message 'rt2.exeg.Node'"
        );
        let err = from_text("magic: \"rt2.exeg\"\nmain {\n").unwrap_err();
        assert!(
            matches!(
                err,
                ExegError::Text {
                    line: 3,
                    column: 1,
                    ..
                }
            ),
            "{err:?}"
        );
        let err = from_text("magic: \"rt2.é\" format_version: x").unwrap_err();
        assert!(
            matches!(
                err,
                ExegError::Text {
                    line: 1,
                    column: 32,
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn text_runs_the_checks() {
        let mut eg = sample();
        eg.main.nodes[4].kernel = "Bogus".into();
        let err = from_text(&to_text(&eg)).unwrap_err();
        assert!(matches!(&err, ExegError::Invalid { problems } if problems.len() == 1));
        let err = from_text("format_version: 2").unwrap_err();
        assert!(matches!(err, ExegError::BadMagic { .. }));
        let err = from_text("magic: \"rt2.exeg\"").unwrap_err();
        assert!(matches!(err, ExegError::UnsupportedVersion { found: 0 }));
    }

    #[test]
    fn deep_text_is_refused_before_parsing() {
        let mut text = String::from("magic: \"rt2.exeg\" format_version: 2 main {");
        for _ in 0..10_000 {
            text.push_str(" nodes { subgraphs {");
        }
        let err = from_text(&text).unwrap_err();
        assert_eq!(
            err.to_string(),
            "text form line 1, column 4042: nesting deeper than 400 levels"
        );
        // Brackets inside strings and comments do not count.
        let quiet = format!(
            "magic: \"rt2.exeg{}\" # {}\nformat_version: 2",
            "{".repeat(500),
            "[".repeat(500)
        );
        assert!(matches!(from_text(&quiet), Err(ExegError::BadMagic { .. })));
    }

    #[test]
    fn line_column_counts_characters() {
        assert_eq!(line_column("ab\ncé d", 0), (1, 1));
        assert_eq!(line_column("ab\ncé d", 3), (2, 1));
        assert_eq!(line_column("ab\ncé d", 6), (2, 3));
        assert_eq!(line_column("ab\ncé d", 5), (2, 2)); // inside é: its start
        assert_eq!(line_column("ab", 99), (1, 3));
    }

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
    fn json_view_has_every_field() {
        let v = to_json(&sample(), GraphSelect::All);
        assert_eq!(v["name"], "sample");
        assert_eq!(v["multi_thread"], true);
        assert_eq!(
            v["resources"],
            json!({"streams": 1, "events": 2, "notifies": 3})
        );
        assert_eq!(
            v["inputs"][0],
            json!({"name": "x", "dtype": "float32", "shape": [1, -1]})
        );
        assert_eq!(v["outputs"][0]["dtype"], Value::Null);
        let keys: Vec<&String> = v["graphs"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["Init", "Main", "DeInit"]);
        let launch = &v["graphs"]["Main"]["nodes"][3];
        assert_eq!(launch["kernel"], "LaunchKernelWithHandle");
        assert_eq!(launch["class"], "launch");
        assert_eq!(launch["priority"], 7);
        assert_eq!(
            launch["inputs"][2],
            json!({"node": 2, "output": 0, "name": "conv1_out"})
        );
        assert_eq!(
            launch["attrs"]["a_int"],
            json!({"type": "int", "value": -5})
        );
        assert_eq!(
            launch["attrs"]["h_bytes"],
            json!({"type": "bytes", "value": "00ff22"})
        );
        assert_eq!(
            launch["attrs"]["i_dtype"],
            json!({"type": "dtype", "value": "bfloat16"})
        );
        assert_eq!(
            launch["attrs"]["j_tensor"],
            json!({"type": "tensor", "value": {"dtype": "int64", "shape": [1, 1], "data": "0900000000000000"}})
        );
        let main = &v["graphs"]["Main"];
        assert_eq!(main["nodes"][2]["origin"]["op_type"], "Conv");
        assert_eq!(
            main["nodes"][5]["control_inputs"],
            json!([{"node": 3, "name": "conv1_launch"}])
        );
        assert_eq!(
            main["free_launch"],
            json!([{"free": 5, "free_name": "ws_free", "launch": 3, "launch_name": "conv1_launch"}])
        );
        assert_eq!(main["nodes"][6]["subgraphs"][0]["name"], "then");
        assert_eq!(
            main["nodes"][6]["subgraphs"][1]["nodes"][1]["kernel"],
            "InnerNetOutput"
        );
        let only = to_json(&sample(), GraphSelect::DeInit);
        assert_eq!(only["graphs"].as_object().unwrap().len(), 1);
        assert_eq!(only["graphs"]["DeInit"]["nodes"][1]["name"], "destroy");
    }

    #[test]
    fn graph_select_names() {
        assert_eq!(GraphSelect::from_name("deinit"), Some(GraphSelect::DeInit));
        assert_eq!(GraphSelect::from_name("Main"), None);
        assert_eq!(GraphSelect::All.kinds().len(), 3);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn random_text_never_panics(s in "\\PC{0,200}") {
            let _ = from_text(&s);
        }

        #[test]
        fn mutated_text_never_panics(at in any::<prop::sample::Index>(), c in any::<char>()) {
            let mut text: Vec<char> = to_text(&sample()).chars().collect();
            let i = at.index(text.len());
            text[i] = c;
            let _ = from_text(&text.into_iter().collect::<String>());
        }
    }
}
