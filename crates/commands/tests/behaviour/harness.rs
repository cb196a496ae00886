//! A registry with real services: a SQLite store in a temp dir (or Postgres in its own schema
//! when `SWITCHBOARD_TEST_POSTGRES_URL` is set and the test asks for it), the matrix fixture's
//! grants table, and audit lines kept in memory.

use std::sync::Arc;

use authz_core::{ActorId, ChannelVisibility, GrantsTable, Origin, resolve_actor, resolve_agent};
use commands::{Caller, MemoryAudit, RawInput, Registry, Reply, ScheduleInfo, Services, Surface};
use store::{NewRun, RunRecord, Store, Timestamp};

pub struct World {
    pub registry: Registry,
    pub services: Services,
    pub audit: Arc<MemoryAudit>,
    pub table: Arc<GrantsTable>,
    _dir: Option<tempfile::TempDir>,
}

pub const NOW: i64 = 1_800_000_000_000_000;

fn now() -> Timestamp {
    Timestamp::from_micros(NOW)
}

pub async fn sqlite() -> World {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    world(store::open(&url).await.unwrap(), Some(dir))
}

pub async fn postgres() -> World {
    let url = std::env::var("SWITCHBOARD_TEST_POSTGRES_URL")
        .expect("SWITCHBOARD_TEST_POSTGRES_URL is not set");
    let schema = format!(
        "sb_cmd_{}",
        store::new_id(Timestamp::now()).to_ascii_lowercase()
    );
    let s = store::PostgresStore::open_in_schema(&url, Some(&schema))
        .await
        .unwrap();
    world(Arc::new(s), None)
}

fn world(store: Arc<dyn Store>, dir: Option<tempfile::TempDir>) -> World {
    let table = Arc::new(commands::conformance::fixture_table().unwrap());
    let audit = Arc::new(MemoryAudit::default());
    let services = Services {
        store,
        table: table.clone(),
        audit: audit.clone(),
        started_at: Timestamp::from_micros(NOW - 90_000_000),
        now,
        schedules: vec![ScheduleInfo {
            name: "self-improvement".parse().unwrap(),
            cron: "0 9 * * MON".into(),
            runs: "friction report --days 7".into(),
        }],
        version: "test",
        dispatcher: None,
    };
    World {
        registry: Registry::catalogue(),
        services,
        audit,
        table,
        _dir: dir,
    }
}

impl World {
    pub fn caller(&self, id: &str) -> Caller {
        let id: ActorId = id.parse().unwrap();
        let surface = match id.namespace() {
            authz_core::Namespace::Slack => Surface::Slack,
            authz_core::Namespace::Http => Surface::Http,
            authz_core::Namespace::Mcp => Surface::Mcp,
            authz_core::Namespace::Access | authz_core::Namespace::AccessSvc => Surface::Access,
            authz_core::Namespace::Cli => Surface::Cli,
            authz_core::Namespace::Schedule => Surface::Schedule,
            authz_core::Namespace::Agent => Surface::Mcp,
        };
        Caller {
            actor: resolve_actor(id, &self.table),
            surface,
        }
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
        Caller {
            actor: resolve_agent(&"coding".parse().unwrap(), Some(p), &self.table),
            surface: Surface::Mcp,
        }
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
        let n = NewRun {
            surface: "test".into(),
            channel_id: channel.parse().unwrap(),
            thread_key: None,
            user_id: user.parse().unwrap(),
            agent: "echo".into(),
            repo: None,
            channel_visibility: vis,
            request: format!("request in {channel}"),
            created_at: Timestamp::from_micros(NOW - age_s * 1_000_000),
            capability_token: None,
            agent_token: None,
            owner: None,
        };
        self.services.store.create_run(n).await.unwrap()
    }
}
