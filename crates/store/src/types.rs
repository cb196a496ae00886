//! What the store keeps: runs and their parts, memory records, config values, schedule
//! firings. Plain data; every string from a row is parsed back into its type on the way out.

use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use authz_core::{
    ActorId, ChannelId, ChannelVisibility, ConfigTier, RepoSlug, RunFacts, RunId, ScheduleName,
    ScopeKey, Surface,
};
use sha2::{Digest, Sha256};

use crate::error::StoreError;

pub use authz_core::Timestamp;

/// The wall clock. Only binaries and tests call this; the store takes time as an argument.
pub fn wall_clock() -> Timestamp {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Timestamp::from_micros(i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

pub use authz_core::{FiringSlot, RunStatus};

/// A stored status word read back; any other word is a corrupt row, named.
pub fn parse_status(s: &str) -> Result<RunStatus, StoreError> {
    RunStatus::from_name(s).ok_or_else(|| StoreError::corrupt("run status", s))
}

/// A manual firing asked for at `at`, with a fresh id of its own ([`new_id`]).
pub fn manual_slot(at: Timestamp) -> FiringSlot {
    FiringSlot::Manual { id: new_id(at), at }
}

/// A token, stored only as its SHA-256.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct TokenHash([u8; 32]);

impl TokenHash {
    pub fn of(token: &str) -> Self {
        TokenHash(Sha256::digest(token.as_bytes()).into())
    }

    pub fn to_hex(&self) -> String {
        hex(&self.0)
    }

    pub fn from_hex(s: &str) -> Result<Self, StoreError> {
        let bytes = unhex(s).ok_or_else(|| StoreError::corrupt("token hash", s))?;
        let arr: [u8; 32] = bytes
            .try_into()
            .map_err(|_| StoreError::corrupt("token hash", s))?;
        Ok(TokenHash(arr))
    }

    /// Constant-time comparison with a presented token.
    pub fn matches(&self, token: &str) -> bool {
        self.ct_eq(&TokenHash::of(token))
    }

    /// Constant-time comparison of two hashes (no early exit on the first differing byte).
    pub fn ct_eq(&self, other: &TokenHash) -> bool {
        self.0
            .iter()
            .zip(other.0.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }
}

impl fmt::Debug for TokenHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TokenHash(…)")
    }
}

/// The replica that owns a live run (its process); renews a heartbeat lease.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReplicaId(String);

impl ReplicaId {
    pub fn parse(s: &str) -> Result<Self, StoreError> {
        let ok = !s.is_empty()
            && s.len() <= 128
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if ok {
            Ok(ReplicaId(s.to_owned()))
        } else {
            Err(StoreError::Invalid(format!(
                "replica id {s:?}: use 1-128 letters, digits, '-', '_' or '.'"
            )))
        }
    }

    /// A fresh id for this process.
    pub fn random() -> Self {
        ReplicaId(format!(
            "replica-{}",
            new_id(wall_clock()).to_ascii_lowercase()
        ))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A new run, as the dispatcher records it.
#[derive(Debug, Clone)]
pub struct NewRun {
    pub surface: Surface,
    pub channel_id: ChannelId,
    pub thread_key: Option<String>,
    pub user_id: ActorId,
    pub agent: String,
    pub repo: Option<RepoSlug>,
    pub channel_visibility: ChannelVisibility,
    pub request: String,
    pub created_at: Timestamp,
    pub capability_token: Option<TokenHash>,
    pub agent_token: Option<TokenHash>,
    pub owner: Option<ReplicaId>,
    /// The run whose agent started this one (MCP `ask` with an agent token); `None` otherwise.
    pub parent_run: Option<RunId>,
}

#[cfg(feature = "testing")]
impl NewRun {
    /// A queued run for tests: `user`'s request in `channel`, stamped `visibility`, over HTTP
    /// with the `echo` agent, no repo, no tokens, no owner, no parent. Override with `..`.
    pub fn fixture(
        channel: ChannelId,
        user: ActorId,
        visibility: ChannelVisibility,
        created_at: Timestamp,
    ) -> NewRun {
        NewRun {
            surface: Surface::Http,
            request: format!("request in {channel}"),
            channel_id: channel,
            thread_key: None,
            user_id: user,
            agent: "echo".into(),
            repo: None,
            channel_visibility: visibility,
            created_at,
            capability_token: None,
            agent_token: None,
            owner: None,
            parent_run: None,
        }
    }
}

/// A run as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRecord {
    pub id: RunId,
    pub surface: Surface,
    pub channel_id: ChannelId,
    pub thread_key: Option<String>,
    pub user_id: ActorId,
    pub agent: String,
    pub repo: Option<RepoSlug>,
    pub status: RunStatus,
    pub channel_visibility: ChannelVisibility,
    pub request: String,
    pub answer: Option<String>,
    pub error: Option<String>,
    pub created_at: Timestamp,
    pub finished_at: Option<Timestamp>,
    pub capability_token: Option<TokenHash>,
    pub agent_token: Option<TokenHash>,
    pub owner: Option<String>,
    /// When someone asked for the run to stop (`runs stop` from any process); the owning
    /// process sees it and cancels the run.
    pub stop_requested_at: Option<Timestamp>,
    /// The run whose agent started this one; its channel and stamp are this run's.
    pub parent_run: Option<RunId>,
}

impl RunRecord {
    /// The facts the policy reads.
    pub fn facts(&self) -> RunFacts {
        RunFacts {
            id: self.id.clone(),
            channel_id: self.channel_id.clone(),
            user_id: self.user_id.clone(),
            repo: self.repo.clone(),
            channel_visibility: self.channel_visibility,
        }
    }

    pub fn cursor(&self) -> Cursor {
        Cursor {
            created_at: self.created_at,
            id: self.id.clone(),
        }
    }
}

/// How a run ends.
#[derive(Debug, Clone)]
pub struct Finish {
    pub status: RunStatus,
    pub answer: Option<String>,
    pub error: Option<String>,
    pub at: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunEvent {
    pub run_id: RunId,
    pub seq: i64,
    pub at: Timestamp,
    pub kind: String,
    pub body: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Friction {
    pub run_id: RunId,
    pub at: Timestamp,
    /// tool error, denial, retry, timeout, user correction, …
    pub kind: String,
    pub detail: String,
}

/// A friction entry joined to the run it belongs to (for `friction report`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrictionOfRun {
    pub friction: Friction,
    pub channel_id: ChannelId,
    pub agent: String,
}

/// Which runs a list wants by status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusFilter {
    /// queued or running
    Live,
    /// everything else
    Finished,
    All,
}

/// A page request. `visible_to` is the caller's compiled predicate; the store applies it in
/// its own query.
#[derive(Debug, Clone)]
pub struct ListRuns {
    pub visible_to: authz_core::Predicate,
    pub status: StatusFilter,
    pub limit: u32,
    pub before: Option<Cursor>,
}

/// A page, newest first, and the cursor of the next page when there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    pub runs: Vec<RunRecord>,
    pub next: Option<Cursor>,
}

/// A keyset position: the page continues strictly before `(created_at, id)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub created_at: Timestamp,
    pub id: RunId,
}

