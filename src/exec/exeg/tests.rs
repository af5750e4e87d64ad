//! Tests of the `.exeg` encoder and decoder.

use super::*;
use proptest::prelude::*;

use crate::exec::ValueRef;
use crate::exec::testdata::sample;
use crate::ops::AttrMap;

#[test]
fn sample_is_valid() {
    let problems: Vec<String> = check(&sample()).iter().map(|p| p.to_string()).collect();
    assert_eq!(problems, Vec::<String>::new());
    assert!(check_or_err(&sample()).is_ok());
}

#[test]
fn round_trip_is_equal_and_deterministic() {
    let eg = sample();
    let bytes = encode(&eg);
    assert!(bytes.starts_with(b"\x0a\x08rt2.exeg"));
    assert!(is_exeg(&bytes));
    assert_eq!(decode(&bytes).unwrap(), eg);
    assert_eq!(encode(&eg), bytes);
    assert_eq!(encode(&eg.clone()), bytes);
    // Re-encoding what was decoded gives the same bytes again.
    assert_eq!(encode(&decode(&bytes).unwrap()), bytes);
}

#[test]
fn empty_graph_round_trips_and_starts_with_magic() {
    let eg = ExecuteGraph::default();
    let bytes = encode(&eg);
    assert!(is_exeg(&bytes));
    assert_eq!(decode(&bytes).unwrap(), eg);
}

#[test]
fn bad_magic_is_refused() {
    let err = decode(b"\x0a\x08onnx.xyzmore").unwrap_err();
    assert!(matches!(&err, ExegError::BadMagic { found, .. } if found == "\n\x08onnx.xyz"));
    assert!(err.to_string().starts_with("not an .exeg file: at byte 0"));
    assert!(matches!(decode(b""), Err(ExegError::BadMagic { .. })));
    assert!(!is_exeg(b"\x0a\x08rt2.exe"));
    // A later field 1 overrides the first one in protobuf: the decoded magic is checked.
    let mut bytes = encode(&ExecuteGraph::default());
    bytes.extend_from_slice(b"\x0a\x03abc");
    match decode(&bytes) {
        Err(ExegError::BadMagic { found, expected }) => {
            assert_eq!((found.as_str(), expected.as_str()), ("abc", "rt2.exeg"))
        }
        other => panic!("expected BadMagic, got {other:?}"),
    }
}

/// The encoder finds each graph's table entries on its own and merges them: the
/// file's tables must still be those of one pass over the graphs in file order. Here
/// an attribute set that DeInit uses first and Main and Init use again under other
/// identities, one origin shared by all three graphs, sets used first in Init, and a
/// subgraph's node whose kernel and set come before those of the nodes after its
/// owner.
#[test]
fn tables_found_per_graph_are_those_of_one_pass_in_file_order() {
    let mut eg = sample();
    let set = |k: i64| {
        let mut a = AttrMap::new();
        a.insert("probe".into(), KernelAttr::Int(k));
        a
    };
    let shared = Arc::new(Origin {
        graph: "g".into(),
        node: "n".into(),
        op_type: "Add".into(),
        index: 7,
    });
    for (g, ks) in [
        (&mut eg.deinit, [5, 1, 5]),
        (&mut eg.main, [1, 2, 9]),
        (&mut eg.init, [2, 9, 2]),
    ] {
        for k in ks {
            let mut n = KernelNode::new(format!("n{k}"), "InnerData", KernelClass::Normal);
            n.outputs = 1;
            // A set of its own each time: equal values, other identities.
            n.attrs = set(k);
            n.origin = Some(if k == 9 {
                Arc::new(Origin {
                    index: 9,
                    ..(*shared).clone()
                })
            } else {
                shared.clone()
            });
            g.nodes.push(n);
        }
    }
    let mut owner = KernelNode::new("owner", "If", KernelClass::Normal);
    let mut sub = KernelGraph::new("then");
    let mut inner = KernelNode::new("inner", "SubKernel", KernelClass::Normal);
    inner.attrs = set(42);
    sub.nodes.push(inner);
    owner.subgraphs.push(sub);
    owner.attrs = set(41);
    eg.main.nodes.insert(1, owner);
    let want = to_file_as(&eg, Form::Tables).encode_to_vec();
    assert_eq!(encode(&eg), want);
    let file = pb::ExecuteGraphFile::decode(&want[..]).unwrap();
    let names: Vec<_> = file.kernels.iter().map(String::as_str).collect();
    let sub_kernel = names.iter().position(|k| *k == "SubKernel").unwrap();
    assert!(sub_kernel > names.iter().position(|k| *k == "If").unwrap());
    let ints: Vec<i64> = file
        .attr_sets
        .iter()
        .filter(|s| s.attrs.len() == 1 && s.attrs[0].name == "probe")
        .filter_map(|s| match s.attrs[0].value {
            Some(pb::attr::Value::Int(i)) => Some(i),
            _ => None,
        })
        .collect();
    // Each value once, in first use: Init's 2 and 9, then Main's (41 and 42 in its
    // subgraph come before 1), then DeInit's 5.
    let at = |v: i64| ints.iter().position(|&i| i == v).unwrap();
    assert!(at(2) < at(9) && at(9) < at(41) && at(41) < at(42) && at(42) < at(1));
    assert!(at(1) < at(5));
    assert_eq!(ints.iter().filter(|&&i| i == 2).count(), 1);
}

