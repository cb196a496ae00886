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
//!
//! ## Modules
//!
//! | module | what it holds |
//! | --- | --- |
//! | `ids` | validated newtypes: `ActorId` (namespaced by its `Namespace` prefix, e.g. `slack:U…`, `access:svc:…`), `ChannelId`, `RepoSlug` (lower-cased), `AgentName`, `ScheduleName`, `RunId`, `CommandId`; `Namespace` with each namespace's `ActorKind` and grants `Baseline` (a new surface's namespace is one row here) |
//! | `surface` | `Surface`, the one spelling of the surfaces (e.g. `slack`, `cli`): how runs record it, which have a grants entry (`slack:*` …), what a channel id of each establishes alone (`channel_visibility`), the surface each namespace speaks through, which take bearer tokens |
//! | `action` | the closed vocabulary: `Action::{Command(group, effect), AgentRun, AgentRunAny, RepoUse, TraceRead}`; `CATALOGUE_ACTIONS` (the command actions the catalogue declares) |
//! | `grants` | `GrantSet<T>` (`All` / `Only`), `Grants` (actions, channels, repos), `NO_GRANTS`, `ALL_GRANTS`; `holds` (with `agent:run:*`), union, intersection |
//! | `groups` | `GroupId` (`group:<name>`, `group:slack:S…`, `group:access:<name>`), `GroupFacts` (what a surface learned for a request), `[groups]` parsing, the grants a Slack group may never hold |
//! | `review` | `diff` (every change of decision between two tables, over every actor class × action × resource shape, exactly), `who_can`, the classes and shapes they enumerate, `spec_of` |
//! | `sources` | `GrantSource`: which baseline, entry, surface entry or group gave an actor its grants (`authz explain`) |
//! | `actor` | `Actor`, `Origin`; consistency (kind matches namespace) and `effective_grants` (agent ∩ principal) |
//! | `resource` | `Resource` and its parts (`RunFacts`, `ScopeKey`, `ConfigTier`, …), `ChannelVisibility` (default `Unknown`), `ResourceType`, kinds |
//! | `policy` | `Rule` (action pattern, `Target` with kind, selectors, conditions), `Condition` (the five), `validate_policy`, `Policy` (only validated tables decide), `builtin_rules()` |
//! | `decide` | `authorize`, `explain`, `Verdict`, `Reason` (audit line only), `RowOutcome` |
//! | `predicate` | `Predicate`, `predicate_for`, `matches`, `Predicate::check` (what a store refuses) |
//! | `config` | `GrantsTable::from_config` (grants + groups + restrict, fail closed), `GrantsTable::resolve` (with group facts), `resolve_again` (the same actor under a reloaded table), the baselines by `Baseline`, surface entries, schedule declarations, `grants_for`, `resolve_actor`, `resolve_agent`, `admins_hint`, `can_*`, `restricted_agents_for` |
//! | `spec` | `parse_resource_spec`: the one-line resource form operators and tests use |
//! | `directory` | `ChannelDirectory` (boxed futures, no runtime: `info`, `is_member`, `memberships`), `StaticChannelDirectory`, `static_visibility` (each surface's `channel_visibility`), `DirectoryByNamespace` (each chat surface answers for its own namespace, the id alone for the rest) |
//! | `time`, `run` | the vocabulary every layer shares: `Timestamp` (µs since the epoch; nothing here reads a clock), `RunStatus` (`from_name`, `is_live`) and `FiringSlot` (a schedule's timer slot or manual firing, and its stored key) |
//! | `policy_cases` (test) | a positive and a negative case for every row of the built-in table |
//!
//! ## What a decision reads
//!
//! authz-core reads these attributes; it never looks anything up.
//!
//! | attribute | of | supplied by |
//! | --- | --- | --- |
//! | id, kind | actor | the surface that proved it (`ActorId` namespace → `ActorKind`) |
//! | grants (actions, channels, repos) | actor | the one resolver, `resolve_actor` / `resolve_agent`, from the grants table |
//! | groups | actor | declared groups: the table; a Slack user group: the Slack directory (`usergroups.users.list`, cached, single-flight); an identity provider's group: the verified Access token's `[access] groups_claim`. Facts (`GroupFacts`): the resolver adds the grants of the groups the table names; a failed lookup adds none and is named on a refusal's audit line |
//! | memberships | actor | a surface's directory, per request (`ChannelDirectory::memberships`; the Slack surface: the private channels and group DMs `users.conversations` says the user shares with the bot, cached for the TTL). Facts, not grants: `effective_grants` adds them to the channels `member_of` reads, never to `all`; an agent sees them only through its principal. A failed lookup supplies none (deny) |
//! | origin (channel, thread) | actor | the surface (where the request was made; context, never authority) |
//! | channel id, visibility stamp, user, repo | run | the dispatcher at the run's start (the stamp from `ChannelDirectory::info`, bounded, else `unknown`) |
//!
//! More invariants, each pinned by a test (`tests/behaviour/`, `policy_cases.rs`, the `compile_fail`
//! doctests in `policy.rs`; purity by `cargo xtask tidy`):
//!
//! - It names no command id of the catalogue: which commands exist is `commands`'s.
//! - An inconsistent actor also covers a non-agent with a principal and an agent acting for an
//!   agent. `all ∩ S = S` for effective grants (property-tested).
//! - The differential covers `runs:read`, `runs:write`, `friction:read` and an action with no
//!   run row, over generated actors and runs.
//! - Rows OR, conditions AND, no row denies. A row on a memory or config scope has a kind and no
//!   other row can (`Target`).
//! - The built-in table passes `validate_policy` against `CATALOGUE_ACTIONS`; every row has a
//!   positive and a negative case, and a case naming no row fails.
//!
//! ## Decisions
//!
//! - `ActorId` is strict: an id that does not parse (unknown namespace, empty subject, a Slack id
//!   that is not `U…`/`W…`, `cli:` other than `local`) cannot be built, so the surface refuses it
//!   rather than resolving it to an actor. Every id that parses is placeable; the ones the table
//!   knows nothing about (an unlisted token, an undeclared schedule, an agent with no principal)
//!   hold `NO_GRANTS`.
//! - `Reason` has variants for rows that fail for other causes: `NotAllChannels`, `ActorKind`
//!   (the rows that apply are for other kinds), `Restricted` (a restricted repo), `Unreadable` (a
//!   row that reads an attribute the resource lacks; validation refuses such rows, this is the
//!   fail-closed answer). The reason is the first failed condition of a row that applied, else
//!   the first selector that kept a row out, else `NoRule`.
//! - A grant `agent:run:<name>` must name a declared agent (a typo would silently grant nothing),
//!   and a grants entry for `cli:local` is refused (it already holds everything).
//! - `predicate_for` compiles only unkinded rows without resource-side selectors or templated
//!   grants; such rows are point-only and can only narrow a list, never widen it.
//! - Whether a caller may use a command is the registry's admission (`Registry::admission`), not
//!   a `can_*` here: that would have to name a command id.

