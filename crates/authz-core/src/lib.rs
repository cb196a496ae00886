//! # authz-core: the one policy crate
//!
//! What it is: the single place Switchboard decides what any caller may do. Actors (who is
//! asking), grants (what they hold, on three axes), the closed action vocabulary, typed
//! resources, the policy table as data rows, [`authorize`] (the one decision), [`explain`] (the
//! same decision with every row's outcome), [`predicate_for`] (the same rows compiled to a list
//! filter) and [`matches`] (that filter's one truth table), the `grants`/`restrict` config
//! blocks with their baselines, and the [`ChannelDirectory`] seam.
//!
//! What it must never do: I/O of any kind, read a clock or the environment, spawn, or depend on
//! an async runtime, a database or an HTTP crate (a tidy test reads `cargo metadata` and fails
//! if one appears). It never panics on input: `unwrap`, `expect`, `panic!` and indexing are
//! denied by the workspace's lints, as in every crate. Time and facts are arguments.
//!
//! Invariants:
//! - An inconsistent actor (kind not matching its id's namespace) is denied before anything
//!   else, and compiles to `Predicate::None`.
//! - An agent's effective grants are its own intersected with its principal's: never more.
//! - For every actor and run, `matches(predicate_for(actor, a, Run), run)` equals
//!   `authorize(actor, a, Run(run)).is_allow()` (the load-bearing property test).
//! - Only a table that passed `validate_policy` decides; the built-in one is validated once,
//!   and were it ever invalid it would decide nothing (deny everything).
//! - Config parsing fails closed, naming key and field; nothing unknown is skipped or widened.
//! - A deny `Reason` is for the audit line only; it names the actor's missing fact, never the
//!   surface key a grant came through.

pub mod action;
pub mod actor;
pub mod config;
pub mod decide;
pub mod directory;
pub mod grants;
pub mod ids;
pub mod policy;
pub mod predicate;
pub mod resource;
pub mod spec;
pub mod surface;

#[cfg(test)]
mod policy_cases;

pub use action::{Action, ActionError, CATALOGUE_ACTIONS, CommandGroup, Effect};
pub use actor::{Actor, ActorKind, Origin};
pub use config::{
    ConfigError, ConfigProblem, GrantsTable, Restrict, chat_open_actions, resolve_actor,
    resolve_agent, resolve_outsider,
};
pub use decide::{Explanation, Reason, RowOutcome, RowTrace, Verdict, authorize, explain};
pub use directory::{
    BoxFuture, ChannelDirectory, Membership, StaticChannelDirectory, static_visibility,
};
pub use grants::{ALL_GRANTS, GrantSet, Grants, NO_GRANTS};
pub use ids::{
    ActorId, AgentName, ChannelId, CommandId, IdError, Namespace, RepoSlug, RunId, ScheduleName,
};
pub use policy::{Policy, PolicyFault, Rule, validate_policy};
pub use predicate::{MalformedPredicate, Predicate, matches, predicate_for};
pub use resource::{
    ChannelVisibility, ConfigKind, ConfigTier, MemoryKind, Resource, ResourceKind, ResourceType,
    RunFacts, ScopeKey,
};
pub use spec::{SpecError, parse_resource_spec};
pub use surface::Surface;