/// Real lowered graphs, in every mode: the hand-written, parallel encoder writes what
/// prost writes of the reference tables form.
#[test]
fn lowered_models_encode_as_the_reference_does() {
    for model in ["nested_if_weights", "lstm", "loop_counter", "cnn_bn"] {
        let path = format!(
            "{}/fixtures/models/{model}.onnx",
            env!("CARGO_MANIFEST_DIR")
        );
        let bytes = std::fs::read(&path).unwrap();
        let file = crate::om::file::read(&bytes, &Default::default()).unwrap();
        for multi_thread in [false, true] {
            let opts = crate::lower::LowerOptions {
                multi_thread,
                static_memory: true,
                ..Default::default()
            };
            let eg = crate::lower::lower(&file.models[0].model, &opts).unwrap();
            let want = to_file_as(&eg, Form::Tables).encode_to_vec();
            assert!(encode(&eg) == want, "{model}, multi_thread {multi_thread}");
        }
    }
}

#[test]
fn hand_written_encoder_writes_exactly_what_prost_writes() {
    let mut eg = sample();
    // A second graph's worth of edge cases: index and output 0 (default, left out),
    // large ids, negative priorities, control lists, a node with no name.
    let mut n = KernelNode::new("", "Const", KernelClass::Normal);
    n.priority = i64::MIN / 2;
    n.control_inputs = vec![KernelNodeId(0), KernelNodeId(300), KernelNodeId(u32::MAX)].into();
    n.inputs = smallvec::smallvec![
        ValueRef {
            node: KernelNodeId(0),
            output: 0,
        },
        ValueRef {
            node: KernelNodeId(70_000),
            output: 3,
        },
    ];
    eg.deinit.nodes.push(n);
    let want = to_file_as(&eg, Form::Tables).encode_to_vec();
    assert_eq!(encode(&eg), want);
    // And the reader takes back what either wrote (the checks aside).
    let file = pb::ExecuteGraphFile::decode(&want[..]).unwrap();
    let (rest, graphs, origins) = split_graphs(&want).unwrap();
    assert_eq!(origins.len(), 2, "the sample's two origins");
    assert!(
        pb::ExecuteGraphFile::decode(&rest.concat()[..])
            .unwrap()
            .init
            .is_none()
    );
    assert!(matches!(graphs[2], Source::Wire(_)));
    for (w, m) in [(&graphs[0], &file.init), (&graphs[1], &file.main)] {
        let (Source::Wire(bytes), Some(m)) = (w, m) else {
            panic!("wire bytes and a message")
        };
        let mut buf = *bytes;
        let mut k = 0;
        while !buf.is_empty() {
            let f = next_field(&mut buf).unwrap();
            if f.tag == 2 {
                let mut node = KernelNode::default();
                let parts = read_node(f.payload, &mut node).unwrap();
                let (msg_node, msg) = wire::from_message(m.nodes[k].clone());
                assert_eq!(node, msg_node);
                assert_eq!(parts.class, msg.class);
                assert_eq!(
                    (parts.kernel_index, parts.attrs_index, parts.origin_index),
                    (msg.kernel_index, msg.attrs_index, msg.origin_index)
                );
                assert_eq!(parts.subgraphs.len(), msg.subgraphs.len());
                k += 1;
            }
        }
        assert_eq!(k, m.nodes.len());
    }
}

