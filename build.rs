//! Generates the protobuf code for the schemas in proto/ without a system protoc: protox
//! compiles the .proto files to a descriptor set, prost-build turns it into Rust, and the
//! descriptor set itself is kept for prost-reflect (protobuf text format, JSON views).

use std::path::PathBuf;

const PROTOS: &[&str] = &[
    "ge_ir.proto",
    "task.proto",
    "flow_model.proto",
    "onnx.proto",
    "exeg.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for proto in PROTOS {
        println!("cargo:rerun-if-changed=proto/{proto}");
    }
    let fds = protox::compile(PROTOS, ["proto"])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out.join("rt2_descriptor.bin"),
        prost::Message::encode_to_vec(&fds),
    )?;
    let mut config = prost_build::Config::new();
    // BTreeMap keeps map fields in key order, so encoding a message is deterministic and
    // the same graph always serializes to the same bytes.
    config.btree_map(["."]);
    // Box the large arms of AttrDef's oneof: an attribute is mostly an int or a string, and
    // without boxes every one of them (millions in a large graph) would take the size of
    // an inline TensorDescriptor, close to 300 bytes.
    for arm in [
        "list",
        "func",
        "td",
        "t",
        "g",
        "list_list_int",
        "list_list_float",
    ] {
        config.boxed(format!(".ge.proto.AttrDef.value.{arm}"));
    }
    // A tensor's bytes as `bytes::Bytes`: decoded into a buffer of their own once, then
    // handed from the ONNX model to the GE graph and on to rt2's own (and from an
    // ExecuteGraph into the message that writes it) by reference count, so a model's
    // weights are not copied at each step of reading, lowering and writing it.
    config.bytes([
        ".onnx.TensorProto.raw_data",
        ".ge.proto.TensorDef.data",
        ".rt2.exeg.Tensor.data",
    ]);
    config.compile_fds(fds)?;
    Ok(())
}
