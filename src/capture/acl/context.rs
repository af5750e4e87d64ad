//! [`Acl`], one ACL runtime context on its own emulated device, and how it is set up
//! ([`AclConfig`]): the device with the scripts' kernels registered, the lock over the
//! context's state, resources (streams, events, device memory), and inspection of models
//! for reports and saving. The API calls are added by the files beside this one.

use std::sync::{Mutex, PoisonError};

use crate::npu::device::{Device, DeviceConfig, DevicePtr, EventId, SanitizeChecks, StreamId};
use crate::ops::OpRegistry;

use crate::capture::device_kernels;

use super::model::{CondHandle, HandleInfo, ModelRI, ModelSnapshot, TaskGroup};
use super::state::{R, State, dev};

/// The WHILE watchdog when none is asked for: body runs of one WHILE task in one
/// execution.
pub const MAX_WHILE_ITERATIONS: u64 = 1_000_000;

/// How a context is set up.
#[derive(Debug, Clone)]
pub struct AclConfig {
    /// Task slots of one capture stream; the last one of a full stream holds the activate
    /// task of its cascade stream. At least 2.
    pub sq_depth: usize,
    /// The device's WHILE watchdog: body runs allowed in one execution.
    pub max_while_iterations: u64,
    /// Device memory in bytes.
    pub memory_bytes: u64,
    /// The device sanitizer's checks (`DeviceConfig::sanitize`); the device's default is
    /// on in debug builds.
    pub sanitize: Option<SanitizeChecks>,
}

impl Default for AclConfig {
    fn default() -> Self {
        AclConfig {
            sq_depth: 1024,
            max_while_iterations: MAX_WHILE_ITERATIONS,
            memory_bytes: 1 << 30,
            sanitize: DeviceConfig::default().sanitize,
        }
    }
}

/// One ACL runtime context on its own emulated device.
pub struct Acl {
    pub(super) device: Device,
    pub(super) sq_depth: usize,
    state: Mutex<State>,
}

impl Acl {
    /// # Panics
    /// When the device's threads cannot be started; [`Acl::try_new`] says so instead.
    pub fn new(config: AclConfig) -> Acl {
        Self::try_new(config).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A context on a fresh device; ACL_ERROR_RT_INTERNAL_ERROR when the system refuses
    /// the device's threads.
    pub fn try_new(config: AclConfig) -> R<Acl> {
        // A capture device runs every op of the library and the scripts' own kernels.
        let mut ops = OpRegistry::new();
        device_kernels::register(&mut ops);
        let device = Device::try_new(DeviceConfig {
            memory_bytes: config.memory_bytes,
            ops: Some(std::sync::Arc::new(ops)),
            max_while_iterations: config.max_while_iterations,
            sanitize: config.sanitize,
            ..DeviceConfig::default()
        })
        .map_err(dev)?;
        Ok(Acl {
            device,
            sq_depth: config.sq_depth.max(2),
            state: Mutex::new(State::default()),
        })
    }

    /// The device under the context.
    pub fn device(&self) -> &Device {
        &self.device
    }

    pub(super) fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    // ---- resources

    /// `aclrtCreateStream`: ACL_ERROR_RT_INTERNAL_ERROR when the system refuses the
    /// stream's worker thread.
    pub fn create_stream(&self) -> R<StreamId> {
        self.device.try_create_stream().map_err(dev)
    }

    /// An event for capture (`aclrtCreateEventExWithFlag`, ACL_EVENT_SYNC).
    pub fn create_event(&self) -> EventId {
        self.device.create_event()
    }

    /// Device memory, zero-filled.
    pub fn malloc(&self, bytes: usize) -> R<DevicePtr> {
        let ptr = self.malloc_uninit(bytes)?;
        self.device.memcpy_h2d(ptr, &vec![0; bytes]).map_err(dev)?;
        Ok(ptr)
    }

    /// Device memory as `aclrtMalloc` gives it: its contents undefined (0xFF, and
    /// unwritten to the sanitizer, when it runs).
    pub fn malloc_uninit(&self, bytes: usize) -> R<DevicePtr> {
        self.device
            .malloc(bytes, self.device.default_stream())
            .map_err(dev)
    }

    /// Writes host bytes to device memory now (set-up, not an API call a mode governs).
    pub fn write(&self, ptr: DevicePtr, bytes: &[u8]) -> R<()> {
        self.device.memcpy_h2d(ptr, bytes).map_err(dev)
    }

    /// Reads device memory now, after every stream that is not capturing has run what was
    /// issued to it (faults stay with the streams for their next synchronize).
    pub fn read(&self, ptr: DevicePtr, bytes: &mut [u8]) -> R<()> {
        self.quiesce();
        self.device.memcpy_d2h(bytes, ptr).map_err(dev)
    }

    /// Waits for the work issued so far to every stream that is not capturing, without
    /// taking their faults.
    pub(super) fn quiesce(&self) {
        let idle: Vec<StreamId> = {
            let st = self.state();
            st.streams
                .iter()
                .filter(|(_, c)| c.status.is_none())
                .map(|(s, _)| *s)
                .chain([self.device.default_stream()])
                .collect()
        };
        for s in idle {
            // A fault shows at the stream's own synchronize; here only the waiting counts.
            let e = self.device.create_event();
            if self.device.record_event(e, s).is_ok() {
                let _ = self.device.synchronize_event(e);
            }
            let _ = self.device.destroy_event(e);
        }
    }

    // ---- inspection

    /// A copy of what the model holds; `None` for a destroyed or unknown model.
    pub fn snapshot(&self, model: ModelRI) -> Option<ModelSnapshot> {
        let st = self.state();
        let e = st.model(model).ok()?;
        Some(ModelSnapshot {
            status: e.status,
            parent: e.parent,
            subs: e.subs.clone(),
            streams: e.streams.clone(),
            events: e.events,
            handles: e.handles.clone(),
            groups: e.groups.clone(),
            added: e.added.clone(),
        })
    }

    pub fn handle_info(&self, handle: CondHandle) -> Option<HandleInfo> {
        self.state().handle(handle).ok()
    }

    /// The tasks of a task group, as (model stream, task index).
    pub fn group_tasks(&self, group: TaskGroup) -> Option<Vec<(usize, usize)>> {
        self.state().group(group).ok().map(|g| g.tasks.clone())
    }
}