#[test]
fn binary_form_shares_table_entries_and_checks_their_indices() {
    let eg = sample();
    let bytes = encode(&eg);
    let mut file = pb::ExecuteGraphFile::decode(&bytes[..]).unwrap();
    // Each kernel type and origin once; nodes refer to them.
    let mut kernels = file.kernels.clone();
    kernels.sort();
    kernels.dedup();
    assert_eq!(kernels.len(), file.kernels.len());
    let main = file.main.as_ref().unwrap();
    assert!(
        main.nodes
            .iter()
            .all(|n| n.kernel.is_empty() && n.kernel_index > 0)
    );
    assert_eq!(decode(&bytes).unwrap(), eg);
    // Out-of-range indices are problems, named by node.
    let main = file.main.as_mut().unwrap();
    main.nodes[0].kernel_index = 99;
    main.nodes[1].attrs_index = 77;
    let err = decode(&file.encode_to_vec()).unwrap_err().to_string();
    assert!(
        err.contains("Main: node 0 \"x\": kernels index 99 is out of range"),
        "{err}"
    );
    assert!(err.contains("attr_sets index 77 is out of range"), "{err}");
}

/// Version 2 wrote an op kernel's operand types as comma-separated names; they are
/// read as the dtype lists version 3 writes.
#[test]
fn version_2_dtype_lists_are_read_as_dtype_lists() {
    use pb::attr::Value as V;
    let mut eg = sample();
    let lists = [
        ("_in_dtypes", vec![Some(DType::F32), None, Some(DType::I64)]),
        ("_out_dtypes", vec![Some(DType::Bool)]),
    ];
    for (k, v) in &lists {
        eg.main.nodes[0]
            .attrs
            .insert((*k).into(), KernelAttr::DTypes(v.clone()));
    }
    // Both forms: attributes inline on the nodes, and in the file's table.
    let as_v2 = |form: Form| {
        let mut file = to_file_as(&eg, form);
        let main = file.main.as_mut().expect("main");
        let inline = main.nodes.iter_mut().flat_map(|n| &mut n.attrs);
        let tables = file.attr_sets.iter_mut().flat_map(|s| &mut s.attrs);
        let mut rewritten = 0;
        for a in inline.chain(tables) {
            if let Some(V::Dtypes(l)) = &a.value
                && a.name.starts_with('_')
            {
                a.value = Some(V::Str(l.values.join(",")));
                rewritten += 1;
            }
        }
        assert_eq!(rewritten, 2);
        file.format_version = 2;
        file
    };
    assert_eq!(decode(&as_v2(Form::Tables).encode_to_vec()).unwrap(), eg);
    let mut file = as_v2(Form::Inline);
    assert_eq!(decode(&file.encode_to_vec()).unwrap(), eg);
    // In version 3 a string is a string.
    file.format_version = 3;
    let back = decode(&file.encode_to_vec()).unwrap();
    assert_eq!(
        back.main.nodes[0].attrs.get("_in_dtypes"),
        Some(&KernelAttr::Str("float32,,int64".into()))
    );
}

