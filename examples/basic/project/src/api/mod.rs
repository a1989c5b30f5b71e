//! HTTP handlers.
