//! The Slack surface over real HTTP on loopback: the app built by the one composition root,
//! served by `server::serve` (which connects the surface with `auth.test`), slack-morphism's
//! client pointed at a fake Slack Web API through `[slack] api_url`, and event bodies signed
//! in the test with Slack's scheme.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use authz_core::{ChannelVisibility, Predicate, Surface};
use serde_json::{Value, json};
use slack::{SlackApi, SlackChannelDirectory};
use store::{ListRuns, RunRecord, RunStatus, StatusFilter, Store};
use test_support::slack::{
    Conversation, FakeSlack, callback, click, interaction_form, signed_headers,
};

const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const TTL: u64 = 600;

/// The test config; `slack_keys` go into `[slack]`.
fn config(api_url: &str, db: &str, data: &str, slack_keys: &str) -> String {
    format!(
        r#"
[agents]
default = "echo"
max_per_actor = 50
max_concurrent = 50
[agents.echo]

[server]
data_dir = {data:?}
public_url = "https://sb.example.com/"

[store]
url = "sqlite://{db}"

[slack]
api_url = "{api_url}"
directory_ttl_seconds = {TTL}
{slack_keys}

# runs:read is not in the Slack baseline; granted here.
[grants."slack:*"]
actions = ["runs:read"]
"#
    )
}

struct Harness {
    base: String,
    fake: FakeSlack,
    store: Arc<dyn Store>,
    client: reqwest::Client,
    summary: String,
    /// The directory's clock, in seconds; tests advance it past the TTL.
    clock: Arc<AtomicU64>,
    _serving: Serving,
    _dir: tempfile::TempDir,
}

