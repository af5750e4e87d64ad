//! A summary of the TASK_INFO partition (`domi.ModelTaskDef`): how many tasks of each
//! runtime task type, and the model-level counts GE records beside them.
//!
//! Owns the `rtModelTaskType_t` names. It must not interpret task payloads (kernel args,
//! sqe contents); that belongs to the runtime emulation.

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::proto::domi::ModelTaskDef;

/// `rtModelTaskType_t` names by value (runtime `rt_model.h`, `RT_MODEL_TASK_*`, a plain
/// enum counting from KERNEL = 0; the last five checked against the public header).
const TASK_TYPE_NAMES: [&str; 38] = [
    "KERNEL",
    "EVENT_RECORD",
    "EVENT_WAIT",
    "FUSION_START",
    "FUSION_END",
    "KERNEL_EX",
    "HCCL",
    "STREAM_SWITCH",
    "STREAM_ACTIVE",
    "LABEL_SET",
    "LABEL_SWITCH",
    "LABEL_GOTO",
    "PROFILER_TRACE",
    "MEMCPY_ASYNC",
    "NOTIFY_RECORD",
    "NOTIFY_WAIT",
    "REDUCE_ASYNC",
    "RDMA_SEND",
    "EVENT_RESET",
    "MODEL_END_GRAPH",
    "STREAM_SWITCH_N",
    "RDMA_DB_SEND",
    "MEMCPY_ADDR_ASYNC",
    "STREAM_LABEL_SWITCH_BY_INDEX",
    "STREAM_LABEL_GOTO",
    "MODEL_EXIT",
    "ALL_KERNEL",
    "PROFILER_TRACE_EX",
    "FFTS_TASK",
    "FFTS_PLUS_TASK",
    "DSA_TASK",
    "CMO",
    "BARRIER",
    "NPU_GET_FLOAT_STATUS",
    "NPU_CLEAR_FLOAT_STATUS",
    "DVPP",
    "NPU_GET_DEBUG_FLOAT_STATUS",
    "NPU_CLEAR_DEBUG_FLOAT_STATUS",
];

/// The name of a task type value; values past the known table print as `TYPE_<n>`.
pub fn task_type_name(ty: u32) -> Cow<'static, str> {
    match TASK_TYPE_NAMES.get(ty as usize) {
        Some(n) => Cow::Borrowed(n),
        None => Cow::Owned(format!("TYPE_{ty}")),
    }
}

/// What a TASK_INFO partition holds, in numbers.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct TaskSummary {
    pub task_count: usize,
    /// Task count per task type name, sorted by name.
    pub by_type: BTreeMap<String, usize>,
    pub stream_num: u32,
    pub event_num: u32,
    pub memory_size: u64,
    pub weight_size: u64,
}

impl TaskSummary {
    /// Counts the tasks of a decoded TASK_INFO.
    pub fn of(def: &ModelTaskDef) -> TaskSummary {
        let mut by_type = BTreeMap::new();
        for t in &def.task {
            *by_type
                .entry(task_type_name(t.r#type).into_owned())
                .or_insert(0) += 1;
        }
        TaskSummary {
            task_count: def.task.len(),
            by_type,
            stream_num: def.stream_num,
            event_num: def.event_num,
            memory_size: def.memory_size,
            weight_size: def.weight_size,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::domi::TaskDef;

    #[test]
    fn counts_by_name() {
        let def = ModelTaskDef {
            task: [0u32, 0, 1, 13, 99]
                .iter()
                .map(|&t| TaskDef {
                    r#type: t,
                    ..TaskDef::default()
                })
                .collect(),
            stream_num: 2,
            event_num: 1,
            memory_size: 4096,
            weight_size: 1024,
            ..ModelTaskDef::default()
        };
        let s = TaskSummary::of(&def);
        assert_eq!(s.task_count, 5);
        assert_eq!(s.by_type["KERNEL"], 2);
        assert_eq!(s.by_type["EVENT_RECORD"], 1);
        assert_eq!(s.by_type["MEMCPY_ASYNC"], 1);
        assert_eq!(s.by_type["TYPE_99"], 1);
        assert_eq!(task_type_name(32), "BARRIER");
        assert_eq!(task_type_name(35), "DVPP");
        assert_eq!(task_type_name(38), "TYPE_38");
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.contains("\"stream_num\":2"), "{json}");
    }
}
