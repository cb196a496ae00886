//! Live-run updates across replicas: this replica's upserts and ends go out over the store's
//! fan-out (Postgres `NOTIFY`), and other replicas' come back into this replica's broadcast,
//! where every subscription filters them per viewer exactly as local ones.
//!
//! A payload carries the run's facts, status and agent, never its request, answer or events
//! (they can be long, and `NOTIFY` holds under 8,000 bytes): a page that sees a run end
//! reads the rest from the store. A payload that does not parse is dropped with a warning;
//! nothing unparsed ever reaches a viewer.

use std::sync::Arc;
use std::time::Duration;

use agents::CancellationToken;
use authz_core::{ActorId, ChannelId, ChannelVisibility, RepoSlug, RunFacts, RunId, Surface};
use commands::{LiveRun, LiveUpdate};
use serde::{Deserialize, Serialize};
use store::{LiveFanout, ReplicaId, RunStatus, Timestamp};
use tokio::sync::mpsc;

use crate::live::LiveRuns;

/// How many outgoing updates may wait for the database before new ones are dropped.
pub(crate) const OUTBOX: usize = 4_096;
/// How long the listener waits before listening again after losing its connection.
const RELISTEN: Duration = Duration::from_secs(1);

/// One update on the wire.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Wire {
    /// The replica that sent it (its own listener skips it).
    from: String,
    /// `upsert` or `finished`.
    kind: String,
    id: String,
    channel: String,
    user: String,
    repo: Option<String>,
    visibility: String,
    status: String,
    agent: String,
    surface: String,
    created_at: i64,
}

/// The wire form of a local update; `None` for what does not cross replicas (events, lags).
fn encode(from: &ReplicaId, update: &LiveUpdate) -> Option<String> {
    let (kind, facts, status, agent, surface, created_at) = match update {
        LiveUpdate::Upsert(run) => (
            "upsert",
            &run.facts,
            run.status,
            run.agent.as_str(),
            run.surface.as_str(),
            run.created_at.micros(),
        ),
        LiveUpdate::Finished { run, status, .. } => ("finished", run, *status, "", "", 0),
        LiveUpdate::Event { .. } | LiveUpdate::Lagged(_) => return None,
    };
    serde_json::to_string(&Wire {
        from: from.as_str().to_owned(),
        kind: kind.to_owned(),
        id: facts.id.as_str().to_owned(),
        channel: facts.channel_id.as_str().to_owned(),
        user: facts.user_id.as_str().to_owned(),
        repo: facts.repo.as_ref().map(|r| r.as_str().to_owned()),
        visibility: facts.channel_visibility.as_str().to_owned(),
        status: status.as_str().to_owned(),
        agent: agent.to_owned(),
        surface: surface.to_owned(),
        created_at,
    })
    .ok()
}

