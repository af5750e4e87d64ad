//! What a parsed capture script is: [`Script`] with its [`DeviceSettings`], buffer
//! declarations ([`BufferDecl`]) and typed steps ([`Step`], [`Call`]), every default
//! filled in and every name checked. Plain values: the parser makes them, the runner runs
//! them, tests build them directly.

use crate::capture::device_kernels::DeviceKernel;
use crate::capture::error::AclError;
use crate::capture::types::{BufDtype, CaptureMode, CaptureStatus, CondKind, Scalar};
use crate::npu::device::{DeviceConfig, SanitizeChecks};

/// A parsed and statically checked capture script.
#[derive(Debug, Clone, PartialEq)]
pub struct Script {
    /// The optional `name`, used in reports.
    pub name: Option<String>,
    /// The `[device]` table, defaults filled in.
    pub device: DeviceSettings,
    /// The `[buffers]` table, in file order.
    pub buffers: Vec<BufferDecl>,
    /// The `[[step]]` tables, in file order.
    pub steps: Vec<Step>,
}

/// The `[device]` table of a script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceSettings {
    /// Task slots of one capture stream before a cascade stream is chained on (at least 2).
    pub sq_depth: usize,
    /// How often a WHILE body may run in one execution before the execution faults (at
    /// least 1).
    pub max_while_iterations: u64,
    /// The device sanitizer's checks (`rt2 capture --sanitize`; not a script field). The
    /// device's default: on in debug builds.
    pub sanitize: Option<SanitizeChecks>,
}

impl Default for DeviceSettings {
    fn default() -> Self {
        DeviceSettings {
            sq_depth: 1024,
            max_while_iterations: 1_000_000,
            sanitize: DeviceConfig::default().sanitize,
        }
    }
}

/// One buffer of the `[buffers]` table.
#[derive(Debug, Clone, PartialEq)]
pub struct BufferDecl {
    /// The buffer's name, the key in `[buffers]`.
    pub name: String,
    /// The element type.
    pub dtype: BufDtype,
    /// The initial contents: always the buffer's length in values, each already fitted to
    /// `dtype` ([`Scalar::fit`]), zeros when the script gives no `init`.
    pub init: Vec<Scalar>,
    /// `uninit = true`: allocated and not written; its contents are undefined (0xFF under
    /// the sanitizer, whose initcheck reports a read before the first write).
    pub uninit: bool,
    /// The 1-based line of the buffer's key.
    pub line: usize,
}

/// One `[[step]]` of a script.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The 1-based line where the step's table starts: the `[[step]]` header, or the `{` of
    /// an inline table in `step = [...]`.
    pub line: usize,
    /// The host thread that makes the call (`"main"` by default).
    pub thread: String,
    /// The error the call must fail with, if the script expects one.
    pub expect_error: Option<AclError>,
    /// The call itself.
    pub call: Call,
}

