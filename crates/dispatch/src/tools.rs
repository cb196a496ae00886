//! The broker's tool loop for one run: the gate an `openai` agent's tool calls pass, built
//! before the agent starts from the org's rules and grants (`[agent_policy]`,
//! `[[agent_grants]]`), the project's `.switchboard/agent-policy.toml` as its repo's base
//! commit holds it (read before the run's workspace was made), the run's own
//! `--policy-rule`s, the promises and taint of its ancestor runs (their `restriction` and
//! `taint` events), the agent actor acting for the run's principal, who answers a person's
//! ask (nobody, for a principal that is not a person), and the MCP servers `mcp add`
//! configured for the run's channel and the org (connected and listed before the agent
//! starts).

use std::sync::Arc;
use std::time::Duration;

use agents::tools::{
    Approver, BrokerGate, ExecLimits, GateSettings, McpServer, McpServers, McpTimeouts,
    NobodyToAsk, Tools,
};
use authz_core::{Actor, AgentName, ChannelId, ConfigTier, RunId};
use broker::ratchet::{Ratchet, RatchetEvent};
use broker::rules::ToolRule;
use broker::{GrantSpec, RuleTable, SessionId, SessionState, Timestamp, ToolGrants};
use commands::catalogue::MCP_PREFIX;
use store::{RunRecord, Store};

/// How far up the parent chain promises are read.
const MAX_ANCESTORS: usize = 32;

/// What every run's gate is built from (the server fills it from the config).
#[derive(Clone)]
pub struct ToolBroker {
    /// The policy in force: the grants table (agent actors, repo resources) and the org's
    /// rules, read again before each call of a live run.
    pub policy: Arc<commands::LivePolicy>,
    pub grants: Vec<GrantSpec>,
    pub approval_timeout: Duration,
    /// Who answers a person's ask: the terminal for `switchboard ask`, the approval desk
    /// (the run page, Slack's buttons) under `serve`. Asked only in a run whose principal is
    /// a person.
    pub person: Arc<dyn Approver>,
    /// `[agent_policy] reviewer`: the declared agent asked for `agent_review` (the dispatcher
    /// runs it like the memory model); none refuses every review.
    pub reviewer: Option<AgentName>,
    pub limits: ExecLimits,
    /// How long listing an MCP server's tools at a run's start, and one call, may take.
    pub mcp_timeouts: McpTimeouts,
}

impl Default for ToolBroker {
    fn default() -> Self {
        ToolBroker {
            policy: Arc::default(),
            grants: Vec::new(),
            approval_timeout: Duration::from_secs(300),
            person: Arc::new(NobodyToAsk),
            reviewer: None,
            limits: ExecLimits::default(),
            mcp_timeouts: McpTimeouts::default(),
        }
    }
}

/// An agent whose runs have a broker gate: one whose back end calls tools (`openai`), or a
/// command agent whose network goes through the broker. Its kind and model are what the
/// rules name (a command agent's model is not known: `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolProfile {
    pub kind: Option<String>,
    pub model: Option<String>,
}

/// What one run's gate is built for.
pub(crate) struct ForRun<'a> {
    pub run: &'a RunRecord,
    pub agent: &'a AgentName,
    pub principal: &'a Actor,
    pub profile: &'a ToolProfile,
    pub workspace: &'a agents::Workspace,
    /// The project's policy, from the repo's base commit (empty without a repo).
    pub project: &'a broker::file::ProjectPolicy,
    /// Who answers a person's ask; `None` when the principal is not a person.
    pub person: Option<Arc<dyn Approver>>,
    pub run_rules: &'a [commands::RunRule],
    pub now: fn() -> store::Timestamp,
}

/// The run's own rules, read by the broker; one it cannot read is the run's fault (the run
/// fails before its agent starts), never a rule left out.
fn run_rules(rules: &[commands::RunRule]) -> Result<Vec<ToolRule>, String> {
    rules
        .iter()
        .map(|rule| broker::rules::parse_run_rule(&rule.0))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())
}

