//! The ComputeGraph verifier: checks a [`ComputeModel`] and reports *every* problem.
//!
//! Invariants checked, per graph and recursively per subgraph:
//! 1. node names are unique;
//! 2. every data edge names an existing node and, where the producer has output
//!    descriptors, an existing output; graph inputs and outputs likewise;
//! 3. a node with input descriptors has exactly one per data input, not counting the
//!    `FORMAT_RESERVED` descriptors GE writes for optional inputs left unconnected;
//! 4. data and control edges form no cycle;
//! 5. the root graph's Data nodes carry `index` attributes `0..n` with no gap or repeat;
//!    a subgraph's Data nodes carry `_parent_node_index` within the caller's inputs;
//! 6. a subgraph's NetOutput input descriptors carry `_parent_node_index` within the
//!    caller's outputs, and a graph has at most one NetOutput;
//! 7. control-flow nodes own the number of subgraphs their type needs (If 1-2, Case 1+,
//!    While 2, PartitionedCall 1, Loop/Scan 1);
//! 8. shapes hold dims >= -1, or are exactly "unknown rank"; dtypes are known numbers;
//! 9. a Const's `value` is a tensor whose byte count fits its dtype and static shape.
//!
//! External subgraphs (names another model of the file answers) are not checked.
//! Graphs no node calls are reported as warnings. The verifier never fails early and
//! never panics, whatever the graph holds: it is run on graphs straight from files.

use std::collections::{HashMap, HashSet};
use std::fmt;

use crate::om::graph::{
    AttrValue, ComputeGraph, ComputeModel, ComputeNode, Shape, TensorDesc, is_const_type,
    is_data_type,
};
use crate::om::{DataType, Place};

/// How bad a problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Warning,
    Error,
}

/// One finding of the verifier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub severity: Severity,
    pub place: Place,
    pub msg: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sev = match self.severity {
            Severity::Warning => "warning",
            Severity::Error => "error",
        };
        write!(f, "{sev}: {}: {}", self.place, self.msg)
    }
}

/// Checks the whole model; returns every problem found, errors and warnings, in graph
/// order.
pub fn verify(model: &ComputeModel) -> Vec<Problem> {
    let mut v = Verifier {
        problems: Vec::new(),
    };
    v.graph(&model.root, None);
    for g in &model.detached {
        v.push(
            Severity::Warning,
            Place::graph(&g.name),
            "no node calls this graph".into(),
        );
        v.graph(g, None);
    }
    v.problems
}

/// Only the errors of [`verify`].
pub fn errors(model: &ComputeModel) -> Vec<Problem> {
    verify(model)
        .into_iter()
        .filter(|p| p.severity == Severity::Error)
        .collect()
}

struct Verifier {
    problems: Vec<Problem>,
}

impl Verifier {
    fn push(&mut self, severity: Severity, place: Place, msg: String) {
        self.problems.push(Problem {
            severity,
            place,
            msg,
        });
    }

    fn err(&mut self, g: &ComputeGraph, n: &ComputeNode, msg: String) {
        self.push(Severity::Error, Place::node(&g.name, &n.name), msg);
    }

    fn graph(&mut self, g: &ComputeGraph, caller: Option<&ComputeNode>) {
        let mut seen = HashSet::with_capacity(g.nodes.len());
        for n in &g.nodes {
            if !seen.insert(n.name.as_str()) {
                self.err(g, n, "two nodes in the graph have this name".into());
            }
        }
        for n in &g.nodes {
            self.edges(g, n);
            self.descs(g, n);
            self.subgraph_arity(g, n);
            if is_const_type(&n.op_type) {
                self.constant(g, n);
            }
        }
        for (what, ports) in [("graph input", &g.inputs), ("graph output", &g.outputs)] {
            for p in ports.iter() {
                if g.nodes.get(p.node.index()).is_none() {
                    let msg = format!("{what} names node {} of {}", p.node, g.nodes.len());
                    self.push(Severity::Error, Place::graph(&g.name), msg);
                }
            }
        }
        self.acyclic(g);
        self.boundary(g, caller);
        for n in &g.nodes {
            // An external subgraph is a name another model of the file answers; it has
            // nothing of its own to check.
            for sub in n.subgraphs.iter().filter(|s| !s.external) {
                self.graph(sub, Some(n));
            }
        }
    }

