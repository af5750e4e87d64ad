//! Every reader against hostile input, through the one entry point the commands use
//! (`om::file::read`): random bytes, and every truncation of a valid file of each kind,
//! give a value or an error, never a panic. Also: weights and graphs survive the trips
//! between kinds.

use proptest::prelude::*;
use rt2::om::file::{self, FileKind, ReadOptions};
use rt2::om::om_writer::{OmBuildOptions, build_om};
use rt2::om::onnx::builder::chain_model;
use rt2::om::{ir, json, testdata, text};

/// One valid file of every kind.
fn samples() -> Vec<(&'static str, Vec<u8>)> {
    let onnx = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/models/nested_if_weights.onnx"
    ))
    .unwrap();
    let def = ir::to_model_def(
        &file::read(&onnx, &ReadOptions::default())
            .unwrap()
            .root()
            .model,
    );
    let om = build_om(def.clone(), &OmBuildOptions::default())
        .unwrap()
        .to_bytes()
        .unwrap();
    let mut out = vec![
        ("onnx", onnx),
        ("om", om),
        ("ge-ir", prost::Message::encode_to_vec(&def)),
        ("ge-text", text::print_text(&def).into_bytes()),
        (
            "ge-json",
            serde_json::to_vec(&json::to_json(&def, &json::JsonOptions::default())).unwrap(),
        ),
    ];
    for (name, om) in testdata::all() {
        out.push((name, om.to_bytes().unwrap()));
    }
    out
}

#[test]
fn every_truncation_of_every_kind_is_an_error_not_a_panic() {
    for (name, bytes) in samples() {
        // Every byte for small files; a dense sample of cut points for larger ones.
        let step = (bytes.len() / 4000).max(1);
        for cut in (0..bytes.len()).step_by(step) {
            let _ = file::read(&bytes[..cut], &ReadOptions::default());
        }
        assert!(
            file::read(&bytes, &ReadOptions::default()).is_ok(),
            "{name} reads whole"
        );
    }
}

#[test]
fn truncated_oms_are_always_errors() {
    for (name, bytes) in samples()
        .into_iter()
        .filter(|(_, b)| b.starts_with(b"IMOD"))
    {
        for cut in 0..bytes.len() {
            assert!(
                file::read(&bytes[..cut], &ReadOptions::default()).is_err(),
                "{name} cut at {cut}"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let _ = file::read(&bytes, &ReadOptions::default());
    }

    #[test]
    fn random_bytes_behind_each_magic_never_panic(
        prefix in prop_oneof![Just(&b"IMOD"[..]), Just(&b"graph {"[..]), Just(&b"{\"graph\":"[..]), Just(&[0x08u8][..]), Just(&[0x0au8][..])],
        tail in proptest::collection::vec(any::<u8>(), 0..1024),
    ) {
        let mut bytes = prefix.to_vec();
        bytes.extend(tail);
        let _ = file::read(&bytes, &ReadOptions::default());
    }

    #[test]
    fn mutated_files_never_panic(which in 0usize..11, flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8)) {
        let samples = samples();
        let (_, mut bytes) = samples[which % samples.len()].clone();
        for (at, v) in flips {
            let i = at.index(bytes.len());
            bytes[i] = v;
        }
        let _ = file::read(&bytes, &ReadOptions::default());
    }
}

#[test]
fn const_weights_survive_the_om() {
    for model in ["cnn_bn", "nested_if_weights"] {
        let path = format!(
            "{}/fixtures/models/{model}.onnx",
            env!("CARGO_MANIFEST_DIR")
        );
        let imported = file::read(&std::fs::read(path).unwrap(), &ReadOptions::default()).unwrap();
        assert_eq!(imported.kind, FileKind::Onnx);
        let def = ir::to_model_def(&imported.root().model);
        let om = build_om(def, &OmBuildOptions::default())
            .unwrap()
            .to_bytes()
            .unwrap();
        let back = file::read(&om, &ReadOptions::default()).unwrap();
        assert_eq!(back.kind, FileKind::Om);
        // Every Const of every graph, subgraphs included, with its bytes.
        let consts = |m: &rt2::om::ComputeModel| -> Vec<(String, Vec<u8>)> {
            let mut out = Vec::new();
            m.root.walk(&mut |g| {
                for n in g.nodes.iter().filter(|n| n.op_type == "Const") {
                    let t = n
                        .attr("value")
                        .and_then(|v| v.as_tensor())
                        .expect("a Const has a tensor value");
                    out.push((n.name.clone(), t.data.to_vec()));
                }
            });
            out
        };
        let want = consts(&imported.root().model);
        assert!(
            // A reduction's empty axes (GE's plugin makes them a [0]-shaped Const) has
            // no bytes; every weight has some.
            want.len() >= 4
                && want
                    .iter()
                    .all(|(n, d)| !d.is_empty() || n.ends_with("_axes")),
            "{model}: {want:?}"
        );
        assert_eq!(consts(&back.root().model), want, "{model}");
        // The graph is the same once the weights' placement fields are set aside.
        let strip = |m: &rt2::om::ComputeModel| {
            let mut d = ir::to_model_def(m);
            for g in &mut d.graph {
                for op in &mut g.op {
                    op.attr.retain(|k, _| k != "value");
                }
            }
            d.graph
        };
        assert_eq!(
            strip(&back.root().model),
            strip(&imported.root().model),
            "{model}"
        );
    }
    // And the 10,000-node benchmark model imports.
    let chain = file::read(&chain_model(10_000), &ReadOptions::default()).unwrap();
    assert_eq!(chain.root().model.root.nodes.len(), 10_000 + 2 + 1 + 1);
}