/// The run's gate, or why it cannot have one (the run then fails before its agent starts).
pub(crate) async fn gate_for(
    broker: &ToolBroker,
    reviewer: Arc<dyn Approver>,
    store: &dyn Store,
    r: ForRun<'_>,
) -> Result<Tools, String> {
    let repo = r.run.repo.as_ref().map(|slug| slug.as_str().to_owned());
    let grants = broker
        .grants
        .iter()
        .filter(|g| g.agent.as_deref().is_none_or(|a| a == r.agent.as_str()))
        .filter(|g| {
            g.repo
                .as_ref()
                .is_none_or(|want| Some(want.to_ascii_lowercase()) == repo)
        })
        .map(|g| g.resolve(&r.workspace.dir))
        .collect::<Result<Vec<_>, _>>()
        .and_then(ToolGrants::new)
        .map_err(|e| format!("the agent's grants: {e}"))?;
    let run_rules = run_rules(r.run_rules)?;
    let policy = broker.policy.now();
    let table = RuleTable::new(policy.org_rules.clone(), r.project.rules.clone(), run_rules);
    let (ratchet, state) = ancestors(store, r.run.parent_run.clone()).await?;
    let agent = authz_core::resolve_agent(r.agent, Some(r.principal.clone()), &policy.table);
    let servers = mcp_servers(store, &r.run.channel_id).await?;
    let mcp = McpServers::connect(servers, broker.mcp_timeouts).await;
    let now = r.now;
    let settings = GateSettings {
        session: SessionId::from(r.run.id.clone()),
        agent,
        repo: r.run.repo.clone().map(|slug| policy.table.repo(slug)),
        grants,
        table,
        agent_kind: r.profile.kind.clone(),
        model: r.profile.model.clone(),
        workspace: r.workspace.dir.clone(),
        repository: r.workspace.repository,
        deny_read: r.workspace.deny_read.clone(),
        protected: r.workspace.protected.clone(),
        ratchet,
        state,
        limits: broker.limits,
        person: r.person,
        reviewer,
        approval_timeout: broker.approval_timeout,
        clock: Arc::new(move || Timestamp::from_micros(now().micros())),
        mcp,
        watch: Some(Arc::new(WatchPolicy(broker.policy.clone()))),
    };
    BrokerGate::new(settings).map(|gate| Tools(Arc::new(gate)))
}

/// A live run's view of the policy in force: its agent and repo resolved again after a reload.
struct WatchPolicy(Arc<commands::LivePolicy>);

impl agents::tools::PolicyWatch for WatchPolicy {
    fn generation(&self) -> u64 {
        self.0.generation()
    }

    fn now(&self, agent: &Actor, repo: Option<&authz_core::Resource>) -> agents::tools::PolicyNow {
        let policy = self.0.now();
        let repo = repo.and_then(|r| match r {
            authz_core::Resource::Repo { slug, .. } => Some(policy.table.repo(slug.clone())),
            _ => None,
        });
        agents::tools::PolicyNow {
            agent: policy.table.resolve_again(agent),
            repo,
            org_rules: policy.org_rules.clone(),
        }
    }
}

/// The MCP servers `mcp add` configured for the run's channel and the org; a channel's server
/// stands in for the org's of the same name. A store fault fails the run (a server list that
/// cannot be read is not an empty one).
async fn mcp_servers(store: &dyn Store, channel: &ChannelId) -> Result<Vec<McpServer>, String> {
    let mut servers: Vec<McpServer> = Vec::new();
    for tier in [ConfigTier::Channel(channel.clone()), ConfigTier::Org] {
        let values = store
            .list_config(&tier, MCP_PREFIX)
            .await
            .map_err(|e| format!("the MCP servers could not be read: {}", e.token()))?;
        for v in values {
            let name = v.key.trim_start_matches(MCP_PREFIX).to_owned();
            if !servers.iter().any(|s| s.name == name) {
                servers.push(McpServer { name, url: v.value });
            }
        }
    }
    Ok(servers)
}

/// A `taint` event's body: the session's state once it rose.
#[derive(serde::Deserialize)]
struct TaintEvent {
    taint: broker::DataClass,
    untrusted: bool,
}

