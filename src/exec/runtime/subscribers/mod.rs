//! The subscribers rt2 ships (GE's profiler, tracer and data dumper, as
//! [`super::Subscriber`]s), and what turns their recordings into reports.
//!
//! - [`recorder`]: [`NodeRecorder`] records a span per node call (thread, node, kernel,
//!   the op it serves, start, end, time spent outside nested calls, and optionally the
//!   kernel's trace lines) while it is switched on.
//! - [`profile`]: [`Profile`] aggregates those spans per kernel type and per op, and the
//!   device's task records per op.
//! - [`trace`]: a Chrome trace-event document of the spans and the device's task records:
//!   one track per host executor thread, one per device stream.
//! - [`dumper`]: [`TensorDumper`] copies every launch's outputs to host memory in stream
//!   order during one execution.
//!
//! Nothing here does IO: reports are values, and `cmd` prints or writes them.

pub mod dumper;
pub mod profile;
pub mod recorder;
pub mod trace;

pub use dumper::{DumpedTensor, TensorDumper};
pub use profile::{Profile, ProfileRow};
pub use recorder::{NodeRecorder, NodeSpan, Recording};
pub use trace::chrome_trace;
