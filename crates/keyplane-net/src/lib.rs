//! keyplane-net (see the crate description; work in progress).