/// What a child run inherits from its ancestors: their promises, oldest first, and the highest
/// taint any of them reached (so a secret one read cannot leave through a child's fetch). A
/// restriction or taint event that cannot be read fails the run: neither may silently stop
/// binding.
async fn ancestors(
    store: &dyn Store,
    parent: Option<RunId>,
) -> Result<(Ratchet, SessionState), String> {
    let mut chain: Vec<Vec<RatchetEvent>> = Vec::new();
    let mut state = SessionState::default();
    let mut next = parent;
    while let Some(id) = next {
        if chain.len() >= MAX_ANCESTORS {
            return Err(format!(
                "the run's ancestors go deeper than {MAX_ANCESTORS} runs"
            ));
        }
        let events = store
            .events(&id)
            .await
            .map_err(|e| format!("reading run {id}'s promises failed: {}", e.token()))?;
        let promises = events
            .iter()
            .filter(|e| e.kind == "restriction")
            .map(|e| serde_json::from_str::<RatchetEvent>(&e.body))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("run {id} holds a restriction that does not read: {e}"))?;
        chain.push(promises);
        for event in events.iter().filter(|e| e.kind == "taint") {
            let taint: TaintEvent = serde_json::from_str(&event.body)
                .map_err(|e| format!("run {id} holds a taint event that does not read: {e}"))?;
            state = state.after(broker::Label {
                class: taint.taint,
                untrusted: taint.untrusted,
            });
        }
        next = store
            .get_run(&id)
            .await
            .map_err(|e| format!("reading run {id} failed: {}", e.token()))?
            .and_then(|run| run.parent_run);
    }
    let oldest_first: Vec<RatchetEvent> = chain.into_iter().rev().flatten().collect();
    let ratchet = Ratchet::fold(&oldest_first).map_err(|e| e.to_string())?;
    Ok((ratchet, state))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_run_rule_the_broker_cannot_read_fails_the_gate_and_a_good_one_is_kept() {
        use commands::RunRule;
        let good = super::run_rules(&[RunRule("fs.write=allow".into())]).unwrap();
        assert_eq!(good.len(), 1);
        let bad = super::run_rules(&[
            RunRule("fs.write=allow".into()),
            RunRule("fs.write=maybe".into()),
        ]);
        assert!(bad.unwrap_err().contains("fs.write=maybe"));
    }

    use super::*;
    use authz_core::{ActorId, ChannelId, ChannelVisibility};
    use broker::{DataClass, RuleDecision};
    use store::NewRun;

    async fn run(store: &dyn Store, parent: Option<RunId>, events: &[(&str, &str)]) -> RunId {
        let mut new = NewRun::fixture(
            ChannelId::parse("http:ops").unwrap(),
            ActorId::parse("http:ops").unwrap(),
            ChannelVisibility::Machine,
            store::wall_clock(),
        );
        new.parent_run = parent;
        let id = store.create_run(new).await.unwrap().id;
        for (kind, body) in events {
            store
                .append_event(&id, store::wall_clock(), kind, body)
                .await
                .unwrap();
        }
        id
    }

    #[tokio::test]
    async fn a_child_inherits_every_ancestors_promises_and_highest_taint() {
        let store = store::open("memory:").await.unwrap();
        let grandparent = run(
            store.as_ref(),
            None,
            &[
                (
                    "restriction",
                    r#"{"kind":"restricted","promise":"net.*=deny"}"#,
                ),
                ("taint", r#"{"taint":"sensitive","untrusted":false}"#),
                ("text", "not a promise"),
            ],
        )
        .await;
        let parent = run(
            store.as_ref(),
            Some(grandparent.clone()),
            &[
                (
                    "restriction",
                    r#"{"kind":"restricted","promise":"fs.write=ask"}"#,
                ),
                ("taint", r#"{"taint":"secret","untrusted":true}"#),
            ],
        )
        .await;
        let (ratchet, state) = ancestors(store.as_ref(), Some(parent.clone()))
            .await
            .unwrap();
        assert_eq!(ratchet.ceiling("net.fetch"), Some(RuleDecision::Deny));
        assert_eq!(ratchet.ceiling("fs.write"), Some(RuleDecision::Ask));
        assert_eq!((state.taint, state.untrusted), (DataClass::Secret, true));
        // A run with no parent starts clean.
        let (ratchet, state) = ancestors(store.as_ref(), None).await.unwrap();
        assert!(ratchet.promises().is_empty());
        assert_eq!(state, SessionState::default());
        // An ancestor's event that does not read fails the child, never loosens it.
        let bad = run(
            store.as_ref(),
            Some(parent),
            &[("restriction", "{\"kind\":\"lifted\"}")],
        )
        .await;
        let err = ancestors(store.as_ref(), Some(bad.clone()))
            .await
            .unwrap_err();
        assert!(err.contains("does not read"), "{err}");
        let tainted = run(
            store.as_ref(),
            None,
            &[("taint", "{\"taint\":\"topsecret\"}")],
        )
        .await;
        assert!(ancestors(store.as_ref(), Some(tainted)).await.is_err());
    }

    #[tokio::test]
    async fn a_runs_mcp_servers_are_its_channels_then_the_orgs() {
        let store = store::open("memory:").await.unwrap();
        let ops = ChannelId::parse("http:ops").unwrap();
        let other = ChannelId::parse("http:other").unwrap();
        let set = |tier: ConfigTier, name: &str, url: &str| store::ConfigValue {
            tier,
            key: format!("mcp.{name}"),
            value: url.to_owned(),
            updated_by: ActorId::cli_local(),
            updated_at: store::wall_clock(),
        };
        for v in [
            set(ConfigTier::Org, "github", "https://org.example/gh"),
            set(ConfigTier::Org, "linear", "https://org.example/linear"),
            set(
                ConfigTier::Channel(ops.clone()),
                "github",
                "https://ops.example/gh",
            ),
            set(
                ConfigTier::Channel(other),
                "sentry",
                "https://other.example/s",
            ),
        ] {
            store.set_config(v).await.unwrap();
        }
        let servers = mcp_servers(store.as_ref(), &ops).await.unwrap();
        let got: Vec<(&str, &str)> = servers
            .iter()
            .map(|s| (s.name.as_str(), s.url.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("github", "https://ops.example/gh"),
                ("linear", "https://org.example/linear")
            ],
            "the channel's github stands in for the org's; another channel's are not here"
        );
    }
}
