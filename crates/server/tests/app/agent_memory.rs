//! Memory end to end, through real runs on SQLite and on Postgres: an ingress run (a machine
//! channel) and a DM-shaped Slack run each say `remember: …`; reflection writes the first to
//! org and narrows the second to its person; the next runs' context blocks show each record
//! only where it belongs; `memory list` as someone else does not show the DM fact.

use crate::common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use authz_core::{ActorId, Origin, ScopeKey, resolve_actor};
use commands::{Caller, RawInput, Registry, Services, Surface};
use server::config::{Source, parse};
use server::{App, Secrets};

const TOKENS: &str = r#"{"ops-token-0123456789": {"subject": "ops", "channel": "http:ops"}}"#;
const FACT: &str = "deploys freeze on Fridays";

fn config(dir: &std::path::Path, store: &str) -> server::LoadedConfig {
    let text = format!(
        r#"
[server]
data_dir = "{data}"
{store}
[agents]
default = "echo"
[agents.echo]
[agents.recall]
backend = "command"
command = ["/bin/sh", "-c", "cat \"$SWITCHBOARD_MEMORY_FILE\""]
# No forwarder in a library's test binary: the host's network (the binary's tests cover the broker's).
network = "host"
[grants."http:ops"]
actions = ["runs:read", "agent:run:*"]
channels = ["http:ops"]
"#,
        data = dir.join("data").display(),
    );
    parse(Source::File("test.toml".into()), &text).unwrap()
}

struct Running {
    serving: common::Serving,
    store: Arc<dyn store::Store>,
    registry: Arc<Registry>,
    services: Arc<Services>,
    dispatcher: dispatch::Dispatcher,
}

async fn start(dir: &std::path::Path, store: &str) -> Running {
    let c = config(dir, store);
    let env: HashMap<&str, &str> = [("SWITCHBOARD_INGRESS_TOKENS", TOKENS)].into();
    let secrets = Secrets::from_lookup(&c, |k| env.get(k).map(|v| (*v).to_owned())).unwrap();
    let app = App::build(c, secrets, store::ReplicaId::parse("memory-e2e").unwrap())
        .await
        .unwrap();
    let (store, registry, services, dispatcher) = (
        app.store.clone(),
        app.registry.clone(),
        app.services.clone(),
        app.dispatcher.clone(),
    );
    let serving = common::serve(app).await;
    assert!(
        serving.summary.contains("memory  rules extractor"),
        "{}",
        serving.summary
    );
    Running {
        serving,
        store,
        registry,
        services,
        dispatcher,
    }
}

impl Running {
    /// A run over the ingress as the `ops` token, waited for; its reflection settled.
    async fn ingress(&self, text: &str) -> serde_json::Value {
        let r = reqwest::Client::new()
            .post(format!("http://{}/ingress?wait=30", self.serving.addr))
            .bearer_auth("ops-token-0123456789")
            .header("accept", "application/json")
            .body(text.to_owned())
            .send()
            .await
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
        assert!(
            self.dispatcher
                .settle_reflections(Duration::from_secs(10))
                .await
        );
        v
    }

    /// The caller a Slack message from `user` in `channel` would be.
    fn slack(&self, user: &str, channel: &str) -> Caller {
        let actor = resolve_actor(ActorId::parse(user).unwrap(), &self.services.table())
            .with_origin(Origin {
                channel_id: channel.parse().unwrap(),
                thread_key: Some("1700000000.000100".into()),
            });
        Caller::new(actor, Surface::Slack)
    }

    /// A DM-shaped run, as the Slack surface starts one; its answer, reflection settled.
    async fn slack_run(&self, user: &str, channel: &str, text: &str) -> String {
        let caller = self.slack(user, channel);
        let handled = commands::start_agent_run(&caller, text, None, &self.services).await;
        let started = handled.run.unwrap_or_else(|| panic!("{:?}", handled.reply));
        let outcome = started.finished().await.unwrap();
        assert!(
            self.dispatcher
                .settle_reflections(Duration::from_secs(10))
                .await
        );
        outcome.answer().unwrap_or_default().to_owned()
    }

    async fn say(&self, caller: &Caller, text: &str) -> commands::Reply {
        self.registry
            .invoke(caller, RawInput::Text(text.into()), &self.services)
            .await
    }

    async fn stop(self) {
        self.serving.stop.send(()).unwrap();
        self.serving.handle.await.unwrap().unwrap();
    }
}

async fn memory_lands_where_it_belongs(store: &str, dir: &std::path::Path) {
    let s = start(dir, store).await;
    let said = format!("remember: {FACT}");

    // A machine origin keeps the extractor's routing: org.
    let v = s.ingress(&said).await;
    assert_eq!(v["status"], "completed", "{v}");
    let org = s
        .store
        .memory_in_scopes(&[ScopeKey::Org], 10)
        .await
        .unwrap();
    assert_eq!(org.len(), 1);
    assert_eq!(org[0].text, FACT);

    // The same words in a DM: narrowed to that person, never org.
    s.slack_run("slack:U1", "slack:D1", &said).await;
    let u1 = ScopeKey::User(ActorId::parse("slack:U1").unwrap());
    let mine = s
        .store
        .memory_in_scopes(std::slice::from_ref(&u1), 10)
        .await
        .unwrap();
    assert_eq!(mine.len(), 1, "{mine:?}");
    assert_eq!(mine[0].text, FACT);
    assert_eq!(
        s.store
            .memory_in_scopes(&[ScopeKey::Org], 10)
            .await
            .unwrap()
            .len(),
        1
    );

    // The next runs' blocks: the person sees both; someone else and the token see org only.
    let block = s
        .slack_run("slack:U1", "slack:D1", "@recall what do you know?")
        .await;
    assert_eq!(block.matches(FACT).count(), 2, "{block}");
    assert!(
        block.contains("[org]") && block.contains("[user]"),
        "{block}"
    );
    let block = s
        .slack_run("slack:U2", "slack:D2", "@recall what do you know?")
        .await;
    assert_eq!(block.matches(FACT).count(), 1, "{block}");
    assert!(!block.contains("[user]"), "{block}");
    let v = s.ingress("@recall what do you know?").await;
    let block = v["answer"].as_str().unwrap();
    assert!(
        block.contains("[org]") && !block.contains("[user]"),
        "{block}"
    );
    // The echo agent says only how many records it was given.
    let echoed = s.slack_run("slack:U1", "slack:D1", "hello").await;
    assert!(
        echoed.contains("memory: 2 records (org 1, user 1)"),
        "{echoed}"
    );

    // memory list: the DM fact is its person's only.
    let theirs = s.say(&s.slack("slack:U2", "slack:D2"), "memory list").await;
    let records = theirs.data["records"].as_array().unwrap();
    assert_eq!(records.len(), 1, "{}", theirs.text);
    assert_eq!(records[0]["scope"]["kind"], "org");
    let own = s
        .say(&s.slack("slack:U1", "slack:D1"), "memory list --scope user")
        .await;
    assert_eq!(own.data["records"][0]["text"], FACT, "{}", own.text);
    s.stop().await;
}

#[tokio::test]
async fn memory_end_to_end_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!(
        "[store]\nurl = \"sqlite://{}\"",
        dir.path().join("sb.db").display()
    );
    memory_lands_where_it_belongs(&store, dir.path()).await;
}

#[tokio::test]
async fn memory_end_to_end_on_postgres() {
    let dir = tempfile::tempdir().unwrap();
    let store = test_support::postgres::store_section("memory");
    memory_lands_where_it_belongs(&store, dir.path()).await;
}
