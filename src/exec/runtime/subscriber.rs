//! Subscribers to executor events (GE's `ExecutorSubscriber`): model start, each node's
//! execute start and end, model end. When an executor has one, the engines call it around
//! every node; the profiler, the tracer and the tensor dumper are subscribers.

use super::context::{KernelContext, KernelResult};
use super::plan::Plan;

pub trait Subscriber: Send + Sync {
    fn model_start(&self, _plan: &Plan) {}
    fn node_start(&self, _plan: &Plan, _cx: &KernelContext<'_>) {}
    fn node_end(&self, _plan: &Plan, _cx: &KernelContext<'_>, _result: &KernelResult) {}
    fn model_end(&self, _plan: &Plan, _ok: bool) {}
}
