//! The kernel registry, in GE's shape (`KernelRegistry::KernelFuncs` plus the critical
//! section and, for rt2's engines, the kernel class and role).
//!
//! Loading resolves every node's kernel type here once; the engines then call function
//! pointers and never look a name up again. The registry is plain data, so a test or a
//! benchmark can build its own with extra kernels (`KernelRegistry::builtin` plus
//! [`KernelRegistry::register`]), as GE's `REGISTER_KERNEL` adds to the global one.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::exec::{ExecNode, KernelClass};
use crate::ops::OpRegistry;

use super::context::{KernelContext, KernelResult};
use super::error::LoadError;
use super::plan::NodeData;
use super::value::Value;

/// Runs the kernel: GE's `KernelFunc`.
pub type KernelFn = fn(&mut KernelContext<'_>) -> KernelResult;
/// Creates a node's outputs once, at load (GE's `CreateOutputsFunc`): a constant's value.
pub type OutputsCreator = fn(&ExecNode, &mut [Value]) -> Result<(), LoadError>;
/// Resolves what a node needs at run time from its attributes, once, at load (GE's kernel
/// extend info and compute node info): the op of a launch, its dtypes.
pub type Prepare = fn(&ExecNode, &OpRegistry) -> Result<NodeData, LoadError>;
/// Lines describing a node's current inputs and outputs, for the trace (GE's
/// `TracePrinter`).
pub type TracePrinter = fn(&KernelContext<'_>) -> Vec<String>;
/// The op a node's time is attributed to in the profile (GE's profiling filler).
pub type ProfilingFiller = for<'a> fn(&KernelContext<'a>) -> Option<ProfilingInfo<'a>>;

/// What a [`ProfilingFiller`] names: the op type and the op (compute node) a kernel serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProfilingInfo<'a> {
    pub op_type: &'a str,
    pub op_name: &'a str,
}

/// What a kernel's node does in the schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Run by the engine.
    Run,
    /// Its outputs are bound before the run (model inputs, Init exports, owner inputs).
    Input,
    /// Its outputs are created once at load and never change.
    Const,
    /// The graph's outputs: the binder reads its inputs after the run.
    Output,
}

#[derive(Debug, Clone, Copy)]
pub struct KernelFuncs {
    pub run: KernelFn,
    pub outputs_creator: Option<OutputsCreator>,
    pub prepare: Option<Prepare>,
    pub trace_printer: Option<TracePrinter>,
    pub profiling_filler: Option<ProfilingFiller>,
}

#[derive(Debug, Clone, Copy)]
pub struct KernelInfo {
    pub funcs: KernelFuncs,
    /// Kernels with the same non-empty key never run at the same time (GE's critical
    /// section); the multi-thread engine honours it.
    pub critical_section: &'static str,
    pub class: KernelClass,
    pub role: Role,
}

impl KernelInfo {
    pub const fn new(run: KernelFn, class: KernelClass) -> Self {
        KernelInfo {
            funcs: KernelFuncs {
                run,
                outputs_creator: None,
                prepare: None,
                trace_printer: None,
                profiling_filler: None,
            },
            critical_section: "",
            class,
            role: Role::Run,
        }
    }
    pub const fn prepare(mut self, f: Prepare) -> Self {
        self.funcs.prepare = Some(f);
        self
    }
    pub const fn outputs_creator(mut self, f: OutputsCreator) -> Self {
        self.funcs.outputs_creator = Some(f);
        self
    }
    pub const fn trace(mut self, f: TracePrinter) -> Self {
        self.funcs.trace_printer = Some(f);
        self
    }
    pub const fn profiling(mut self, f: ProfilingFiller) -> Self {
        self.funcs.profiling_filler = Some(f);
        self
    }
    pub const fn role(mut self, role: Role) -> Self {
        self.role = role;
        self
    }
    pub const fn critical_section(mut self, key: &'static str) -> Self {
        self.critical_section = key;
        self
    }
}

/// Kernel type name to its functions.
#[derive(Debug, Clone, Default)]
pub struct KernelRegistry {
    kernels: HashMap<&'static str, KernelInfo>,
}

impl KernelRegistry {
    /// Every kernel rt2 implements (`super::kernels`).
    pub fn builtin() -> &'static KernelRegistry {
        static REG: OnceLock<KernelRegistry> = OnceLock::new();
        REG.get_or_init(|| {
            let mut r = KernelRegistry::default();
            super::kernels::register_all(&mut r);
            r
        })
    }
    /// Adds a kernel; a later registration of the same name replaces the earlier.
    pub fn register(&mut self, name: &'static str, info: KernelInfo) {
        self.kernels.insert(name, info);
    }
    pub fn find(&self, name: &str) -> Option<&KernelInfo> {
        self.kernels.get(name)
    }
    /// The kernel and the registry's `'static` spelling of its name.
    pub fn find_named(&self, name: &str) -> Option<(&'static str, &KernelInfo)> {
        self.kernels.get_key_value(name).map(|(k, v)| (*k, v))
    }
    /// Registered kernel type names, sorted.
    pub fn names(&self) -> Vec<&'static str> {
        let mut v: Vec<_> = self.kernels.keys().copied().collect();
        v.sort_unstable();
        v
    }
}
