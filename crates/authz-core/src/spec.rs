//! The resource spec: a one-line text form of a [`Resource`] for operators (`switchboard authz
//! explain --resource …`) and for tests.
//!
//! `<type>:<key>=<value>,<key>=<value>`, each pair split at its first `=`:
//! `run:id=r1,channel=slack:C1,user=slack:U2,visibility=public,repo=acme/web` (visibility
//! omitted = unstamped, read as `unknown`), `channel:id=slack:C1,visibility=private`,
//! `memory-scope:kind=org,key=org,origin=dm`, `repo:slug=acme/web`,
//! `config-scope:tier=channel,id=slack:C1` (`tier=user,id=…`, `tier=org`), `agent:name=coding`,
//! `command:id=runs.list`. Facts the config decides (whether a repo is restricted) come from the
//! grants table, never from the spec.

use std::collections::BTreeMap;

use crate::config::GrantsTable;
use crate::ids::{ActorId, AgentName, ChannelId, CommandId, IdError, RepoSlug, RunId};
use crate::resource::{ChannelVisibility, ConfigTier, Resource, RunFacts, ScopeKey};

/// Why a resource spec does not parse. Each names the part at fault and what is expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error(
        "no resource type: write <type>:<key>=<value>,…, where type is run, channel, memory-scope, repo, config-scope, agent or command"
    )]
    MissingType,
    #[error(
        "unknown resource type `{0}`; the types are run, channel, memory-scope, repo, config-scope, agent, command"
    )]
    UnknownType(String),
    #[error("`{0}` is not key=value")]
    NotAPair(String),
    #[error("`{key}` is not a key of {ty}; its keys are {expected}")]
    UnknownKey {
        ty: &'static str,
        key: String,
        expected: &'static str,
    },
    #[error("`{0}` is given twice")]
    DuplicateKey(String),
    #[error("{ty} needs `{key}`")]
    MissingKey { ty: &'static str, key: &'static str },
    #[error("{key}: {source}")]
    BadId { key: &'static str, source: IdError },
    #[error("{key}: `{value}` is not one of {expected}")]
    BadWord {
        key: &'static str,
        value: String,
        expected: &'static str,
    },
    #[error("config-scope tier=org takes no id")]
    OrgWithId,
}

const VISIBILITIES: &str = "public, private, dm, machine, unknown";

/// Parses a resource spec. `table` supplies the facts config decides.
pub fn parse_resource_spec(spec: &str, table: &GrantsTable) -> Result<Resource, SpecError> {
    let (ty, rest) = spec.split_once(':').ok_or(SpecError::MissingType)?;
    let (ty, expected): (&'static str, &'static str) = match ty {
        "run" => ("run", "id, channel, user, visibility, repo"),
        "channel" => ("channel", "id, visibility"),
        "memory-scope" => ("memory-scope", "kind, key, origin"),
        "repo" => ("repo", "slug"),
        "config-scope" => ("config-scope", "tier, id"),
        "agent" => ("agent", "name"),
        "command" => ("command", "id"),
        "" => return Err(SpecError::MissingType),
        other => return Err(SpecError::UnknownType(other.to_owned())),
    };
    let mut pairs = Pairs::parse(rest, ty, expected)?;
    match ty {
        "run" => Ok(Resource::Run(RunFacts {
            id: pairs.required("id", RunId::parse)?,
            channel_id: pairs.required("channel", ChannelId::parse)?,
            user_id: pairs.required("user", ActorId::parse)?,
            repo: pairs.optional("repo", RepoSlug::parse)?,
            channel_visibility: pairs.visibility("visibility")?,
        })),
        "channel" => Ok(Resource::Channel {
            id: pairs.required("id", ChannelId::parse)?,
            visibility: pairs.visibility("visibility")?,
        }),
        "memory-scope" => memory_scope(&mut pairs),
        "repo" => Ok(table.repo(pairs.required("slug", RepoSlug::parse)?)),
        "config-scope" => config_scope(&mut pairs),
        "agent" => Ok(Resource::Agent {
            name: pairs.required("name", AgentName::parse)?,
        }),
        _ => Ok(Resource::Command {
            id: pairs.required("id", CommandId::parse)?,
        }),
    }
}

