//! CLI tests: bad input of every kind gets one `rt2: error:` line naming the file and the
//! place, exit status 2, no panic, and no output file.

use rt2::om::testdata;

use crate::util::{Run, Scratch, fixture};

fn om_bytes() -> Vec<u8> {
    testdata::compressed_om().to_bytes().unwrap()
}

/// Compiles `input` to `out.om` and checks the failure and that nothing was written.
#[track_caller]
fn compile_fails(s: &Scratch, input: &str, needles: &[&str]) -> Run {
    let before = s.files();
    let r = s.rt2(&["compile", input, "-o", "out.om"]).fails(2, needles);
    assert_eq!(
        s.files(),
        before,
        "no output and no temporary file left behind"
    );
    r
}

#[test]
fn truncated_om_at_many_offsets() {
    let s = Scratch::new();
    let bytes = om_bytes();
    let cuts = [
        1,
        3,
        4,
        10,
        83,
        200,
        255,
        256,
        257,
        263,
        300,
        bytes.len() / 2,
        bytes.len() - 1,
    ];
    for cut in cuts {
        s.write("t.om", &bytes[..cut]);
        let r = s.rt2(&["inspect", "t.om"]);
        assert_eq!(r.code(), 2, "cut at {cut}: {}", r.stderr());
        let err = r.stderr();
        assert!(err.starts_with("rt2: error: t.om: "), "cut at {cut}: {err}");
        assert!(!err.contains("panicked"), "cut at {cut}: {err}");
        assert_eq!(err.lines().count(), 1, "cut at {cut}: {err}");
    }
    s.write("t.om", &bytes[..100]);
    s.rt2(&["inspect", "t.om"])
        .fails(2, &["t.om", "offset", "truncated"]);
}

#[test]
fn wrong_magic_is_no_known_kind() {
    let s = Scratch::new();
    let mut b = om_bytes();
    b[3] = b'X';
    s.write("m.om", &b);
    s.rt2(&["inspect", "m.om"])
        .fails(2, &["m.om", "not a model file rt2 knows"]);
}

#[test]
fn partition_past_the_end() {
    let s = Scratch::new();
    let mut b = om_bytes();
    // Model 0's table: num, pad, then entries {type, pad, mem_offset, mem_size}.
    b[256 + 8 + 16..256 + 8 + 24].copy_from_slice(&(1u64 << 40).to_le_bytes());
    s.write("p.om", &b);
    s.rt2(&["inspect", "p.om"])
        .fails(2, &["p.om", "offset", "partition"]);
}

#[test]
fn partition_count_out_of_range() {
    let s = Scratch::new();
    let mut b = om_bytes();
    b[256..260].copy_from_slice(&9u32.to_le_bytes());
    s.write("n.om", &b);
    s.rt2(&["inspect", "n.om"]).fails(2, &["n.om", "9"]);
}

#[test]
fn encrypted_and_signed_models_are_not_supported() {
    let s = Scratch::new();
    let mut enc = om_bytes();
    enc[80] = 1;
    s.write("e.om", &enc);
    s.rt2(&["inspect", "e.om"])
        .fails(2, &["e.om", "not supported", "encrypt"]);
    let mut signed = om_bytes();
    signed[12] = 0x5a;
    s.write("s.om", &signed);
    s.rt2(&["inspect", "s.om"])
        .fails(2, &["s.om", "not supported", "sign"]);
}

#[test]
fn om2_zip_is_not_supported() {
    let s = Scratch::new();
    s.write("z.om", b"PK\x03\x04rest of a zip");
    s.rt2(&["inspect", "z.om"]).fails(2, &["z.om", "OM2"]);
}

#[test]
fn malformed_protobuf() {
    let s = Scratch::new();
    s.write("g.pb", &[0x0a, 0xff, 0xff, 0xff, 0x0f, 1, 2]);
    compile_fails(&s, "g.pb", &["g.pb", "malformed protobuf"]);
    s.write("o.onnx", &[0x08, 0x07, 0x3a, 0x80]);
    compile_fails(&s, "o.onnx", &["o.onnx", "malformed protobuf"]);
}

#[test]
fn text_dump_syntax_error_gives_the_line() {
    let s = Scratch::new();
    s.write(
        "ge_proto_1.txt",
        b"graph {\n  name: \"g\"\n  op {\n    name: \"a\" type: \n  }\n}\n",
    );
    compile_fails(&s, "ge_proto_1.txt", &["ge_proto_1.txt", "line 5"]);
    s.write("u.txt", b"graph {\n  nmae: \"g\"\n}\n");
    compile_fails(&s, "u.txt", &["u.txt", "line 2", "nmae"]);
}

#[test]
fn broken_json_gives_the_path() {
    let s = Scratch::new();
    s.write("b.json", b"{\"graph\": [{\"name\": \"g\", \"op\": [ }");
    compile_fails(&s, "b.json", &["b.json", "$"]);
    s.write(
        "t.json",
        b"{\"graph\": [{\"name\": \"g\", \"op\": [{\"name\": 7}]}]}",
    );
    compile_fails(&s, "t.json", &["t.json", "$.graph[0].op[0].name"]);
}

#[test]
fn graph_faults_name_the_node() {
    let s = Scratch::new();
    s.write("d.txt", b"graph {\n  name: \"g\"\n  op {\n    name: \"b\"\n    type: \"Relu\"\n    input: \"missing:0\"\n  }\n}\n");
    compile_fails(&s, "d.txt", &["d.txt", "node \"b\"", "missing:0"]);
}

#[test]
fn unknown_kind_and_missing_file() {
    let s = Scratch::new();
    s.write("x.bin", &[0xde, 0xad, 0xbe, 0xef]);
    s.rt2(&["inspect", "x.bin"]).fails(2, &["x.bin", "de"]);
    s.write("empty.om", b"");
    s.rt2(&["inspect", "empty.om"])
        .fails(2, &["empty.om", "empty"]);
    s.rt2(&["inspect", "nothere.om"])
        .fails(2, &["nothere.om", "cannot read"]);
}

#[test]
fn a_failed_compile_leaves_an_existing_output_untouched() {
    let s = Scratch::new();
    s.write("out.om", b"previous contents");
    s.write("bad.onnx", &[0x08, 0x07, 0x3a, 0x80]);
    s.rt2(&["compile", "bad.onnx", "-o", "out.om"])
        .fails(2, &["bad.onnx"]);
    assert_eq!(s.read("out.om"), b"previous contents");
}

#[test]
fn usage_errors_exit_2() {
    let s = Scratch::new();
    let model = fixture("models/cnn_bn.onnx");
    let r = s.rt2(&["compile", model.to_str().unwrap()]);
    assert_eq!(r.code(), 2, "missing -o");
    let r = s.rt2(&["dump", model.to_str().unwrap(), "--format", "svg"]);
    assert_eq!(r.code(), 2, "unknown format");
    let r = s.rt2(&["frobnicate"]);
    assert_eq!(r.code(), 2, "unknown command");
}

#[test]
fn help_lists_the_commands() {
    let s = Scratch::new();
    s.rt2(&["--help"])
        .ok()
        .stdout_has(&["compile", "inspect", "dump"]);
    s.rt2(&["compile", "--help"])
        .ok()
        .stdout_has(&["--input-shape", "--name", "--output"]);
}
