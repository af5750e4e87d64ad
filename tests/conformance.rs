//! The ONNX backend node tests, run on rt2's op library: every case in
//! `tests/conformance/manifest.txt` must still pass within its tolerance.
//!
//! The data comes with the onnx 1.22.0 wheel (`tools/pyenv.sh` installs it); set
//! `RT2_ONNX_NODE_DATA` to its `onnx/backend/test/data/node` folder (`.ci/run` does).
//! Without it the test says so and checks nothing.
//!
//! - `RT2_BLESS=1`: runs every case and rewrites the manifest from what passes.
//! - `RT2_CONFORMANCE_REPORT=1`: runs every case and prints each one that does not pass.
//! - `RT2_CONFORMANCE_FILTER=text`: only the cases whose name contains `text`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use rayon::prelude::*;
use rt2::conform::{self, Outcome, Runner, Tolerance};
use rt2::exec::runtime::ExecutorType;
use rt2::ops::OpRegistry;

fn manifest_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/manifest.txt")
}

#[test]
fn onnx_node_cases_in_the_manifest_pass() {
    let Some(dir) = std::env::var_os("RT2_ONNX_NODE_DATA") else {
        eprintln!("RT2_ONNX_NODE_DATA is not set: the ONNX node cases were not run");
        return;
    };
    let flag = |k: &str| std::env::var_os(k).is_some_and(|v| v == "1");
    let (bless, report) = (flag("RT2_BLESS"), flag("RT2_CONFORMANCE_REPORT"));
    let filter = std::env::var("RT2_CONFORMANCE_FILTER").unwrap_or_default();
    let text = std::fs::read_to_string(manifest_path()).unwrap_or_default();
    let manifest: BTreeMap<String, Tolerance> = conform::parse_manifest(&text)
        .expect("the manifest parses")
        .into_iter()
        .collect();
    let all = conform::cases(std::path::Path::new(&dir)).expect("the node test folder");
    let total = all.len();
    let run_all = bless || report;
    let cases: Vec<_> = all
        .into_iter()
        .filter(|c| c.name.contains(&filter))
        .filter(|c| run_all || manifest.contains_key(&c.name))
        .collect();
    let ops = Arc::new(OpRegistry::new());
    let runner = match std::env::var("RT2_CONFORMANCE_RUNNER").as_deref() {
        Ok("ops") | Err(_) => Runner::OpByOp,
        Ok(name) => Runner::Engine(
            ExecutorType::from_name(name)
                .expect("RT2_CONFORMANCE_RUNNER: ops, seq, topo, topo-prio or topo-mt"),
        ),
    };
    let outcomes: Vec<(String, Outcome)> = cases
        .par_iter()
        .map(|c| (c.name.clone(), conform::run_case_with(c, &ops, runner)))
        .collect();
    let passed: BTreeMap<&str, Tolerance> = outcomes
        .iter()
        .filter_map(|(n, o)| match o {
            Outcome::Pass(t) => Some((n.as_str(), *t)),
            _ => None,
        })
        .collect();
    if report {
        for (n, o) in &outcomes {
            if !matches!(o, Outcome::Pass(_)) {
                eprintln!("{n}: {o}");
            }
        }
    }
    if run_all {
        eprintln!(
            "{} of {} cases run pass ({total} cases in all)",
            passed.len(),
            outcomes.len()
        );
    }
    if bless {
        assert!(
            filter.is_empty(),
            "bless runs every case: unset RT2_CONFORMANCE_FILTER"
        );
        let mut text = String::from(
            "# ONNX backend node cases rt2 passes, with the tightest tolerance each meets.\n\
             # Regenerate: RT2_BLESS=1 cargo test --release --test conformance\n",
        );
        for (n, t) in &passed {
            text.push_str(&format!("{n} {}\n", t.name()));
        }
        std::fs::write(manifest_path(), text).expect("writing the manifest");
        return;
    }
    let mut failures = Vec::new();
    for (n, o) in &outcomes {
        let Some(&want) = manifest.get(n) else {
            continue;
        };
        match o {
            Outcome::Pass(t) if *t <= want => {}
            o => failures.push(format!("{n} (manifest: {}): {o}", want.name())),
        }
    }
    eprintln!(
        "{} manifest cases run",
        outcomes
            .iter()
            .filter(|(n, _)| manifest.contains_key(n))
            .count()
    );
    assert!(
        failures.is_empty(),
        "{} case(s) regressed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The manifest's cases through the whole pipeline (import, lower, load, execute) under
/// all four engines, and again under topo-prio and topo-mt with static memory planning
/// (the cases of several nodes, function expansions and control flow among them, plan
/// their inner tensors): each must pass within its manifest tolerance.
#[test]
fn onnx_node_cases_in_the_manifest_pass_under_every_engine() {
    let Some(dir) = std::env::var_os("RT2_ONNX_NODE_DATA") else {
        eprintln!("RT2_ONNX_NODE_DATA is not set: the ONNX node cases were not run");
        return;
    };
    let text = std::fs::read_to_string(manifest_path()).unwrap_or_default();
    let manifest: BTreeMap<String, Tolerance> = conform::parse_manifest(&text)
        .expect("the manifest parses")
        .into_iter()
        .collect();
    let cases: Vec<_> = conform::cases(std::path::Path::new(&dir))
        .expect("the node test folder")
        .into_iter()
        .filter(|c| manifest.contains_key(&c.name))
        .collect();
    let ops = Arc::new(OpRegistry::new());
    let mut failures = Vec::new();
    for (runner, what) in [
        (Runner::Engine(ExecutorType::Sequential), "seq"),
        (Runner::Engine(ExecutorType::Topological), "topo"),
        (
            Runner::Engine(ExecutorType::TopologicalPriority),
            "topo-prio",
        ),
        (
            Runner::Engine(ExecutorType::TopologicalMultiThread),
            "topo-mt",
        ),
        (
            Runner::Planned(ExecutorType::TopologicalPriority),
            "topo-prio, static memory",
        ),
        (
            Runner::Planned(ExecutorType::TopologicalMultiThread),
            "topo-mt, static memory",
        ),
    ] {
        let outcomes: Vec<(String, Outcome)> = cases
            .par_iter()
            .map(|c| (c.name.clone(), conform::run_case_with(c, &ops, runner)))
            .collect();
        for (n, o) in &outcomes {
            let want = manifest[n];
            match o {
                Outcome::Pass(t) if *t <= want => {}
                o => failures.push(format!("{what} {n} (manifest: {}): {o}", want.name())),
            }
        }
        eprintln!("{what}: {} manifest cases run", outcomes.len());
    }
    assert!(
        failures.is_empty(),
        "{} case(s) fail through the pipeline:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
