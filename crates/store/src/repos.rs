//! The repos: a key family of the org config tier, `repo.<owner/name>` → where its workspace
//! comes from. This module is its one owner; `repo add|remove|list` and the dispatcher's
//! workspaces read and write it through here, and `config set` refuses its keys.

use authz_core::{ActorId, ConfigTier, RepoSlug};

use crate::ConfigStore;
use crate::error::Result;
use crate::types::{ConfigValue, Timestamp};

/// Every key of the family starts with this.
pub const KEY_PREFIX: &str = "repo.";

/// Where a repo's workspace comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RepoSource {
    /// A local checkout.
    Path(String),
    /// A git URL, cloned once into the data directory. May carry credentials: never shown.
    Url(String),
    /// Configured without a source (`repo add <slug>` alone); no workspace until one is set.
    Unset,
    /// A stored value in no known form.
    Unreadable,
}

impl RepoSource {
    fn encode(&self) -> String {
        match self {
            RepoSource::Path(p) => format!("path:{p}"),
            RepoSource::Url(u) => format!("url:{u}"),
            RepoSource::Unset | RepoSource::Unreadable => String::new(),
        }
    }

    fn decode(value: &str) -> Self {
        if let Some(p) = value.strip_prefix("path:") {
            RepoSource::Path(p.to_owned())
        } else if let Some(u) = value.strip_prefix("url:") {
            RepoSource::Url(u.to_owned())
        } else if value.is_empty() {
            RepoSource::Unset
        } else {
            RepoSource::Unreadable
        }
    }

    /// The source as it may be shown: a clone URL's credentials (`https://<token>@host/…`)
    /// never leave the store.
    pub fn shown(&self) -> String {
        match self {
            RepoSource::Path(p) => format!("path:{p}"),
            RepoSource::Url(u) => format!("url:{}", without_credentials(u)),
            RepoSource::Unset => String::new(),
            RepoSource::Unreadable => "(unreadable; set it again with `repo add`)".to_owned(),
        }
    }
}

fn without_credentials(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let authority = rest.get(..authority_end).unwrap_or(rest);
    match authority.rfind('@') {
        Some(at) => format!("{scheme}://…@{}", rest.get(at + 1..).unwrap_or_default()),
        None => url.to_owned(),
    }
}

fn key(slug: &RepoSlug) -> String {
    format!("{KEY_PREFIX}{slug}")
}

/// The repo's source, or `None` when it is not configured.
pub async fn source(store: &dyn ConfigStore, slug: &RepoSlug) -> Result<Option<RepoSource>> {
    Ok(store
        .get_config(&ConfigTier::Org, &key(slug))
        .await?
        .map(|v| RepoSource::decode(&v.value)))
}

/// Configures a repo (replacing its source).
pub async fn set(
    store: &dyn ConfigStore,
    slug: &RepoSlug,
    source: &RepoSource,
    by: &ActorId,
    at: Timestamp,
) -> Result<()> {
    store
        .set_config(ConfigValue {
            tier: ConfigTier::Org,
            key: key(slug),
            value: source.encode(),
            updated_by: by.clone(),
            updated_at: at,
        })
        .await
}

/// Removes a repo; false when it was not configured.
pub async fn remove(store: &dyn ConfigStore, slug: &RepoSlug) -> Result<bool> {
    store.delete_config(&ConfigTier::Org, &key(slug)).await
}

/// Every configured repo with its source, by slug. A key whose slug no longer parses is left
/// out (it cannot be used, and `repo remove` cannot name it either).
pub async fn all(store: &dyn ConfigStore) -> Result<Vec<(RepoSlug, RepoSource)>> {
    Ok(store
        .list_config(&ConfigTier::Org, KEY_PREFIX)
        .await?
        .into_iter()
        .filter_map(|v| {
            let slug = RepoSlug::parse(v.key.strip_prefix(KEY_PREFIX)?).ok()?;
            Some((slug, RepoSource::decode(&v.value)))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_round_trip_and_urls_lose_their_credentials_when_shown() {
        for s in [
            RepoSource::Path("/srv/web".into()),
            RepoSource::Url("https://github.com/a/b".into()),
            RepoSource::Unset,
        ] {
            assert_eq!(RepoSource::decode(&s.encode()), s);
        }
        assert_eq!(RepoSource::decode("ftp:x"), RepoSource::Unreadable);
        let shown = |u: &str| RepoSource::Url(u.into()).shown();
        assert_eq!(
            shown("https://x-access-token:ghs_secret@github.com/acme/web.git"),
            "url:https://…@github.com/acme/web.git"
        );
        assert_eq!(
            shown("https://ghp_token@github.com/a/b"),
            "url:https://…@github.com/a/b"
        );
        assert_eq!(
            shown("https://github.com/a/b@v1"),
            "url:https://github.com/a/b@v1"
        );
        assert_eq!(RepoSource::Path("/srv/web".into()).shown(), "path:/srv/web");
    }
}
