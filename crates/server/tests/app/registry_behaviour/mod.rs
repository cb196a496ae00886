//! The registry and the catalogue, end to end against a real store.

mod catalogue;
mod harness;
mod matrix;
mod ports;
mod registry;