/// A step's call, with its fields. Scalar values are already fitted to the dtype of the
/// buffer they apply to. Model, handle and group names are bound by an earlier step.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    /// `aclmdlRICaptureBegin`.
    CaptureBegin { stream: String, mode: CaptureMode },
    /// `aclmdlRICaptureEnd`; `model` names the captured model (none for a sub-model).
    CaptureEnd {
        stream: String,
        model: Option<String>,
    },
    /// `aclmdlRICaptureGetInfo`; `expect_status` is checked, `model` binds the model being
    /// captured.
    CaptureGetInfo {
        stream: String,
        expect_status: Option<CaptureStatus>,
        model: Option<String>,
    },
    /// `aclmdlRICaptureToModelRIBegin` into an existing model.
    CaptureToModelBegin {
        stream: String,
        model: String,
        mode: CaptureMode,
    },
    /// `aclmdlRICaptureThreadExchangeMode`; `expect_previous` is checked.
    ThreadExchangeMode {
        mode: CaptureMode,
        expect_previous: Option<CaptureMode>,
    },
    /// `rtStreamAddToModel`.
    StreamAddToModel { stream: String, model: String },
    /// `aclrtLaunchKernel` of a built-in kernel.
    Launch {
        stream: String,
        kernel: DeviceKernel,
    },
    /// `aclrtMemcpy` between two buffers of one dtype and length.
    Memcpy { dst: String, src: String },
    /// `aclrtMemset`, element-wise.
    Memset { dst: String, value: Scalar },
    /// `aclrtSynchronizeStream`.
    Synchronize { stream: String },
    /// `aclrtRecordEvent`.
    EventRecord { event: String, stream: String },
    /// `aclrtStreamWaitEvent`.
    EventWait { event: String, stream: String },
    /// `aclmdlRICaptureTaskGrpBegin`.
    TaskGroupBegin { stream: String },
    /// `aclmdlRICaptureTaskGrpEnd`; binds `group`.
    TaskGroupEnd { stream: String, group: String },
    /// `aclmdlRICaptureTaskUpdateBegin`.
    TaskUpdateBegin { stream: String, group: String },
    /// `aclmdlRICaptureTaskUpdateEnd`.
    TaskUpdateEnd { stream: String },
    /// `aclmdlRIUpdate`.
    ModelUpdate { model: String },
    /// `aclmdlRITaskDisable` (an rt2 extension of the script format): `stream` is an index
    /// in the model's stream list, `task` the index of the task on that stream.
    TaskDisable {
        model: String,
        stream: usize,
        task: usize,
    },
    /// `aclmdlRITaskSetParams` (an rt2 extension): new kernel arguments for one task,
    /// addressed as in [`Call::TaskDisable`].
    TaskSetParams {
        model: String,
        stream: usize,
        task: usize,
        kernel: DeviceKernel,
    },
    /// `aclmdlRICondHandleCreate` on the model being captured; binds `handle`.
    CondHandleCreate {
        model: String,
        handle: String,
        default: u32,
        assign_default: bool,
    },
    /// `aclmdlRIAddCondTask`; binds each of `models` (non-empty, distinct) to a sub-model.
    AddCondTask {
        stream: String,
        handle: String,
        kind: CondKind,
        models: Vec<String>,
    },
    /// `aclmdlRIExecuteAsync`, `times` times (at least 1).
    Execute {
        model: String,
        stream: String,
        times: u32,
    },
    /// `aclmdlRIDestroy`.
    ModelDestroy { model: String },
    /// A check of a buffer's contents: `equals` has the buffer's length.
    Expect { buffer: String, equals: Vec<Scalar> },
}

impl Call {
    /// The call's name in scripts (`"capture_begin"`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Call::CaptureBegin { .. } => "capture_begin",
            Call::CaptureEnd { .. } => "capture_end",
            Call::CaptureGetInfo { .. } => "capture_get_info",
            Call::CaptureToModelBegin { .. } => "capture_to_model_begin",
            Call::ThreadExchangeMode { .. } => "thread_exchange_mode",
            Call::StreamAddToModel { .. } => "stream_add_to_model",
            Call::Launch { .. } => "launch",
            Call::Memcpy { .. } => "memcpy",
            Call::Memset { .. } => "memset",
            Call::Synchronize { .. } => "synchronize",
            Call::EventRecord { .. } => "event_record",
            Call::EventWait { .. } => "event_wait",
            Call::TaskGroupBegin { .. } => "task_group_begin",
            Call::TaskGroupEnd { .. } => "task_group_end",
            Call::TaskUpdateBegin { .. } => "task_update_begin",
            Call::TaskUpdateEnd { .. } => "task_update_end",
            Call::ModelUpdate { .. } => "model_update",
            Call::TaskDisable { .. } => "task_disable",
            Call::TaskSetParams { .. } => "task_set_params",
            Call::CondHandleCreate { .. } => "cond_handle_create",
            Call::AddCondTask { .. } => "add_cond_task",
            Call::Execute { .. } => "execute",
            Call::ModelDestroy { .. } => "model_destroy",
            Call::Expect { .. } => "expect",
        }
    }
}
