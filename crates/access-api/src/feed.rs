//! The live feed: Server-Sent Events from `LiveFeed::subscribe(viewer)`.
//!
//! - `/runs/stream` (or `/runs?stream=1`): every live run the viewer may read. It opens with a
//!   `sync` event (the viewer's live runs from the store, read after subscribing, so no run
//!   that ends meanwhile stays on the page), then `upsert`, `finished` and `lagged` events.
//! - `/runs/<id>/stream`: one run, for a viewer who may read it or its capability token:
//!   `upsert`, `event` (the run's events as they are recorded) and `finished`.
//!
//! The subscription filters before anything reaches this module: a run the viewer may not
//! read never becomes a byte here. A feed sends a keep-alive comment when idle, and ends on
//! shutdown and at the viewer's `exp` (a capability feed at the run's end).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use authz_core::RunId;
use axum::extract::{Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use commands::{LiveStream, LiveUpdate, ReplyKind};
use futures_util::stream::{self, Stream};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::pages::{ask, param};
use crate::{AccessApi, html, is_live};

/// The index page's script: keeps the table of live runs current from the feed.
pub const INDEX_SCRIPT: &str = r#"(function () {
  const body = document.getElementById('runs');
  const empty = document.getElementById('empty');
  function cell(text, cls) { const td = document.createElement('td'); td.textContent = text; if (cls) td.className = cls; return td; }
  function when(us) { return new Date(Math.floor(us / 1000)).toISOString().replace(/\.\d{3}Z$/, 'Z'); }
  function row(r) {
    const tr = document.createElement('tr'); tr.id = 'run-' + r.id;
    const id = cell('', 'id'); const a = document.createElement('a');
    a.href = '/runs/' + encodeURIComponent(r.id); a.textContent = r.id; id.appendChild(a);
    tr.append(id, cell(r.status, 'status-' + r.status), cell(r.agent), cell(r.channel), cell(r.surface), cell(when(r.created_at)));
    return tr;
  }
  function settle() { empty.hidden = body.children.length > 0; }
  const feed = new EventSource('/runs/stream');
  feed.addEventListener('sync', function (e) { body.replaceChildren.apply(body, JSON.parse(e.data).map(row)); settle(); });
  feed.addEventListener('upsert', function (e) {
    const r = JSON.parse(e.data); const old = document.getElementById('run-' + r.id);
    if (old) { old.replaceWith(row(r)); } else { body.prepend(row(r)); } settle();
  });
  feed.addEventListener('finished', function (e) {
    const old = document.getElementById('run-' + JSON.parse(e.data).id); if (old) old.remove(); settle();
  });
  feed.addEventListener('lagged', function () { location.reload(); });
})();"#;

/// A run page's script: appends the run's events and reloads when it ends.
pub const RUN_SCRIPT: &str = r#"(function () {
  const main = document.getElementById('run');
  const events = document.getElementById('events');
  const feed = new EventSource(main.dataset.stream);
  feed.addEventListener('event', function (e) {
    const ev = JSON.parse(e.data); const li = document.createElement('li');
    const kind = document.createElement('span'); kind.className = 'muted'; kind.textContent = ev.kind;
    li.append(kind, ' ' + ev.body); events.appendChild(li);
  });
  feed.addEventListener('upsert', function (e) {
    const s = document.getElementById('run-status'); if (s) s.textContent = JSON.parse(e.data).status;
  });
  feed.addEventListener('finished', function () { feed.close(); location.reload(); });
  feed.addEventListener('lagged', function () { location.reload(); });
})();"#;

/// What one feed carries.
struct Feed {
    updates: Box<dyn LiveStream>,
    /// A run's own feed (its events too, and it ends with the run); else the index.
    one_run: bool,
    /// The first event, sent before any update.
    opening: Option<Event>,
    /// When the feed ends: the viewer's `exp`.
    until: Option<tokio::time::Instant>,
    /// A run's feed: its run, whose status is read from the store at each tick.
    recheck: Option<Recheck>,
    /// The index's feed: the policy its filter was compiled under, looked at each tick.
    policy: Option<PolicyTick>,
    shutdown: CancellationToken,
    /// Its run has ended: nothing more to send.
    ended: bool,
}

