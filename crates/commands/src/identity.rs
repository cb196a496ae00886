//! The callers a surface can prove, built here so no surface reaches past this crate:
//!
//! - a bearer token from the shared token map, on a surface that takes them
//!   (`http:<subject>`, `mcp:<subject>`), its runs recorded in the token's channel;
//! - a run-scoped agent token: `agent:<name>` acting for the run's principal (grants
//!   intersected), valid only while its run is live — read from the store, so it holds on
//!   every replica;
//! - a capability token: opens one run (its page, events, friction and stop) without an
//!   identity; the token is the capability, no actor is consulted. The token also records
//!   whether the one it was made for is a person: only then does it answer the run's asks
//!   ([`Capability::answers`]). A machine's or an agent's link watches and stops.
//!
//! - a chat user a signed event proved (Slack): in the channel and thread it wrote in, with
//!   the channels it is a member of; someone from another workspace holds only their own entry;
//! - a viewer a verified token proved (Access): its own channel as origin;
//! - a declared actor (a schedule's `schedule:<name>`): its own channel as origin;
//! - the local user of the CLI.
//!
//! Every surface builds its `Caller` here (tidy refuses `Caller::new` in an adapter or the
//! CLI), so what an actor holds is resolved one way from the grants table.
//!
//! Every failure is `None` or a reason for the operator's log: never a hint to the caller.

use authz_core::{
    Actor, ActorId, AgentName, ChannelId, GrantsTable, GroupFacts, Origin, RunId, Surface,
    resolve_actor, resolve_agent,
};
use store::RunRecord;

use crate::catalogue::runs;
use crate::{Caller, Reply, Services};

/// The token of an `Authorization` header value, when it is `Bearer <token>` (scheme in any
/// case, the token non-empty); the one reading every bearer surface shares.
pub fn bearer_token(authorization: &str) -> Option<&str> {
    let (scheme, token) = authorization.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The caller a bearer token proves on `surface`; `None` for an unknown token, no token map,
/// or a surface that takes no bearer tokens.
pub fn bearer_caller(services: &Services, surface: Surface, token: &str) -> Option<Caller> {
    let entry = services.tokens.as_ref()?.lookup(token)?;
    let actor = entry.actor(surface)?;
    let channel = entry.run_channel(surface)?;
    Some(Caller::new(
        resolve_actor(actor, &services.table()).with_origin(Origin {
            channel_id: channel,
            thread_key: None,
        }),
        surface,
    ))
}

/// Where a chat message was written, as its surface proved it.
pub struct ChatOrigin {
    pub channel: ChannelId,
    pub thread_key: String,
    /// The channels the writer is a member of (read from the chat's directory).
    pub memberships: Vec<ChannelId>,
    /// A writer from another workspace let in: they hold only their own grants entry (and
    /// the declared groups listing them), never the workspace's baseline.
    pub from_outside: bool,
    /// The writer's groups as the chat's directory found them for this request.
    pub groups: GroupFacts,
}

/// The caller a chat message proves: its writer, in its channel and thread.
pub fn chat_caller(
    services: &Services,
    surface: Surface,
    writer: ActorId,
    at: ChatOrigin,
) -> Caller {
    let actor = services
        .table()
        .resolve(writer, at.groups, at.from_outside)
        .with_origin(Origin {
            channel_id: at.channel,
            thread_key: Some(at.thread_key),
        })
        .with_memberships(at.memberships);
    Caller::new(actor, surface)
}

/// `id`'s actor from the table with `groups` learned for the request, with `channel` (when
/// there is one) as its origin.
fn resolved_in(
    id: ActorId,
    groups: GroupFacts,
    channel: Option<ChannelId>,
    table: &GrantsTable,
) -> Actor {
    let actor = table.resolve(id, groups, false);
    match channel {
        Some(channel_id) => actor.with_origin(Origin {
            channel_id,
            thread_key: None,
        }),
        None => actor,
    }
}

/// The caller a verified token proves (an Access viewer): its grants from the table with the
/// groups the token names, and its own channel as origin when its id is also a channel's.
pub fn verified_caller(
    services: &Services,
    surface: Surface,
    id: ActorId,
    groups: GroupFacts,
) -> Caller {
    let channel = ChannelId::parse(id.as_str()).ok();
    Caller::new(resolved_in(id, groups, channel, &services.table()), surface)
}

/// The caller a declared actor is (a schedule's `schedule:<name>`), in its own channel; an
/// id that is not also a channel's is refused with the reason.
pub fn declared_caller(
    table: &GrantsTable,
    surface: Surface,
    id: ActorId,
) -> Result<Caller, authz_core::IdError> {
    let channel = ChannelId::parse(id.as_str())?;
    Ok(Caller::new(
        resolved_in(id, GroupFacts::default(), Some(channel), table),
        surface,
    ))
}

/// The local user of the CLI (`cli:local`), in `channel` when one is given.
pub fn local_caller(services: &Services, channel: Option<ChannelId>) -> Caller {
    Caller::new(
        resolved_in(
            ActorId::cli_local(),
            GroupFacts::default(),
            channel,
            &services.table(),
        ),
        Surface::Cli,
    )
}

/// `caller` as the policy in force resolves it now, from the same facts (a reload since it
/// was proved changes its grants, nothing else): what a long-lived reader, the live feed's
/// recheck, decides as.
pub fn resolved_again(services: &Services, caller: &Caller) -> Caller {
    Caller {
        actor: services.table().resolve_again(&caller.actor),
        surface: caller.surface,
        acting_in: caller.acting_in.clone(),
    }
}

/// Why an agent token was refused (for the operator's log; the caller sees only a 401).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AgentTokenRefused {
    #[error("bad-token")]
    BadToken,
    #[error("unknown-run")]
    UnknownRun,
    #[error("run-ended")]
    RunEnded,
    #[error("store-unavailable")]
    Store,
}

