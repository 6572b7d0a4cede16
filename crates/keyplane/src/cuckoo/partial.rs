//! Partial-key cuckoo (placeholder while under construction).
