//! keyplane-switch (see the crate description; work in progress).