impl Cursor {
    /// The opaque text form handed to callers.
    pub fn encode(&self) -> String {
        hex(format!("{}.{}", self.created_at.micros(), self.id).as_bytes())
    }

    pub fn decode(s: &str) -> Result<Self, StoreError> {
        let bad = || StoreError::BadCursor;
        let bytes = unhex(s).ok_or_else(bad)?;
        let text = String::from_utf8(bytes).map_err(|_| bad())?;
        let (at, id) = text.split_once('.').ok_or_else(bad)?;
        Ok(Cursor {
            created_at: Timestamp::from_micros(at.parse().map_err(|_| bad())?),
            id: RunId::parse(id).map_err(|_| bad())?,
        })
    }
}

/// A memory record id (time-sortable, like run ids).
pub type MemoryId = RunId;

#[derive(Debug, Clone)]
pub struct NewMemory {
    pub scope: ScopeKey,
    pub text: String,
    pub supersedes: Option<MemoryId>,
    pub source_run: Option<RunId>,
    pub created_at: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryRecord {
    pub id: MemoryId,
    pub scope: ScopeKey,
    pub text: String,
    pub supersedes: Option<MemoryId>,
    pub source_run: Option<RunId>,
    pub created_at: Timestamp,
    pub forgotten_at: Option<Timestamp>,
}

/// One tiered config value. MCP server entries are a key family (`mcp.<name>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigValue {
    pub tier: ConfigTier,
    pub key: String,
    pub value: String,
    pub updated_by: ActorId,
    pub updated_at: Timestamp,
}

/// A `serve` process sharing the store, as it announced itself; alive while its heartbeat is
/// within the lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerInfo {
    pub replica: ReplicaId,
    pub version: String,
    pub started_at: Timestamp,
    pub heartbeat_at: Timestamp,
    /// The hash of the policy it runs, once it recorded one.
    pub policy_hash: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Firing {
    pub name: ScheduleName,
    pub slot: FiringSlot,
    pub fired_at: Timestamp,
    pub status: String,
    pub run_id: Option<RunId>,
    pub detail: Option<String>,
}

pub(crate) fn scope_parts(scope: &ScopeKey) -> (&'static str, String) {
    (scope.kind().as_str(), scope.key())
}

