//! The ACL Graph API on the emulated device: [`Acl`], one runtime context whose methods
//! mirror the `aclmdlRI*` and `aclrt*` calls, with their checks and error codes as the
//! CANN runtime has them (../shared/notes/acl-graph.md names each source).
//!
//! ## How a capture is kept
//! Work issued to a stream that is not capturing goes to the device at once. Work issued
//! to a capturing stream is recorded, not run, into the capture's model as a [`RecTask`]
//! on one of the model's [`RecStream`]s. Each user stream in a capture (the origin, the
//! streams that joined by waiting on a captured event, the streams added to the model)
//! owns a chain of model streams: when the current one would exceed `sq_depth` slots, a
//! cascade stream is appended and the current one ends with a [`RecTask::Activate`] of
//! it, so the chain runs in order. Captured events are model-local: each record made
//! while capturing is a new local event, and a wait refers to the record it waits for.
//!
//! A successful end turns the model tree (the model and the sub-models of its conditional
//! tasks, captured on other streams) into device models, sub-models first, and the model is
//! READY: executing it queues one device job on the execution stream, and the device's
//! stream workers run every task with no host work per task. An update (a task group's,
//! or a whole-model one) rebuilds the device task lists for the executions issued after
//! it; executions already issued run what they were issued with.
//!
//! ## Invariants
//! - One lock guards the context's state; every call takes it once. Calls are host API
//!   calls, not a hot path: a captured model's execution takes no host lock per task.
//! - A failed call changes nothing, except where the runtime documents a side effect
//!   (a failed end discards the capture; a cross-capture wait, or a failed add of a
//!   stream, invalidates it; a task refused inside a task group breaks the group).
//! - A model's status is one of [`ModelStatus`]; executing needs READY.
//!
//! ## Layers
//! [`model`] holds what the API hands out and shows; [`state`] the context's state under
//! its lock, with [`record`] (how a capture records tasks), [`end`] (a capture's end) and
//! [`tree`] (model trees on the device) as its operations; [`context`] is the [`Acl`]
//! value with its resources and inspection; each file above it adds one group of API
//! calls ([`capture`], [`work`], [`update`], [`cond`], [`execute`], [`build`]).

pub mod build;
pub mod capture;
pub mod cond;
pub mod context;
pub mod end;
pub mod execute;
pub mod model;
pub mod record;
pub mod state;
pub mod tree;
pub mod update;
pub mod work;

pub use context::{Acl, AclConfig, MAX_WHILE_ITERATIONS};
pub use model::{
    CondHandle, HandleInfo, ModelRI, ModelSnapshot, ModelStatus, RecStream, RecTask, TaskGroup,
};
