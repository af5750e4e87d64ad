//! ACL error codes the capture API returns, by name and number (hicann/runtime
//! `include/external/acl/error_codes/rt_error_codes.h` and `acl_base_rt.h`; the table is in
//! ../shared/notes/acl-graph.md). A call fails with exactly one of these, where the real
//! runtime returns it; reports print the name and the number.

use std::fmt;

macro_rules! acl_errors {
    ($($(#[$doc:meta])* $variant:ident = $code:literal, $name:literal;)*) => {
        /// An ACL error code.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum AclError {
            $($(#[$doc])* $variant,)*
        }

        impl AclError {
            /// Every code, in the order of the table.
            pub const ALL: &'static [AclError] = &[$(AclError::$variant,)*];

            /// The C name, e.g. `ACL_ERROR_RT_STREAM_CAPTURED`.
            pub fn name(self) -> &'static str {
                match self {
                    $(AclError::$variant => $name,)*
                }
            }

            /// The numeric `aclError`.
            pub fn code(self) -> i32 {
                match self {
                    $(AclError::$variant => $code,)*
                }
            }
        }
    };
}

acl_errors! {
    /// A parameter is invalid (a null handle, a size out of range, a handle used twice).
    InvalidParam = 100000, "ACL_ERROR_INVALID_PARAM";
    /// The API is not supported.
    ApiNotSupport = 200001, "ACL_ERROR_API_NOT_SUPPORT";
    /// The runtime rejects a parameter.
    RtParamInvalid = 107000, "ACL_ERROR_RT_PARAM_INVALID";
    /// An unknown stream, event or model handle.
    InvalidHandle = 107017, "ACL_ERROR_RT_INVALID_HANDLE";
    /// Captured work would depend on work outside the capture.
    CaptureDependency = 107024, "ACL_ERROR_RT_CAPTURE_DEPENDENCY";
    /// A stream that joined the capture was not joined back before its end.
    StreamUnjoined = 107025, "ACL_ERROR_RT_STREAM_UNJOINED";
    /// The model is still being captured.
    ModelCaptured = 107026, "ACL_ERROR_RT_MODEL_CAPTURED";
    /// The stream is capturing (or its capture is invalidated).
    StreamCaptured = 107027, "ACL_ERROR_RT_STREAM_CAPTURED";
    /// The event is part of a capture.
    EventCaptured = 107028, "ACL_ERROR_RT_EVENT_CAPTURED";
    /// The stream is not capturing.
    StreamNotCaptured = 107029, "ACL_ERROR_RT_STREAM_NOT_CAPTURED";
    /// An unsafe call under a capture mode that forbids it.
    CaptureModeNotSupport = 107030, "ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT";
    /// An implicit dependency on the default stream.
    StreamCaptureImplicit = 107031, "ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT";
    /// Interdependent streams cannot begin capture together.
    StreamCaptureConflict = 107032, "ACL_ERROR_STREAM_CAPTURE_CONFLICT";
    /// A task group is in the wrong state (opened twice, not opened, not closed, busy).
    TaskGroupStatus = 107033, "ACL_ERROR_STREAM_TASK_GROUP_STATUS";
    /// A task group was interrupted during capture.
    TaskGroupIntr = 107034, "ACL_ERROR_STREAM_TASK_GROUP_INTR";
    /// The capture was not begun on this stream.
    StreamCaptureUnmatched = 107036, "ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED";
    /// The model is running.
    ModelRunning = 107037, "ACL_ERROR_RT_MODEL_RUNNING";
    /// The capture is ended from another thread than the one that began it.
    StreamCaptureWrongThread = 107038, "ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD";
    /// A task update does not match its task group.
    ModelUpdateFailed = 107040, "ACL_ERROR_RT_MODEL_UPDATE_FAILED";
    /// A blocking call is not allowed under the capture mode.
    CaptureModeBlockAsync = 107041, "ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC";
    /// A sub-model of the model is still capturing.
    SubAclgraphIsCapturing = 107045, "ACL_ERROR_RT_SUB_ACLGRAPH_IS_CAPTURING";
    /// The feature is not supported (a condition handle on a model that is not a capture).
    FeatureNotSupport = 207000, "ACL_ERROR_RT_FEATURE_NOT_SUPPORT";
    /// Device memory is exhausted.
    MemoryAllocation = 207001, "ACL_ERROR_RT_MEMORY_ALLOCATION";
    /// Freeing what is not an allocated block.
    MemoryFree = 207002, "ACL_ERROR_RT_MEMORY_FREE";
    /// The feature is not supported by this runtime.
    FeatureUnsupported = 200006, "ACL_ERROR_FEATURE_UNSUPPORTED";
    /// An internal error.
    InternalError = 507000, "ACL_ERROR_RT_INTERNAL_ERROR";
    /// The stream's task queue is full.
    StreamTaskFull = 507002, "ACL_ERROR_RT_STREAM_TASK_FULL";
    /// The task type is not allowed here (a non-kernel task in a task group).
    TaskTypeNotSupport = 507009, "ACL_ERROR_RT_TASK_TYPE_NOT_SUPPORT";
    /// A model execution failed, or the model is not ready to execute.
    ModelExecute = 507011, "ACL_ERROR_RT_MODEL_EXECUTE";
    /// A kernel failed while computing.
    AicoreException = 507015, "ACL_ERROR_RT_AICORE_EXCEPTION";
    /// The kernel is not in the device's library.
    KernelLookup = 507027, "ACL_ERROR_RT_KERNEL_LOOKUP";
    /// The capture was invalidated.
    StreamCaptureInvalidated = 507903, "ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED";
}

impl AclError {
    /// The code with this C name.
    pub fn from_name(name: &str) -> Option<AclError> {
        AclError::ALL.iter().copied().find(|e| e.name() == name)
    }
}

impl AclError {
    /// The code with this number.
    pub fn from_code(code: i32) -> Option<AclError> {
        AclError::ALL.iter().copied().find(|e| e.code() == code)
    }

    /// What a device error is as an ACL error: its code when it is one of these, else
    /// `ACL_ERROR_RT_INTERNAL_ERROR`.
    pub fn of_device(e: &crate::npu::device::NpuError) -> AclError {
        AclError::from_code(e.code()).unwrap_or(AclError::InternalError)
    }
}

impl fmt::Display for AclError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.code())
    }
}

impl std::error::Error for AclError {}

#[cfg(test)]
mod tests {
    use super::AclError;

    #[test]
    fn names_and_codes_are_unique_and_round_trip() {
        for (i, a) in AclError::ALL.iter().enumerate() {
            assert_eq!(AclError::from_name(a.name()), Some(*a));
            for b in &AclError::ALL[i + 1..] {
                assert_ne!(a.name(), b.name());
                assert_ne!(a.code(), b.code());
            }
        }
        assert_eq!(AclError::StreamCaptured.code(), 107027);
        assert_eq!(AclError::from_code(507011), Some(AclError::ModelExecute));
        assert_eq!(
            AclError::StreamCaptureInvalidated.to_string(),
            "ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED (507903)"
        );
    }
}
