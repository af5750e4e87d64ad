//! The kernel registry, in GE's shape (`KernelRegistry::KernelFuncs` plus the critical
//! section and, for rt2's engines, the kernel class and role).
//!
//! Loading resolves every node's kernel type here once; the engines then call function
//! pointers and never look a name up again. The registry is plain data, so a test or a
//! benchmark can build its own with extra kernels (`KernelRegistry::builtin` plus
//! [`KernelRegistry::register`]), as GE's `REGISTER_KERNEL` adds to the global one.
//! It knows no kernel: the builtin registry is assembled above both, in `kernels`.

use std::collections::HashMap;

use crate::exec::KernelClass;

use super::context::{
    KernelFn, KernelFuncs, OutputsCreator, Prepare, ProfilingFiller, TracePrinter,
};

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