fn memory_scope(pairs: &mut Pairs) -> Result<Resource, SpecError> {
    let kind = pairs.take("kind").ok_or(SpecError::MissingKey {
        ty: "memory-scope",
        key: "kind",
    })?;
    let key = pairs.take("key");
    let key_of = |prefix: &str| -> Result<String, SpecError> {
        let raw = key.clone().ok_or(SpecError::MissingKey {
            ty: "memory-scope",
            key: "key",
        })?;
        Ok(raw.strip_prefix(prefix).map(str::to_owned).unwrap_or(raw))
    };
    let bad_id = |source| SpecError::BadId { key: "key", source };
    let scope = match kind.as_str() {
        "org" => match key.as_deref() {
            None | Some("org") => ScopeKey::Org,
            Some(other) => {
                return Err(SpecError::BadWord {
                    key: "key",
                    value: other.to_owned(),
                    expected: "org (the org scope has one key)",
                });
            }
        },
        "user" => ScopeKey::User(ActorId::parse(&key_of("user:")?).map_err(bad_id)?),
        "channel" => ScopeKey::Channel(ChannelId::parse(&key_of("channel:")?).map_err(bad_id)?),
        "repo" => ScopeKey::Repo(RepoSlug::parse(&key_of("repo:")?).map_err(bad_id)?),
        other => {
            return Err(SpecError::BadWord {
                key: "kind",
                value: other.to_owned(),
                expected: "org, user, channel, repo",
            });
        }
    };
    Ok(Resource::MemoryScope {
        scope,
        origin_visibility: pairs.visibility("origin")?,
    })
}

fn config_scope(pairs: &mut Pairs) -> Result<Resource, SpecError> {
    let tier = pairs.take("tier").ok_or(SpecError::MissingKey {
        ty: "config-scope",
        key: "tier",
    })?;
    let tier = match tier.as_str() {
        "channel" => ConfigTier::Channel(pairs.required("id", ChannelId::parse)?),
        "user" => ConfigTier::User(pairs.required("id", ActorId::parse)?),
        "org" if pairs.take("id").is_some() => return Err(SpecError::OrgWithId),
        "org" => ConfigTier::Org,
        other => {
            return Err(SpecError::BadWord {
                key: "tier",
                value: other.to_owned(),
                expected: "channel, user, org",
            });
        }
    };
    Ok(Resource::ConfigScope(tier))
}

/// The `key=value` pairs of one spec, checked against the type's keys.
struct Pairs {
    ty: &'static str,
    values: BTreeMap<String, String>,
}