/// Why a payload was dropped (for the log).
#[derive(Debug, PartialEq, Eq)]
enum Dropped {
    Own,
    Malformed(&'static str),
}

/// A payload from another replica as an update; its own and malformed ones are dropped.
fn decode(me: &ReplicaId, payload: &str) -> Result<LiveUpdate, Dropped> {
    let w: Wire = serde_json::from_str(payload).map_err(|_| Dropped::Malformed("json"))?;
    if w.from == me.as_str() {
        return Err(Dropped::Own);
    }
    let facts = RunFacts {
        id: RunId::parse(&w.id).map_err(|_| Dropped::Malformed("id"))?,
        channel_id: ChannelId::parse(&w.channel).map_err(|_| Dropped::Malformed("channel"))?,
        user_id: ActorId::parse(&w.user).map_err(|_| Dropped::Malformed("user"))?,
        repo: w
            .repo
            .as_deref()
            .map(RepoSlug::parse)
            .transpose()
            .map_err(|_| Dropped::Malformed("repo"))?,
        channel_visibility: ChannelVisibility::parse(&w.visibility)
            .ok_or(Dropped::Malformed("visibility"))?,
    };
    let status = RunStatus::from_name(&w.status).ok_or(Dropped::Malformed("status"))?;
    match w.kind.as_str() {
        "upsert" => Ok(LiveUpdate::Upsert(LiveRun {
            facts,
            agent: w.agent,
            surface: Surface::parse(&w.surface).ok_or(Dropped::Malformed("surface"))?,
            status,
            created_at: Timestamp::from_micros(w.created_at),
        })),
        "finished" => Ok(LiveUpdate::Finished {
            run: facts,
            status,
            answer: None,
            error: None,
        }),
        _ => Err(Dropped::Malformed("kind")),
    }
}

/// Starts the two fan-out tasks until `stop`: the sender of this replica's updates and the
/// listener for the others'.
pub(crate) fn spawn(
    live: Arc<LiveRuns>,
    fanout: Arc<dyn LiveFanout>,
    replica: ReplicaId,
    stop: CancellationToken,
) -> Vec<tokio::task::JoinHandle<()>> {
    let (tx, rx) = mpsc::channel(OUTBOX);
    live.set_outbox(tx);
    vec![
        tokio::spawn(send(rx, fanout.clone(), replica.clone(), stop.clone())),
        tokio::spawn(listen(live, fanout, replica, stop)),
    ]
}

async fn send(
    mut rx: mpsc::Receiver<LiveUpdate>,
    fanout: Arc<dyn LiveFanout>,
    replica: ReplicaId,
    stop: CancellationToken,
) {
    loop {
        let update = tokio::select! {
            u = rx.recv() => match u { Some(u) => u, None => return },
            () = stop.cancelled() => return,
        };
        let Some(payload) = encode(&replica, &update) else {
            continue;
        };
        if let Err(e) = fanout.notify(&payload).await {
            tracing::warn!(error = %e.token(), "a live-run update did not reach the other replicas");
        }
    }
}

async fn listen(
    live: Arc<LiveRuns>,
    fanout: Arc<dyn LiveFanout>,
    replica: ReplicaId,
    stop: CancellationToken,
) {
    while !stop.is_cancelled() {
        let mut listener = match fanout.listen().await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e.token(), "listening for other replicas' live runs failed; trying again");
                tokio::select! {
                    () = tokio::time::sleep(RELISTEN) => continue,
                    () = stop.cancelled() => return,
                }
            }
        };
        loop {
            let payload = tokio::select! {
                p = listener.next() => p,
                () = stop.cancelled() => return,
            };
            match payload {
                Ok(p) => match decode(&replica, &p) {
                    Ok(update) => live.publish(update),
                    Err(Dropped::Own) => {}
                    Err(Dropped::Malformed(field)) => {
                        tracing::warn!(
                            field,
                            "dropped a live-run update from another replica that does not parse"
                        );
                    }
                },
                Err(e) => {
                    tracing::warn!(error = %e.token(), "lost the connection listening for other replicas' live runs; listening again");
                    break;
                }
            }
        }
    }
}

/// How often a process that shares a store without a fan-out (SQLite) reads the other
/// processes' live runs: a run `switchboard ask` starts reaches a served page within this.
pub const STORE_WATCH: Duration = Duration::from_millis(500);

/// The most live runs one read of the store takes in.
const WATCH_PAGE: u32 = 100;

/// Until `stop`: every `every`, the store's live runs that other processes own (another
/// `serve`, `switchboard ask`) come into this process's broadcast as upserts, and those that
/// left the live set as their end, read from the store. For a store with no fan-out of its
/// own (SQLite): what `NOTIFY` carries between Postgres replicas, read instead.
pub(crate) async fn watch_store(
    live: Arc<LiveRuns>,
    store: Arc<dyn store::Store>,
    replica: ReplicaId,
    every: Duration,
    stop: CancellationToken,
) {
    let mut known: std::collections::BTreeMap<RunId, RunStatus> = Default::default();
    let mut since = store::wall_clock();
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = stop.cancelled() => return,
        }
        let now = store::wall_clock();
        let (Some(live_runs), Some(finished)) = (
            others(store.as_ref(), &replica, store::StatusFilter::Live).await,
            others(store.as_ref(), &replica, store::StatusFilter::Finished).await,
        ) else {
            continue;
        };
        let now_live: std::collections::BTreeSet<RunId> =
            live_runs.iter().map(|r| r.id.clone()).collect();
        for run in live_runs {
            if known.get(&run.id) != Some(&run.status) {
                known.insert(run.id.clone(), run.status);
                live.publish(upsert(&run));
            }
        }
        // What ended since the last read: those seen live, and those that began and ended
        // between two reads (an upsert first, so a page shows them at all).
        for run in finished {
            let ended_now = run.finished_at.is_some_and(|at| at > since && at <= now);
            let was_live = known.remove(&run.id).is_some();
            if ended_now && !was_live {
                live.publish(upsert(&run));
            }
            if ended_now || was_live {
                live.publish(LiveUpdate::Finished {
                    run: run.facts(),
                    status: run.status,
                    answer: run.answer.clone(),
                    error: run.error.clone(),
                });
            }
        }
        // Seen live, gone from the live set and from the newest finished runs: ended long
        // enough ago to be off that page, read one by one.
        let gone: Vec<RunId> = known
            .keys()
            .filter(|id| !now_live.contains(*id))
            .cloned()
            .collect();
        for id in gone {
            if let Ok(Some(run)) = store.get_run(&id).await
                && !run.status.is_live()
            {
                known.remove(&id);
                live.publish(LiveUpdate::Finished {
                    run: run.facts(),
                    status: run.status,
                    answer: run.answer.clone(),
                    error: run.error.clone(),
                });
            }
        }
        since = now;
    }
}

