//! One execution of a lowered model as a user runs it, for the whole-model tests.

use rt2::exec::ExecuteGraph;
use rt2::exec::runtime::{ExecutorOptions, ExecutorType, ModelV2Executor};
use rt2::npu::device::{Device, DeviceConfig};
use rt2::ops::HostTensor;

/// `eg` created and loaded under `executor` on `device`. Panics naming the executor and
/// the step that failed.
pub fn loaded(eg: &ExecuteGraph, device: &Device, executor: ExecutorType) -> ModelV2Executor {
    let mut ex = ModelV2Executor::create(
        eg,
        device,
        ExecutorOptions {
            executor,
            ..ExecutorOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("{}: create: {e}", executor.name()));
    ex.load()
        .unwrap_or_else(|e| panic!("{}: load: {e}", executor.name()));
    ex
}

/// One execution of `eg` under `executor` on a fresh device: create, load,
/// `execute_sync` on `input`, unload; the outputs. Panics naming the executor and the
/// step that failed.
pub fn execute(eg: &ExecuteGraph, executor: ExecutorType, input: &HostTensor) -> Vec<HostTensor> {
    let device = Device::new(DeviceConfig::default());
    let mut ex = loaded(eg, &device, executor);
    let mut out = Vec::new();
    ex.execute_sync(&[input], &mut out)
        .unwrap_or_else(|e| panic!("{}: execute: {e}", executor.name()));
    ex.unload()
        .unwrap_or_else(|e| panic!("{}: unload: {e}", executor.name()));
    out
}