/// The caller an agent token proves: the run's agent acting for the run's principal, with
/// the run's channel and thread as its origin, acting inside that run (a run it starts is its
/// child). The run must be live now.
pub async fn agent_caller(
    services: &Services,
    surface: Surface,
    token: &str,
) -> Result<Caller, AgentTokenRefused> {
    let id = services
        .agent_tokens
        .run_of(token)
        .ok_or(AgentTokenRefused::BadToken)?;
    let run = services
        .store
        .get()
        .get_run(&id)
        .await
        .map_err(|_| AgentTokenRefused::Store)?
        .ok_or(AgentTokenRefused::UnknownRun)?;
    if !run.status.is_live() {
        return Err(AgentTokenRefused::RunEnded);
    }
    let name = AgentName::parse(&run.agent).map_err(|_| AgentTokenRefused::UnknownRun)?;
    // The principal from its id under the policy in force: its declared groups count, the
    // group facts its own request learned (a Slack or identity provider's group) do not.
    let table = services.table();
    let principal = resolve_actor(run.user_id.clone(), &table);
    let mut actor = resolve_agent(&name, Some(principal), &table);
    actor.origin = Some(Origin {
        channel_id: run.channel_id.clone(),
        thread_key: run.thread_key.clone(),
    });
    Ok(Caller {
        actor,
        surface,
        acting_in: Some(run.id),
    })
}

/// Who a capability token was made for, written into the token itself (the hash the store
/// keeps covers it, so a holder cannot change it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkHolder {
    /// A person asked (a Slack member, an Access browser session, the local operator): the
    /// link also answers the run's asks.
    Person,
    /// A machine (a bearer token, a schedule, an Access service token) or an agent asked:
    /// the link watches and stops the run, nothing more.
    Machine,
}

impl LinkHolder {
    /// The holder a request's actor makes: a person asking for itself, else a machine.
    pub fn of(actor: &authz_core::Actor) -> LinkHolder {
        if actor.is_person() {
            LinkHolder::Person
        } else {
            LinkHolder::Machine
        }
    }

    fn prefix(self) -> &'static str {
        match self {
            LinkHolder::Person => "sbp_",
            LinkHolder::Machine => "sbm_",
        }
    }

    /// A capability token for this holder around `random` (unguessable).
    pub fn token(self, random: &str) -> String {
        format!("{}{random}", self.prefix())
    }
}

/// One run, opened by its capability token.
pub struct Capability {
    run: RunRecord,
    holder: LinkHolder,
}

impl Capability {
    /// The run `token` opens; `None` for a missing run, a run with no token, a wrong token or
    /// a store fault — all alike.
    pub async fn open(services: &Services, id: &RunId, token: &str) -> Option<Capability> {
        let run = services.store.get().get_run(id).await.ok()??;
        let holder = if token.starts_with(LinkHolder::Person.prefix()) {
            LinkHolder::Person
        } else {
            LinkHolder::Machine
        };
        run.capability_token
            .as_ref()
            .is_some_and(|h| h.matches(token))
            .then_some(Capability { run, holder })
    }

    /// Whether this link answers the run's asks: only one made for a person.
    pub fn answers(&self) -> bool {
        self.holder == LinkHolder::Person
    }

    pub fn id(&self) -> &RunId {
        &self.run.id
    }

    /// Whether the run is still live: after its end the token opens nothing but a page
    /// saying so.
    pub fn is_live(&self) -> bool {
        self.run.status.is_live()
    }

    /// The run, as `runs get` answers it.
    pub fn run(&self, services: &Services) -> Reply {
        runs::run_reply(&self.run, services.clock.now())
    }

    /// Its events, as `runs events` answers them.
    pub async fn events(&self, services: &Services) -> Reply {
        runs::events_reply(&self.run, services).await
    }

    /// Its friction, as `runs friction` answers it.
    pub async fn friction(&self, services: &Services) -> Reply {
        runs::friction_reply(&self.run, services).await
    }

    /// What it changed: nothing yet, as `runs diff` answers for a live run. A capability
    /// opens only a live run, and never reads a run's changes (they are for readers of the
    /// run, and of its repo when that is restricted).
    pub fn changes(&self) -> Reply {
        if self.is_live() {
            Reply::of(
                crate::ReplyKind::Conflict,
                crate::run_changes::ChangesError::Live.to_string(),
            )
        } else {
            Reply::not_found("run")
        }
    }

    /// Stops it, as `runs stop` would for someone allowed to.
    pub async fn stop(&self, services: &Services) -> Reply {
        runs::stop_reply(&self.run, services).await
    }
}

#[cfg(test)]
mod tests {
    use super::bearer_token;

    #[test]
    fn bearer_headers_are_read_one_way() {
        for (v, want) in [
            ("Bearer abc", Some("abc")),
            ("bearer  abc ", Some("abc")),
            ("BEARER abc", Some("abc")),
            ("Basic abc", None),
            ("Bearer ", None),
            ("Bearer", None),
            ("", None),
        ] {
            assert_eq!(bearer_token(v), want, "{v:?}");
        }
    }
}
