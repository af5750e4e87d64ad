//! Placeholder replaced by the multi-thread engine.
use super::plan::Plan;
use super::{Env, ExecError, ExecState};

pub(crate) fn run(_env: &Env, _plan: &Plan, _st: &mut ExecState) -> Result<(), ExecError> {
    Err(ExecError::State("topo-mt is not built yet".into()))
}