pub(crate) fn scope_from_parts(kind: &str, key: &str) -> Result<ScopeKey, StoreError> {
    let bad = || StoreError::corrupt("memory scope", &format!("{kind}/{key}"));
    let scope = match kind {
        "org" if key == "org" => ScopeKey::Org,
        "user" => ScopeKey::User(
            key.strip_prefix("user:")
                .and_then(|k| k.parse().ok())
                .ok_or_else(bad)?,
        ),
        "channel" => ScopeKey::Channel(
            key.strip_prefix("channel:")
                .and_then(|k| k.parse().ok())
                .ok_or_else(bad)?,
        ),
        "repo" => ScopeKey::Repo(
            key.strip_prefix("repo:")
                .and_then(|k| k.parse().ok())
                .ok_or_else(bad)?,
        ),
        _ => return Err(bad()),
    };
    Ok(scope)
}

pub(crate) fn tier_parts(tier: &ConfigTier) -> (&'static str, String) {
    match tier {
        ConfigTier::Org => ("org", String::new()),
        ConfigTier::Channel(c) => ("channel", c.to_string()),
        ConfigTier::User(u) => ("user", u.to_string()),
    }
}

pub(crate) fn tier_from_parts(tier: &str, id: &str) -> Result<ConfigTier, StoreError> {
    let bad = || StoreError::corrupt("config tier", &format!("{tier}/{id}"));
    Ok(match tier {
        "org" => ConfigTier::Org,
        "channel" => ConfigTier::Channel(id.parse().map_err(|_| bad())?),
        "user" => ConfigTier::User(id.parse().map_err(|_| bad())?),
        _ => return Err(bad()),
    })
}

const CROCKFORD: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// A new time-sortable id: 13 base32 digits of the time in microseconds, then 13 of
/// randomness (seeded per process by the OS through `RandomState`, mixed with a counter).
pub fn new_id(at: Timestamp) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_i64(at.micros());
    let random = h.finish();
    let mut out = String::with_capacity(26);
    for value in [at.micros().max(0) as u64, random] {
        for i in (0..13).rev() {
            let digit = if i == 12 {
                (value >> 60) & 0xf
            } else {
                (value >> (i * 5)) & 0x1f
            };
            // `digit` is below 32 by the mask; '0' stands in for the impossible.
            out.push(char::from(*CROCKFORD.get(digit as usize).unwrap_or(&b'0')));
        }
    }
    out
}

/// When an id [`new_id`] made was made; `None` for a string it could not have made.
pub fn id_time(id: &str) -> Option<Timestamp> {
    let digits = id.as_bytes().get(..13)?;
    let mut micros: u64 = 0;
    for (n, c) in digits.iter().enumerate() {
        let value = CROCKFORD.iter().position(|d| d == c)? as u64;
        if n == 0 {
            if value > 0xf {
                return None;
            }
            micros = value << 60;
        } else {
            micros |= value << (5 * (12 - n));
        }
    }
    Some(Timestamp::from_micros(i64::try_from(micros).ok()?))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || s.len() > 1024 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|p| u8::from_str_radix(p, 16).ok()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_sort_by_time() {
        let a = new_id(Timestamp::from_micros(1_000));
        let b = new_id(Timestamp::from_micros(1_001));
        let c = new_id(Timestamp::from_micros(1_001));
        assert_eq!(a.len(), 26);
        assert!(a < b && b != c);
        assert!(RunId::parse(&a).is_ok());
    }

    #[test]
    fn an_ids_time_reads_back() {
        for micros in [0, 1_000, 1_764_786_600_123_456, i64::MAX] {
            let at = Timestamp::from_micros(micros);
            assert_eq!(id_time(&new_id(at)), Some(at), "{micros}");
        }
        for bad in [
            "",
            "short",
            "zzzzzzzzzzzzzzzzzzzzzzzzzz",
            "GZZZZZZZZZZZZ0000000000000",
        ] {
            assert_eq!(id_time(bad), None, "{bad}");
        }
    }

    #[test]
    fn cursors_round_trip_and_refuse_garbage() {
        let c = Cursor {
            created_at: Timestamp::from_micros(42),
            id: RunId::parse("r1").unwrap(),
        };
        assert_eq!(Cursor::decode(&c.encode()).unwrap(), c);
        for bad in [
            "",
            "zz",
            "abc",
            "3432",
            &hex(b"42"),
            &hex(b"x.r1"),
            &hex(b"42.../x"),
            &"a".repeat(2000),
        ] {
            assert!(
                matches!(Cursor::decode(bad), Err(StoreError::BadCursor)),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn statuses_parse_and_refuse_unknown_words() {
        for s in RunStatus::ALL {
            assert_eq!(parse_status(s.as_str()).unwrap(), s);
        }
        let e = parse_status("paused").unwrap_err().to_string();
        assert!(e.contains("run status") && e.contains("paused"), "{e}");
    }

    #[test]
    fn token_hashes_compare_without_keeping_the_token() {
        let h = TokenHash::of("secret");
        assert!(h.matches("secret") && !h.matches("secreT"));
        assert_eq!(TokenHash::from_hex(&h.to_hex()).unwrap(), h);
        assert!(!format!("{h:?}").contains(&h.to_hex()));
        assert!(TokenHash::from_hex("00").is_err());
    }
}

/// Where a tool call's ask for a person stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalState {
    /// Waiting for its answer.
    Open,
    Approved,
    Denied,
    /// Timed out, or its run ended: it can no longer be answered.
    Closed,
}

impl ApprovalState {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalState::Open => "open",
            ApprovalState::Approved => "approved",
            ApprovalState::Denied => "denied",
            ApprovalState::Closed => "closed",
        }
    }

    pub fn parse(s: &str) -> Option<ApprovalState> {
        Some(match s {
            "open" => ApprovalState::Open,
            "approved" => ApprovalState::Approved,
            "denied" => ApprovalState::Denied,
            "closed" => ApprovalState::Closed,
            _ => return None,
        })
    }
}

