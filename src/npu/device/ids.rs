//! The device's handles: [`StreamId`], [`EventId`], [`NotifyId`], [`ModelId`] (newtype
//! ids with short display forms) and [`DevicePtr`], a device memory address. The bottom
//! layer of the device: every other file names them.

use std::fmt;

macro_rules! id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u32);
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}
id!(
    /// A stream of a device.
    StreamId,
    "s"
);
id!(
    /// An event of a device.
    EventId,
    "e"
);
id!(
    /// A notify of a device.
    NotifyId,
    "n"
);
id!(
    /// A loaded model of a device.
    ModelId,
    "m"
);

/// A device memory address. Never 0; addresses inside an allocation are valid arguments
/// too, so `ptr.offset(bytes)` names a sub-range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DevicePtr(pub u64);

impl DevicePtr {
    /// The address `bytes` further on.
    pub fn offset(self, bytes: u64) -> DevicePtr {
        DevicePtr(self.0.wrapping_add(bytes))
    }
}

impl fmt::Display for DevicePtr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}