pub mod action;
pub mod actor;
pub mod config;
pub mod decide;
pub mod directory;
pub mod grants;
pub mod groups;
pub mod ids;
pub mod policy;
pub mod predicate;
pub mod resource;
pub mod review;
pub mod run;
pub mod sources;
pub mod spec;
pub mod surface;
pub mod time;

#[cfg(test)]
mod policy_cases;

pub use action::{Action, ActionError, CATALOGUE_ACTIONS, CommandGroup, Effect};
pub use actor::{Actor, Origin};
pub use config::{
    ConfigError, ConfigProblem, GrantsTable, Restrict, chat_open_actions, resolve_actor,
    resolve_agent, resolve_outsider,
};
pub use decide::{Explanation, Reason, RowOutcome, RowTrace, Verdict, authorize, explain};
pub use directory::{
    BoxFuture, ChannelDirectory, DIRECTORY_ANSWER_BOUND, DirectoryByNamespace, Membership,
    StaticChannelDirectory, static_visibility,
};
pub use grants::{ALL_GRANTS, GrantSet, Grants, NO_GRANTS};
pub use groups::{GroupFacts, GroupId, GroupKind};
pub use ids::{
    ActorId, ActorKind, AgentName, Baseline, ChannelId, CommandId, IdError, Namespace, RepoSlug,
    RunId, ScheduleName,
};
pub use policy::{Policy, PolicyFault, Rule, validate_policy};
pub use predicate::{MalformedPredicate, Predicate, matches, predicate_for};
pub use resource::{
    ChannelVisibility, ConfigKind, ConfigTier, MemoryKind, Resource, ResourceKind, ResourceType,
    RunFacts, ScopeKey,
};
pub use run::{FiringSlot, RunStatus};
pub use sources::GrantSource;
pub use spec::{SpecError, parse_resource_spec};
pub use surface::Surface;
pub use time::Timestamp;