    fn edges(&mut self, g: &ComputeGraph, n: &ComputeNode) {
        for (i, input) in n.inputs.iter().enumerate() {
            let Some(p) = input else { continue };
            match g.nodes.get(p.node.index()) {
                None => self.err(
                    g,
                    n,
                    format!("input {i} names node {} which does not exist", p.node),
                ),
                Some(src)
                    if !src.output_descs.is_empty()
                        && p.index as usize >= src.output_descs.len() =>
                {
                    self.err(
                        g,
                        n,
                        format!(
                            "input {i} reads output {} of {:?}, which has {} output(s)",
                            p.index,
                            src.name,
                            src.output_descs.len()
                        ),
                    )
                }
                Some(_) => {}
            }
        }
        for c in &n.control_inputs {
            if g.nodes.get(c.index()).is_none() {
                self.err(
                    g,
                    n,
                    format!("control input names node {c} which does not exist"),
                );
            }
        }
        let descs = n.data_input_descs().len();
        // GE's graph inputs and variables are registered with an input `x` (REG_OP(Data),
        // REG_OP(Variable)) and GE writes its descriptor, but nothing feeds it in a graph.
        let fed_from_outside =
            n.inputs.is_empty() && (is_data_type(&n.op_type) || n.op_type == "Variable");
        if !n.input_descs.is_empty() && descs != n.inputs.len() && !fed_from_outside {
            let reserved = n.input_descs.len() - descs;
            let unconnected = if reserved > 0 {
                format!(" (and {reserved} of unconnected optional inputs)")
            } else {
                String::new()
            };
            self.err(
                g,
                n,
                format!(
                    "{} data input(s) but {descs} input descriptor(s){unconnected}",
                    n.inputs.len(),
                ),
            );
        }
    }

    fn descs(&mut self, g: &ComputeGraph, n: &ComputeNode) {
        let all = n
            .input_descs
            .iter()
            .map(|d| ("input", d))
            .chain(n.output_descs.iter().map(|d| ("output", d)));
        for (i, (side, d)) in all.enumerate() {
            let i = if side == "input" {
                i
            } else {
                i - n.input_descs.len()
            };
            if let Some(msg) = desc_problem(d) {
                self.err(g, n, format!("{side} {i}: {msg}"));
            }
        }
    }

    fn subgraph_arity(&mut self, g: &ComputeGraph, n: &ComputeNode) {
        let count = n.subgraphs.len();
        let ok = match n.op_type.as_str() {
            "If" | "_If" | "StatelessIf" => (1..=2).contains(&count),
            "Case" | "StatelessCase" => count >= 1,
            "While" | "_While" | "StatelessWhile" => count == 2,
            "PartitionedCall" | "StatefulPartitionedCall" | "Loop" | "Scan" => count == 1,
            _ => true,
        };
        if !ok {
            self.err(
                g,
                n,
                format!("a {} node cannot own {count} subgraph(s)", n.op_type),
            );
        }
    }

    fn constant(&mut self, g: &ComputeGraph, n: &ComputeNode) {
        match n.attr("value") {
            Some(AttrValue::Tensor(t)) => {
                if t.data.is_empty() {
                    return; // weights stripped from a dump, or resolved later from WEIGHTS_DATA
                }
                let want = t
                    .desc
                    .shape
                    .element_count()
                    .and_then(|c| t.desc.dtype.byte_size(c));
                if let Some(want) = want
                    && want != t.data.len() as u64
                {
                    self.err(
                        g,
                        n,
                        format!(
                            "attribute \"value\": {} {} needs {want} bytes, has {}",
                            t.desc.dtype,
                            t.desc.shape,
                            t.data.len()
                        ),
                    );
                }
            }
            Some(other) => self.err(
                g,
                n,
                format!(
                    "attribute \"value\" is of kind {}, not a tensor",
                    other.kind()
                ),
            ),
            None => {}
        }
    }

