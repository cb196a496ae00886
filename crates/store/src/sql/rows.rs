//! Rows read back into their types, the same way on both databases. Every stored string is
//! parsed; a value that does not parse is `Corrupt`, naming what it was and never skipped.

use std::borrow::Cow;

use authz_core::{ActorId, ChannelVisibility, RepoSlug, RunId, ScheduleName, Surface};
use serde::Deserialize;

use super::dialect::RowAccess;
use crate::error::{Result, StoreError};
use crate::types::{
    ApprovalRecord, ApprovalState, ConfigValue, Firing, FiringSlot, Friction, FrictionOfRun,
    KeptChanges, MemoryRecord, RunEvent, RunRecord, Timestamp, TokenHash, parse_status,
    scope_from_parts, tier_from_parts,
};

fn parsed<T>(
    what: &'static str,
    raw: impl AsRef<str>,
    parse: impl FnOnce(&str) -> Option<T>,
) -> Result<T> {
    let raw = raw.as_ref();
    parse(raw).ok_or_else(|| StoreError::corrupt(what, raw))
}

fn run_id(raw: impl AsRef<str>) -> Result<RunId> {
    parsed("run id", raw, |s| RunId::parse(s).ok())
}

fn opt_run_id(what: &'static str, raw: Option<String>) -> Result<Option<RunId>> {
    raw.map(|s| parsed(what, s, |v| RunId::parse(v).ok()))
        .transpose()
}

fn micros(v: i64) -> Timestamp {
    Timestamp::from_micros(v)
}

/// A run row as the database returns it, in `RUN_COLUMNS` order: read by position from a row
/// (owned), or from one JSON array of that row (how SQLite hands a page over in one piece).
/// From JSON, each required text borrows from the page unless it had escapes, so it is copied
/// once, into its record; serde copies the optional ones (it borrows only a plain `Cow`).
#[derive(Debug, Deserialize)]
pub struct RawRun<'a> {
    #[serde(borrow)]
    id: Cow<'a, str>,
    #[serde(borrow)]
    surface: Cow<'a, str>,
    #[serde(borrow)]
    channel_id: Cow<'a, str>,
    thread_key: Option<Cow<'a, str>>,
    #[serde(borrow)]
    user_id: Cow<'a, str>,
    #[serde(borrow)]
    agent: Cow<'a, str>,
    repo: Option<Cow<'a, str>>,
    #[serde(borrow)]
    status: Cow<'a, str>,
    #[serde(borrow)]
    request: Cow<'a, str>,
    answer: Option<Cow<'a, str>>,
    error: Option<Cow<'a, str>>,
    created_at: i64,
    finished_at: Option<i64>,
    capability_token_hash: Option<Cow<'a, str>>,
    agent_token_hash: Option<Cow<'a, str>>,
    owner: Option<Cow<'a, str>>,
    #[serde(borrow)]
    channel_visibility: Cow<'a, str>,
    stop_requested_at: Option<i64>,
    parent_run: Option<Cow<'a, str>>,
}

impl RawRun<'static> {
    pub fn from_row(r: &impl RowAccess) -> Result<RawRun<'static>> {
        let text = |i| r.text(i).map(Cow::Owned);
        let opt_text = |i| r.opt_text(i).map(|v| v.map(Cow::Owned));
        Ok(RawRun {
            id: text(0)?,
            surface: text(1)?,
            channel_id: text(2)?,
            thread_key: opt_text(3)?,
            user_id: text(4)?,
            agent: text(5)?,
            repo: opt_text(6)?,
            status: text(7)?,
            request: text(8)?,
            answer: opt_text(9)?,
            error: opt_text(10)?,
            created_at: r.int(11)?,
            finished_at: r.opt_int(12)?,
            capability_token_hash: opt_text(13)?,
            agent_token_hash: opt_text(14)?,
            owner: opt_text(15)?,
            channel_visibility: text(16)?,
            stop_requested_at: r.opt_int(17)?,
            parent_run: opt_text(18)?,
        })
    }
}

impl RawRun<'_> {
    /// The record, every field parsed back into its type.
    pub fn into_record(self) -> Result<RunRecord> {
        Ok(RunRecord {
            id: run_id(self.id)?,
            surface: parsed("surface", self.surface, Surface::parse)?,
            channel_id: parsed("channel id", self.channel_id, |s| s.parse().ok())?,
            thread_key: self.thread_key.map(Cow::into_owned),
            user_id: parsed("user id", self.user_id, |s| s.parse().ok())?,
            agent: self.agent.into_owned(),
            repo: self
                .repo
                .map(|v| parsed("repo", v, |s| s.parse().ok()))
                .transpose()?,
            status: parse_status(&self.status)?,
            request: self.request.into_owned(),
            answer: self.answer.map(Cow::into_owned),
            error: self.error.map(Cow::into_owned),
            created_at: micros(self.created_at),
            finished_at: self.finished_at.map(micros),
            capability_token: self
                .capability_token_hash
                .as_deref()
                .map(TokenHash::from_hex)
                .transpose()?,
            agent_token: self
                .agent_token_hash
                .as_deref()
                .map(TokenHash::from_hex)
                .transpose()?,
            owner: self.owner.map(Cow::into_owned),
            channel_visibility: parsed(
                "channel visibility",
                self.channel_visibility,
                ChannelVisibility::parse,
            )?,
            stop_requested_at: self.stop_requested_at.map(micros),
            parent_run: self.parent_run.map(run_id).transpose()?,
        })
    }
}

/// A run, from `RUN_COLUMNS` in order.
pub fn run(r: &impl RowAccess) -> Result<RunRecord> {
    RawRun::from_row(r)?.into_record()
}

