//! [`Names`]: the script's names of the ids a run created (streams, events, models,
//! condition handles, task groups, buffers by address), which reports print and saved
//! models write in place of ids.

use std::collections::HashMap;

use crate::npu::device::{DevicePtr, EventId, StreamId};

use super::acl::{CondHandle, ModelRI, TaskGroup};

/// The script's names of the ids a run created.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Names {
    pub streams: HashMap<StreamId, String>,
    pub events: HashMap<EventId, String>,
    pub models: HashMap<ModelRI, String>,
    pub handles: HashMap<CondHandle, String>,
    pub groups: HashMap<TaskGroup, String>,
    /// Buffers by device address.
    pub buffers: HashMap<DevicePtr, String>,
}
