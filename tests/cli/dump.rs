//! CLI tests: `rt2 dump --view compute` as DOT, JSON and GE text dump, and the filters
//! for large graphs (`--max-nodes`, `--around`/`--depth`, `--subgraph`, `--owner`) on both
//! views.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use rt2::om::onnx::builder::{self, Dim, F32, OnnxBuilder};
use rt2::om::testdata;

use crate::util::{Scratch, fixture};

/// Renders a DOT file with Graphviz when `dot` is installed (required when
/// `RT2_REQUIRE_DOT` is set).
#[track_caller]
fn renders(dot_file: &Path) {
    match Command::new("dot").arg("-Tsvg").arg(dot_file).output() {
        Ok(out) => {
            assert!(
                out.status.success(),
                "dot failed on {}: {}",
                dot_file.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(String::from_utf8_lossy(&out.stdout).contains("<svg"));
        }
        Err(_) => assert!(
            std::env::var_os("RT2_REQUIRE_DOT").is_none(),
            "graphviz `dot` is required here"
        ),
    }
}

/// The node statements of a DOT text: (label, the whole line).
fn dot_nodes(dot: &str) -> Vec<(String, String)> {
    dot.lines()
        .map(str::trim)
        .filter(|l| l.starts_with('g') && !l.contains(" -> ") && l.contains(" [label=\""))
        .map(|l| {
            let label = l.split(" [label=\"").nth(1).unwrap_or("");
            let label = label.split("\", ").next().unwrap_or("");
            (label.to_string(), l.to_string())
        })
        .collect()
}

/// The names of the model's own nodes in a DOT text (summaries and cut markers left out):
/// the label's first line in the compute view, its second in the exe view.
fn dot_names(dot: &str, line: usize) -> BTreeSet<String> {
    dot_nodes(dot)
        .into_iter()
        .filter(|(_, l)| !l.contains("shape=plain") && !l.contains("shape=box3d"))
        .map(|(label, _)| label.split("\\n").nth(line).unwrap_or("").to_string())
        .collect()
}

/// `r0 -> r1 -> ... -> r{n-1}` (Relu) over one input: a chain without shared constants.
fn relu_chain(n: usize) -> Vec<u8> {
    let mut b = OnnxBuilder::new("relus").input("x", F32, &[Dim::Value(1), Dim::Value(4)]);
    let mut prev = "x".to_string();
    for i in 0..n {
        let out = format!("v{i}");
        b = b.named_node(&format!("r{i}"), "Relu", &[&prev], &[&out], vec![]);
        prev = out;
    }
    b.output(&prev, F32, &[Dim::Value(1), Dim::Value(4)])
        .build()
}

#[test]
fn dot_renders_with_graphviz() {
    let s = Scratch::new();
    let model = fixture("models/nested_if_weights.onnx");
    s.rt2(&[
        "dump",
        model.to_str().unwrap(),
        "--format",
        "dot",
        "-o",
        "m.dot",
    ])
    .ok();
    let dot = String::from_utf8(s.read("m.dot")).unwrap();
    assert!(dot.starts_with("digraph \"nested_if_weights\" {"));
    assert_eq!(
        dot.matches("subgraph cluster_").count(),
        5,
        "root and four branches"
    );
    assert!(
        dot.contains("float32 [-1,4]"),
        "edges carry dtype and shape"
    );
    match Command::new("dot")
        .arg("-Tsvg")
        .arg(s.path("m.dot"))
        .output()
    {
        Ok(out) => {
            assert!(
                out.status.success(),
                "dot failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(String::from_utf8_lossy(&out.stdout).contains("<svg"));
        }
        Err(_) => assert!(
            std::env::var_os("RT2_REQUIRE_DOT").is_none(),
            "graphviz `dot` is required here"
        ),
    }
}

#[test]
fn control_edges_are_dashed() {
    let s = Scratch::new();
    let text = "graph {\n  name: \"g\"\n  op {\n    name: \"a\"\n    type: \"Data\"\n    attr {\n      key: \"index\"\n      value {\n        i: 0\n      }\n    }\n  }\n  op {\n    name: \"b\"\n    type: \"NoOp\"\n    input: \"a:-1\"\n  }\n}\n";
    let p = s.write("ge_proto_00000001_graph_1_x.txt", text.as_bytes());
    let r = s.rt2(&["dump", p.to_str().unwrap()]).ok();
    assert!(
        r.stdout().contains("g0n0 -> g0n1 [style=dashed"),
        "{}",
        r.stdout()
    );
}

#[test]
fn text_dump_reads_back_to_the_same_graph() {
    let s = Scratch::new();
    let om = s.write("c.om", &testdata::compressed_om().to_bytes().unwrap());
    s.rt2(&[
        "dump",
        om.to_str().unwrap(),
        "--format",
        "pbtxt",
        "-o",
        "a.pbtxt",
    ])
    .ok();
    s.rt2(&["dump", "a.pbtxt", "--format", "pbtxt", "-o", "b.pbtxt"])
        .ok();
    assert_eq!(s.read("a.pbtxt"), s.read("b.pbtxt"));
    // Compression is undone on read: no key in the dump starts with a NUL escape.
    let text = String::from_utf8(s.read("a.pbtxt")).unwrap();
    assert!(
        !text.contains("key: \"\\000"),
        "attribute names are decompressed"
    );
    assert!(text.contains("key: \"index\""));
}

#[test]
fn om_to_json_to_om_keeps_the_graph_and_weights() {
    let s = Scratch::new();
    let model = fixture("models/cnn_bn.onnx");
    s.rt2(&["compile", model.to_str().unwrap(), "-o", "a.om"])
        .ok();
    s.rt2(&["dump", "a.om", "--format", "json", "-o", "a.json"])
        .ok();
    s.rt2(&["compile", "a.json", "-o", "b.om"]).ok();
    s.rt2(&["dump", "a.om", "--format", "pbtxt", "-o", "a.pbtxt"])
        .ok();
    s.rt2(&["dump", "b.om", "--format", "pbtxt", "-o", "b.pbtxt"])
        .ok();
    assert_eq!(s.read("a.pbtxt"), s.read("b.pbtxt"));
}

#[test]
fn atc_json_leaves_out_what_atc_leaves_out() {
    let s = Scratch::new();
    let model = fixture("models/cnn_bn.onnx");
    let full = s
        .rt2(&["dump", model.to_str().unwrap(), "--format", "json"])
        .ok()
        .stdout();
    let atc = s
        .rt2(&["dump", model.to_str().unwrap(), "--format", "json", "--atc"])
        .ok()
        .stdout();
    assert!(full.contains("\"data\""));
    assert!(!atc.contains("\"data\""));
    let j: serde_json::Value = serde_json::from_str(&atc).unwrap();
    assert_eq!(j["graph"][0]["name"], "cnn_bn");
}

#[test]
fn model_selects_a_model_of_a_multi_model_om() {
    let s = Scratch::new();
    let om = s.write("d.om", &testdata::multi_model_dynamic().to_bytes().unwrap());
    let r0 = s
        .rt2(&["dump", om.to_str().unwrap(), "--format", "pbtxt"])
        .ok()
        .stdout();
    let r2 = s
        .rt2(&[
            "dump",
            om.to_str().unwrap(),
            "--format",
            "pbtxt",
            "--model",
            "2",
        ])
        .ok()
        .stdout();
    assert_ne!(r0, r2);
    assert!(r2.contains("sub_2"), "{r2}");
    s.rt2(&["dump", om.to_str().unwrap(), "--model", "7"])
        .fails(2, &["--model 7", "[0, 1, 2]"]);
}

#[test]
fn max_nodes_folds_a_large_model_into_a_drawable_view() {
    let s = Scratch::new();
    s.write("big.onnx", &builder::add_chain_model(5000, 4));
    for view in ["compute", "exe"] {
        let out = format!("{view}.dot");
        s.rt2(&[
            "dump",
            "big.onnx",
            "--view",
            view,
            "--max-nodes",
            "200",
            "-o",
            &out,
        ])
        .ok();
        let dot = String::from_utf8(s.read(&out)).unwrap();
        // Plain text names a shared producer again beside each consumer; the rest are
        // the nodes.
        let (refs, nodes): (Vec<_>, Vec<_>) = dot_nodes(&dot)
            .into_iter()
            .partition(|(_, l)| l.contains("shape=plain"));
        assert!(
            refs.iter().all(|(label, _)| label.starts_with("↑ ")),
            "{refs:?}"
        );
        assert!(
            (150..=200).contains(&nodes.len()),
            "{view}: {} nodes drawn for --max-nodes 200",
            nodes.len()
        );
        let summaries = nodes.iter().filter(|(_, l)| l.contains("shape=box3d"));
        // Each summary says how many nodes it stands for; together, all of them.
        let folded: usize = summaries
            .map(|(label, _)| label.split(' ').next().unwrap().parse::<usize>().unwrap())
            .sum();
        let kept = nodes
            .iter()
            .filter(|(_, l)| !l.contains("shape=box3d"))
            .count();
        if view == "compute" {
            assert_eq!(folded + kept, 5003, "x, c, 5000 Adds and the NetOutput");
            assert!(dot.contains("Add ×"), "summaries name their op types");
        }
        renders(&s.path(&out));
    }
    // JSON: the same folding, as GE JSON ops and as exe nodes.
    let j = s
        .rt2(&["dump", "big.onnx", "--format", "json", "--max-nodes", "200"])
        .ok()
        .json();
    let ops = j["graph"][0]["op"].as_array().unwrap();
    assert!(ops.len() <= 200, "{} ops", ops.len());
    assert!(ops.iter().any(|o| o["type"] == "rt2.Folded"));
    let j = s
        .rt2(&[
            "dump",
            "big.onnx",
            "--view",
            "exe",
            "--graph",
            "main",
            "--format",
            "json",
            "--max-nodes",
            "50",
        ])
        .ok()
        .json();
    let nodes = j["graphs"]["Main"]["nodes"].as_array().unwrap();
    assert!(nodes.len() <= 50, "{} exe nodes", nodes.len());
    assert!(nodes.iter().any(|n| n["kernel"] == "rt2.Folded"));
}

/// Every Add of the chain reads one shared constant: two edges from any Add would be the
/// whole chain through it, so the walk stops at such a hub (and, in the exe view, at the
/// stream and allocator every launch takes).
#[test]
fn around_does_not_walk_through_a_shared_constant() {
    let s = Scratch::new();
    s.write("big.onnx", &builder::add_chain_model(5000, 4));
    for (view, most) in [("compute", 12), ("exe", 80)] {
        let out = format!("{view}.dot");
        let mut args = vec!["dump", "big.onnx", "--view", view];
        if view == "exe" {
            args.extend(["--graph", "main"]);
        }
        let center = if view == "exe" {
            "add2500/LaunchKernelWithHandle"
        } else {
            "add2500"
        };
        args.extend(["--around", center, "--depth", "2", "-o", &out]);
        s.rt2(&args).ok();
        let dot = String::from_utf8(s.read(&out)).unwrap();
        let nodes = dot_nodes(&dot);
        assert!(
            nodes.len() <= most,
            "{view}: {} nodes around one Add of 5000",
            nodes.len()
        );
        assert!(dot.contains("add2500"), "{view}: the center is shown");
        assert!(!dot.contains("add2510"), "{view}: ten Adds away is not");
        renders(&s.path(&out));
    }
}

#[test]
fn around_shows_exactly_the_neighbourhood() {
    let s = Scratch::new();
    s.write("relus.onnx", &relu_chain(20));
    let r = s
        .rt2(&[
            "dump",
            "relus.onnx",
            "--around",
            "r10",
            "--depth",
            "2",
            "-o",
            "a.dot",
        ])
        .ok();
    assert!(r.stdout().is_empty());
    let dot = String::from_utf8(s.read("a.dot")).unwrap();
    let want: BTreeSet<String> = ["r8", "r9", "r10", "r11", "r12"].map(String::from).into();
    assert_eq!(dot_names(&dot, 0), want);
    let cuts: Vec<String> = dot_nodes(&dot)
        .into_iter()
        .filter(|(_, l)| l.contains("shape=plain"))
        .map(|(label, _)| label)
        .collect();
    assert_eq!(cuts, ["… 1 more", "… 1 more"], "one marker each way");
    renders(&s.path("a.dot"));
    // The default depth is 2; JSON shows the same nodes.
    let j = s
        .rt2(&["dump", "relus.onnx", "--around", "r10", "--format", "json"])
        .ok()
        .json();
    let names: BTreeSet<String> = j["graph"][0]["op"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["type"] != "rt2.Cut")
        .map(|o| o["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, want);

    // The exe view: the nodes within two edges of a node, as the whole graph's JSON says.
    let whole = s
        .rt2(&[
            "dump",
            "relus.onnx",
            "--view",
            "exe",
            "--graph",
            "main",
            "--format",
            "json",
        ])
        .ok()
        .json();
    let main = whole["graphs"]["Main"]["nodes"].as_array().unwrap();
    let mut adjacent: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut consumers: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for n in main {
        let to = n["name"].as_str().unwrap();
        for from in n["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .chain(n["control_inputs"].as_array().unwrap())
        {
            let from = from["name"].as_str().unwrap();
            adjacent.entry(from).or_default().insert(to);
            adjacent.entry(to).or_default().insert(from);
            consumers.entry(from).or_default().insert(to);
        }
    }
    // A hub (the stream and the allocator every launch takes) is reached, not walked
    // through.
    let hub = |n: &str| consumers.get(n).is_some_and(|c| c.len() > 8);
    assert!(hub("stream"), "every launch takes the stream");
    let center = main
        .iter()
        .find(|n| n["origin"]["node"] == "r10" && n["kernel"] != "AllocMemHbm")
        .expect("a node lowered from r10")["name"]
        .as_str()
        .unwrap();
    let mut want: BTreeSet<&str> = BTreeSet::from([center]);
    let mut frontier = vec![center];
    for _ in 0..2 {
        let mut next = Vec::new();
        for n in frontier {
            for &m in &adjacent[n] {
                if want.insert(m) && !hub(m) {
                    next.push(m);
                }
            }
        }
        frontier = next;
    }
    assert!(want.len() > 3 && want.len() < main.len(), "{want:?}");
    let r = s
        .rt2(&[
            "dump",
            "relus.onnx",
            "--view",
            "exe",
            "--graph",
            "main",
            "--around",
            center,
        ])
        .ok();
    let got = dot_names(&r.stdout(), 1);
    assert_eq!(
        got,
        want.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>()
    );
}

#[test]
fn subgraph_and_owner_show_one_part_under_its_owners() {
    let s = Scratch::new();
    let model = fixture("models/nested_if_weights.onnx");
    let model = model.to_str().unwrap();
    let inner = "outer_if_0_then_branch/inner_if_1_else_branch";
    let dot = s.rt2(&["dump", model, "--subgraph", inner]).ok().stdout();
    assert_eq!(dot.matches("subgraph cluster_").count(), 3, "{dot}");
    let names = dot_names(&dot, 0);
    assert!(names.contains("outer_if") && names.contains("outer_if_0_then_branch/inner_if"));
    assert!(names.contains(&format!("{inner}/relu_te")));
    assert!(
        !names.iter().any(|n| n.contains("then_branch/inner_if_0")),
        "{names:?}"
    );
    let dot = s.rt2(&["dump", model, "--owner", "outer_if"]).ok().stdout();
    assert_eq!(
        dot.matches("subgraph cluster_").count(),
        5,
        "root and four branches"
    );
    assert!(
        !dot_names(&dot, 0).contains("x"),
        "outside the owner's subgraphs"
    );
    // The exe view: the owner node in Main, its subgraphs as clusters.
    let dot = s
        .rt2(&[
            "dump",
            model,
            "--view",
            "exe",
            "--owner",
            "outer_if",
            "--subgraph",
            "outer_if_1_else_branch",
        ])
        .ok()
        .stdout();
    assert!(
        dot.contains("subgraph cluster_g1 {") && !dot.contains("cluster_g0 "),
        "Main only"
    );
    assert_eq!(dot.matches("subgraph cluster_").count(), 2, "{dot}");
    s.write("m.dot", dot.as_bytes());
    renders(&s.path("m.dot"));
}

#[test]
fn bad_names_and_flags_are_one_line_errors() {
    let s = Scratch::new();
    s.write("relus.onnx", &relu_chain(3));
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["--around", "nope"],
            &["relus.onnx", "no node named \"nope\""],
        ),
        (
            &["--view", "exe", "--around", "nope"],
            &["relus.onnx", "\"nope\""],
        ),
        (
            &["--subgraph", "nope"],
            &["relus.onnx", "no graph named \"nope\"", "\"relus\""],
        ),
        (
            &["--owner", "r1"],
            &["relus.onnx", "\"r1\" owns no subgraphs"],
        ),
        (
            &["--view", "exe", "--owner", "nope"],
            &["relus.onnx", "\"nope\""],
        ),
        (
            &["--format", "pbtxt", "--max-nodes", "5"],
            &["relus.onnx", "--max-nodes", "pbtxt"],
        ),
        (&["--depth", "3"], &["--depth", "--around"]),
    ];
    for (args, needles) in cases {
        let mut all = vec!["dump", "relus.onnx", "-o", "out.dot"];
        all.extend_from_slice(args);
        s.rt2(&all).fails(2, needles);
        assert!(!s.exists("out.dot"), "{args:?}: no output file");
    }
    let zero = s.rt2(&["dump", "relus.onnx", "--max-nodes", "0"]);
    assert_eq!(zero.code(), 2, "{}", zero.stderr());
    let help = s.rt2(&["dump", "--help"]).ok().stdout();
    assert!(
        help.contains("--max-nodes") && help.contains("a few hundred nodes"),
        "{help}"
    );
}