    fn acyclic(&mut self, g: &ComputeGraph) {
        let len = g.nodes.len();
        let mut indeg = vec![0u32; len];
        let mut succ: Vec<Vec<usize>> = vec![Vec::new(); len];
        for (i, n) in g.nodes.iter().enumerate() {
            let preds = n
                .inputs
                .iter()
                .flatten()
                .map(|p| p.node.index())
                .chain(n.control_inputs.iter().map(|c| c.index()));
            for p in preds.filter(|&p| p < len) {
                succ[p].push(i);
                indeg[i] += 1;
            }
        }
        let mut ready: Vec<usize> = (0..len).filter(|&i| indeg[i] == 0).collect();
        let mut done = 0;
        while let Some(i) = ready.pop() {
            done += 1;
            for &s in &succ[i] {
                indeg[s] -= 1;
                if indeg[s] == 0 {
                    ready.push(s);
                }
            }
        }
        if done < len {
            let on_cycle: Vec<&str> = (0..len)
                .filter(|&i| indeg[i] > 0)
                .take(5)
                .map(|i| g.nodes[i].name.as_str())
                .collect();
            let msg = format!(
                "edges form a cycle through {} node(s), among them {on_cycle:?}",
                len - done
            );
            self.push(Severity::Error, Place::graph(&g.name), msg);
        }
    }

    /// Data and NetOutput nodes: the graph's boundary with its caller (or with the user).
    fn boundary(&mut self, g: &ComputeGraph, caller: Option<&ComputeNode>) {
        let mut indices: HashMap<i64, &str> = HashMap::new();
        for (_, n) in g.data_nodes() {
            match caller {
                None => match n.attr_int("index") {
                    None => self.err(
                        g,
                        n,
                        "a root-graph Data node needs an int attribute \"index\"".into(),
                    ),
                    Some(i) => {
                        if let Some(other) = indices.insert(i, &n.name) {
                            self.err(g, n, format!("Data index {i} is also used by {other:?}"));
                        }
                    }
                },
                Some(c) => match n.attr_int("_parent_node_index") {
                    None => self.err(
                        g,
                        n,
                        "a subgraph Data node needs an int attribute \"_parent_node_index\"".into(),
                    ),
                    Some(i) if i < 0 || i as usize >= c.inputs.len() => self.err(
                        g,
                        n,
                        format!(
                            "_parent_node_index {i} is out of range: {:?} has {} input(s)",
                            c.name,
                            c.inputs.len()
                        ),
                    ),
                    Some(_) => {}
                },
            }
        }
        if caller.is_none() && !indices.is_empty() {
            let n = indices.len() as i64;
            if let Some(gap) = (0..n).find(|i| !indices.contains_key(i)) {
                let msg = format!("Data indices must be 0..{n}, but {gap} is missing");
                self.push(Severity::Error, Place::graph(&g.name), msg);
            }
        }
        let outs: Vec<&ComputeNode> = g
            .nodes
            .iter()
            .filter(|n| n.op_type == "NetOutput")
            .collect();
        if outs.len() > 1 {
            let msg = format!("{} NetOutput nodes; a graph has at most one", outs.len());
            self.push(Severity::Error, Place::graph(&g.name), msg);
        }
        if let (Some(c), Some(out)) = (caller, outs.first()) {
            let outputs = c.output_descs.len();
            for (i, d) in out.input_descs.iter().enumerate() {
                if let Some(AttrValue::Int(p)) = d.attrs.get("_parent_node_index")
                    && (*p < 0 || (outputs > 0 && *p as usize >= outputs))
                {
                    self.err(
                        g,
                        out,
                        format!("input {i}: _parent_node_index {p} is out of range: {:?} has {outputs} output(s)", c.name),
                    );
                }
            }
        }
    }
}