fn run_json(run: &commands::LiveRun) -> Value {
    json!({
        "id": run.facts.id.as_str(),
        "status": run.status.as_str(),
        "agent": run.agent,
        "channel": run.facts.channel_id.as_str(),
        "surface": run.surface.as_str(),
        "created_at": run.created_at.micros(),
    })
}

/// Who opened a run's feed, and so who each recheck reads the run's status as.
enum Reader {
    /// A viewer: each read is the registry's `runs.get`, decided and audited as any.
    Viewer(commands::Caller),
    /// The run's capability link: its own run only.
    Capability(commands::identity::Capability),
}

/// A run's status, read again at each tick of `every`, as the one who opened the feed.
struct Recheck {
    api: Arc<AccessApi>,
    run: RunId,
    reader: Reader,
    every: tokio::time::Interval,
}

impl Recheck {
    fn new(api: &Arc<AccessApi>, run: RunId, reader: Reader) -> Recheck {
        let mut every =
            tokio::time::interval_at(tokio::time::Instant::now() + api.recheck, api.recheck);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Recheck {
            api: api.clone(),
            run,
            reader,
            every,
        }
    }

    /// What a read of the run's status says now, as the one who opened the feed.
    async fn read(&self) -> Reread {
        match &self.reader {
            Reader::Viewer(caller) => {
                // As the policy in force resolves the viewer now: a revocation reaches here.
                let caller = commands::identity::resolved_again(&self.api.services, caller);
                let run = ask(
                    &self.api,
                    &caller,
                    "runs.get",
                    json!({"id": self.run.as_str()}),
                )
                .await;
                match run.kind {
                    ReplyKind::Ok => run
                        .data
                        .get("status")
                        .and_then(Value::as_str)
                        .and_then(commands::RunStatus::from_name)
                        .map_or(Reread::Fault, Reread::Status),
                    ReplyKind::NotFound | ReplyKind::Unauthorized => Reread::Unreadable,
                    _ => Reread::Fault,
                }
            }
            Reader::Capability(capability) => {
                match self.api.services.run_status(capability).await {
                    Ok(Some(status)) => Reread::Status(status),
                    Ok(None) => Reread::Unreadable,
                    Err(_) => Reread::Fault,
                }
            }
        }
    }

    /// Waits for the next tick at which the run has ended (`Some`, with its status) or is no
    /// longer the reader's to read (`None`: gone, or denied; the feed then ends, carrying
    /// nothing more). A fault keeps the feed open until the next tick: it widens nothing,
    /// and the feed's `exp` and the shutdown still end it.
    async fn ended(&mut self) -> Option<commands::RunStatus> {
        loop {
            self.every.tick().await;
            match self.read().await {
                Reread::Status(status) if !status.is_live() => return Some(status),
                Reread::Unreadable => return None,
                Reread::Status(_) | Reread::Fault => {}
            }
        }
    }
}

/// The index feed's filter is the viewer's `runs:read` under the policy it opened with: at
/// the first tick after a reload the feed ends, and the page's `EventSource` opens it again
/// under the policy in force (with a fresh `sync`).
struct PolicyTick {
    policy: Arc<commands::LivePolicy>,
    opened_under: u64,
    every: tokio::time::Interval,
}

impl PolicyTick {
    fn new(api: &AccessApi) -> PolicyTick {
        let mut every =
            tokio::time::interval_at(tokio::time::Instant::now() + api.recheck, api.recheck);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        PolicyTick {
            policy: api.services.policy.clone(),
            opened_under: api.services.policy.generation(),
            every,
        }
    }

    /// Waits for the first tick at which a reload has happened.
    async fn reloaded(&mut self) {
        loop {
            self.every.tick().await;
            if self.policy.generation() != self.opened_under {
                return;
            }
        }
    }
}

/// One recheck's answer.
enum Reread {
    Status(commands::RunStatus),
    /// Gone, or no longer the reader's to read.
    Unreadable,
    /// The read failed; nothing is concluded from it.
    Fault,
}

/// The SSE event of an update, or `None` for one this feed does not carry.
fn event_of(update: &LiveUpdate, one_run: bool) -> Option<Event> {
    let (name, data) = named(update, one_run)?;
    Some(Event::default().event(name).data(data.to_string()))
}

