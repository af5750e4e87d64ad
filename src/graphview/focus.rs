//! What a view of a large model shows: the filter (`--subgraph`, `--owner`, `--around`,
//! `--depth`, `--max-nodes`), and the plan it comes to on a [`Flat`] graph: which nodes
//! show as themselves, which fold into which summary, where cut markers go, graph by
//! graph. The caller (`om::filter`, `exec::view::filter`) flattens its graph and builds
//! the smaller one from the plan.

use super::fold::{self, Cuts, Flat, Folding, Key};

/// What a view shows. The parts apply in order: the scope (`subgraph`, `owner`), the
/// neighbourhood (`around`, `depth`), then folding (`max_nodes`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ViewFilter {
    /// Only the graph of this name and the subgraphs below it (with `owner`: only the
    /// owner's subgraph of this name).
    pub subgraph: Option<String>,
    /// Only the subgraphs this node owns.
    pub owner: Option<String>,
    /// Only the nodes within `depth` edges of this node.
    pub around: Option<String>,
    pub depth: usize,
    /// Fold nodes into summaries until at most this many are left.
    pub max_nodes: Option<usize>,
}

impl ViewFilter {
    /// True when the filter shows everything as it is.
    pub fn is_empty(&self) -> bool {
        self.subgraph.is_none()
            && self.owner.is_none()
            && self.around.is_none()
            && self.max_nodes.is_none()
    }

    /// True when the filter shows a part rather than all of it, folded or not.
    pub fn narrows(&self) -> bool {
        self.subgraph.is_some() || self.owner.is_some() || self.around.is_some()
    }
}

/// Why a filter cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    #[error("no node named {name:?}")]
    NoNode { name: String },
    #[error("no graph named {name:?} (the graphs are {})", list(.graphs))]
    NoGraph { name: String, graphs: Vec<String> },
    #[error("{name:?} names {} nodes, in graphs {}: narrow the view to one of them first", .graphs.len(), list(.graphs))]
    AmbiguousNode { name: String, graphs: Vec<String> },
    #[error("{name:?} names {count} graphs: narrow the view to one of them with its owner")]
    AmbiguousGraph { name: String, count: usize },
    #[error("node {name:?} owns no subgraphs")]
    NotAnOwner { name: String },
    #[error("node {owner:?} owns no subgraph named {name:?} (it owns {})", list(.owned))]
    NotOwned {
        owner: String,
        name: String,
        owned: Vec<String>,
    },
}

/// Names for a message: quoted, comma-separated, the first eight.
fn list(names: &[String]) -> String {
    let mut s: Vec<String> = names.iter().take(8).map(|n| format!("{n:?}")).collect();
    if names.len() > 8 {
        s.push(format!("and {} more", names.len() - 8));
    }
    s.join(", ")
}

/// A node of a filtered graph, in the order the graph lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Item {
    /// The marker for the left-out producers of a view node.
    CutIn(Key),
    /// A node shown as itself, or a summary.
    View(Key),
    /// The marker for the left-out consumers of a view node.
    CutOut(Key),
}

/// What a view shows of a flat graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub folding: Folding,
    pub cuts: Cuts,
}

/// The plan for the view `f` asks for; `named(i, name)` tells whether node `i` is called
/// `name`. In scope: the graphs selected and every graph below them; around a node, its
/// neighbourhood within the scope; then folding. The owners of what is kept stay too,
/// pinned, so each subgraph hangs where it belongs.
pub fn plan(
    flat: &Flat,
    named: &dyn Fn(usize, &str) -> bool,
    f: &ViewFilter,
) -> Result<Plan, FilterError> {
    let n = flat.len();
    let mut in_scope = vec![true; flat.graphs.len()];
    let mut pinned = vec![false; n];
    if let Some(roots) = scope(flat, named, f)? {
        in_scope.fill(false);
        for &r in &roots {
            in_scope[r as usize] = true;
            mark_owners(flat, r as usize, &mut pinned);
        }
        // Graphs are numbered parents first, so one pass reaches every descendant.
        for g in 0..flat.graphs.len() {
            if let Some(o) = flat.graphs[g].owner {
                in_scope[g] |= in_scope[flat.graph[o] as usize];
            }
        }
    }
    let allowed: Vec<bool> = (0..n).map(|i| in_scope[flat.graph[i] as usize]).collect();
    let mut shown = match &f.around {
        None => allowed,
        Some(name) => {
            let center = find(flat, named, name, &allowed)?;
            pinned[center] = true;
            mark_owners(flat, flat.graph[center] as usize, &mut pinned);
            fold::neighbourhood(flat, &allowed, center, f.depth)
        }
    };
    for (s, &p) in shown.iter_mut().zip(&pinned) {
        *s |= p;
    }
    let budget = f.max_nodes.unwrap_or(usize::MAX);
    let folding = fold::fold(flat, &shown, &pinned, budget);
    let cuts = fold::cuts(flat, &folding);
    Ok(Plan { folding, cuts })
}