/// A tool call of a run waiting for a person's answer (the broker's `ask` under `serve`),
/// kept where every replica can read and answer it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRecord {
    /// Unguessable; names the ask in its answer.
    pub id: String,
    pub run_id: RunId,
    /// The person whose answer counts (the run's principal), when the run has one.
    pub principal: Option<ActorId>,
    pub action: String,
    pub tool: String,
    /// As the model wrote them (agent text).
    pub arguments: String,
    pub state: ApprovalState,
    pub asked_at: Timestamp,
}

/// How long each kind of record is kept past its use (`[retention]`); `None` keeps them all.
/// Whatever the ages, an open approval and each schedule's latest firing (and latest timer
/// slot, which the scheduler reads at start) are never pruned, nor is a live run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retention {
    /// Surfaces' event ids seen (retries arrive within the hour).
    pub event_ids: Option<std::time::Duration>,
    /// Threads a surface's bot answered: pruning one ends follow-ups without a mention there.
    pub answered_threads: Option<std::time::Duration>,
    /// Answered or closed approvals.
    pub approvals: Option<std::time::Duration>,
    /// Schedule firings.
    pub firings: Option<std::time::Duration>,
    /// Finished runs, with their events, friction and approvals.
    pub runs: Option<std::time::Duration>,
    /// The most rows of each kind one pass deletes (of runs: the most runs).
    pub batch: u32,
}

impl Default for Retention {
    fn default() -> Self {
        let days = |d: u64| Some(std::time::Duration::from_secs(d * 24 * 3600));
        Retention {
            event_ids: days(7),
            answered_threads: days(90),
            approvals: days(30),
            firings: days(90),
            runs: None,
            batch: 500,
        }
    }
}

/// What one pass of pruning deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    pub event_ids: u64,
    pub answered_threads: u64,
    pub approvals: u64,
    pub firings: u64,
    pub runs: u64,
}

impl Pruned {
    pub fn total(&self) -> u64 {
        self.event_ids + self.answered_threads + self.approvals + self.firings + self.runs
    }

    /// Whether a kind filled its batch, so another pass has more to do.
    pub fn full(&self, batch: u32) -> bool {
        let b = u64::from(batch);
        [
            self.event_ids,
            self.answered_threads,
            self.approvals,
            self.firings,
            self.runs,
        ]
        .iter()
        .any(|n| *n >= b)
    }
}

/// The instant before which a record of `age` is past its retention (`None`: kept).
pub(crate) fn cutoff(now: Timestamp, age: Option<std::time::Duration>) -> Option<i64> {
    age.map(|a| {
        now.micros()
            .saturating_sub(i64::try_from(a.as_micros()).unwrap_or(i64::MAX))
    })
}

/// What keeping a run's changes left in its repo's repository, recorded once when the run
/// ends (by the server, never from anything the run wrote): the commit it started from, the
/// last commit kept, and the names of the changes not kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptChanges {
    pub run_id: RunId,
    pub repo: RepoSlug,
    /// The commit the run's workspace was made from.
    pub start: String,
    /// The last kept commit (its branch's tip when it was made); `None` when nothing was kept
    /// (and no branch was made).
    pub tip: Option<String>,
    /// Commits kept beyond `start`.
    pub commits: u64,
    /// The first names of the changes not kept, as the run wrote them (agent text).
    pub not_kept: Vec<String>,
    /// How many changes were not kept, listed or not.
    pub not_kept_count: u64,
    pub kept_at: Timestamp,
}
