//! `[store]`: the raw section (its URL checked as it is read) and its check into the store
//! crate's `StoreSpec`.

use serde::Deserialize;
use serde::de::{self, Deserializer};
use store::{StoreSpec, StoreUrl};
use toml::Spanned;

use super::numbers::Positive;
use super::{DEFAULT_STORE_URL, LoadError, Text};

/// A store URL, checked where it is read (`store::StoreUrl`, the one place URLs are checked).
#[derive(Debug, Clone)]
pub struct Url(pub StoreUrl);

impl<'de> Deserialize<'de> for Url {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        StoreUrl::parse(&s).map(Url).map_err(|_| {
            de::Error::custom(
                if s.starts_with("postgres://") || s.starts_with("postgresql://") {
                    "is not a URL the Postgres driver reads (a host, a port from 1 to 65535, known options); write it like postgres://user@host:5432/db"
                } else {
                    "must be sqlite://path/to/switchboard.db, postgres://user@host/db or memory:"
                },
            )
        })
    }
}

/// `[store]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreSection {
    pub url: Option<Url>,
    /// Postgres only: a schema of Switchboard's own (created if missing).
    pub schema: Option<Spanned<String>>,
    pub max_connections: Option<Positive>,
}

pub(super) fn store_spec(t: &Text<'_>, s: &StoreSection) -> Result<StoreSpec, LoadError> {
    let url = match &s.url {
        Some(u) => u.0.clone(),
        None => StoreUrl::parse(DEFAULT_STORE_URL).map_err(|e| t.nowhere(e))?,
    };
    if let (Some(schema), false) = (&s.schema, matches!(url, StoreUrl::Postgres(_))) {
        return Err(t.at(
            schema.span().start,
            "only a postgres:// store has schemas; remove it, or use a postgres URL",
        ));
    }
    if let Some(schema) = &s.schema {
        store::check_schema(schema.get_ref()).map_err(|e| t.at(schema.span().start, e))?;
    }
    Ok(StoreSpec {
        url,
        schema: s.schema.as_ref().map(|v| v.get_ref().clone()),
        max_connections: s
            .max_connections
            .map(|n| u32::try_from(n.0).unwrap_or(u32::MAX)),
    })
}