/// The SSE event's name and data for an update.
fn named(update: &LiveUpdate, one_run: bool) -> Option<(&'static str, Value)> {
    Some(match update {
        LiveUpdate::Upsert(run) => ("upsert", run_json(run)),
        LiveUpdate::Finished { run, status, .. } => (
            "finished",
            json!({"id": run.id.as_str(), "status": status.as_str()}),
        ),
        LiveUpdate::Event {
            run,
            seq,
            kind,
            body,
        } if one_run => (
            "event",
            json!({"run": run.id.as_str(), "seq": seq, "kind": kind, "body": body}),
        ),
        LiveUpdate::Event { .. } => return None,
        LiveUpdate::Lagged(n) => ("lagged", json!({"missed": n})),
    })
}

async fn next(mut feed: Feed) -> Option<(Result<Event, Infallible>, Feed)> {
    if let Some(first) = feed.opening.take() {
        return Some((Ok(first), feed));
    }
    if feed.ended {
        return None;
    }
    loop {
        let deadline = async {
            match feed.until {
                Some(t) => tokio::time::sleep_until(t).await,
                None => std::future::pending().await,
            }
        };
        let rechecked = async {
            match feed.recheck.as_mut() {
                Some(r) => r.ended().await,
                None => std::future::pending().await,
            }
        };
        let reloaded = async {
            match feed.policy.as_mut() {
                Some(p) => p.reloaded().await,
                None => std::future::pending().await,
            }
        };
        let update = tokio::select! {
            u = feed.updates.recv() => u?,
            () = feed.shutdown.cancelled() => return None,
            () = deadline => return None,
            // The page opens the feed again, under the policy in force.
            () = reloaded => return None,
            ended = rechecked => {
                // No longer the reader's to read: the feed ends, carrying nothing more.
                let status = ended?;
                // The run ended and its notification never came (lost between replicas).
                feed.ended = true;
                let id = feed.recheck.as_ref().map(|r| r.run.as_str().to_owned());
                let data = json!({"id": id, "status": status.as_str()});
                return Some((Ok(Event::default().event("finished").data(data.to_string())), feed));
            }
        };
        if let Some(event) = event_of(&update, feed.one_run) {
            if feed.one_run && matches!(update, LiveUpdate::Finished { .. }) {
                // A run's feed ends with its run.
                feed.ended = true;
            }
            return Some((Ok(event), feed));
        }
    }
}

fn respond(api: &AccessApi, feed: Feed) -> Response {
    let events: std::pin::Pin<Box<dyn Stream<Item = Result<Event, Infallible>> + Send>> =
        Box::pin(stream::unfold(feed, next));
    let mut r = Sse::new(events)
        .keep_alive(KeepAlive::new().interval(api.keep_alive))
        .into_response();
    html::secure(&mut r, None);
    r
}

/// When a feed for a token with `remaining` life ends; none for a life past what a clock can
/// hold (an `exp` of 2^64 − 1 is a token valid for ever: the feed ends at shutdown).
fn until(remaining: Duration) -> Option<tokio::time::Instant> {
    tokio::time::Instant::now().checked_add(remaining)
}

/// `GET /runs/stream`.
pub async fn index_stream(State(api): State<Arc<AccessApi>>, headers: HeaderMap) -> Response {
    // Before the viewer is resolved: a reload from here on ends this feed at its next tick.
    let policy = PolicyTick::new(&api);
    let (caller, viewer) = match api.caller(&headers).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    // Subscribed before the store is read: a run that ends in between is in both, and the
    // page applies its `finished` after the `sync`.
    let updates = api.services.live.subscribe(&caller.actor);
    let live = ask(
        &api,
        &caller,
        "runs.list",
        json!({"status": "live", "limit": crate::pages::PAGE.to_string()}),
    )
    .await;
    let runs: Vec<Value> = match live.kind {
        ReplyKind::Ok => live
            .data
            .get("runs")
            .and_then(Value::as_array)
            .map(|runs| runs.iter().map(index_row).collect())
            .unwrap_or_default(),
        _ => vec![],
    };
    let opening = Event::default()
        .event("sync")
        .data(Value::Array(runs).to_string());
    respond(
        &api,
        Feed {
            updates,
            one_run: false,
            opening: Some(opening),
            until: until(viewer.remaining()),
            recheck: None,
            policy: Some(policy),
            shutdown: api.shutdown.clone(),
            ended: false,
        },
    )
}

