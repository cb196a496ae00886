//! A live run decides its next tool call under the policy in force: a reload between two calls
//! reaches the second (the org's rules, and the principal's right to the run's repository).

use super::*;

use agents::tools::{PolicyNow, PolicyWatch};
use authz_core::{Actor, Resource};

/// The policy in force, as a reload changes it: each marker file the agent writes stands for
/// one reload (so the change lands exactly between two of its calls).
struct Reloads {
    ws: std::path::PathBuf,
}

impl Reloads {
    fn reloaded(&self, n: u32) -> bool {
        self.ws.join(format!("reload-{n}")).exists()
    }
}

impl PolicyWatch for Reloads {
    fn generation(&self) -> u64 {
        (1..=2).filter(|n| self.reloaded(*n)).count() as u64
    }

    fn now(&self, agent: &Actor, _repo: Option<&Resource>) -> PolicyNow {
        // Before any reload: no org rule. The first reload denies fs.read org-wide; the
        // second takes the principal's grant of the run's repository away.
        let org_rules = match self.reloaded(1) {
            true => vec![parse_run_rule("fs.read=deny").unwrap()],
            false => Vec::new(),
        };
        if !self.reloaded(2) {
            let table = ops_table(OPS_MAY_USE_WEB);
            return PolicyNow {
                agent: table.resolve_again(agent),
                repo: Some(table.repo(RepoSlug::parse("acme/web").unwrap())),
                org_rules,
            };
        }
        let table = ops_table(WEB_RESTRICTED);
        PolicyNow {
            agent: table.resolve_again(agent),
            repo: Some(table.repo(RepoSlug::parse("acme/web").unwrap())),
            org_rules: Vec::new(),
        }
    }
}

/// A grants table of the run's agent with `grant`'s entries.
fn ops_table(grant: &str) -> GrantsTable {
    let doc: toml::Table = toml::from_str(grant).unwrap();
    GrantsTable::from_config(&doc, [AgentName::parse("local").unwrap()].into()).unwrap()
}

/// acme/web is restricted: only those granted it may use it.
const WEB_RESTRICTED: &str = "[restrict]\nrepos = [\"acme/web\"]\n";
const OPS_MAY_USE_WEB: &str = "[restrict]\nrepos = [\"acme/web\"]\n\
    [grants.\"http:ops\"]\nactions = [\"repo:use\"]\nrepos = [\"acme/web\"]\n";

#[tokio::test]
async fn a_reload_between_two_calls_decides_the_second() {
    let fx = Fixture::new();
    let (base, script) = scripted_model(vec![
        Reply::Call("read_file", args(json!({"path": fx.path("src/lib.rs")}))),
        Reply::Call(
            "write_file",
            args(json!({"path": fx.path("reload-1"), "content": "1"})),
        ),
        // Under the reloaded policy: the org now denies fs.read.
        Reply::Call("read_file", args(json!({"path": fx.path("src/lib.rs")}))),
        Reply::Call(
            "write_file",
            args(json!({"path": fx.path("reload-2"), "content": "2"})),
        ),
        // And then its principal's grant of the run's repo is gone.
        Reply::Call(
            "write_file",
            args(json!({"path": fx.path("after.md"), "content": "x"})),
        ),
        Reply::Text("done"),
    ])
    .await;
    let mut settings = fx.settings(Ratchet::default(), Arc::new(NobodyToAsk));
    let before = ops_table(OPS_MAY_USE_WEB);
    let principal = resolve_actor(ActorId::parse("http:ops").unwrap(), &before);
    settings.agent = resolve_agent(
        &AgentName::parse("local").unwrap(),
        Some(principal),
        &before,
    );
    settings.repo = Some(before.repo(RepoSlug::parse("acme/web").unwrap()));
    settings.watch = Some(Arc::new(Reloads {
        ws: fx.ws.path().to_owned(),
    }));
    let gate = BrokerGate::new(settings).unwrap();
    let (outcome, _) = run_model(&base, gate).await;
    assert_eq!(outcome.answer(), Some("done"), "{:?}", outcome.error());
    let results = script.tool_results();
    assert_eq!(results[0], "pub fn answer() -> u8 { 42 }\n");
    assert!(results[1].starts_with("wrote"), "{}", results[1]);
    assert_eq!(results[2], "refused: the org policy denies fs.read");
    assert!(results[3].starts_with("wrote"), "{}", results[3]);
    assert_eq!(
        results[4],
        "refused: the person this run acts for may not use this repository"
    );
    assert!(!fx.ws.path().join("after.md").exists());
}
