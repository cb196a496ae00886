//! Test support: builders for grants and requests, and the oracle.

pub mod build;
pub mod oracle;
