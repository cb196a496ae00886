//! The Slack surface over real HTTP on loopback: the app built by the one composition root,
//! served by `server::serve` (which connects the surface with `auth.test`), slack-morphism's
//! client pointed at a fake Slack Web API through `[slack] api_url`, and event bodies signed
//! in the test with Slack's scheme.

mod bad_input;
mod channels;
mod events;
mod interactions;
mod replies;
mod setup;
mod socket_mode;
mod workspaces;

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
    start_at(&api_url, fake, env, slack_keys).await
}

/// [`start_with`] with Slack's API at `api_url`, which `fake` may not serve yet.
async fn start_at(
    api_url: &str,
    fake: FakeSlack,
    env: &[(&str, &str)],
    slack_keys: &str,
) -> Harness {
    let api_url = api_url.to_owned();
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
