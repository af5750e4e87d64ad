//! A readable JSON view of an ExecuteGraph: every field of every node, input references
//! with the source node's name, typed attributes.

use serde_json::{Value, json};

use crate::exec::graph::{ExecuteGraph, KernelAttr, KernelGraph, KernelNode};
use crate::exec::view::select::GraphSelect;

/// A readable JSON view of the selected graphs: model name, flags, resources, model IO,
/// then `graphs` keyed by `Init`/`Main`/`DeInit`, each with its nodes (every field, input
/// references with the source node's name, typed attributes) and free/launch relations.
pub fn to_json(eg: &ExecuteGraph, which: GraphSelect) -> Value {
    let io = |ios: &[crate::exec::graph::ModelIo]| -> Value {
        ios.iter()
            .map(|io| {
                let mut v = json!({
                    "name": io.name,
                    "dtype": io.dtype.map(|d| d.name()),
                    "shape": io.shape,
                });
                if io.weight {
                    v["weight"] = json!(true);
                }
                v
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

fn json_graph(g: &KernelGraph) -> Value {
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

fn json_node<'a>(i: usize, n: &KernelNode, name_of: &impl Fn(usize) -> Option<&'a str>) -> Value {
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
fn json_attr(a: &KernelAttr) -> Value {
    let (ty, value) = match a {
        KernelAttr::Int(i) => ("int", json!(i)),
        KernelAttr::Ints(v) => ("ints", json!(v)),
        KernelAttr::Float(f) => ("float", json!(f)),
        KernelAttr::Floats(v) => ("floats", json!(v)),
        KernelAttr::Bool(b) => ("bool", json!(b)),
        KernelAttr::Str(s) => ("str", json!(s)),
        KernelAttr::Strs(v) => ("strs", json!(v)),
        KernelAttr::Bytes(b) => ("bytes", json!(hex(b))),
        KernelAttr::DType(d) => ("dtype", json!(d.name())),
        KernelAttr::DTypes(v) => (
            "dtypes",
            json!(
                v.iter()
                    .map(|d| d.map_or("", |d| d.name()))
                    .collect::<Vec<_>>()
            ),
        ),
        KernelAttr::Tensor(t) => (
            "tensor",
            json!({"dtype": t.dtype.name(), "shape": t.shape, "data": hex(&t.data)}),
        ),
    };
    json!({"type": ty, "value": value})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::testdata::sample;

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
}
