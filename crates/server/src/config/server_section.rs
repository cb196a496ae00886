//! `[server]`: the raw section (its address and replica id checked as they are read), its
//! typed config and its checks.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use serde::de::{self, Deserializer};
use store::ReplicaId;
use toml::Spanned;

use super::numbers::Positive;
use super::urls::base_url_fault;
use super::{LoadError, Text};

/// `host:port` with an IP.
#[derive(Debug, Clone, Copy)]
pub struct Listen(pub SocketAddr);

impl<'de> Deserialize<'de> for Listen {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map(Listen).map_err(|_| {
            de::Error::custom(format!(
                "{s:?} is not an address; use host:port with an IP, like \"127.0.0.1:8080\" or \"0.0.0.0:8080\""
            ))
        })
    }
}

/// A replica id: 1-128 letters, digits, `-`, `_` or `.`.
#[derive(Debug, Clone)]
pub struct Replica(pub ReplicaId);

impl<'de> Deserialize<'de> for Replica {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        ReplicaId::parse(&s).map(Replica).map_err(de::Error::custom)
    }
}

/// `[server]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSection {
    pub listen: Option<Listen>,
    pub replica_id: Option<Replica>,
    pub data_dir: Option<PathBuf>,
    pub shutdown_grace_seconds: Option<Positive>,
    pub heartbeat_seconds: Option<Positive>,
    pub lease_seconds: Option<Spanned<Positive>>,
    pub agent_token_secret_file: Option<PathBuf>,
    pub public_url: Option<Spanned<String>>,
    pub config_poll_ms: Option<u64>,
}

/// `[server]`.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    /// This process's name among replicas; default: the host name.
    pub replica_id: Option<ReplicaId>,
    /// Repo clones and agents' scratch space.
    pub data_dir: PathBuf,
    /// How long live runs may finish after a shutdown signal before they are interrupted.
    pub shutdown_grace: Duration,
    pub heartbeat: Duration,
    /// A replica whose heartbeat is older than this is dead; its live runs are tombstoned.
    pub lease: Duration,
    /// A file holding the agent-token secret (else `SWITCHBOARD_AGENT_TOKEN_SECRET`).
    pub agent_token_secret_file: Option<PathBuf>,
    /// Where people reach this server (`https://switchboard.example.com`): the base of the
    /// capability links handed to whoever starts a run. None: no links.
    pub public_url: Option<String>,
    /// How often `serve` looks whether its config file changed, to reload its policy;
    /// `None` (`config_poll_ms = 0`): on SIGHUP only.
    pub config_poll: Option<Duration>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            replica_id: None,
            data_dir: PathBuf::from("./switchboard-data"),
            shutdown_grace: Duration::from_secs(10),
            heartbeat: Duration::from_secs(10),
            lease: Duration::from_secs(30),
            agent_token_secret_file: None,
            public_url: None,
            config_poll: Some(Duration::from_millis(2000)),
        }
    }
}

pub(super) fn server(t: &Text<'_>, s: &ServerSection) -> Result<ServerConfig, LoadError> {
    let d = ServerConfig::default();
    let heartbeat = s.heartbeat_seconds.map_or(d.heartbeat, |n| n.seconds());
    let lease = match &s.lease_seconds {
        None => d.lease,
        Some(l) => {
            let lease = l.get_ref().seconds();
            if lease <= heartbeat {
                return Err(t.at(
                    l.span().start,
                    "must be longer than heartbeat_seconds (three heartbeats is a good lease)",
                ));
            }
            lease
        }
    };
    if lease <= heartbeat {
        return Err(t.key(
            &["server", "heartbeat_seconds"],
            "must be shorter than lease_seconds (30 by default)",
        ));
    }
    Ok(ServerConfig {
        listen: s.listen.map_or(d.listen, |l| l.0),
        replica_id: s.replica_id.clone().map(|r| r.0),
        data_dir: s.data_dir.clone().unwrap_or(d.data_dir),
        shutdown_grace: s
            .shutdown_grace_seconds
            .map_or(d.shutdown_grace, |n| n.seconds()),
        heartbeat,
        lease,
        agent_token_secret_file: s.agent_token_secret_file.clone(),
        config_poll: match s.config_poll_ms {
            None => d.config_poll,
            Some(0) => None,
            Some(ms) => Some(Duration::from_millis(ms)),
        },
        public_url: match &s.public_url {
            None => None,
            Some(url) => match base_url_fault(url.get_ref()) {
                None => Some(url.get_ref().trim_end_matches('/').to_owned()),
                Some(why) => {
                    return Err(t.at(
                        url.span().start,
                        format!("must be where people reach this server, an http(s) URL like \"https://switchboard.example.com\"; here {why}"),
                    ));
                }
            },
        },
    })
}
