//! Real GE dumps and their quirks, on graphs built here in GE text form (as
//! `DUMP_GE_GRAPH` writes them, through `om::testdata_text`'s builder): descriptors of
//! optional inputs left unconnected, Consts written without their values, the
//! PlaceHolder and End boundaries of a partitioned subgraph, storage and origin formats,
//! and ops lowered as compiled kernels rt2 cannot compute. Each graph is printed as
//! text and read back through the text reader, so the tests see what a user's file gives.

use rt2::om::ComputeModel;
use rt2::om::file::{ReadOptions, read};
use rt2::om::testdata_text::{DumpOp, dump_model, f32_desc, reserved_desc};
use rt2::om::text::print_text;
use rt2::om::verify::verify;
use rt2::proto::ge_ir::ModelDef;

/// The model a GE text dump of `md` reads as.
fn read_text(md: &ModelDef) -> ComputeModel {
    let text = print_text(md);
    read(text.as_bytes(), &ReadOptions::default())
        .unwrap_or_else(|e| panic!("{e}\n{text}"))
        .models
        .remove(0)
        .model
}

fn problems(m: &ComputeModel) -> Vec<String> {
    verify(m).iter().map(|p| p.to_string()).collect()
}

/// Data -> Relu (with a second, optional input left unconnected) -> NetOutput.
fn optional_inputs(second: rt2::proto::ge_ir::TensorDescriptor) -> ModelDef {
    dump_model(
        "g",
        vec![
            DumpOp::new("x", "Data")
                .attr_i("index", 0)
                .out_desc(f32_desc(&[2])),
            DumpOp::new("relu", "Relu")
                .input("x:0")
                .in_desc(f32_desc(&[2]))
                .in_desc(second)
                .out_desc(f32_desc(&[2])),
            DumpOp::new("out", "NetOutput")
                .input("relu:0")
                .in_desc(f32_desc(&[2])),
        ],
    )
}

#[test]
fn reserved_descriptors_of_unconnected_optional_inputs_are_normal() {
    let m = read_text(&optional_inputs(reserved_desc()));
    assert_eq!(m.root.nodes[1].input_descs.len(), 2);
    assert_eq!(m.root.nodes[1].data_input_descs().len(), 1);
    assert_eq!(problems(&m), Vec::<String>::new());
    // A second descriptor that is not FORMAT_RESERVED is still a mismatch.
    let m = read_text(&optional_inputs(f32_desc(&[2])));
    assert_eq!(
        problems(&m),
        ["error: graph \"g\": node \"relu\": 1 data input(s) but 2 input descriptor(s)"]
    );
}