/// A branch round's key: `(grp, val, created_at, id)`.
pub fn branch_key(r: &impl RowAccess) -> Result<(usize, String, (i64, String))> {
    Ok((
        usize::try_from(r.int(0)?).unwrap_or(usize::MAX),
        r.text(1)?,
        (r.int(2)?, r.text(3)?),
    ))
}

/// `seq, at, kind, body`.
pub fn event(run: &RunId, r: &impl RowAccess) -> Result<RunEvent> {
    Ok(RunEvent {
        run_id: run.clone(),
        seq: r.int(0)?,
        at: micros(r.int(1)?),
        kind: r.text(2)?,
        body: r.text(3)?,
    })
}

/// `at, kind, detail`.
pub fn friction(run: &RunId, r: &impl RowAccess) -> Result<Friction> {
    Ok(Friction {
        run_id: run.clone(),
        at: micros(r.int(0)?),
        kind: r.text(1)?,
        detail: r.text(2)?,
    })
}

/// `run_id, at, kind, detail, channel_id, agent`.
pub fn friction_of_run(r: &impl RowAccess) -> Result<FrictionOfRun> {
    Ok(FrictionOfRun {
        friction: Friction {
            run_id: run_id(r.text(0)?)?,
            at: micros(r.int(1)?),
            kind: r.text(2)?,
            detail: r.text(3)?,
        },
        channel_id: parsed("channel id", r.text(4)?, |s| s.parse().ok())?,
        agent: r.text(5)?,
    })
}

/// The memory columns, in the order `memory` reads them.
pub const MEMORY_COLUMNS: &str =
    "id, scope_kind, scope_key, text, supersedes, source_run, created_at, forgotten_at";

pub fn memory(r: &impl RowAccess) -> Result<MemoryRecord> {
    Ok(MemoryRecord {
        id: parsed("memory id", r.text(0)?, |s| RunId::parse(s).ok())?,
        scope: scope_from_parts(&r.text(1)?, &r.text(2)?)?,
        text: r.text(3)?,
        supersedes: opt_run_id("memory id", r.opt_text(4)?)?,
        source_run: opt_run_id("run id", r.opt_text(5)?)?,
        created_at: micros(r.int(6)?),
        forgotten_at: r.opt_int(7)?.map(micros),
    })
}

/// The config columns, in the order `config` reads them.
pub const CONFIG_COLUMNS: &str = "tier, tier_id, key, value, updated_by, updated_at";

pub fn config(r: &impl RowAccess) -> Result<ConfigValue> {
    Ok(ConfigValue {
        tier: tier_from_parts(&r.text(0)?, &r.text(1)?)?,
        key: r.text(2)?,
        value: r.text(3)?,
        updated_by: parsed("actor id", r.text(4)?, |s| s.parse().ok())?,
        updated_at: micros(r.int(5)?),
    })
}

/// `slot, slot_at, fired_at, status, run_id, detail`.
pub fn firing(name: &ScheduleName, r: &impl RowAccess) -> Result<Firing> {
    let at = micros(r.int(1)?);
    Ok(Firing {
        name: name.clone(),
        slot: parsed("firing slot", r.text(0)?, |k| FiringSlot::from_key(k, at))?,
        fired_at: micros(r.int(2)?),
        status: r.text(3)?,
        run_id: opt_run_id("run id", r.opt_text(4)?)?,
        detail: r.opt_text(5)?,
    })
}

/// `name, MAX(slot_at)`: a schedule's latest timer slot.
pub fn last_slot(r: &impl RowAccess) -> Result<(ScheduleName, Timestamp)> {
    let name = parsed("schedule name", r.text(0)?, |s| ScheduleName::parse(s).ok())?;
    Ok((name, micros(r.int(1)?)))
}

/// `id, run_id, principal, action, tool, arguments, state, asked_at` of `tool_approvals`.
pub fn approval(r: &impl RowAccess) -> Result<ApprovalRecord> {
    Ok(ApprovalRecord {
        id: r.text(0)?,
        run_id: run_id(r.text(1)?)?,
        principal: match r.opt_text(2)? {
            None => None,
            Some(p) => Some(parsed("approval principal", p, |s| ActorId::parse(s).ok())?),
        },
        action: r.text(3)?,
        tool: r.text(4)?,
        arguments: r.text(5)?,
        state: parsed("approval state", r.text(6)?, ApprovalState::parse)?,
        asked_at: micros(r.int(7)?),
    })
}

/// `state` of `tool_approvals`.
pub fn approval_state(r: &impl RowAccess) -> Result<ApprovalState> {
    parsed("approval state", r.text(0)?, ApprovalState::parse)
}

/// A run id alone (`RETURNING id`, `SELECT id`).
pub fn run_id_of(r: &impl RowAccess) -> Result<RunId> {
    run_id(r.text(0)?)
}

/// A `run_changes` row: run_id, repo, start_commit, tip_commit, commits, not_kept,
/// not_kept_count, kept_at.
pub fn kept(r: &impl RowAccess) -> Result<KeptChanges> {
    let not_kept = r.text(5)?;
    Ok(KeptChanges {
        run_id: run_id(r.text(0)?)?,
        repo: parsed("repo", r.text(1)?, |s| RepoSlug::parse(s).ok())?,
        start: r.text(2)?,
        tip: r.opt_text(3)?,
        commits: u64::try_from(r.int(4)?)
            .map_err(|_| StoreError::corrupt("kept commits", "negative"))?,
        not_kept: serde_json::from_str(&not_kept)
            .map_err(|_| StoreError::corrupt("names not kept", &not_kept))?,
        not_kept_count: u64::try_from(r.int(6)?)
            .map_err(|_| StoreError::corrupt("count not kept", "negative"))?,
        kept_at: micros(r.int(7)?),
    })
}
