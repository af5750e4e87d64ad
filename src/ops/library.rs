//! The whole op library: every family registered into one [`OpRegistry`]. The top of
//! `ops`: it knows every family, and no family knows it.

use super::registry::OpRegistry;
use super::{
    attention, elementwise, format, gather, ge, linalg, loss, nn, reduce, rnn, shape, slicing,
};

impl OpRegistry {
    /// The registry with every family registered.
    pub fn new() -> Self {
        let mut reg = OpRegistry::default();
        elementwise::register(&mut reg);
        nn::register(&mut reg);
        shape::register(&mut reg);
        reduce::register(&mut reg);
        slicing::register(&mut reg);
        gather::register(&mut reg);
        rnn::register(&mut reg);
        attention::register(&mut reg);
        loss::register(&mut reg);
        linalg::register(&mut reg);
        format::register(&mut reg);
        ge::register(&mut reg);
        // The ONNX ops GE also names check or translate a GE graph's attributes first.
        for op in ge::shared::ruled() {
            reg.set_ge_contract(op, ge::shared::ge_node);
        }
        reg
    }
}