/// The newest runs of `status` other processes own; `None` (said on the log) when the store
/// could not be read.
async fn others(
    store: &dyn store::Store,
    me: &ReplicaId,
    status: store::StatusFilter,
) -> Option<Vec<store::RunRecord>> {
    let page = store
        .list_runs(&store::ListRuns {
            visible_to: authz_core::Predicate::All,
            status,
            limit: WATCH_PAGE,
            before: None,
        })
        .await;
    match page {
        Ok(page) => Some(
            page.runs
                .into_iter()
                .filter(|r| r.owner.as_deref() != Some(me.as_str()))
                .collect(),
        ),
        Err(e) => {
            tracing::warn!(error = %e.token(), "reading other processes' runs failed; trying again");
            None
        }
    }
}

fn upsert(run: &store::RunRecord) -> LiveUpdate {
    LiveUpdate::Upsert(LiveRun {
        facts: run.facts(),
        agent: run.agent.clone(),
        surface: run.surface,
        status: run.status,
        created_at: run.created_at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(visibility: ChannelVisibility) -> RunFacts {
        RunFacts {
            id: RunId::parse("01JABCDEFGHJKMNPQRSTVWXYZ0").unwrap(),
            channel_id: ChannelId::parse("slack:G123").unwrap(),
            user_id: ActorId::parse("slack:U1").unwrap(),
            repo: Some(RepoSlug::parse("acme/web").unwrap()),
            channel_visibility: visibility,
        }
    }

    #[test]
    fn updates_cross_replicas_and_come_back_as_they_left() {
        let a = ReplicaId::parse("a").unwrap();
        let b = ReplicaId::parse("b").unwrap();
        let upsert = LiveUpdate::Upsert(LiveRun {
            facts: facts(ChannelVisibility::Private),
            agent: "echo".into(),
            surface: Surface::Http,
            status: RunStatus::Running,
            created_at: Timestamp::from_micros(42),
        });
        let payload = encode(&a, &upsert).unwrap();
        assert_eq!(decode(&b, &payload).unwrap(), upsert);
        assert_eq!(decode(&a, &payload).unwrap_err(), Dropped::Own);
        let finished = LiveUpdate::Finished {
            run: facts(ChannelVisibility::Public),
            status: RunStatus::Completed,
            answer: Some("long answer stays home".into()),
            error: None,
        };
        let payload = encode(&a, &finished).unwrap();
        assert!(!payload.contains("long answer"));
        assert!(matches!(
            decode(&b, &payload).unwrap(),
            LiveUpdate::Finished {
                answer: None,
                status: RunStatus::Completed,
                ..
            }
        ));
        assert!(encode(&a, &LiveUpdate::Lagged(3)).is_none());
    }

    #[test]
    fn malformed_payloads_are_dropped_never_widened() {
        let b = ReplicaId::parse("b").unwrap();
        let good = encode(
            &ReplicaId::parse("a").unwrap(),
            &LiveUpdate::Upsert(LiveRun {
                facts: facts(ChannelVisibility::Private),
                agent: "echo".into(),
                surface: Surface::Http,
                status: RunStatus::Running,
                created_at: Timestamp::from_micros(1),
            }),
        )
        .unwrap();
        for (payload, field) in [
            ("", "json"),
            ("{}", "json"),
            (
                &good.replace("\"private\"", "\"secretish\"")[..],
                "visibility",
            ),
            (&good.replace("slack:U1", "nobody")[..], "user"),
            (&good.replace("\"running\"", "\"sprinting\"")[..], "status"),
            (&good.replace("\"upsert\"", "\"delete\"")[..], "kind"),
            (&good.replace("\"http\"", "\"fax\"")[..], "surface"),
            (&good.replace("slack:G123", "G123")[..], "channel"),
        ] {
            assert_eq!(
                decode(&b, payload).unwrap_err(),
                Dropped::Malformed(field),
                "{payload}"
            );
        }
    }
}
