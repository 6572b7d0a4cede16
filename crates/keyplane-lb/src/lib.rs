//! keyplane-lb (see the crate description; work in progress).
