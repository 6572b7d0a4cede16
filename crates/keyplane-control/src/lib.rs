//! keyplane-control (see the crate description; work in progress).