impl Pairs {
    fn parse(rest: &str, ty: &'static str, expected: &'static str) -> Result<Self, SpecError> {
        let mut values = BTreeMap::new();
        for pair in rest.split(',').filter(|p| !p.is_empty()) {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| SpecError::NotAPair(pair.to_owned()))?;
            if k.is_empty() {
                return Err(SpecError::NotAPair(pair.to_owned()));
            }
            if !expected.split(", ").any(|e| e == k) {
                return Err(SpecError::UnknownKey {
                    ty,
                    key: k.to_owned(),
                    expected,
                });
            }
            if values.insert(k.to_owned(), v.to_owned()).is_some() {
                return Err(SpecError::DuplicateKey(k.to_owned()));
            }
        }
        Ok(Pairs { ty, values })
    }

    fn take(&mut self, key: &str) -> Option<String> {
        self.values.remove(key)
    }

    fn required<T>(
        &mut self,
        key: &'static str,
        parse: impl Fn(&str) -> Result<T, IdError>,
    ) -> Result<T, SpecError> {
        let ty = self.ty;
        let v = self.take(key).ok_or(SpecError::MissingKey { ty, key })?;
        parse(&v).map_err(|source| SpecError::BadId { key, source })
    }

    fn optional<T>(
        &mut self,
        key: &'static str,
        parse: impl Fn(&str) -> Result<T, IdError>,
    ) -> Result<Option<T>, SpecError> {
        self.take(key)
            .map(|v| parse(&v).map_err(|source| SpecError::BadId { key, source }))
            .transpose()
    }

    /// A visibility word; omitted means unstamped, which reads as `unknown`.
    fn visibility(&mut self, key: &'static str) -> Result<ChannelVisibility, SpecError> {
        match self.take(key) {
            None => Ok(ChannelVisibility::Unknown),
            Some(v) => ChannelVisibility::parse(&v).ok_or(SpecError::BadWord {
                key,
                value: v,
                expected: VISIBILITIES,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::MemoryKind;

    fn parse(spec: &str) -> Result<Resource, SpecError> {
        let doc: toml::Table = toml::from_str("[restrict]\nrepos = [\"acme/payments\"]").unwrap();
        let table = GrantsTable::from_config(&doc, Default::default()).unwrap();
        parse_resource_spec(spec, &table)
    }

    #[test]
    fn every_type_parses() {
        let run = parse("run:id=r1,channel=slack:C1,user=slack:U2,visibility=public,repo=Acme/Web")
            .unwrap();
        let Resource::Run(r) = run else {
            panic!("not a run")
        };
        assert_eq!(r.channel_visibility, ChannelVisibility::Public);
        assert_eq!(r.repo.unwrap().as_str(), "acme/web");
        let Resource::Run(r) = parse("run:id=r1,channel=slack:C1,user=slack:U2").unwrap() else {
            panic!("not a run")
        };
        assert_eq!(
            r.channel_visibility,
            ChannelVisibility::Unknown,
            "unstamped reads unknown"
        );
        assert!(matches!(
            parse("channel:id=slack:C1,visibility=private").unwrap(),
            Resource::Channel {
                visibility: ChannelVisibility::Private,
                ..
            }
        ));
        for (spec, kind) in [
            ("memory-scope:kind=org,key=org,origin=dm", MemoryKind::Org),
            ("memory-scope:kind=user,key=user:slack:U1", MemoryKind::User),
            ("memory-scope:kind=user,key=slack:U1", MemoryKind::User),
            (
                "memory-scope:kind=channel,key=channel:slack:C1",
                MemoryKind::Channel,
            ),
            ("memory-scope:kind=repo,key=acme/web", MemoryKind::Repo),
        ] {
            assert_eq!(
                parse(spec).unwrap().kind(),
                Some(crate::ResourceKind::Memory(kind)),
                "{spec}"
            );
        }
        assert_eq!(
            parse("repo:slug=ACME/payments").unwrap(),
            Resource::Repo {
                slug: RepoSlug::parse("acme/payments").unwrap(),
                restricted: true
            },
            "restricted comes from config, case-insensitively"
        );
        assert!(matches!(
            parse("repo:slug=acme/web").unwrap(),
            Resource::Repo {
                restricted: false,
                ..
            }
        ));
        assert!(matches!(
            parse("config-scope:tier=org").unwrap(),
            Resource::ConfigScope(ConfigTier::Org)
        ));
        assert!(matches!(
            parse("config-scope:tier=user,id=slack:U1").unwrap(),
            Resource::ConfigScope(ConfigTier::User(_))
        ));
        assert!(matches!(
            parse("agent:name=coding").unwrap(),
            Resource::Agent { .. }
        ));
        assert!(matches!(
            parse("command:id=runs.list").unwrap(),
            Resource::Command { .. }
        ));
    }

    #[test]
    fn malformed_specs_are_refused_with_the_part_named() {
        let cases: &[(&str, &str)] = &[
            ("", "no resource type"),
            ("run", "no resource type"),
            (":id=x", "no resource type"),
            ("runs:id=r1", "unknown resource type `runs`"),
            ("run:id", "`id` is not key=value"),
            ("run:=x", "`=x` is not key=value"),
            (
                "run:id=r1,id=r2,channel=slack:C1,user=slack:U1",
                "`id` is given twice",
            ),
            ("run:id=r1,channel=slack:C1", "run needs `user`"),
            (
                "run:id=r1,channel=slack:C1,user=slack:U1,restricted=true",
                "`restricted` is not a key of run",
            ),
            ("run:id=../x,channel=slack:C1,user=slack:U1", "id: "),
            ("run:id=r1,channel=C1,user=slack:U1", "channel: "),
            (
                "run:id=r1,channel=slack:C1,user=slack:U1,visibility=Public",
                "`Public` is not one of",
            ),
            (
                "repo:slug=acme/web,restricted=false",
                "`restricted` is not a key of repo",
            ),
            ("repo:slug=acme", "slug: "),
            (
                "memory-scope:kind=team,key=x",
                "`team` is not one of org, user",
            ),
            ("memory-scope:kind=user", "memory-scope needs `key`"),
            (
                "memory-scope:kind=org,key=other",
                "`other` is not one of org",
            ),
            ("memory-scope:key=org", "memory-scope needs `kind`"),
            ("config-scope:tier=org,id=slack:C1", "tier=org takes no id"),
            ("config-scope:tier=channel", "config-scope needs `id`"),
            (
                "config-scope:tier=team",
                "`team` is not one of channel, user, org",
            ),
            ("agent:name=", "name: "),
            ("command:id=Runs.List", "id: "),
        ];
        for (spec, want) in cases {
            let got = parse(spec).expect_err(spec).to_string();
            assert!(got.contains(want), "{spec:?}: {got:?} lacks {want:?}");
        }
    }
}
