//! `SlackChannelDirectory`: channel visibility and real membership from the Slack API,
//! behind authz-core's [`ChannelDirectory`] seam.
//!
//! moka's own clock cannot be injected and its `try_get_with` does not cache an error, so
//! each entry is a `(value, fetched_at)` pair (a failure cached as `unknown` or as no
//! memberships), checked against the injected clock on every read; `or_insert_with_if`
//! makes concurrent first lookups (and concurrent refreshes) share one call.
//!
//! A lookup runs in a task of its own: a caller that stops waiting (its request's bound ran
//! out) never cancels it, and its answer, a failure included, is cached for the others. The
//! caches evict the least recently used entry, so a channel seen for the first time is always
//! admitted (moka's default admission policy may refuse a newcomer to a full cache).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use authz_core::{
    ActorId, BoxFuture, ChannelDirectory, ChannelId, ChannelVisibility, GroupFacts, GroupId,
    GroupKind, Membership, static_visibility,
};

use crate::api::SlackApi;

/// The most channels (and, separately, users) the directory remembers.
pub const CAPACITY: u64 = 1_000;

/// A monotonic clock: time since some fixed instant. Tests pass one they advance.
pub type Clock = Arc<dyn Fn() -> Duration + Send + Sync>;

/// The process's monotonic clock.
pub fn system_clock() -> Clock {
    let start = Instant::now();
    Arc::new(move || start.elapsed())
}

#[derive(Clone)]
struct Looked<T> {
    value: T,
    at: Duration,
}

/// Visibility from `conversations.info`, memberships from `users.conversations`, each
/// cached for the TTL.
#[derive(Clone)]
pub struct SlackChannelDirectory {
    api: SlackApi,
    ttl: Duration,
    clock: Clock,
    channels: moka::future::Cache<String, Looked<ChannelVisibility>>,
    members: moka::future::Cache<String, Looked<Arc<BTreeSet<ChannelId>>>>,
    /// A user group's members (`None`: the lookup failed, so nobody is known to be in it).
    user_groups: moka::future::Cache<String, Looked<Option<Arc<BTreeSet<String>>>>>,
}

impl SlackChannelDirectory {
    pub fn new(api: SlackApi, ttl: Duration, clock: Clock) -> Self {
        SlackChannelDirectory {
            api,
            ttl,
            clock,
            channels: moka::future::Cache::builder()
                .max_capacity(CAPACITY)
                .eviction_policy(moka::policy::EvictionPolicy::lru())
                .build(),
            members: moka::future::Cache::builder()
                .max_capacity(CAPACITY)
                .eviction_policy(moka::policy::EvictionPolicy::lru())
                .build(),
            user_groups: moka::future::Cache::builder()
                .max_capacity(CAPACITY)
                .eviction_policy(moka::policy::EvictionPolicy::lru())
                .build(),
        }
    }

    /// How many channels are cached now (after moka's pending evictions ran).
    pub fn cached_channels(&self) -> u64 {
        self.channels.entry_count()
    }

    /// Runs moka's pending maintenance (evictions), so a count is exact.
    pub async fn run_pending_tasks(&self) {
        self.channels.run_pending_tasks().await;
        self.members.run_pending_tasks().await;
        self.user_groups.run_pending_tasks().await;
    }

