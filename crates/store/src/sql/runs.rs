//! Runs and their events: start, finish, point reads, lists, stops and recovery.

use std::time::Duration;

use async_trait::async_trait;
use authz_core::{Predicate, RunId};

use super::dialect::{Dialect, RowAccess, Statement};
use super::statements::{ListRead, RUN_COLUMNS};
use super::{SqlStore, fresh_id, rows, statements};

use crate::error::{Result, StoreError};
use crate::merge::{self, assemble_page, check_limit};
use crate::plan::{self};
use crate::types::*;
use crate::{INTERRUPTED, RunStore};

/// After an update that matched no live run: why. Missing, already running (for a start:
/// fine), or already finished.
fn not_live(id: &RunId, existing: Option<&RunRecord>, running_is_ok: bool) -> Result<()> {
    match existing {
        None => Err(StoreError::NoSuchRun(id.clone())),
        Some(r) if running_is_ok && r.status == RunStatus::Running => Ok(()),
        Some(r) => Err(StoreError::AlreadyFinished {
            id: id.clone(),
            status: r.status,
        }),
    }
}

#[async_trait]
impl<D: Dialect> RunStore for SqlStore<D> {
    async fn create_run(&self, new: NewRun) -> Result<RunRecord> {
        let id = fresh_id(new.created_at)?;
        self.exec(
            Statement::new(
                "INSERT INTO runs (id, surface, channel_id, thread_key, user_id, agent, repo, status, request, created_at, capability_token_hash, agent_token_hash, owner, channel_visibility, parent_run) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?)",
            )
            .text(id.as_str())
            .text(new.surface.as_str())
            .text(new.channel_id.as_str())
            .opt_text(new.thread_key)
            .text(new.user_id.as_str())
            .text(new.agent)
            .opt_text(new.repo.as_ref().map(|r| r.as_str()))
            .text(new.request)
            .int(new.created_at.micros())
            .opt_text(new.capability_token.as_ref().map(TokenHash::to_hex))
            .opt_text(new.agent_token.as_ref().map(TokenHash::to_hex))
            .opt_text(new.owner.as_ref().map(ReplicaId::as_str))
            .text(new.channel_visibility.as_str())
            .opt_text(new.parent_run.as_ref().map(RunId::as_str)),
        )
        .await?;
        self.get_run(&id).await?.ok_or(StoreError::NoSuchRun(id))
    }

    async fn start_run(&self, id: &RunId) -> Result<()> {
        let done = self
            .exec(
                Statement::new(
                    "UPDATE runs SET status = 'running' WHERE id = ? AND status = 'queued'",
                )
                .text(id.as_str()),
            )
            .await?;
        if done == 1 {
            return Ok(());
        }
        not_live(id, self.get_run(id).await?.as_ref(), true)
    }

    async fn finish_run(&self, id: &RunId, f: Finish) -> Result<RunRecord> {
        if f.status.is_live() {
            return Err(StoreError::Invalid(format!(
                "{} is not a terminal status",
                f.status
            )));
        }
        let done = self
            .exec(
                Statement::new(
                    "UPDATE runs SET status = ?, answer = ?, error = ?, finished_at = ? WHERE id = ? AND status IN ('queued', 'running')",
                )
                .text(f.status.as_str())
                .opt_text(f.answer)
                .opt_text(f.error)
                .int(f.at.micros())
                .text(id.as_str()),
            )
            .await?;
        let run = self.get_run(id).await?;
        match (done, run) {
            (1, Some(run)) => Ok(run),
            (_, run) => {
                not_live(id, run.as_ref(), false).and(Err(StoreError::NoSuchRun(id.clone())))
            }
        }
    }

