//! Recurrent ops: LSTM, GRU, RNN. Shape and dtype inference here; the compute in
//! `recurrence.rs`.
//!
//! X is [seq, batch, input] (or [batch, seq, input] with `layout` 1); W's first dim is
//! `num_directions * gates * hidden`. Outputs: Y [seq, dirs, batch, hidden] (layout 1:
//! [batch, seq, dirs, hidden]), Y_h and (LSTM) Y_c [dirs, batch, hidden] (layout 1:
//! [batch, dirs, hidden]).

use crate::ops::{InferCtx, OpError, OpRegistry, OpSpec, TensorMeta, UNKNOWN};

mod recurrence;
mod units;

/// Registers the family.
pub fn register(reg: &mut OpRegistry) {
    for name in ["LSTM", "GRU", "RNN"] {
        reg.add(
            OpSpec::new(name, infer_rnn)
                .computes(recurrence::recurrence)
                .prepacks(recurrence::prepack_weights),
        );
    }
}

fn infer_rnn(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(3, 8)?;
    let x = &ctx.inputs[0];
    let attr = |n: &str| ctx.attrs.get(n);
    let hidden = attr("hidden_size")
        .and_then(|a| a.as_int())
        .ok_or_else(|| OpError::Attribute {
            op: ctx.op.into(),
            name: "hidden_size".into(),
            msg: "is missing".into(),
        })?;
    if hidden < 0 {
        return Err(ctx.attr_error("hidden_size", format!("{hidden} is negative")));
    }
    let dirs = match attr("direction")
        .and_then(|a| a.as_str())
        .unwrap_or("forward")
    {
        "forward" | "reverse" => 1,
        "bidirectional" => 2,
        other => {
            return Err(OpError::Attribute {
                op: ctx.op.into(),
                name: "direction".into(),
                msg: format!("{other:?} is not a direction"),
            });
        }
    };
    let batch_first = attr("layout").and_then(|a| a.as_int()).unwrap_or(0) == 1;
    let (seq, batch) = match &x.shape {
        Some(s) if s.len() == 3 => {
            if batch_first {
                (s[1], s[0])
            } else {
                (s[0], s[1])
            }
        }
        Some(s) => return Err(ctx.input_error(0, format!("is {s:?}; X is 3-D"))),
        None => (UNKNOWN, UNKNOWN),
    };
    let y = if batch_first {
        vec![batch, seq, dirs, hidden]
    } else {
        vec![seq, dirs, batch, hidden]
    };
    let state = if batch_first {
        vec![batch, dirs, hidden]
    } else {
        vec![dirs, batch, hidden]
    };
    let mut out = vec![
        TensorMeta {
            dtype: x.dtype,
            shape: Some(y),
        },
        TensorMeta {
            dtype: x.dtype,
            shape: Some(state.clone()),
        },
    ];
    if ctx.op == "LSTM" {
        out.push(TensorMeta {
            dtype: x.dtype,
            shape: Some(state),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{Attr, DType};

    #[test]
    fn lstm_shapes() {
        let attrs = [
            ("hidden_size", Attr::Int(4)),
            ("direction", Attr::Str("bidirectional".into())),
        ];
        let inputs = [
            TensorMeta::new(DType::F32, &[-1, 2, 3]),
            TensorMeta::new(DType::F32, &[2, 16, 3]),
            TensorMeta::new(DType::F32, &[2, 16, 4]),
        ];
        let out = crate::ops::infer_for_test("LSTM", &inputs, &[], &attrs, 3).unwrap();
        let shapes: Vec<Vec<i64>> = out.into_iter().map(|t| t.shape.unwrap()).collect();
        assert_eq!(shapes, [vec![-1, 2, 2, 4], vec![2, 2, 4], vec![2, 2, 4]]);
    }
}
