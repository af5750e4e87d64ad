//! Capture scripts (../shared/specs/capture-script.md): parsing and static checks.