    async fn get_run(&self, id: &RunId) -> Result<Option<RunRecord>> {
        self.one(
            Statement::new(format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?"))
                .text(id.as_str()),
        )
        .await?
        .as_ref()
        .map(rows::run)
        .transpose()
    }

    async fn list_runs(&self, q: &ListRuns) -> Result<Page> {
        let limit = check_limit(q.limit)?;
        let plan = plan::plan(&q.visible_to, self.max_width)?;
        match statements::list_read::<D>(plan, q) {
            ListRead::Nothing => Ok(Page {
                runs: vec![],
                next: None,
            }),
            ListRead::One(st) => Ok(assemble_page(self.runs(st).await?, limit)),
            ListRead::Groups(groups) => {
                merge::page_of_groups(self, &groups, q.status, limit, q.before.as_ref()).await
            }
        }
    }

    async fn append_event(&self, id: &RunId, at: Timestamp, kind: &str, body: &str) -> Result<i64> {
        let (run, kind, body) = (id.as_str().to_owned(), kind.to_owned(), body.to_owned());
        let bump = Statement::new(
            "UPDATE runs SET event_seq = event_seq + 1 WHERE id = ? RETURNING event_seq",
        )
        .text(id.as_str());
        let insert = Box::new(move |seq: i64| {
            Statement::new(
                "INSERT INTO run_events (run_id, seq, at, kind, body) VALUES (?, ?, ?, ?, ?)",
            )
            .text(run)
            .int(seq)
            .int(at.micros())
            .text(kind)
            .text(body)
        });
        D::bump_then(&self.pool, bump, insert)
            .await?
            .ok_or_else(|| StoreError::NoSuchRun(id.clone()))
    }

    async fn events(&self, id: &RunId) -> Result<Vec<RunEvent>> {
        let st = Statement::new(
            "SELECT seq, at, kind, body FROM run_events WHERE run_id = ? ORDER BY seq",
        )
        .text(id.as_str());
        self.all(st)
            .await?
            .iter()
            .map(|r| rows::event(id, r))
            .collect()
    }

    async fn add_friction(&self, f: Friction) -> Result<()> {
        // One statement: the row is written only when its run exists.
        let done = self
            .exec(
                Statement::new(
                    "INSERT INTO friction (run_id, at, kind, detail) SELECT id, ?, ?, ? FROM runs WHERE id = ?",
                )
                .int(f.at.micros())
                .text(f.kind)
                .text(f.detail)
                .text(f.run_id.as_str()),
            )
            .await?;
        if done == 1 {
            Ok(())
        } else {
            Err(StoreError::NoSuchRun(f.run_id))
        }
    }

    async fn friction(&self, id: &RunId) -> Result<Vec<Friction>> {
        let st = Statement::new(
            "SELECT at, kind, detail FROM friction WHERE run_id = ? ORDER BY at, id",
        )
        .text(id.as_str());
        self.all(st)
            .await?
            .iter()
            .map(|r| rows::friction(id, r))
            .collect()
    }

    async fn friction_recent(
        &self,
        visible_to: &Predicate,
        since: Timestamp,
        limit: u32,
    ) -> Result<Vec<FrictionOfRun>> {
        let limit = check_limit(limit)?;
        let Some(filter) = statements::plan_filter::<D>(plan::plan(visible_to, self.max_width)?)
        else {
            return Ok(vec![]);
        };
        let st = statements::friction_recent(filter, since.micros(), limit as i64);
        self.all(st)
            .await?
            .iter()
            .map(rows::friction_of_run)
            .collect()
    }

    async fn count_runs_since(&self, visible_to: &Predicate, since: Timestamp) -> Result<u64> {
        let Some(filter) = statements::plan_filter::<D>(plan::plan(visible_to, self.max_width)?)
        else {
            return Ok(0);
        };
        let n = match self
            .one(statements::count_since(filter, since.micros()))
            .await?
        {
            Some(r) => r.int(0)?,
            None => 0,
        };
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn heartbeat(&self, replica: &ReplicaId, now: Timestamp) -> Result<()> {
        self.exec(
            Statement::new(
                "INSERT INTO replicas (id, heartbeat_at) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at",
            )
            .text(replica.as_str())
            .int(now.micros()),
        )
        .await?;
        Ok(())
    }

    async fn announce_server(
        &self,
        replica: &ReplicaId,
        version: &str,
        started_at: Timestamp,
        now: Timestamp,
    ) -> Result<()> {
        self.exec(
            Statement::new(
                "INSERT INTO replicas (id, heartbeat_at, server_version, started_at) VALUES (?, ?, ?, ?) \
                 ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, \
                 server_version = excluded.server_version, started_at = excluded.started_at",
            )
            .text(replica.as_str())
            .int(now.micros())
            .text(version)
            .int(started_at.micros()),
        )
        .await?;
        Ok(())
    }

    async fn record_policy(&self, replica: &ReplicaId, hash: &str) -> Result<()> {
        self.exec(
            Statement::new("UPDATE replicas SET policy_hash = ? WHERE id = ?")
                .text(hash)
                .text(replica.as_str()),
        )
        .await?;
        Ok(())
    }

    async fn retire_server(&self, replica: &ReplicaId) -> Result<()> {
        self.exec(
            Statement::new(
                "UPDATE replicas SET server_version = NULL, started_at = NULL WHERE id = ?",
            )
            .text(replica.as_str()),
        )
        .await?;
        Ok(())
    }

    async fn servers(&self, since: Timestamp) -> Result<Vec<ServerInfo>> {
        let rows = self
            .all(
                Statement::new(
                    "SELECT id, server_version, started_at, heartbeat_at, policy_hash FROM replicas \
                     WHERE server_version IS NOT NULL AND started_at IS NOT NULL AND heartbeat_at >= ? \
                     ORDER BY started_at DESC, id",
                )
                .int(since.micros()),
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok(ServerInfo {
                    replica: ReplicaId::parse(&r.text(0)?).map_err(|_| StoreError::Corrupt {
                        what: "replica id",
                        value: r.text(0).unwrap_or_default(),
                    })?,
                    version: r.text(1)?,
                    started_at: Timestamp::from_micros(r.int(2)?),
                    heartbeat_at: Timestamp::from_micros(r.int(3)?),
                    policy_hash: r.opt_text(4)?,
                })
            })
            .collect()
    }

    async fn tombstone_orphans(
        &self,
        replica: &ReplicaId,
        now: Timestamp,
        lease: Duration,
        own: bool,
    ) -> Result<Vec<RunId>> {
        let expired_before = now.saturating_sub(lease).micros();
        let st = Statement::new(
            "UPDATE runs SET status = 'interrupted', finished_at = ?, error = ? \
             WHERE status IN ('queued', 'running') AND ( \
               (? = 1 AND (owner IS NULL OR owner = ?)) \
               OR (owner IS NOT NULL AND owner <> ? AND NOT EXISTS (SELECT 1 FROM replicas p WHERE p.id = runs.owner AND p.heartbeat_at >= ?))) \
             RETURNING id",
        )
        .int(now.micros())
        .text(INTERRUPTED)
        .int(i64::from(own))
        .text(replica.as_str())
        .text(replica.as_str())
        .int(expired_before);
        let mut ids = Vec::new();
        for r in self.all(st).await? {
            ids.push(rows::run_id_of(&r)?);
        }
        Ok(ids)
    }

    async fn request_stop(&self, id: &RunId, at: Timestamp) -> Result<RunRecord> {
        let done = self
            .exec(
                Statement::new(
                    "UPDATE runs SET stop_requested_at = ? WHERE id = ? AND status IN ('queued', 'running') AND stop_requested_at IS NULL",
                )
                .int(at.micros())
                .text(id.as_str()),
            )
            .await?;
        let run = self.get_run(id).await?;
        match run {
            Some(run) if done == 1 || run.status.is_live() => Ok(run),
            run => not_live(id, run.as_ref(), false).and(Err(StoreError::NoSuchRun(id.clone()))),
        }
    }

    async fn stop_requests(&self, owner: &ReplicaId) -> Result<Vec<RunId>> {
        let st = Statement::new(format!(
            "SELECT x.id FROM {} WHERE x.status IN ('queued', 'running') AND x.owner = ? AND x.stop_requested_at IS NOT NULL",
            D::live_index()
        ))
        .text(owner.as_str());
        let mut ids = Vec::new();
        for r in self.all(st).await? {
            ids.push(rows::run_id_of(&r)?);
        }
        Ok(ids)
    }
}
