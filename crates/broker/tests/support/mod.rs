//! Test support: builders for grants and requests, and the oracle.
#![allow(dead_code)]

pub mod build;
pub mod oracle;