    /// The cached value for `key` while it is younger than the TTL on the injected clock,
    /// else `fetch`'s: one shared call for concurrent callers, run detached so that a caller
    /// giving up never cancels it, and cached whatever it answers (a failure is a value too).
    /// `lost` is the answer if the lookup's task itself is lost (a panic): never cached.
    async fn fresh<T: Clone + Send + Sync + 'static>(
        &self,
        cache: &moka::future::Cache<String, Looked<T>>,
        key: &str,
        fetch: impl std::future::Future<Output = T> + Send + 'static,
        lost: T,
    ) -> T {
        let now = (self.clock)();
        let ttl = self.ttl;
        let stale = move |old: &Looked<T>| now.saturating_sub(old.at) >= ttl;
        if let Some(hit) = cache.get(key).await
            && !stale(&hit)
        {
            return hit.value;
        }
        let (cache, key, clock) = (cache.clone(), key.to_owned(), self.clock.clone());
        let lookup = tokio::spawn(async move {
            // Stamped when the answer came: a long walk is fresh for a whole TTL after it.
            let looked = async {
                let value = fetch.await;
                Looked { value, at: clock() }
            };
            cache
                .entry(key)
                .or_insert_with_if(looked, stale)
                .await
                .into_value()
                .value
        });
        lookup.await.unwrap_or(lost)
    }

    /// A `C…`/`G…` channel's visibility: cached, else one shared `conversations.info`.
    async fn looked_up(&self, channel: &str) -> ChannelVisibility {
        let (api, id) = (self.api.clone(), channel.to_owned());
        let fetch = async move {
            api.visibility(&id).await.unwrap_or_else(|fault| {
                // Once per channel per window: the failure is cached for the TTL.
                tracing::warn!(channel = %id, error = %fault, "[slack] conversations.info failed; the channel is unknown until the next lookup");
                ChannelVisibility::Unknown
            })
        };
        self.fresh(&self.channels, channel, fetch, ChannelVisibility::Unknown)
            .await
    }

    /// A user's private channels shared with the bot: cached, else one shared walk.
    async fn walked(&self, user: &str) -> Arc<BTreeSet<ChannelId>> {
        let (api, id) = (self.api.clone(), user.to_owned());
        let fetch = async move {
            match api.private_channels_of(&id).await {
                Ok(ids) => Arc::new(
                    ids.into_iter()
                        .filter_map(|id| ChannelId::parse(&format!("slack:{id}")).ok())
                        .collect(),
                ),
                Err(fault) => {
                    tracing::warn!(user = %id, error = %fault, "[slack] users.conversations failed; no memberships until the next walk");
                    Arc::default()
                }
            }
        };
        self.fresh(&self.members, user, fetch, Arc::default()).await
    }
}

impl SlackChannelDirectory {
    /// A user group's members: cached, else one shared `usergroups.users.list`. `None` when
    /// the lookup failed (cached for the TTL like every failure: the group grants nothing).
    async fn group_members(&self, group: &str) -> Option<Arc<BTreeSet<String>>> {
        let (api, id) = (self.api.clone(), group.to_owned());
        let fetch = async move {
            match api.user_group_members(&id).await {
                Ok(users) => Some(Arc::new(users)),
                Err(fault) => {
                    tracing::warn!(user_group = %id, error = %fault, "[slack] usergroups.users.list failed; the group grants nobody anything until the next lookup (the bot needs the usergroups:read scope)");
                    None
                }
            }
        };
        self.fresh(&self.user_groups, group, fetch, None).await
    }
}

/// The Slack user of an actor id, if it is one.
fn slack_user(actor: &ActorId) -> Option<&str> {
    actor.as_str().strip_prefix("slack:")
}

impl ChannelDirectory for SlackChannelDirectory {
    fn info<'a>(&'a self, channel: &'a ChannelId) -> BoxFuture<'a, ChannelVisibility> {
        Box::pin(async move {
            match channel.as_str().strip_prefix("slack:") {
                Some(id) if id.starts_with('C') || id.starts_with('G') => self.looked_up(id).await,
                // `slack:D…` is a DM, anything else what its id alone says: no call.
                _ => static_visibility(channel),
            }
        })
    }

    fn is_member<'a>(
        &'a self,
        actor: &'a ActorId,
        channel: &'a ChannelId,
    ) -> BoxFuture<'a, Membership> {
        Box::pin(async move {
            match slack_user(actor) {
                Some(user) if self.walked(user).await.contains(channel) => Membership::Yes,
                _ => Membership::Unknown,
            }
        })
    }

    fn memberships<'a>(&'a self, actor: &'a ActorId) -> BoxFuture<'a, BTreeSet<ChannelId>> {
        Box::pin(async move {
            match slack_user(actor) {
                Some(user) => self.walked(user).await.as_ref().clone(),
                None => BTreeSet::new(),
            }
        })
    }

    fn groups<'a>(
        &'a self,
        actor: &'a ActorId,
        wanted: &'a [GroupId],
    ) -> BoxFuture<'a, GroupFacts> {
        Box::pin(async move {
            let mut facts = GroupFacts::default();
            let Some(user) = slack_user(actor) else {
                return facts;
            };
            // One after another: each is cached for the TTL, so a request seldom waits on one.
            for group in wanted.iter().filter(|g| g.kind() == GroupKind::Slack) {
                match self.group_members(group.name()).await {
                    Some(m) if m.contains(user) => {
                        facts.member_of.insert(group.clone());
                    }
                    Some(_) => {}
                    None => {
                        facts.unresolved.insert(group.clone());
                    }
                }
            }
            facts
        })
    }
}