fn desc_problem(d: &TensorDesc) -> Option<String> {
    let number = d.rest.as_ref().map_or(0, |r| r.dtype);
    if d.dtype == DataType::Undefined && number != 0 {
        return Some(format!("unknown data type number {number}"));
    }
    match &d.shape {
        Shape::UnknownRank => None,
        Shape::Dims(dims) => dims.iter().find(|&&x| x < -1).map(|x| {
            format!(
                "dim {x} in shape {}: dims are >= -1, and -2 stands alone",
                d.shape
            )
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::om::graph::{NodeId, OutPort, Tensor};

    fn data(name: &str, index: i64) -> ComputeNode {
        let mut n = ComputeNode::new(name, "Data");
        n.attrs.insert("index".into(), AttrValue::Int(index));
        n.output_descs
            .push(TensorDesc::new(DataType::Float32, Shape::Dims(vec![2])));
        n
    }

    fn check(model: &ComputeModel, expect: &[&str]) {
        let got: Vec<String> = verify(model).iter().map(|p| p.to_string()).collect();
        assert_eq!(got.len(), expect.len(), "{got:#?}");
        for (g, e) in got.iter().zip(expect) {
            assert!(g.contains(e), "{g:?} should contain {e:?}");
        }
    }

    #[test]
    fn a_valid_graph_has_no_problems() {
        let mut g = ComputeGraph::new("g");
        let x = g.add_node(data("x", 0));
        let mut out = ComputeNode::new("out", "NetOutput");
        out.inputs.push(Some(OutPort { node: x, index: 0 }));
        g.add_node(out);
        check(
            &ComputeModel {
                root: g,
                ..Default::default()
            },
            &[],
        );
    }

    #[test]
    fn a_data_node_with_its_input_descriptor_is_normal_ge() {
        let mut g = ComputeGraph::new("g");
        let mut x = data("x", 0);
        x.input_descs
            .push(TensorDesc::new(DataType::Float32, Shape::Dims(vec![2])));
        let x = g.add_node(x);
        let mut out = ComputeNode::new("out", "NetOutput");
        out.inputs.push(Some(OutPort { node: x, index: 0 }));
        g.add_node(out);
        let mut relu = ComputeNode::new("r", "Relu");
        relu.input_descs
            .push(TensorDesc::new(DataType::Float32, Shape::Dims(vec![2])));
        g.add_node(relu);
        // The Data is clean; a Relu with a descriptor and no input is still reported.
        check(
            &ComputeModel {
                root: g,
                ..Default::default()
            },
            &["node \"r\": 0 data input(s) but 1 input descriptor(s)"],
        );
    }

    #[test]
    fn reports_every_problem_not_the_first() {
        let mut g = ComputeGraph::new("g");
        let x = g.add_node(data("x", 0));
        g.add_node(data("y", 2));
        let mut a = ComputeNode::new("a", "Add");
        a.inputs = vec![
            Some(OutPort { node: x, index: 3 }),
            Some(OutPort {
                node: NodeId(9),
                index: 0,
            }),
        ];
        a.control_inputs.push(NodeId(3));
        a.output_descs
            .push(TensorDesc::new(DataType::Float32, Shape::Dims(vec![-3])));
        let a = g.add_node(a);
        let mut b = ComputeNode::new("b", "Relu");
        b.inputs.push(Some(OutPort { node: a, index: 0 }));
        g.add_node(b);
        let mut c = ComputeNode::new("c", "Const");
        c.attrs.insert(
            "value".into(),
            AttrValue::Tensor(Box::new(Tensor {
                desc: TensorDesc::new(DataType::Float32, Shape::Dims(vec![3])),
                data: vec![0; 8].into(),
            })),
        );
        g.add_node(c);
        g.add_node(ComputeNode::new("w", "While"));
        check(
            &ComputeModel {
                root: g,
                ..Default::default()
            },
            &[
                "node \"a\": input 0 reads output 3 of \"x\", which has 1 output(s)",
                "node \"a\": input 1 names node n9",
                "output 0: dim -3",
                "float32 [3] needs 12 bytes, has 8",
                "a While node cannot own 0 subgraph(s)",
                "cycle through 2 node(s)",
                "Data indices must be 0..2, but 1 is missing",
            ],
        );
    }

    #[test]
    fn subgraph_boundaries() {
        let mut then = ComputeGraph::new("then");
        let mut d = ComputeNode::new("d", "Data");
        d.attrs
            .insert("_parent_node_index".into(), AttrValue::Int(5));
        then.add_node(d);
        then.add_node(ComputeNode::new("d2", "Data"));
        let mut iff = ComputeNode::new("if", "If");
        iff.inputs = vec![None, None];
        iff.subgraphs.push(then);
        let mut g = ComputeGraph::new("root");
        g.add_node(iff);
        check(
            &ComputeModel {
                root: g,
                ..Default::default()
            },
            &[
                "_parent_node_index 5 is out of range: \"if\" has 2 input(s)",
                "node \"d2\": a subgraph Data node needs",
            ],
        );
    }
}