struct Serving {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Serving {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

async fn start_with(fake: FakeSlack, env: &[(&str, &str)], slack_keys: &str) -> Harness {
    let api_url = fake.serve().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let text = config(
        &api_url,
        &dir.path().join("sb.db").display().to_string(),
        &dir.path().join("data").display().to_string(),
        slack_keys,
    );
    let config = server::config::parse(server::Source::File("slack.toml".into()), &text).unwrap();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let secrets = server::Secrets::from_lookup(&config, |k| {
        env.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone())
    })
    .unwrap();
    // The real Slack directory against the fake, on a clock the test advances.
    let clock = Arc::new(AtomicU64::new(0));
    let c = clock.clone();
    let directory = SlackChannelDirectory::new(
        SlackApi::new(&api_url, "xoxb-test").unwrap(),
        Duration::from_secs(TTL),
        Arc::new(move || Duration::from_secs(c.load(Ordering::SeqCst))),
    );
    let overrides = server::Overrides {
        directory: Some(Arc::new(directory)),
        ..server::Overrides::default()
    };
    let replica = store::ReplicaId::parse("slack-test").unwrap();
    let app = server::App::build_with(config, secrets, replica, overrides)
        .await
        .unwrap();
    let store = app.store.clone();
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(server::serve(
        app,
        Some("127.0.0.1:0".parse().unwrap()),
        async move {
            let _ = stop_rx.await;
        },
        move |addr, app| {
            let _ = tx.send((addr, server::summary(app, addr).to_string()));
        },
    ));
    let (addr, summary) = rx.await.unwrap();
    Harness {
        base: format!("http://{addr}"),
        fake,
        store,
        client: reqwest::Client::new(),
        summary,
        clock,
        _serving: Serving { stop: Some(stop) },
        _dir: dir,
    }
}

const SLACK_ENV: [(&str, &str); 2] = [
    ("SLACK_BOT_TOKEN", "xoxb-test"),
    ("SLACK_SIGNING_SECRET", SECRET),
];

async fn start() -> Harness {
    start_with(FakeSlack::new(), &SLACK_ENV, "").await
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn mention(user: &str, channel: &str, ts: &str, text: &str) -> Value {
    json!({"type": "app_mention", "user": user, "channel": channel, "ts": ts,
        "text": format!("<@UBOT> {text}")})
}

fn dm(user: &str, channel: &str, ts: &str, text: &str) -> Value {
    json!({"type": "message", "channel_type": "im", "user": user, "channel": channel,
        "ts": ts, "text": text})
}

impl Harness {
    /// Posts `body` with the given headers; the status and the body.
    async fn post_raw(&self, body: Vec<u8>, headers: &[(String, String)]) -> (u16, String) {
        let mut req = self
            .client
            .post(format!("{}/slack/events", self.base))
            .header("content-type", "application/json")
            .body(body);
        for (k, v) in headers {
            req = req.header(k, v);
        }
        let r = req.send().await.unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }

    /// Posts an Interactivity body with the given headers; the status.
    async fn interact_raw(&self, body: Vec<u8>, headers: &[(String, String)]) -> u16 {
        let mut req = self
            .client
            .post(format!("{}/slack/interactions", self.base))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body);
        for (k, v) in headers {
            req = req.header(k, v);
        }
        req.send().await.unwrap().status().as_u16()
    }

    /// Posts a click `payload`, form-encoded and signed now, as Slack does.
    async fn interact(&self, payload: &Value) -> u16 {
        let body = interaction_form(payload);
        let headers = signed_headers(SECRET, now(), &body);
        self.interact_raw(body, &headers).await
    }

    /// Posts `body`, signed now.
    async fn post(&self, body: Vec<u8>) -> (u16, String) {
        let headers = signed_headers(SECRET, now(), &body);
        self.post_raw(body, &headers).await
    }

    async fn event(&self, id: &str, event: Value) -> u16 {
        self.post(callback(id, event)).await.0
    }

    async fn runs(&self) -> Vec<RunRecord> {
        self.store
            .list_runs(&ListRuns {
                visible_to: Predicate::All,
                status: StatusFilter::All,
                limit: 100,
                before: None,
            })
            .await
            .unwrap()
            .runs
    }

    /// Waits until `n` runs exist and all have finished.
    async fn finished_runs(&self, n: usize) -> Vec<RunRecord> {
        for _ in 0..300 {
            let runs = self.runs().await;
            if runs.len() >= n && runs.iter().all(|r| !r.status.is_live()) {
                return runs;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("{n} finished runs never appeared: {:?}", self.runs().await);
    }

    /// The texts the bot posted or updated into `channel`'s thread `ts`, in order.
    fn thread(&self, channel: &str, ts: &str) -> Vec<String> {
        self.fake
            .calls()
            .into_iter()
            .filter(|c| matches!(c.method.as_str(), "chat.postMessage" | "chat.update"))
            .filter(|c| c.param("channel") == Some(channel))
            .filter(|c| c.param("thread_ts") == Some(ts) || self.updates_in(c, ts))
            .map(|c| c.param("text").unwrap_or_default().to_owned())
            .collect()
    }

    /// Whether `call` is a `chat.update` of a message the bot posted into thread `ts`.
    fn updates_in(&self, call: &test_support::slack::Call, ts: &str) -> bool {
        call.method == "chat.update"
            && self.fake.calls_of("chat.postMessage").iter().any(|p| {
                p.param("thread_ts") == Some(ts) && p.param("posted_ts") == call.param("ts")
            })
    }

    /// A command from `user` in `channel`; the reply's text as `user` reads it: outside a
    /// DM, the messages only they see (the thread says only that they were sent).
    async fn command(&self, id: &str, user: &str, channel: &str, ts: &str, text: &str) -> String {
        assert_eq!(self.event(id, mention(user, channel, ts, text)).await, 200);
        for _ in 0..500 {
            if let Some(reply) = self.thread(channel, ts).into_iter().next() {
                if channel.starts_with('D') {
                    return reply;
                }
                assert_eq!(reply, slack::PRIVATE_REPLY_NOTE);
                return self.private_to(user, channel, ts).concat();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("no reply in thread {ts}");
    }

    /// The ephemeral messages posted to `user` in `channel`'s thread `ts`, in order.
    fn private_to(&self, user: &str, channel: &str, ts: &str) -> Vec<String> {
        self.fake
            .calls_of("chat.postEphemeral")
            .into_iter()
            .filter(|c| c.param("user") == Some(user) && c.param("channel") == Some(channel))
            .filter(|c| c.param("thread_ts") == Some(ts))
            .map(|c| c.param("text").unwrap_or_default().to_owned())
            .collect()
    }
}

#[tokio::test]
async fn a_mention_starts_one_run_and_its_reply_lands_in_the_thread() {
    let h = start().await;
    assert!(
        h.summary.contains(
            "events at POST /slack/events, clicks at POST /slack/interactions, as bot user UBOT"
        ),
        "{}",
        h.summary
    );
    let status = h
        .event(
            "Ev1",
            mention(
                "U1",
                "C1",
                "1700000001.000100",
                "summarise the <!channel> plan",
            ),
        )
        .await;
    assert_eq!(status, 200);
    let runs = h.finished_runs(1).await;
    let run = &runs[0];
    assert_eq!(run.surface, Surface::Slack);
    assert_eq!(run.user_id.as_str(), "slack:U1");
    assert_eq!(run.channel_id.as_str(), "slack:C1");
    assert_eq!(run.thread_key.as_deref(), Some("1700000001.000100"));
    assert_eq!(run.request, "summarise the <!channel> plan");
    assert_eq!(run.channel_visibility, ChannelVisibility::Public);
    assert_eq!(run.status, RunStatus::Completed);
    // One "working" message in the thread, updated with the outcome.
    let updates = h.fake.wait_for("chat.update", 1, 10).await;
    let posts = h.fake.calls_of("chat.postMessage");
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert_eq!(posts[0].param("thread_ts"), Some("1700000001.000100"));
    assert!(posts[0].param("text").unwrap().contains(run.id.as_str()));
    assert_eq!(updates[0].param("ts"), Some("1700000000.000001"));
    let answer = updates[0].param("text").unwrap();
    assert!(
        answer.contains("request: summarise the &lt;!channel&gt; plan"),
        "{answer}"
    );
    assert!(!answer.contains("<!channel>"));
    // The capability link goes to the asker alone, never into the channel.
    let ephemeral = h.fake.calls_of("chat.postEphemeral");
    assert_eq!(ephemeral.len(), 1);
    assert_eq!(ephemeral[0].param("user"), Some("U1"));
    let link = ephemeral[0].param("text").unwrap();
    assert!(
        link.contains(&format!("https://sb.example.com/runs/{}?token=", run.id)),
        "{link}"
    );
    for c in h.fake.calls_of("chat.postMessage").iter().chain(&updates) {
        assert!(!c.param("text").unwrap().contains("token="));
    }
}

/// A mention names the repo its run works in with `in <owner/name>:` at its start.
#[tokio::test]
async fn a_mention_names_its_repo_in_its_text() {
    let h = start().await;
    let repo = tempfile::tempdir().unwrap();
    agents::testing::init_repository(repo.path()).unwrap();
    store::repos::set(
        h.store.as_ref(),
        &"acme/web".parse().unwrap(),
        &store::repos::RepoSource::Path(repo.path().display().to_string()),
        &authz_core::ActorId::cli_local(),
        store::Timestamp::now(),
    )
    .await
    .unwrap();
    let status = h
        .event(
            "EvRepo",
            mention(
                "U1",
                "C1",
                "1700000009.000100",
                "<@UBOT> in acme/web: tidy the docs",
            ),
        )
        .await;
    assert_eq!(status, 200);
    let runs = h.finished_runs(1).await;
    assert_eq!(runs[0].repo.as_ref().map(|r| r.as_str()), Some("acme/web"));
    assert_eq!(runs[0].request, "tidy the docs");
}

#[tokio::test]
async fn a_retried_event_id_starts_nothing() {
    let h = start().await;
    let body = callback("EvRetry", mention("U1", "C1", "1.1", "once"));
    assert_eq!(h.post(body.clone()).await.0, 200);
    // Slack's retry: the same body, re-signed, with X-Slack-Retry-Num.
    let mut headers = signed_headers(SECRET, now(), &body).to_vec();
    headers.push(("x-slack-retry-num".into(), "1".into()));
    headers.push(("x-slack-retry-reason".into(), "http_timeout".into()));
    assert_eq!(h.post_raw(body.clone(), &headers).await.0, 200);
    // And once more without the header: the id alone decides.
    assert_eq!(h.post(body).await.0, 200);
    h.finished_runs(1).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(h.runs().await.len(), 1);
}

#[tokio::test]
async fn bad_signatures_are_401_and_write_nothing() {
    let h = start().await;
    let body = callback("EvSig", mention("U1", "C1", "1.1", "hello"));
    let stale = signed_headers(SECRET, now() - 6 * 60, &body);
    let wrong = signed_headers("not-the-secret", now(), &body);
    // A replay: a body signed earlier, sent under a new timestamp with its old signature.
    let earlier = signed_headers(SECRET, now() - 60, &body);
    let replayed = [
        ("x-slack-request-timestamp".to_owned(), now().to_string()),
        earlier[1].clone(),
    ];
    for headers in [&stale[..], &wrong[..], &replayed[..]] {
        let (status, text) = h.post_raw(body.clone(), headers).await;
        assert_eq!(status, 401, "{headers:?}");
        assert_eq!(text, "");
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(h.runs().await.is_empty());
    assert!(h.fake.calls_of("chat.postMessage").is_empty());
    // No event id was spent: the good delivery of the same id still starts its run.
    assert_eq!(h.post(body).await.0, 200);
    h.finished_runs(1).await;
}

#[tokio::test]
async fn bots_edits_and_the_bots_own_messages_are_ignored() {
    let h = start().await;
    for (i, event) in [
        json!({"type": "message", "channel_type": "im", "subtype": "bot_message", "bot_id": "B9", "channel": "D1", "ts": "1.1", "text": "hi"}),
        json!({"type": "message", "channel_type": "im", "bot_id": "B1", "user": "UBOT", "channel": "D1", "ts": "1.2", "text": "working"}),
        json!({"type": "message", "channel_type": "im", "user": "UBOT", "channel": "D1", "ts": "1.3", "text": "no bot_id"}),
        json!({"type": "message", "channel_type": "im", "subtype": "message_changed", "channel": "D1", "ts": "1.4", "message": {"text": "edited"}}),
        json!({"type": "message", "channel_type": "im", "subtype": "message_deleted", "channel": "D1", "ts": "1.5"}),
        json!({"type": "message", "channel_type": "channel", "subtype": "channel_join", "user": "U1", "channel": "C1", "ts": "1.6", "thread_ts": "1.6"}),
        json!({"type": "app_mention", "user": "U7", "bot_id": "B7", "channel": "C1", "ts": "1.7", "text": "<@UBOT> loop with me"}),
    ]
    .into_iter()
    .enumerate()
    {
        assert_eq!(h.event(&format!("EvIgnored{i}"), event).await, 200);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(h.runs().await.is_empty());
    assert!(h.fake.calls_of("chat.postMessage").is_empty());
}

#[tokio::test]
async fn conversations_info_is_asked_once_per_channel_per_ttl() {
    let h = start().await;
    h.fake.set_conversation("G7", Conversation::Private);
    for i in 0..4 {
        h.event(
            &format!("EvC1-{i}"),
            mention("U1", "C1", &format!("2.{i}"), "hi"),
        )
        .await;
        h.event(
            &format!("EvG7-{i}"),
            mention("U1", "G7", &format!("3.{i}"), "hi"),
        )
        .await;
    }
    let runs = h.finished_runs(8).await;
    let asked = |c: &str| {
        h.fake
            .calls_of("conversations.info")
            .iter()
            .filter(|call| call.param("channel") == Some(c))
            .count()
    };
    assert_eq!((asked("C1"), asked("G7")), (1, 1));
    assert!(
        runs.iter()
            .filter(|r| r.channel_id.as_str() == "slack:G7")
            .all(|r| r.channel_visibility == ChannelVisibility::Private)
    );
    // Past the TTL the next run asks again.
    h.clock.fetch_add(TTL + 1, Ordering::SeqCst);
    h.event("EvC1-late", mention("U1", "C1", "2.9", "hi")).await;
    h.finished_runs(9).await;
    assert_eq!(asked("C1"), 2);
    // A DM needs no call.
    h.event("EvDm", dm("U1", "D1", "4.1", "hi")).await;
    let runs = h.finished_runs(10).await;
    assert_eq!(runs[0].channel_visibility, ChannelVisibility::Dm);
    assert_eq!(asked("D1"), 0);
}

/// A Slack API that answers in 2 s, past the 1.5 s each request waits for the directory:
/// the first mention's lookups (the channel's visibility, the user's memberships) go on
/// without it and are cached, so ten mentions cost one call of each and one `[authz]` line.
#[tokio::test]
async fn a_slow_directory_is_asked_once_for_ten_mentions() {
    let captured = test_support::log::CapturedLog::default();
    let _guard = captured.install();
    let h = start().await;
    h.fake.set_conversation("G7", Conversation::Private);
    h.fake.slow("conversations.info", Duration::from_secs(2));
    h.fake.slow("users.conversations", Duration::from_secs(2));
    for i in 0..10 {
        h.event(
            &format!("EvSlow-{i}"),
            mention("U1", "G7", &format!("7.{i}"), "hi"),
        )
        .await;
        h.finished_runs(i + 1).await;
    }
    let calls = |m: &str| h.fake.calls_of(m).len();
    assert_eq!(
        (calls("conversations.info"), calls("users.conversations")),
        (1, 1)
    );
    let runs = h.finished_runs(10).await;
    // Only the first run, stamped before the answer came, is unknown; the rest are private.
    let unknown = runs
        .iter()
        .filter(|r| r.channel_visibility == ChannelVisibility::Unknown)
        .count();
    assert!(unknown <= 1, "{runs:?}");
    let lines = captured
        .text()
        .lines()
        .filter(|l| l.contains("[authz] channel directory timed out"))
        .count();
    assert!(lines <= 1, "{}", captured.text());
}

/// Another writer holds the store's database for `hold`; meanwhile a mention arrives.
async fn mention_while_locked(h: &Harness, id: &str, ts: &str, hold: Duration) -> (u16, Duration) {
    use sqlx::Connection;
    let url = format!("sqlite://{}", h._dir.path().join("sb.db").display());
    let mut locker = sqlx::SqliteConnection::connect(&url).await.unwrap();
    sqlx::query("BEGIN EXCLUSIVE")
        .execute(&mut locker)
        .await
        .unwrap();
    let release = tokio::spawn(async move {
        tokio::time::sleep(hold).await;
        sqlx::query("COMMIT").execute(&mut locker).await.unwrap();
    });
    let started = std::time::Instant::now();
    let status = h.event(id, mention("U1", "C1", ts, "hi")).await;
    let waited = started.elapsed();
    release.await.unwrap();
    (status, waited)
}

/// A store that cannot record the event id in time (another writer holds the database):
/// Slack gets a 503 within the acknowledgement's 2.5 s, never the 5 s the store would wait,
/// and the event is served exactly once, by the first delivery when its write lands late, or
/// by Slack's retry when it never did.
#[tokio::test(flavor = "multi_thread")]
async fn a_slow_store_answers_slack_within_its_bound_and_serves_the_event_once() {
    let h = start().await;
    // The write lands at 4 s, after the 503: the first delivery starts the run, the retry nothing.
    let (status, waited) = mention_while_locked(&h, "EvLate", "8.1", Duration::from_secs(4)).await;
    assert_eq!(status, 503);
    assert!(
        waited < Duration::from_millis(3_500),
        "answered after {waited:?}"
    );
    h.finished_runs(1).await;
    assert_eq!(
        h.event("EvLate", mention("U1", "C1", "8.1", "hi")).await,
        200
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(h.finished_runs(1).await.len(), 1);
    // The write gives up (the store's 5 s busy wait) before the lock goes at 6 s: the event
    // id was never spent, and Slack's retry starts the run.
    let (status, _) = mention_while_locked(&h, "EvLost", "8.2", Duration::from_secs(6)).await;
    assert_eq!(status, 503);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        h.runs().await.len(),
        1,
        "nothing started from the lost write"
    );
    assert_eq!(
        h.event("EvLost", mention("U1", "C1", "8.2", "hi")).await,
        200
    );
    assert_eq!(h.finished_runs(2).await.len(), 2);
}

#[tokio::test]
async fn a_failed_lookup_stamps_unknown_and_the_reply_still_lands() {
    let h = start().await;
    h.fake.set_conversation("C500", Conversation::ServerError);
    h.fake
        .set_conversation("CSCOPE", Conversation::MissingScope);
    h.event("EvE1", mention("U1", "C500", "5.1", "hi")).await;
    h.event("EvE2", mention("U1", "CSCOPE", "5.2", "hi")).await;
    let runs = h.finished_runs(2).await;
    assert!(
        runs.iter()
            .all(|r| r.channel_visibility == ChannelVisibility::Unknown),
        "{runs:?}"
    );
    let updates = h.fake.wait_for("chat.update", 2, 10).await;
    assert_eq!(updates.len(), 2);
    assert!(
        updates
            .iter()
            .all(|u| u.param("text").unwrap().contains("echo agent"))
    );
}

#[tokio::test]
async fn a_dm_run_is_private_to_its_user_and_a_public_run_is_not() {
    let h = start().await;
    h.event("EvDm1", dm("U1", "D1", "6.1", "my secret plan"))
        .await;
    h.event("EvPub1", mention("U1", "C1", "6.2", "our public plan"))
        .await;
    let runs = h.finished_runs(2).await;
    let dm_run = runs
        .iter()
        .find(|r| r.channel_id.as_str() == "slack:D1")
        .unwrap();
    let pub_run = runs
        .iter()
        .find(|r| r.channel_id.as_str() == "slack:C1")
        .unwrap();
    let seen_by_u2 = h
        .command("EvList2", "U2", "C1", "6.3", "runs list --status all")
        .await;
    assert!(seen_by_u2.contains(pub_run.id.as_str()), "{seen_by_u2}");
    assert!(!seen_by_u2.contains(dm_run.id.as_str()), "{seen_by_u2}");
    let seen_by_u1 = h
        .command("EvList1", "U1", "C1", "6.4", "runs list --status all")
        .await;
    assert!(seen_by_u1.contains(dm_run.id.as_str()), "{seen_by_u1}");
    // A point read by the other user is the same not-found as a missing id.
    let got = h
        .command(
            "EvGet2",
            "U2",
            "C1",
            "6.5",
            &format!("runs get {}", dm_run.id),
        )
        .await;
    let missing = h
        .command("EvGet3", "U2", "C1", "6.6", "runs get r-does-not-exist")
        .await;
    assert_eq!(
        got.replace(dm_run.id.as_str(), "ID"),
        missing.replace("r-does-not-exist", "ID")
    );
}

#[tokio::test]
async fn a_private_channels_runs_follow_real_membership() {
    let h = start().await;
    h.fake.set_conversation("G1", Conversation::Private);
    h.fake.set_members("U1", &["G1"]);
    h.fake.set_members("U2", &["G0", "G5", "G1"]); // three pages of two, then one
    h.event("EvPriv", mention("U1", "G1", "7.1", "private work"))
        .await;
    let runs = h.finished_runs(1).await;
    let private = runs[0].id.clone();
    assert_eq!(runs[0].channel_visibility, ChannelVisibility::Private);
    // A member lists it and reads it, with no channels entry in the config.
    let member = h
        .command("EvM1", "U2", "C1", "7.2", "runs list --status all")
        .await;
    assert!(member.contains(private.as_str()), "{member}");
    let read = h
        .command("EvM2", "U2", "C1", "7.3", &format!("runs get {private}"))
        .await;
    assert!(read.contains("private work"), "{read}");
    // Someone who is not a member does not.
    let outsider = h
        .command("EvO1", "U3", "C1", "7.4", "runs list --status all")
        .await;
    assert!(!outsider.contains(private.as_str()), "{outsider}");
    // U2 leaves: within the TTL the cached walk still admits (the documented stale window);
    // after it, the next walk drops the channel.
    h.fake.set_members("U2", &["G0"]);
    let stale = h
        .command("EvL1", "U2", "C1", "7.5", "runs list --status all")
        .await;
    assert!(stale.contains(private.as_str()));
    h.clock.fetch_add(TTL + 1, Ordering::SeqCst);
    let left = h
        .command("EvL2", "U2", "C1", "7.6", "runs list --status all")
        .await;
    assert!(!left.contains(private.as_str()), "{left}");
    let walks = h
        .fake
        .calls_of("users.conversations")
        .iter()
        .filter(|c| c.param("user") == Some("U2"))
        .count();
    // 2 pages the first walk, 1 the second: one walk per user per TTL, shared by 3 requests.
    assert_eq!(walks, 3);
    // A failed walk adds nothing: U4 is a member until the API fails.
    h.fake.set_members("U4", &["G1"]);
    let before = h
        .command("EvF0", "U4", "C1", "7.7", "runs list --status all")
        .await;
    assert!(before.contains(private.as_str()), "{before}");
    h.fake.fail("users.conversations", "internal_error");
    h.clock.fetch_add(TTL + 1, Ordering::SeqCst);
    let failed = h
        .command("EvF1", "U4", "C1", "7.8", "runs list --status all")
        .await;
    assert!(!failed.contains(private.as_str()), "{failed}");
}

#[tokio::test]
async fn follow_ups_count_only_in_a_thread_the_bot_answered() {
    let h = start().await;
    h.event("EvT1", mention("U1", "C1", "8.1", "start")).await;
    h.finished_runs(1).await;
    h.fake.wait_for("chat.update", 1, 10).await;
    let follow = json!({"type": "message", "channel_type": "channel", "user": "U1",
        "channel": "C1", "ts": "8.2", "thread_ts": "8.1", "text": "and a follow-up"});
    assert_eq!(h.event("EvT2", follow).await, 200);
    let runs = h.finished_runs(2).await;
    assert_eq!(runs[0].request, "and a follow-up");
    assert_eq!(runs[0].thread_key.as_deref(), Some("8.1"));
    // A thread the bot never answered: nothing.
    let other = json!({"type": "message", "channel_type": "channel", "user": "U1",
        "channel": "C1", "ts": "9.2", "thread_ts": "9.1", "text": "chatter"});
    assert_eq!(h.event("EvT3", other).await, 200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(h.runs().await.len(), 2);
}

#[tokio::test]
async fn long_answers_are_split_on_lines_and_url_verification_is_answered() {
    let h = start().await;
    let (status, body) = h
        .post(br#"{"token":"x","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#.to_vec())
        .await;
    assert_eq!(
        (status, body.as_str()),
        (200, "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P")
    );
    let long: String = (0..700)
        .map(|i| format!("line{i:04}-"))
        .collect::<Vec<_>>()
        .join(" ");
    h.event("EvLong", mention("U1", "C1", "10.1", &long)).await;
    h.finished_runs(1).await;
    h.fake.wait_for("chat.update", 1, 10).await;
    let posts = h.fake.wait_for("chat.postMessage", 3, 10).await;
    let texts = h.thread("C1", "10.1");
    assert!(texts.len() >= 3, "{texts:?}");
    assert!(
        texts
            .iter()
            .all(|t| t.chars().count() <= slack::text::MESSAGE_LIMIT)
    );
    let answer: String = texts[1..].concat();
    assert!(answer.contains("line0000-") && answer.contains("line0699-"));
    assert!(posts.len() >= 3);
}

#[tokio::test]
async fn rate_limits_are_retried_and_a_reply_that_still_fails_is_friction() {
    let h = start().await;
    h.fake.rate_limit("chat.postMessage", 2);
    h.event("EvRl", mention("U1", "C1", "11.1", "hi")).await;
    let runs = h.finished_runs(1).await;
    h.fake.wait_for("chat.update", 1, 10).await;
    // Two 429s, then the working message landed.
    assert_eq!(h.fake.calls_of("chat.postMessage").len(), 3);
    assert!(h.store.friction(&runs[0].id).await.unwrap().is_empty());
    // Every reply fails: the run keeps its outcome and the failure is its friction.
    h.fake.fail("chat.postMessage", "channel_not_found");
    h.fake.fail("chat.update", "channel_not_found");
    h.event("EvFail", mention("U1", "C1", "11.2", "hi")).await;
    let runs = h.finished_runs(2).await;
    assert_eq!(runs[0].status, RunStatus::Completed);
    let mut friction = Vec::new();
    for _ in 0..100 {
        friction = h.store.friction(&runs[0].id).await.unwrap();
        if !friction.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(friction[0].kind, "reply");
    assert!(
        friction[0].detail.contains("api:channel_not_found"),
        "{friction:?}"
    );
}

#[tokio::test]
async fn bad_input_gets_its_status_and_no_panic() {
    let h = start().await;
    let good = |body: &[u8]| signed_headers(SECRET, now(), body).to_vec();
    let huge = vec![b' '; slack::MAX_BODY_BYTES + 1];
    let control = callback(
        "EvCtl",
        mention("U1", "C1", "12.1", "runs list\u{7}\u{1b}[2J"),
    );
    let unknown = callback("EvUnknown", json!({"type": "reaction_added", "user": "U1"}));
    let long_id = callback(&"E".repeat(100_000), mention("U1", "C1", "12.3", "hi"));
    let odd_id = callback("Ev'; DROP", mention("U1", "C1", "12.4", "hi"));
    let wrapped = callback("EvWrapped", mention("U1", "C1", "12.5", "hi"));
    type Headers = Vec<(String, String)>;
    let cases: Vec<(&str, Vec<u8>, Headers, u16)> = vec![
        (
            "malformed JSON, signed",
            b"{\"type\": \"event_callback\",".to_vec(),
            good(b"{\"type\": \"event_callback\","),
            400,
        ),
        (
            "not an object, signed",
            b"[1,2]".to_vec(),
            good(b"[1,2]"),
            400,
        ),
        (
            "a callback without an id",
            br#"{"type":"event_callback","event":{}}"#.to_vec(),
            good(br#"{"type":"event_callback","event":{}}"#),
            400,
        ),
        (
            "an unknown event type",
            unknown.clone(),
            good(&unknown),
            200,
        ),
        (
            "an unknown envelope type",
            br#"{"type":"app_rate_limited"}"#.to_vec(),
            good(br#"{"type":"app_rate_limited"}"#),
            200,
        ),
        ("a huge body", huge.clone(), good(&huge), 413),
        (
            "no signature header",
            unknown.clone(),
            vec![good(&unknown)[0].clone()],
            401,
        ),
        (
            "no timestamp header",
            unknown.clone(),
            vec![good(&unknown)[1].clone()],
            401,
        ),
        ("no headers", unknown.clone(), vec![], 401),
        (
            "a timestamp that is not a number",
            unknown.clone(),
            vec![
                ("x-slack-request-timestamp".into(), "soon".into()),
                good(&unknown)[1].clone(),
            ],
            401,
        ),
        (
            "control characters in text",
            control.clone(),
            good(&control),
            200,
        ),
        (
            "an event id of 100 kB (bad input, not a store outage)",
            long_id.clone(),
            good(&long_id),
            400,
        ),
        (
            "an event id that is not letters and digits",
            odd_id.clone(),
            good(&odd_id),
            400,
        ),
        (
            "a timestamp 2^63 seconds ago, correctly signed (it wrapped into the window)",
            wrapped.clone(),
            signed_headers(SECRET, now() + i64::MIN, &wrapped).to_vec(),
            401,
        ),
    ];
    for (what, body, headers, want) in cases {
        let (status, _) = h.post_raw(body, &headers).await;
        assert_eq!(status, want, "{what}");
    }
    // The control characters were refused by the registry, to the caller alone; nothing ran.
    let posts = h.fake.wait_for("chat.postEphemeral", 1, 10).await;
    assert_eq!(posts.len(), 1);
    assert!(
        posts[0].param("text").unwrap().contains("control"),
        "{posts:?}"
    );
    assert!(h.runs().await.is_empty());
    // The server still answers.
    assert_eq!(
        h.event("EvAfter", mention("U1", "C1", "12.2", "hi")).await,
        200
    );
    h.finished_runs(1).await;
}

#[tokio::test]
async fn missing_scopes_are_named_and_missing_secrets_keep_the_surface_off() {
    let fake = FakeSlack::new();
    fake.set_scopes("chat:write,channels:read");
    let h = start_with(fake, &SLACK_ENV, "").await;
    assert!(
        h.summary
            .contains("MISSING SCOPES: groups:read, mpim:read, im:history, app_mentions:read"),
        "{}",
        h.summary
    );
    let off = start_with(FakeSlack::new(), &[("SLACK_BOT_TOKEN", "xoxb-test")], "").await;
    assert!(
        off.summary
            .contains("[slack] is set but needs SLACK_SIGNING_SECRET"),
        "{}",
        off.summary
    );
    let (status, _) = off
        .post(callback("Ev", mention("U1", "C1", "1.1", "hi")))
        .await;
    assert_eq!(status, 404);
    assert!(off.fake.calls_of("auth.test").is_empty());
    // A bad bot token: auth.test refuses, the surface is off and says why.
    let bad = FakeSlack::new();
    bad.fail("auth.test", "invalid_auth");
    let h = start_with(bad, &SLACK_ENV, "").await;
    assert!(
        h.summary.contains("auth.test failed (api:invalid_auth)"),
        "{}",
        h.summary
    );
    assert!(!h.summary.contains("xoxb-test"));
}

#[tokio::test]
async fn socket_mode_takes_the_same_events_through_the_same_checks() {
    let fake = FakeSlack::new();
    fake.serve_socket().await.unwrap();
    let env = [
        ("SLACK_BOT_TOKEN", "xoxb-test"),
        ("SLACK_SIGNING_SECRET", SECRET),
        ("SLACK_APP_TOKEN", "xapp-test"),
    ];
    let h = start_with(fake.clone(), &env, "mode = \"socket\"").await;
    assert!(
        h.summary.contains("Socket Mode, as bot user UBOT"),
        "{}",
        h.summary
    );
    // No public route in Socket Mode.
    assert_eq!(
        h.event("EvHttp", mention("U1", "C1", "1.1", "hi")).await,
        404
    );
    let body = callback("EvSock1", mention("U1", "C1", "13.1", "over the socket"));
    fake.push("env-1", &body);
    let runs = h.finished_runs(1).await;
    assert_eq!(runs[0].request, "over the socket");
    assert_eq!(runs[0].surface, Surface::Slack);
    let updates = fake.wait_for("chat.update", 1, 10).await;
    assert!(
        updates[0]
            .param("text")
            .unwrap()
            .contains("request: over the socket")
    );
    // A redelivery of the same event id starts nothing; a bot's message is ignored.
    fake.push("env-2", &body);
    let bot = callback(
        "EvSock2",
        json!({"type": "message", "channel_type": "im", "subtype": "bot_message", "bot_id": "B9", "channel": "D1", "ts": "13.2", "text": "hi"}),
    );
    fake.push("env-3", &bot);
    // Another bot's mention (an app_mention with a bot_id) is ignored over the socket as over
    // HTTP: its envelope is read raw, so bot_id is not lost.
    let bot_mention = json!({"type": "app_mention", "user": "U7", "bot_id": "B7", "channel": "C1",
        "ts": "13.3", "text": "<@UBOT> loop with me"});
    fake.push("env-5", &callback("EvSockBot", bot_mention));
    for _ in 0..200 {
        if fake.acks().len() >= 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(fake.acks(), ["env-1", "env-2", "env-3", "env-5"]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(h.runs().await.len(), 1);
    // A button click comes over the socket too, read as a signed one is: here it finds
    // nothing waiting, and its message says so.
    fake.push_interactive(
        "env-4",
        &click(
            "U1",
            slack::approvals::APPROVE,
            "01JNOSUCHRUN/abc",
            "C1",
            "13.9",
            "13.1",
        ),
    );
    let updates = fake.wait_for("chat.update", 2, 10).await;
    let answered = updates.iter().find(|c| c.param("ts") == Some("13.9"));
    assert!(
        answered.is_some_and(|c| c.param("text").unwrap().contains("no longer waits")),
        "{updates:?}"
    );
    // Without SLACK_APP_TOKEN, socket mode stays off and says so.
    let off = start_with(FakeSlack::new(), &SLACK_ENV, "mode = \"socket\"").await;
    assert!(
        off.summary.contains("needs SLACK_APP_TOKEN"),
        "{}",
        off.summary
    );
}

/// The writer: an openai agent on `model`, which may write in its run's workspace once the
/// person it acts for approves (`fs.write` asks by default), and which U1 may run. Goes
/// after `[slack]`'s keys.
fn writer(model: &str) -> String {
    format!(
        "\n[agents.writer]\nbackend = \"openai\"\nbase_url = \"{model}\"\nmodel = \"scripted\"\n\n[[agent_grants]]\nid = \"writer-notes\"\nagent = \"writer\"\ntool = \"write_file\"\npaths = [\"{{workspace}}\"]\nmode = \"auto\"\n\n[grants.\"slack:U1\"]\nactions = [\"runs:read\", \"agent:run:writer\"]\n"
    )
}

/// The message with Approve / Deny buttons posted into `thread`: its `ts` and the buttons'
/// value.
async fn offered(h: &Harness, channel: &str, thread: &str) -> (String, String) {
    for _ in 0..500 {
        let offer = h.fake.calls_of("chat.postMessage").into_iter().find(|c| {
            c.param("channel") == Some(channel)
                && c.param("thread_ts") == Some(thread)
                && c.param("blocks").is_some()
        });
        if let Some(offer) = offer {
            let blocks: Value = serde_json::from_str(offer.param("blocks").unwrap()).unwrap();
            let body = blocks[0]["text"]["text"].as_str().unwrap();
            assert!(body.contains("`fs.write` with `write_file`"), "{body}");
            assert!(
                !body.contains("<!channel>"),
                "no agent text in the mrkdwn: {body}"
            );
            assert!(
                slack::approvals::shown_arguments(&blocks).contains("<!channel>"),
                "the call is shown whole, as literal text: {blocks}"
            );
            assert!(body.contains("Only <@U1> can answer."), "{body}");
            let buttons = &blocks.as_array().unwrap().last().unwrap()["elements"];
            assert_eq!(buttons[0]["action_id"], slack::approvals::APPROVE);
            assert_eq!(buttons[1]["action_id"], slack::approvals::DENY);
            return (
                offer.param("posted_ts").unwrap().to_owned(),
                buttons[0]["value"].as_str().unwrap().to_owned(),
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!(
        "no approval was offered in thread {thread}: {:?}",
        h.fake.calls()
    );
}

/// The `chat.update` texts of message `ts`.
fn updates_of(h: &Harness, ts: &str) -> Vec<String> {
    h.fake
        .calls_of("chat.update")
        .into_iter()
        .filter(|c| c.param("ts") == Some(ts))
        .map(|c| c.param("text").unwrap_or_default().to_owned())
        .collect()
}

/// A tool call waiting for the person who asked in Slack is offered in the run's thread with
/// Approve / Deny buttons. A click counts only from that person: another's is told so and
/// changes nothing; theirs reaches the agent, the buttons go, and a second click finds
/// nothing waiting.
#[tokio::test]
async fn a_tool_call_waiting_for_its_person_is_answered_with_slack_buttons() {
    for (button, answered, want) in [
        (
            slack::approvals::APPROVE,
            "Approved by <@U1>.",
            "tool said: wrote 10 bytes to ",
        ),
        (
            slack::approvals::DENY,
            "Denied by <@U1>.",
            "tool said: refused: fs.write needs a person's approval: refused",
        ),
    ] {
        let model = agents::testing::writing_model("<!channel>").await.unwrap();
        let h = start_with(FakeSlack::new(), &SLACK_ENV, &writer(&model)).await;
        let thread = "1700000100.000001";
        assert_eq!(
            h.event("EvWrite", mention("U1", "C1", thread, "@writer take notes"))
                .await,
            200
        );
        let (ts, value) = offered(&h, "C1", thread).await;

        // Someone else's click does not count; they alone are told so.
        assert_eq!(
            h.interact(&click("U2", button, &value, "C1", &ts, thread))
                .await,
            200
        );
        let told = h.fake.wait_for("chat.postEphemeral", 2, 10).await;
        let told = told
            .iter()
            .find(|c| c.param("user") == Some("U2"))
            .unwrap_or_else(|| panic!("U2 was not told: {told:?}"));
        assert!(
            told.param("text").unwrap().contains("did not count"),
            "{told:?}"
        );
        assert_eq!(told.param("thread_ts"), Some(thread));
        assert!(updates_of(&h, &ts).is_empty(), "the buttons stay");
        assert!(h.runs().await.iter().all(|r| r.status.is_live()));

        // Theirs does.
        assert_eq!(
            h.interact(&click("U1", button, &value, "C1", &ts, thread))
                .await,
            200
        );
        let run = h.finished_runs(1).await.remove(0);
        assert_eq!(run.status, RunStatus::Completed);
        let answer = run.answer.unwrap_or_default();
        assert!(answer.starts_with(want), "{answer}");
        let mut updates = Vec::new();
        for _ in 0..200 {
            updates = updates_of(&h, &ts);
            if !updates.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(updates[0].ends_with(answered), "{updates:?}");
        let cleared = h
            .fake
            .calls_of("chat.update")
            .into_iter()
            .find(|c| c.param("ts") == Some(ts.as_str()))
            .unwrap();
        assert_eq!(cleared.param("blocks"), Some("[]"), "the buttons go");
        // The run's events say who was asked and what they answered.
        let events = h.store.events(&run.id).await.unwrap();
        let approvals: Vec<&str> = events
            .iter()
            .filter(|e| e.kind == "approval")
            .map(|e| e.body.as_str())
            .collect();
        assert_eq!(approvals.len(), 2, "{approvals:?}");

        // A second click finds nothing waiting, and says so on the message.
        assert_eq!(
            h.interact(&click("U1", button, &value, "C1", &ts, thread))
                .await,
            200
        );
        for _ in 0..200 {
            if updates_of(&h, &ts).len() == 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            updates_of(&h, &ts)[1].contains("no longer waits"),
            "{:?}",
            updates_of(&h, &ts)
        );
    }
}

/// `/slack/interactions` refuses what is not a signed click on our buttons, and takes no
/// answer from it.
#[tokio::test]
async fn bad_interactions_get_their_status_and_answer_nothing() {
    let h = start().await;
    let good = |body: &[u8]| signed_headers(SECRET, now(), body).to_vec();
    let ours = interaction_form(&click(
        "U1",
        slack::approvals::APPROVE,
        "01JNOSUCHRUN/abc",
        "C1",
        "1.2",
        "1.1",
    ));
    let theirs = interaction_form(&click("U1", "their_button", "x", "C1", "1.2", "1.1"));
    let bad_value = interaction_form(&click(
        "U1",
        slack::approvals::APPROVE,
        "no-slash",
        "C1",
        "1.2",
        "1.1",
    ));
    let huge = vec![b'a'; slack::MAX_BODY_BYTES + 1];
    let stale = signed_headers(SECRET, now() - 600, &ours).to_vec();
    type Headers = Vec<(String, String)>;
    let cases: Vec<(&str, Vec<u8>, Headers, u16)> = vec![
        ("no signature", ours.clone(), vec![], 401),
        ("a stale signature", ours.clone(), stale, 401),
        (
            "signed for another body",
            ours.clone(),
            good(b"payload=%7B%7D"),
            401,
        ),
        ("a huge body", huge.clone(), good(&huge), 413),
        ("not a form", b"{}".to_vec(), good(b"{}"), 400),
        (
            "a payload that is not JSON",
            b"payload=nope".to_vec(),
            good(b"payload=nope"),
            400,
        ),
        (
            "a value that names no run",
            bad_value.clone(),
            good(&bad_value),
            400,
        ),
        ("another app's button", theirs.clone(), good(&theirs), 200),
        ("a click on nothing waiting", ours.clone(), good(&ours), 200),
    ];
    for (what, body, headers, want) in cases {
        assert_eq!(h.interact_raw(body, &headers).await, want, "{what}");
    }
    // Only the click on nothing waiting reached the Web API: its message says so.
    let updates = h.fake.wait_for("chat.update", 1, 10).await;
    assert_eq!(updates.len(), 1, "{updates:?}");
    assert!(
        updates[0]
            .param("text")
            .unwrap()
            .contains("no longer waits")
    );
    assert!(h.runs().await.is_empty());
}

/// Every text the bot posted where the whole conversation reads it (messages and updates).
fn public_texts(h: &Harness) -> Vec<String> {
    h.fake
        .calls()
        .into_iter()
        .filter(|c| matches!(c.method.as_str(), "chat.postMessage" | "chat.update"))
        .map(|c| c.param("text").unwrap_or_default().to_owned())
        .collect()
}

/// A command's reply in a channel reaches only its caller: `runs get` of their DM run, `runs
/// list --status all` (which names it) and `memory list` (their own facts, one said in a DM)
/// go to them alone, split if long and never cut, with one line in the thread; in their own
/// DM the reply is the thread's. An agent run's answer stays in the thread.
#[tokio::test]
async fn a_commands_reply_in_a_channel_reaches_only_its_caller() {
    let h = start().await;
    h.event("EvDmRun", dm("U1", "D1", "20.1", "my secret plan"))
        .await;
    h.event(
        "EvDmNote",
        dm("U1", "D1", "20.2", "note for me: tea-lover-31"),
    )
    .await;
    let runs = h.finished_runs(2).await;
    let dm_run = runs
        .iter()
        .find(|r| r.request == "my secret plan")
        .unwrap()
        .id
        .clone();
    // Reflection writes the note after the run's reply; wait for it.
    for _ in 0..200 {
        let listed = h.command("EvWait", "U1", "D1", "20.3", "memory list").await;
        if listed.contains("tea-lover-31") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before = public_texts(&h).len();
    let asked = [
        (format!("runs get {dm_run}"), "my secret plan".to_owned()),
        ("runs list --status all".to_owned(), dm_run.to_string()),
        ("memory list".to_owned(), "tea-lover-31".to_owned()),
    ];
    for (i, (command, secret)) in asked.iter().enumerate() {
        let ts = format!("21.{i}");
        let private = h
            .command(&format!("EvPub{i}"), "U1", "C1", &ts, command)
            .await;
        assert!(private.contains(secret.as_str()), "{command}: {private}");
        assert_eq!(
            h.thread("C1", &ts),
            vec![slack::PRIVATE_REPLY_NOTE.to_owned()],
            "{command}"
        );
        let ephemeral = h.fake.calls_of("chat.postEphemeral");
        assert!(
            ephemeral
                .iter()
                .filter(|c| c.param("text").is_some_and(|t| t.contains(secret.as_str())))
                .all(|c| c.param("user") == Some("U1")),
            "{command}: only U1 is shown it"
        );
    }
    let public = &public_texts(&h)[before..];
    for (command, secret) in &asked {
        assert!(
            public.iter().all(|t| !t.contains(secret.as_str())),
            "{command} reached the channel: {public:?}"
        );
    }
    // In the caller's own DM, the same reply is the thread's.
    let in_dm = h
        .command("EvDmGet", "U1", "D1", "22.1", &format!("runs get {dm_run}"))
        .await;
    assert!(in_dm.contains("my secret plan"), "{in_dm}");
    // A reply too long for one message is split across several, none cut.
    let long = format!("runs get {}", "x".repeat(8_000));
    let private = h.command("EvLongCmd", "U1", "C1", "23.1", &long).await;
    let parts = h.private_to("U1", "C1", "23.1");
    assert!(
        parts
            .iter()
            .all(|p| p.chars().count() <= slack::text::MESSAGE_LIMIT),
        "{parts:?}"
    );
    assert!(!private.is_empty());
    // An agent run's answer stays in the thread it was asked in.
    h.event("EvRun", mention("U1", "C1", "24.1", "a public question"))
        .await;
    h.finished_runs(3).await;
    h.fake.wait_for("chat.update", 3, 10).await;
    assert!(
        h.thread("C1", "24.1")
            .iter()
            .any(|t| t.contains("request: a public question")),
        "{:?}",
        h.thread("C1", "24.1")
    );
}

fn from_team(mut event: Value, team: &str) -> Value {
    event["user_team"] = json!(team);
    event["team"] = json!("T1");
    event
}

/// A person of another workspace (Slack Connect: the event's `user_team` is not the bot's
/// `T1`) is refused by default, over HTTP and over the socket alike: a short reply to them
/// alone, no run, no thread. With `allow_external_users`, they hold only their own entry:
/// not the Slack baseline, not `slack:*`'s `runs:read`.
#[tokio::test]
async fn people_of_another_workspace_are_refused_unless_allowed_and_then_hold_only_their_entry() {
    let fake = FakeSlack::new();
    fake.serve_socket().await.unwrap();
    let h = start_with(fake.clone(), &SLACK_ENV, "").await;
    assert!(
        h.summary.contains("other workspaces' users refused"),
        "{}",
        h.summary
    );
    let outsider = from_team(mention("UX1", "C1", "30.1", "runs list"), "T9");
    assert_eq!(h.event("EvOut1", outsider.clone()).await, 200);
    let refused = h.fake.wait_for("chat.postEphemeral", 1, 10).await;
    assert_eq!(refused[0].param("user"), Some("UX1"));
    assert!(
        refused[0]
            .param("text")
            .unwrap()
            .contains("serves its own workspace"),
        "{refused:?}"
    );
    // The workspace's own member, in the same shared channel, is served.
    let member = from_team(mention("U1", "C1", "30.2", "hello there"), "T1");
    assert_eq!(h.event("EvIn1", member).await, 200);
    let runs = h.finished_runs(1).await;
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].request, "hello there");
    assert!(
        h.thread("C1", "30.1").is_empty(),
        "nothing was posted into the outsider's thread"
    );

    // Over Socket Mode, the raw envelope keeps `user_team`.
    let socket = FakeSlack::new();
    socket.serve_socket().await.unwrap();
    let env = [
        ("SLACK_BOT_TOKEN", "xoxb-test"),
        ("SLACK_SIGNING_SECRET", SECRET),
        ("SLACK_APP_TOKEN", "xapp-test"),
    ];
    let s = start_with(socket.clone(), &env, "mode = \"socket\"").await;
    socket.push(
        "env-out",
        &callback(
            "EvSockOut",
            from_team(mention("UX1", "C1", "31.1", "do work"), "T9"),
        ),
    );
    let refused = socket.wait_for("chat.postEphemeral", 1, 10).await;
    assert_eq!(refused[0].param("user"), Some("UX1"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        s.runs().await.is_empty(),
        "an outsider started a run over the socket"
    );

    // Allowed: an outsider with no entry holds nothing (not slack:*'s runs:read); one with
    // an entry holds exactly it.
    let allowed = start_with(
        FakeSlack::new(),
        &SLACK_ENV,
        "allow_external_users = true\n\n[grants.\"slack:UX2\"]\nactions = [\"runs:read\"]\n",
    )
    .await;
    assert!(
        allowed
            .summary
            .contains("other workspaces' users hold only their own grants entry"),
        "{}",
        allowed.summary
    );
    let ask = |id: &'static str, user: &'static str, ts: &'static str, text: &'static str| {
        let allowed = &allowed;
        async move {
            let event = from_team(mention(user, "C1", ts, text), "T9");
            assert_eq!(allowed.event(id, event).await, 200);
            for _ in 0..500 {
                if !allowed.thread("C1", ts).is_empty() {
                    return allowed.private_to(user, "C1", ts).concat();
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            panic!("no reply to {user}");
        }
    };
    let got = ask("EvX1", "UX1", "32.1", "runs list").await;
    assert!(
        got.starts_with("🚫"),
        "slack:*'s runs:read is not an outsider's: {got}"
    );
    let got = ask("EvX2", "UX1", "32.2", "help").await;
    assert!(
        got.starts_with("🚫"),
        "help is the baseline's, not an outsider's: {got}"
    );
    let got = ask("EvX3", "UX2", "32.3", "runs list").await;
    assert!(!got.starts_with("🚫"), "{got}");
    let got = ask("EvX4", "UX2", "32.4", "help").await;
    assert!(got.starts_with("🚫"), "{got}");
}