impl Plan {
    /// Whether graph `g` shows any node.
    pub fn visible(&self, flat: &Flat, g: usize) -> bool {
        let fg = &flat.graphs[g];
        (fg.offset..fg.offset + fg.len).any(|i| self.folding.key(i).is_some())
    }

    /// The nodes of filtered graph `g`: each view node at its first member's place,
    /// between its cut markers.
    pub fn items(&self, flat: &Flat, g: usize) -> Vec<Item> {
        let fg = &flat.graphs[g];
        let mut items = Vec::new();
        for i in fg.offset..fg.offset + fg.len {
            let key = match self.folding.key(i) {
                Some(Key::Fold(k)) if self.folding.folds[k as usize][0] as usize != i => continue,
                Some(key) => key,
                None => continue,
            };
            if self.cuts.into.contains_key(&key) {
                items.push(Item::CutIn(key));
            }
            items.push(Item::View(key));
            if self.cuts.out_of.contains_key(&key) {
                items.push(Item::CutOut(key));
            }
        }
        items
    }
}

/// The one node named `name` among those `allowed`.
fn find(
    flat: &Flat,
    named: &dyn Fn(usize, &str) -> bool,
    name: &str,
    allowed: &[bool],
) -> Result<usize, FilterError> {
    let hits: Vec<usize> = (0..flat.len())
        .filter(|&i| allowed[i] && named(i, name))
        .collect();
    match hits[..] {
        [i] => Ok(i),
        [] => Err(FilterError::NoNode { name: name.into() }),
        _ => Err(FilterError::AmbiguousNode {
            name: name.into(),
            graphs: hits.iter().map(|&i| label(flat, flat.graph[i])).collect(),
        }),
    }
}

/// The name of graph `g` in messages.
fn label(flat: &Flat, g: u32) -> String {
    flat.graphs[g as usize]
        .names
        .first()
        .cloned()
        .unwrap_or_default()
}

/// Whether graph `g` answers to `name`.
fn graph_named(flat: &Flat, g: u32, name: &str) -> bool {
    flat.graphs[g as usize].names.iter().any(|n| n == name)
}

/// The graphs the scope part of `f` selects (`None`: all of them).
fn scope(
    flat: &Flat,
    named: &dyn Fn(usize, &str) -> bool,
    f: &ViewFilter,
) -> Result<Option<Vec<u32>>, FilterError> {
    if let Some(owner) = &f.owner {
        let o = find(flat, named, owner, &vec![true; flat.len()])?;
        let owned = &flat.owned[o];
        if owned.is_empty() {
            return Err(FilterError::NotAnOwner {
                name: owner.clone(),
            });
        }
        return match &f.subgraph {
            None => Ok(Some(owned.clone())),
            Some(name) => match owned.iter().find(|&&g| graph_named(flat, g, name)) {
                Some(&g) => Ok(Some(vec![g])),
                None => Err(FilterError::NotOwned {
                    owner: owner.clone(),
                    name: name.clone(),
                    owned: owned.iter().map(|&g| label(flat, g)).collect(),
                }),
            },
        };
    }
    let Some(name) = &f.subgraph else {
        return Ok(None);
    };
    let hits: Vec<u32> = (0..flat.graphs.len() as u32)
        .filter(|&g| graph_named(flat, g, name))
        .collect();
    match hits.len() {
        1 => Ok(Some(hits)),
        0 => Err(FilterError::NoGraph {
            name: name.clone(),
            graphs: (0..flat.graphs.len() as u32)
                .map(|g| label(flat, g))
                .collect(),
        }),
        count => Err(FilterError::AmbiguousGraph {
            name: name.clone(),
            count,
        }),
    }
}

/// Marks the owners of graph `g`, up to the top, in `out`.
fn mark_owners(flat: &Flat, mut g: usize, out: &mut [bool]) {
    while let Some(o) = flat.graphs[g].owner {
        out[o] = true;
        g = flat.graph[o] as usize;
    }
}

#[cfg(test)]
mod tests {
    use super::fold::Rep;
    use super::*;