/// A `runs list` row as the feed's `upsert` carries a run.
fn index_row(run: &Value) -> Value {
    let pick = |k: &str| run.get(k).cloned().unwrap_or(Value::Null);
    json!({
        "id": pick("id"), "status": pick("status"), "agent": pick("agent"),
        "channel": pick("channel"), "surface": pick("surface"), "created_at": pick("created_at"),
    })
}

/// `GET /runs/<id>/stream`.
pub async fn run_stream(
    State(api): State<Arc<AccessApi>>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let Ok(run_id) = RunId::parse(&id) else {
        return html::not_found();
    };
    // Subscribed before the run is read, so an end in between is seen one way or the other;
    // dropped unread when the run may not be opened.
    let updates = api.services.live.subscribe_run(&run_id);
    let (until_at, live, reader) = match param(query.as_deref(), "token") {
        Some(token) => {
            let Some(cap) =
                commands::identity::Capability::open(&api.services, &run_id, &token).await
            else {
                tracing::warn!(
                    reason = "capability-refused",
                    "[access] a capability token did not open its run's feed"
                );
                return html::not_found();
            };
            let live = cap.is_live();
            (None, live, Reader::Capability(cap))
        }
        None => {
            let (caller, viewer) = match api.caller(&headers).await {
                Ok(c) => c,
                Err(r) => return r,
            };
            // The registry decides whether the viewer may read the run.
            let run = ask(&api, &caller, "runs.get", json!({"id": id})).await;
            if run.kind != ReplyKind::Ok {
                return html::not_found();
            }
            let live = is_live(&run.data);
            (until(viewer.remaining()), live, Reader::Viewer(caller))
        }
    };
    // A run that has already ended says so at once, and the page reloads.
    let ended = !live;
    let opening = ended.then(|| {
        Event::default()
            .event("finished")
            .data(json!({"id": run_id.as_str()}).to_string())
    });
    respond(
        &api,
        Feed {
            updates,
            one_run: true,
            opening,
            until: until_at,
            recheck: Some(Recheck::new(&api, run_id, reader)),
            policy: None,
            shutdown: api.shutdown.clone(),
            ended,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use authz_core::{ActorId, ChannelId, ChannelVisibility, RunFacts, Surface};
    use commands::{LiveRun, RunStatus, Timestamp};

    fn facts(id: &str) -> RunFacts {
        RunFacts {
            id: RunId::parse(id).unwrap(),
            channel_id: ChannelId::parse("http:ci").unwrap(),
            user_id: ActorId::parse("http:ci").unwrap(),
            repo: None,
            channel_visibility: ChannelVisibility::Machine,
        }
    }

    #[test]
    fn a_run_feed_carries_its_events_and_the_index_none() {
        let a = "01JABCDEFGHJKMNPQRSTVWXYZ0";
        let event = |id: &str| LiveUpdate::Event {
            run: facts(id),
            seq: 1,
            kind: "log".into(),
            body: "hello".into(),
        };
        assert_eq!(
            named(&event(a), true),
            Some((
                "event",
                json!({"run": a, "seq": 1, "kind": "log", "body": "hello"})
            ))
        );
        assert_eq!(named(&event(a), false), None);
        let upsert = LiveUpdate::Upsert(LiveRun {
            facts: facts(a),
            agent: "echo".into(),
            surface: Surface::Http,
            status: RunStatus::Running,
            created_at: Timestamp::from_micros(1),
        });
        let row = json!({"id": a, "status": "running", "agent": "echo", "channel": "http:ci",
            "surface": "http", "created_at": 1});
        assert_eq!(named(&upsert, false), Some(("upsert", row.clone())));
        assert_eq!(named(&upsert, true), Some(("upsert", row)));
        assert_eq!(
            named(&LiveUpdate::Lagged(2), true),
            Some(("lagged", json!({"missed": 2})))
        );
    }

    #[test]
    fn a_life_past_what_the_clock_holds_has_no_deadline() {
        assert_eq!(until(Duration::from_secs(u64::MAX)), None);
        assert!(until(Duration::from_secs(60)).is_some());
    }
}
