//! The models of one file seen together: a dynamic OM's root model and its sub-models,
//! how they call each other, and a model made whole for lowering.
//!
//! GE writes a dynamic (unknown-shape) model as one root model (model 0) and one model
//! per compiled subgraph, and its loader ties them back together by graph name alone: a
//! sub-model stands for the subgraph instance whose name is its own graph's name
//! (`GeRootModel::SetSubgraphInstanceNameToModel(graph name, model)`), which the root
//! graph's `PartitionedCall` names in its `subgraph_name` (docs/OM_MODELS.md). The root's
//! `ModelDef` may hold its own copy of that subgraph (GE then runs the copy) or name it
//! only, which `ir` keeps as an [external](ComputeGraph::external) graph.
//!
//! This module finds the relations ([`relations`]), checks that every external name of an
//! OM is some model's graph ([`check`]), and replaces external graphs by the models they
//! name ([`link`]). It does no IO, never panics on any file, and bounds linking by the
//! number of models (a model already being linked is a cycle, an error).

use std::borrow::Cow;
use std::collections::HashMap;

use crate::om::graph::{ComputeGraph, ComputeModel};
use crate::om::{OmError, Place, Result};

/// One model of a file: its index in the file (OM models after the first are the
/// sub-models of a dynamic root model) and its typed graph. The GE IR is not kept beside
/// it: `ir::to_model_def` gives it back unchanged.
#[derive(Debug, Clone)]
pub struct LoadedModel {
    pub index: usize,
    pub model: ComputeModel,
}

/// A node that calls a graph by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallSite {
    /// The file index of the model holding the node.
    pub model: usize,
    /// The graphs from that model's root down to the node's own, joined by `/`.
    pub graph: String,
    pub node: String,
    pub op_type: String,
    /// True when the calling model holds its own copy of the graph, which GE's loader
    /// then runs in place of the sub-model's (`GeRootModel::ModifyOwnerGraphForSubModels`);
    /// false when the caller names it only.
    pub inline: bool,
}

/// Where a model of a file stands among the others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Relation {
    /// The file's first model: the root graph, which the others serve.
    Root,
    /// A sub-model: the subgraph instance these nodes call, by this model's graph name.
    Submodel(Vec<CallSite>),
    /// A model no node of the file calls by its graph's name.
    Uncalled,
}

impl Relation {
    /// One line for tables: `root`, `called by model 0: dyn/call_1 (PartitionedCall)`,
    /// `called by no node`.
    pub fn describe(&self) -> String {
        match self {
            Relation::Root => "root".into(),
            Relation::Uncalled => "called by no node".into(),
            Relation::Submodel(sites) => {
                let list: Vec<String> = sites
                    .iter()
                    .map(|s| {
                        format!(
                            "model {}: {}/{} ({}{})",
                            s.model,
                            s.graph,
                            s.node,
                            s.op_type,
                            if s.inline { ", holds a copy" } else { "" }
                        )
                    })
                    .collect();
                format!("called by {}", list.join("; "))
            }
        }
    }
}

