//! A wired registry, built by the one composition root (`server::App::build_with`) from a
//! config naming a SQLite store in a temp dir (or Postgres in its own schema when
//! `SWITCHBOARD_TEST_POSTGRES_URL` is set and the test asks for it), the matrix fixture's
//! grants, echo agents, a fixed clock and audit lines kept in memory.

use std::sync::Arc;

use authz_core::{
    ActorId, ChannelVisibility, GrantsTable, Origin, Surface, resolve_actor, resolve_agent,
};
use commands::{Caller, Clock, MemoryAudit, RawInput, Registry, Reply, Services};
use server::config::{Source, parse};
use store::{NewRun, RunRecord, Timestamp};

pub struct World {
    pub _app: server::App,
    pub registry: Arc<Registry>,
    pub services: Arc<Services>,
    /// The App's store, for a test's own fixtures and checks (surfaces never reach it).
    pub store: Arc<dyn store::Store>,
    pub audit: Arc<MemoryAudit>,
    pub table: Arc<GrantsTable>,
    _dir: tempfile::TempDir,
}

pub const NOW: i64 = 1_800_000_000_000_000;

fn now() -> Timestamp {
    Timestamp::from_micros(NOW)
}

/// The matrix fixture's grants and the agents it names (and any more), as a config file.
fn config_text(dir: &std::path::Path, store: &str, extra_agents: &str) -> String {
    format!(
        "{}\n[server]\ndata_dir = {:?}\n\n{store}\n[agents]\ndefault = \"reviewer\"\n[agents.coding]\n[agents.reviewer]\n{extra_agents}",
        commands::conformance::FIXTURE_CONFIG,
        dir.join("data").display().to_string(),
    )
}

pub async fn sqlite() -> World {
    sqlite_with("", &[]).await
}

/// More `[agents.<name>]` tables, and environment variables (secrets) for the app.
pub async fn sqlite_with(extra_agents: &str, env: &[(&str, &str)]) -> World {
    let dir = tempfile::tempdir().unwrap();
    let store = format!(
        "[store]\nurl = \"sqlite://{}\"\n",
        dir.path().join("t.db").display()
    );
    world_with(dir, &store, extra_agents, env).await
}

pub async fn postgres() -> World {
    let store = test_support::postgres::store_section("cmd");
    world_with(tempfile::tempdir().unwrap(), &store, "", &[]).await
}

async fn world_with(
    dir: tempfile::TempDir,
    store: &str,
    extra_agents: &str,
    env: &[(&str, &str)],
) -> World {
    let config = parse(
        Source::File("harness.toml".into()),
        &config_text(dir.path(), store, extra_agents),
    )
    .unwrap();
    let env: std::collections::HashMap<String, String> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let secrets = server::Secrets::from_lookup(&config, |k| env.get(k).cloned()).unwrap();
    let audit = Arc::new(MemoryAudit::default());
    let overrides = server::Overrides {
        clock: Clock {
            started_at: Timestamp::from_micros(NOW - 90_000_000),
            now,
            pace: 1,
        },
        audit: audit.clone(),
        ..server::Overrides::default()
    };
    let replica = store::ReplicaId::parse("harness").unwrap();
    let app = server::App::build_with(config, secrets, replica, overrides)
        .await
        .unwrap();
    World {
        registry: app.registry.clone(),
        services: app.services.clone(),
        store: app.store.clone(),
        table: app.services.table().clone(),
        audit,
        _app: app,
        _dir: dir,
    }
}

impl World {
    pub fn caller(&self, id: &str) -> Caller {
        let id: ActorId = id.parse().unwrap();
        // An agent id here speaks through MCP, as an agent's run token does.
        let surface = Surface::of_namespace(id.namespace()).unwrap_or(Surface::Mcp);
        Caller::new(resolve_actor(id, &self.table), surface)
    }

    pub fn in_channel(&self, id: &str, channel: &str) -> Caller {
        let mut c = self.caller(id);
        c.actor.origin = Some(Origin {
            channel_id: channel.parse().unwrap(),
            thread_key: None,
        });
        c
    }

    pub fn agent_for(&self, principal: &str) -> Caller {
        let p = self.caller(principal).actor;
        Caller::new(
            resolve_agent(&"coding".parse().unwrap(), Some(p), &self.table),
            Surface::Mcp,
        )
    }

    pub async fn say(&self, caller: &Caller, text: &str) -> Reply {
        self.registry
            .invoke(caller, RawInput::Text(text.into()), &self.services)
            .await
    }

    pub async fn run(
        &self,
        channel: &str,
        user: &str,
        vis: ChannelVisibility,
        age_s: i64,
    ) -> RunRecord {
        let n = NewRun::fixture(
            channel.parse().unwrap(),
            user.parse().unwrap(),
            vis,
            Timestamp::from_micros(NOW - age_s * 1_000_000),
        );
        self.store.create_run(n).await.unwrap()
    }
}
