//! The runtime's errors are typed: each kind of failure a caller may want to handle is
//! provoked here and told apart by matching, never by reading the message: out of device
//! memory, a shape the op refuses, an op that is unknown or has no compute, a kernel type
//! without an implementation, and an executor used out of order.

use std::sync::Arc;

use rt2::exec::ExecuteGraph;
use rt2::exec::runtime::{
    ExecError, ExecutorOptions, ExecutorStatus, KernelError, LoadError, ModelV2Executor, StateError,
};
use rt2::npu::device::{Device, DeviceConfig, NpuError};
use rt2::ops::{DType, HostTensor, OpError, OpRegistry};

/// `relu(x [N, 4] @ w [4, 2])`, lowered: a dynamic batch, so the shapes are inferred
/// at run time.
fn model() -> ExecuteGraph {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/lower/dynamic_batch.exeg.txt"
    ))
    .expect("reading the golden graph");
    rt2::exec::from_text(&text).expect("a valid graph")
}

fn input(shape: &[i64]) -> HostTensor {
    let n: i64 = shape.iter().product();
    HostTensor {
        dtype: DType::F32,
        shape: shape.to_vec(),
        data: vec![0; 4 * n as usize].into(),
    }
}

fn loaded(eg: &ExecuteGraph, device: &Device) -> Result<ModelV2Executor, ExecError> {
    let mut ex = ModelV2Executor::create(eg, device, ExecutorOptions::default())?;
    ex.load()?;
    Ok(ex)
}

fn run(eg: &ExecuteGraph, device: &Device, x: &HostTensor) -> Result<(), ExecError> {
    let mut ex = loaded(eg, device)?;
    ex.execute_sync(&[x], &mut Vec::new())
}

#[test]
fn out_of_device_memory_is_the_device_error() {
    let device = Device::new(DeviceConfig {
        memory_bytes: 1 << 16,
        ..DeviceConfig::default()
    });
    let r = run(&model(), &device, &input(&[1 << 14, 4]));
    match &r {
        Err(ExecError::Kernel {
            source: KernelError::Device(e),
            ..
        }) if matches!(**e, NpuError::OutOfMemory { .. }) => {}
        r => panic!("{r:?}"),
    }
    assert!(matches!(
        r.unwrap_err().npu_error(),
        Some(NpuError::OutOfMemory { .. })
    ));
}

#[test]
fn a_shape_the_op_refuses_is_an_op_error() {
    let mut eg = model();
    // Any rank passes the model's input check; MatMul's inference refuses k = 5.
    eg.inputs[0].shape = vec![-2];
    let device = Device::new(DeviceConfig::default());
    let r = run(&eg, &device, &input(&[3, 5]));
    assert!(
        matches!(
            &r,
            Err(ExecError::Kernel {
                source: KernelError::Op(_),
                ..
            })
        ),
        "{r:?}"
    );
}

#[test]
fn an_op_without_compute_is_told_by_its_op_error() {
    let mut ops = OpRegistry::new();
    let mut relu = *ops.get("Relu").expect("Relu");
    relu.compute = None;
    ops.add(relu);
    let device = Device::new(DeviceConfig {
        ops: Some(Arc::new(ops)),
        ..DeviceConfig::default()
    });
    let e = run(&model(), &device, &input(&[2, 4])).unwrap_err();
    // The launch fails on the stream, so the executor learns of it when it waits.
    assert!(
        matches!(e.npu_error(), Some(NpuError::Kernel { .. })),
        "{e:?}"
    );
    assert!(
        matches!(e.op_error(), Some(OpError::NoCompute { .. })),
        "{e:?}"
    );
}

#[test]
fn an_unknown_op_and_an_unknown_kernel_are_load_errors() {
    let eg = model();
    let mut unknown_op = eg.clone();
    let node = unknown_op
        .main
        .nodes
        .iter_mut()
        .find(|n| n.attrs.get("_op_type").is_some())
        .expect("an op kernel");
    node.attrs
        .insert("_op_type".into(), rt2::ops::Attr::Str("NoSuchOp".into()));
    let device = Device::new(DeviceConfig::default());
    let r = ModelV2Executor::create(&unknown_op, &device, ExecutorOptions::default());
    assert!(
        matches!(
            &r,
            Err(ExecError::Load {
                source: LoadError::UnknownOp(op),
                ..
            }) if op == "NoSuchOp"
        ),
        "{:?}",
        r.err()
    );

    let mut unknown_kernel = eg;
    unknown_kernel.main.nodes[0].kernel = "NoSuchKernel".into();
    let r = ModelV2Executor::create(&unknown_kernel, &device, ExecutorOptions::default());
    assert!(
        matches!(
            &r,
            Err(ExecError::Load {
                source: LoadError::NoKernel(_),
                ..
            })
        ),
        "{:?}",
        r.err()
    );
}

#[test]
fn executing_an_unloaded_model_is_a_state_error() {
    let device = Device::new(DeviceConfig::default());
    let mut ex = ModelV2Executor::create(&model(), &device, ExecutorOptions::default()).unwrap();
    let x = input(&[2, 4]);
    let r = ex.execute_sync(&[&x], &mut Vec::new());
    assert!(
        matches!(
            r,
            Err(ExecError::State(StateError::Status {
                status: ExecutorStatus::Created,
                ..
            }))
        ),
        "{r:?}"
    );
    ex.load().unwrap();
    ex.unload().unwrap();
    let r = ex.execute_sync(&[&x], &mut Vec::new());
    assert!(
        matches!(
            r,
            Err(ExecError::State(StateError::Status {
                status: ExecutorStatus::Unloaded,
                ..
            }))
        ),
        "{r:?}"
    );
}