/// Every node of `model` that calls a subgraph, with the subgraph's name.
fn call_sites(index: usize, model: &ComputeModel) -> Vec<(String, CallSite)> {
    fn walk(index: usize, g: &ComputeGraph, path: &str, out: &mut Vec<(String, CallSite)>) {
        for n in &g.nodes {
            for sub in &n.subgraphs {
                out.push((
                    sub.name.clone(),
                    CallSite {
                        model: index,
                        graph: path.to_string(),
                        node: n.name.clone(),
                        op_type: n.op_type.clone(),
                        inline: !sub.external,
                    },
                ));
                if !sub.external {
                    walk(index, sub, &format!("{path}/{}", sub.name), out);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(index, &model.root, &model.root.name, &mut out);
    for d in &model.detached {
        walk(index, d, &d.name, &mut out);
    }
    out
}

/// The relation of each model of `models` (in the same order) to the others.
pub fn relations(models: &[LoadedModel]) -> Vec<Relation> {
    let mut by_name: HashMap<String, Vec<CallSite>> = HashMap::new();
    for m in models {
        for (name, site) in call_sites(m.index, &m.model) {
            by_name.entry(name).or_default().push(site);
        }
    }
    models
        .iter()
        .enumerate()
        .map(|(k, m)| {
            if k == 0 {
                return Relation::Root;
            }
            let sites: Vec<CallSite> = by_name
                .get(&m.model.root.name)
                .into_iter()
                .flatten()
                .filter(|s| s.model != m.index)
                .cloned()
                .collect();
            if sites.is_empty() {
                Relation::Uncalled
            } else {
                Relation::Submodel(sites)
            }
        })
        .collect()
}

/// The model (by position in `models`) whose root graph is named `name`, other than
/// `except`.
fn model_named(models: &[LoadedModel], name: &str, except: usize) -> Option<usize> {
    models
        .iter()
        .position(|m| m.index != except && m.model.root.name == name)
}

/// Checks that every external name in every model is another model's graph, as GE's
/// loader needs to run it: the error names the model, graph and node.
pub fn check(models: &[LoadedModel]) -> Result<()> {
    for m in models {
        let mut fault = None;
        let mut find = |g: &ComputeGraph, path: &str| {
            for n in &g.nodes {
                for sub in &n.subgraphs {
                    if fault.is_none()
                        && sub.external
                        && !sub.name.is_empty()
                        && model_named(models, &sub.name, m.index).is_none()
                    {
                        fault = Some(OmError::graph(
                            Place::new(format!(
                                "model {}: {}",
                                m.index,
                                Place::node(path, &n.name)
                            )),
                            format!(
                                "subgraph {:?} is neither in the model nor a model of the file",
                                sub.name
                            ),
                        ));
                    }
                }
            }
        };
        visit(&m.model.root, &m.model.root.name, &mut find);
        for d in &m.model.detached {
            visit(d, &d.name, &mut find);
        }
        if let Some(e) = fault {
            return Err(e);
        }
    }
    Ok(())
}

/// Calls `f` on `g` and every graph below it that is not external, with its path.
fn visit(g: &ComputeGraph, path: &str, f: &mut impl FnMut(&ComputeGraph, &str)) {
    f(g, path);
    for n in &g.nodes {
        for sub in &n.subgraphs {
            if !sub.external {
                visit(sub, &format!("{path}/{}", sub.name), f);
            }
        }
    }
}

/// Model `index` (a file index, as `--model` names it) made whole: every external graph
/// that names another model's graph replaced by that model's graph, itself linked. A
/// name no model has stays external. Following a model already being linked is an error.
/// A model without external graphs is handed back as it is, not copied.
pub fn link(models: &[LoadedModel], index: usize) -> Result<Cow<'_, ComputeModel>> {
    let Some(pos) = models.iter().position(|m| m.index == index) else {
        let have: Vec<usize> = models.iter().map(|m| m.index).collect();
        return Err(OmError::graph(
            Place::new(format!("model {index}")),
            format!("the file has models {have:?}"),
        ));
    };
    let mut external = false;
    let mut any = |g: &ComputeGraph, _: &str| {
        external |= g
            .nodes
            .iter()
            .flat_map(|n| &n.subgraphs)
            .any(|s| s.external);
    };
    let own = &models[pos].model;
    visit(&own.root, "", &mut any);
    for d in &own.detached {
        visit(d, "", &mut any);
    }
    if !external {
        return Ok(Cow::Borrowed(own));
    }
    let mut model = own.clone();
    let mut chain = vec![pos];
    fill(models, &mut model.root, &mut chain)?;
    for d in &mut model.detached {
        fill(models, d, &mut chain)?;
    }
    Ok(Cow::Owned(model))
}

fn fill(models: &[LoadedModel], g: &mut ComputeGraph, chain: &mut Vec<usize>) -> Result<()> {
    let gname = g.name.clone();
    for n in &mut g.nodes {
        for sub in &mut n.subgraphs {
            if !sub.external {
                fill(models, sub, chain)?;
                continue;
            }
            let Some(&current) = chain.last() else {
                continue;
            };
            let Some(j) = model_named(models, &sub.name, models[current].index) else {
                continue;
            };
            if chain.contains(&j) {
                return Err(OmError::graph(
                    Place::node(&gname, &n.name),
                    format!(
                        "subgraph {:?} is model {}, which calls back into it",
                        sub.name, models[j].index
                    ),
                ));
            }
            let mut linked = models[j].model.root.clone();
            chain.push(j);
            fill(models, &mut linked, chain)?;
            chain.pop();
            *sub = linked;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::om::graph::ComputeNode;

    fn model(index: usize, root: ComputeGraph) -> LoadedModel {
        LoadedModel {
            index,
            model: ComputeModel {
                name: root.name.clone(),
                root,
                ..Default::default()
            },
        }
    }

    fn caller(graph: &str, node: &str, sub: ComputeGraph) -> ComputeGraph {
        let mut g = ComputeGraph::new(graph);
        let mut n = ComputeNode::new(node, "PartitionedCall");
        n.subgraphs.push(sub);
        g.nodes.push(n);
        g
    }

    fn leaf(name: &str) -> ComputeGraph {
        let mut g = ComputeGraph::new(name);
        g.nodes.push(ComputeNode::new("d", "Data"));
        g
    }

    #[test]
    fn sub_models_are_found_by_graph_name_and_linked_in() {
        let models = vec![
            model(0, caller("root", "call", ComputeGraph::external("s1"))),
            model(1, caller("s1", "inner", ComputeGraph::external("s2"))),
            model(2, leaf("s2")),
            model(3, leaf("lonely")),
        ];
        check(&models).unwrap();
        let rel = relations(&models);
        assert_eq!(rel[0], Relation::Root);
        assert_eq!(
            rel[1].describe(),
            "called by model 0: root/call (PartitionedCall)"
        );
        assert_eq!(
            rel[2].describe(),
            "called by model 1: s1/inner (PartitionedCall)"
        );
        assert_eq!(rel[3], Relation::Uncalled);
        let linked = link(&models, 0).unwrap();
        let s1 = &linked.root.nodes[0].subgraphs[0];
        assert!(!s1.external);
        assert_eq!(s1.nodes[0].subgraphs[0].nodes[0].op_type, "Data");
        assert!(matches!(link(&models, 0).unwrap(), Cow::Owned(_)));
        assert!(matches!(link(&models, 2).unwrap(), Cow::Borrowed(_)));
        assert!(link(&models, 7).is_err());
    }

    #[test]
    fn a_name_no_model_has_is_an_error_naming_model_graph_and_node() {
        let models = vec![
            model(0, caller("root", "call", ComputeGraph::external("s1"))),
            model(1, caller("s1", "inner", ComputeGraph::external("nowhere"))),
        ];
        let e = check(&models).unwrap_err().to_string();
        assert_eq!(
            e,
            "model 1: graph \"s1\": node \"inner\": subgraph \"nowhere\" is neither in the \
             model nor a model of the file"
        );
    }

    #[test]
    fn models_calling_each_other_are_a_cycle() {
        let models = vec![
            model(0, caller("a", "ca", ComputeGraph::external("b"))),
            model(1, caller("b", "cb", ComputeGraph::external("a"))),
        ];
        let e = link(&models, 0).unwrap_err().to_string();
        assert!(e.contains("calls back into it"), "{e}");
    }
}
