//! SQL text shared by the two database back ends: the row shape, binds, JSON arrays.

use authz_core::{ChannelVisibility, RunId};

use crate::types::TokenHash;
use crate::{RunRecord, RunStatus, StatusFilter, StoreError, Timestamp};

/// The run columns, in the order `RawRun` reads them.
pub(crate) const RUN_COLUMNS: &str = "id, surface, channel_id, thread_key, user_id, agent, repo, status, request, answer, error, created_at, finished_at, capability_token_hash, agent_token_hash, owner, channel_visibility";

/// A run row as the database returns it; parsed into a `RunRecord` with every field checked.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct RawRun {
    pub id: String,
    pub surface: String,
    pub channel_id: String,
    pub thread_key: Option<String>,
    pub user_id: String,
    pub agent: String,
    pub repo: Option<String>,
    pub status: String,
    pub request: String,
    pub answer: Option<String>,
    pub error: Option<String>,
    pub created_at: i64,
    pub finished_at: Option<i64>,
    pub capability_token_hash: Option<String>,
    pub agent_token_hash: Option<String>,
    pub owner: Option<String>,
    pub channel_visibility: String,
}

impl RawRun {
    pub fn into_record(self) -> Result<RunRecord, StoreError> {
        let bad = |what, v: &str| StoreError::corrupt(what, v);
        Ok(RunRecord {
            id: RunId::parse(&self.id).map_err(|_| bad("run id", &self.id))?,
            channel_id: self
                .channel_id
                .parse()
                .map_err(|_| bad("channel id", &self.channel_id))?,
            user_id: self
                .user_id
                .parse()
                .map_err(|_| bad("user id", &self.user_id))?,
            repo: self
                .repo
                .as_deref()
                .map(|r| r.parse().map_err(|_| bad("repo", r)))
                .transpose()?,
            status: RunStatus::parse(&self.status)?,
            channel_visibility: ChannelVisibility::parse(&self.channel_visibility)
                .ok_or_else(|| bad("channel visibility", &self.channel_visibility))?,
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
            surface: self.surface,
            thread_key: self.thread_key,
            agent: self.agent,
            request: self.request,
            answer: self.answer,
            error: self.error,
            created_at: Timestamp::from_micros(self.created_at),
            finished_at: self.finished_at.map(Timestamp::from_micros),
            owner: self.owner,
        })
    }
}

/// A round's row: which branch it came from, and the row's page key.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct BranchKey {
    pub grp: i64,
    pub val: String,
    pub created_at: i64,
    pub id: String,
}

/// A bound value.
#[derive(Debug, Clone)]
pub(crate) enum Bind {
    Text(String),
    Int(i64),
    Texts(Vec<String>),
    Ints(Vec<i64>),
}

pub(crate) fn status_sql(filter: StatusFilter, alias: &str) -> String {
    match filter {
        StatusFilter::All => String::new(),
        StatusFilter::Live => format!(" AND {alias}.status IN ('queued', 'running')"),
        StatusFilter::Finished => format!(" AND {alias}.status NOT IN ('queued', 'running')"),
    }
}

/// A JSON string literal.
pub(crate) fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

pub(crate) fn json_array(values: &[String]) -> String {
    let items: Vec<String> = values.iter().map(|v| json_string(v)).collect();
    format!("[{}]", items.join(","))
}

#[cfg(test)]
mod tests {
    #[test]
    fn json_strings_escape() {
        assert_eq!(super::json_string("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
        assert_eq!(
            super::json_array(&["x".into(), "y".into()]),
            "[\"x\",\"y\"]"
        );
    }
}
