//! The in-memory store's replica leases: each replica's last heartbeat, and which replicas
//! announced themselves servers (with their version and start).

use std::collections::BTreeMap;

use crate::types::{ReplicaId, ServerInfo, Timestamp};

#[derive(Default)]
pub(super) struct Leases {
    heartbeats: BTreeMap<String, Timestamp>,
    servers: BTreeMap<String, (String, Timestamp)>,
    policies: BTreeMap<String, String>,
}

impl Leases {
    pub(super) fn heartbeat(&mut self, replica: &ReplicaId, now: Timestamp) {
        self.heartbeats.insert(replica.as_str().to_owned(), now);
    }

    pub(super) fn heartbeat_of(&self, replica: &str) -> Option<Timestamp> {
        self.heartbeats.get(replica).copied()
    }

    pub(super) fn announce(
        &mut self,
        replica: &ReplicaId,
        version: &str,
        started_at: Timestamp,
        now: Timestamp,
    ) {
        self.heartbeat(replica, now);
        self.servers.insert(
            replica.as_str().to_owned(),
            (version.to_owned(), started_at),
        );
    }

    pub(super) fn record_policy(&mut self, replica: &ReplicaId, hash: &str) {
        self.policies
            .insert(replica.as_str().to_owned(), hash.to_owned());
    }

    pub(super) fn retire(&mut self, replica: &ReplicaId) {
        self.servers.remove(replica.as_str());
    }

    /// The servers renewed at or after `since`, the latest started first.
    pub(super) fn servers(&self, since: Timestamp) -> Vec<ServerInfo> {
        let mut out: Vec<ServerInfo> = self
            .servers
            .iter()
            .filter_map(|(id, (version, started_at))| {
                let heartbeat_at = self.heartbeat_of(id).filter(|at| *at >= since)?;
                Some(ServerInfo {
                    replica: ReplicaId::parse(id).ok()?,
                    version: version.clone(),
                    started_at: *started_at,
                    heartbeat_at,
                    policy_hash: self.policies.get(id).cloned(),
                })
            })
            .collect();
        out.sort_by(|a, b| {
            b.started_at
                .cmp(&a.started_at)
                .then_with(|| a.replica.as_str().cmp(b.replica.as_str()))
        });
        out
    }
}
