//! authz-core behaviour: the decision, the predicate differential, config parsing and the
//! baselines, the channel directory. One test binary for the crate.

mod authorize;
mod config;
mod differential;
mod directory;
mod fixtures;
mod validate;