    /// Graph `top` (a -> b -> c -> d, b owning `sub`: e -> f, and `alt`: g), nodes
    /// numbered a=0, b=1, c=2, d=3, e=4, f=5, g=6.
    fn sample() -> (Flat, Vec<&'static str>) {
        let mut flat = Flat::default();
        flat.add_graph(vec!["top".into()], None, 4);
        for i in 0..3 {
            flat.add_edge(i, i + 1, false);
        }
        flat.add_graph(vec!["sub".into()], Some(1), 2);
        flat.add_edge(4, 5, false);
        flat.add_edge(1, 4, true);
        flat.add_graph(vec!["alt".into(), "b.#1".into()], Some(1), 1);
        flat.add_edge(1, 6, true);
        (flat, vec!["a", "b", "c", "d", "e", "f", "g"])
    }

    /// The shown nodes of a plan, by name.
    fn check(f: ViewFilter) -> Result<Vec<&'static str>, FilterError> {
        let (flat, names) = sample();
        let p = plan(&flat, &|i, n| names[i] == n, &f)?;
        Ok((0..flat.len())
            .filter(|&i| p.folding.rep[i] != Rep::Dropped)
            .map(|i| names[i])
            .collect())
    }

    #[test]
    fn scope_keeps_the_graphs_chosen_and_their_owners() {
        let f = |sub: Option<&str>, owner: Option<&str>| ViewFilter {
            subgraph: sub.map(String::from),
            owner: owner.map(String::from),
            ..Default::default()
        };
        assert_eq!(
            check(f(None, None)).unwrap(),
            ["a", "b", "c", "d", "e", "f", "g"]
        );
        assert_eq!(check(f(Some("sub"), None)).unwrap(), ["b", "e", "f"]);
        assert_eq!(check(f(Some("b.#1"), None)).unwrap(), ["b", "g"]);
        assert_eq!(check(f(Some("top"), None)).unwrap().len(), 7);
        assert_eq!(check(f(None, Some("b"))).unwrap(), ["b", "e", "f", "g"]);
        assert_eq!(check(f(Some("alt"), Some("b"))).unwrap(), ["b", "g"]);
        assert_eq!(
            check(f(Some("top"), Some("b"))).unwrap_err().to_string(),
            "node \"b\" owns no subgraph named \"top\" (it owns \"sub\", \"alt\")"
        );
        assert_eq!(
            check(f(None, Some("c"))),
            Err(FilterError::NotAnOwner { name: "c".into() })
        );
        assert_eq!(
            check(f(Some("x"), None)).unwrap_err().to_string(),
            "no graph named \"x\" (the graphs are \"top\", \"sub\", \"alt\")"
        );
    }

    #[test]
    fn around_keeps_the_neighbourhood_within_the_scope() {
        let f = |around: &str, depth, sub: Option<&str>| ViewFilter {
            around: Some(around.into()),
            depth,
            subgraph: sub.map(String::from),
            ..Default::default()
        };
        assert_eq!(check(f("c", 1, None)).unwrap(), ["b", "c", "d"]);
        // Through b's links into both subgraphs.
        assert_eq!(
            check(f("c", 2, None)).unwrap(),
            ["a", "b", "c", "d", "e", "g"]
        );
        // The owner of the centre's graph stays, though further away.
        assert_eq!(check(f("f", 0, None)).unwrap(), ["b", "f"]);
        assert_eq!(check(f("f", 9, Some("sub"))).unwrap(), ["b", "e", "f"]);
        assert_eq!(
            check(f("a", 1, Some("sub"))),
            Err(FilterError::NoNode { name: "a".into() })
        );
    }

    #[test]
    fn items_put_summaries_at_their_first_member_between_their_cuts() {
        let (flat, names) = sample();
        let f = ViewFilter {
            around: Some("b".into()),
            depth: 1,
            max_nodes: Some(4),
            ..Default::default()
        };
        let p = plan(&flat, &|i, n| names[i] == n, &f).unwrap();
        // Shown: a, b, c, e, g. Keeping b pinned takes b and a piece for each of the runs
        // a; c; e; g: five, over the budget of four. So the pin goes, and b folds with c.
        assert_eq!(p.folding.folds, [vec![1, 2]]);
        assert_eq!(
            p.items(&flat, 0),
            [
                Item::View(Key::Node(0)),
                Item::View(Key::Fold(0)),
                Item::CutOut(Key::Fold(0)),
            ]
        );
        assert_eq!(
            p.items(&flat, 1),
            [Item::View(Key::Node(4)), Item::CutOut(Key::Node(4))]
        );
        assert!(p.visible(&flat, 2));
    }
}