#[test]
fn newer_format_version_is_refused_naming_supported_ones() {
    let mut file = to_file(&sample());
    file.format_version = 4;
    let err = decode(&file.encode_to_vec()).unwrap_err();
    assert!(matches!(err, ExegError::UnsupportedVersion { found: 4 }));
    assert_eq!(
        err.to_string(),
        "field format_version: version 4 is not supported, this reader supports 2, 3"
    );
    file.format_version = 1;
    let err = decode(&file.encode_to_vec()).unwrap_err();
    assert!(matches!(err, ExegError::UnsupportedVersion { found: 1 }));
}

#[test]
fn malformed_protobuf_chains_prost_error() {
    let mut bytes = MAGIC_PREFIX.to_vec();
    bytes.extend_from_slice(&[0x22, 0xff, 0xff, 0xff, 0x0f]); // init, length 2^32-1
    let err = decode(&bytes).unwrap_err();
    assert!(matches!(err, ExegError::Malformed { .. }));
    assert!(std::error::Error::source(&err).is_some());
}

#[test]
fn every_truncation_is_an_error() {
    let bytes = encode(&sample());
    assert!(bytes.ends_with(b"\x7dexeg"));
    for len in 0..bytes.len() {
        let err = decode(&bytes[..len]).expect_err("a prefix decoded");
        if len >= MAGIC_PREFIX.len() + 2 {
            // Past magic and version every prefix is either cut mid-field or lacks the
            // end marker.
            assert!(
                matches!(
                    err,
                    ExegError::Truncated { .. } | ExegError::Malformed { .. }
                ),
                "prefix of {len} bytes: {err}"
            );
        }
    }
    // The one prefix that ends on a field boundary right before the marker.
    let err = decode(&bytes[..bytes.len() - 5]).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "truncated .exeg file: field end_marker is 0x00000000, expected 0x67657865 after {} bytes",
            bytes.len() - 5
        )
    );
}

#[test]
fn unconvertible_fields_are_problems() {
    let mut file = to_file(&sample());
    let main = file.main.as_mut().unwrap();
    main.nodes[0].class = 0;
    main.nodes[1].class = 9;
    main.nodes[3].attrs[8].value = Some(pb::attr::Value::Dtype("float8".into()));
    main.nodes[3].attrs[0].value = None;
    let dup = main.nodes[3].attrs[1].clone();
    main.nodes[3].attrs.push(dup);
    file.inputs[0].dtype = "complex".into();
    let Err(ExegError::Invalid { problems }) = decode(&file.encode_to_vec()) else {
        panic!("expected Invalid");
    };
    let got: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
    assert_eq!(
        got,
        [
            "Main: node 0 \"x\": field class: 0 is not a kernel class",
            "Main: node 1 \"w_dev\": field class: 9 is not a kernel class",
            "Main: node 3 \"conv1_launch\": attribute \"a_int\" has no value",
            "Main: node 3 \"conv1_launch\": attribute \"i_dtype\" has unknown dtype \"float8\"",
            "Main: node 3 \"conv1_launch\": attribute \"b_ints\" appears twice",
            "model: inputs[0] \"x\" has unknown dtype \"complex\"",
        ]
    );
}

#[test]
fn invalid_graph_lists_every_problem_in_the_error() {
    let mut eg = sample();
    eg.main.nodes[2].kernel = "Bogus".into();
    eg.deinit.nodes[1].kernel = "Nope".into();
    let err = decode(&encode(&eg)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid ExecuteGraph, 2 problems:\n  \
         Main: node 2 \"conv1_out\": unknown kernel type \"Bogus\"\n  \
         DeInit: node 1 \"destroy\": unknown kernel type \"Nope\""
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = decode(&bytes);
        let mut framed = MAGIC_PREFIX.to_vec();
        framed.extend_from_slice(&bytes);
        let _ = decode(&framed);
    }

    #[test]
    fn random_mutations_of_a_file_never_panic(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8)
    ) {
        let mut bytes = encode(&sample());
        for (at, b) in edits {
            let i = at.index(bytes.len());
            bytes[i] = b;
        }
        let _ = decode(&bytes);
    }
}
