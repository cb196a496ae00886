//! Groups through the binary, on every surface: a declared group's machine credential on the
//! ingress, a Slack user group (members from a fake Slack Web API on loopback), an identity
//! provider's group in a signed Access token's groups claim. Each grant works for members and
//! no one else; a failed `usergroups.users.list` grants nothing and the audit line says so;
//! `authz explain` names the group a grant came from.

use crate::common;

use std::path::Path;
use std::time::Duration;

use access_api::testing::{SigningKey, claims, key_set};
use serde_json::{Value, json};
use test_support::slack::{FakeSlack, callback, signed_headers};

const SECRET: &str = "groups-test-signing-secret";
const ISSUER: &str = "https://issuer.test";
const AUDIENCE: &str = "aud-groups";
const OPS: &str = "ops-token-0123456789abcdef";
const OTHER: &str = "other-token-0123456789abcdef";

/// The policy under test: one group of each kind, each granting one action its members'
/// baseline lacks (and a Slack group whose lookup always fails).
const GROUPS: &str = "[groups]\noncall = [\"http:ops\", \"mcp:ops\"]\n\
    [grants.\"group:oncall\"]\nactions = [\"status:read\"]\n\
    [grants.\"group:slack:S0ONCALL\"]\nactions = [\"runs:read\"]\n\
    [grants.\"group:slack:S0GONE\"]\nactions = [\"friction:write\"]\n\
    [grants.\"group:access:eng\"]\nactions = [\"schedule:exec\"]\n";

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn config(dir: &Path, api_url: &str, key: &SigningKey) -> String {
    let jwks = dir.join("jwks.json");
    std::fs::write(&jwks, key_set(&[key]).to_string()).unwrap();
    let audit = dir.join("audit.log");
    format!(
        "[agents]\ndefault = \"echo\"\n[agents.echo]\n[mcp]\nenabled = true\n[slack]\napi_url = \"{api_url}\"\n\
         [access]\nissuer = \"{ISSUER}\"\naudience = \"{AUDIENCE}\"\njwks_file = {jwks:?}\ngroups_claim = \"groups\"\n\
         [telemetry]\naudit_file = {audit:?}\n{GROUPS}",
    )
}

/// The texts of the ephemeral replies to `user` so far.
fn replies_to(fake: &FakeSlack, user: &str) -> Vec<String> {
    fake.calls_of("chat.postEphemeral")
        .iter()
        .filter(|c| c.param("user") == Some(user))
        .filter_map(|c| c.param("text").filter(|t| !t.is_empty()).map(str::to_owned))
        .collect()
}

/// Posts a signed `app_mention` of `user` saying `text`; the reply's text to that user: the
/// first ephemeral to them that arrives after the mention (60 s at most).
async fn mention(base: &str, fake: &FakeSlack, n: usize, user: &str, text: &str) -> String {
    let before = replies_to(fake, user).len();
    let body = callback(
        &format!("EvGroups{n}"),
        json!({"type": "app_mention", "user": user, "channel": "C1",
            "ts": format!("1700000300.{n:06}"), "text": format!("<@UBOT> {text}")}),
    );
    let mut req = reqwest::Client::new()
        .post(format!("{base}/slack/events"))
        .body(body.clone());
    for (k, v) in signed_headers(SECRET, now(), &body) {
        req = req.header(k, v);
    }
    assert_eq!(req.send().await.unwrap().status(), 200);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(reply) = replies_to(fake, user).get(before) {
            return reply.clone();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no reply to {user}'s {text:?}: {:?}",
            fake.calls()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn ingress(base: &str, token: &str, text: &str) -> u16 {
    reqwest::Client::new()
        .post(format!("{base}/ingress"))
        .bearer_auth(token)
        .header("content-type", "text/plain")
        .body(text.to_owned())
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// The tools `tools/list` offers a bearer token on `/mcp` (stateless: no session to open).
async fn mcp_tools(base: &str, token: &str) -> Vec<String> {
    let body = reqwest::Client::new()
        .post(format!("{base}/mcp"))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let answer: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    answer["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{answer}"))
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

async fn api_fire(base: &str, token: &str) -> u16 {
    reqwest::Client::new()
        .post(format!("{base}/api/schedule.fire"))
        .header("cf-access-jwt-assertion", token)
        .header("content-type", "application/json")
        .body(json!({"name": "no-such-schedule"}).to_string())
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// Waits until the audit file holds a line with every one of `parts`.
fn audit_line(dir: &Path, parts: &[&str]) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(dir.join("audit.log")).unwrap_or_default();
        if let Some(line) = text.lines().find(|l| parts.iter().all(|p| l.contains(p))) {
            return line.to_owned();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no audit line with {parts:?} in:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_groups_grant_reaches_its_members_on_every_surface_and_nobody_else() {
    let fake = FakeSlack::new();
    fake.set_user_group("S0ONCALL", &["U1"]);
    let api_url = fake.serve().await.unwrap();
    let key = SigningKey::generate("groups-key");
    let dir = tempfile::tempdir().unwrap();
    let tokens = json!({
        OPS: {"subject": "ops", "channel": "http:ops"},
        OTHER: {"subject": "other", "channel": "http:other"},
    })
    .to_string();
    let env = [
        ("SLACK_BOT_TOKEN", "xoxb-groups"),
        ("SLACK_SIGNING_SECRET", SECRET),
        ("SWITCHBOARD_INGRESS_TOKENS", tokens.as_str()),
    ];
    let (server, summary) =
        common::start_replica(dir.path(), &config(dir.path(), &api_url, &key), &env);
    assert!(summary.contains("Access JWTs from"), "{summary}");

    // A declared group: the ingress token it lists holds its grant; another token does not.
    assert_eq!(ingress(&server.base, OPS, "status").await, 200);
    assert_eq!(ingress(&server.base, OTHER, "status").await, 403);
    // The same on MCP: the group's status tool is offered to its member's token alone.
    assert!(
        mcp_tools(&server.base, OPS)
            .await
            .contains(&"status".to_owned())
    );
    assert!(
        !mcp_tools(&server.base, OTHER)
            .await
            .contains(&"status".to_owned())
    );

    // A Slack user group: U1 is in it (Slack says so), U2 is not.
    let u1 = mention(&server.base, &fake, 0, "U1", "runs list").await;
    assert!(!u1.contains("🚫"), "{u1}");
    let u2 = mention(&server.base, &fake, 1, "U2", "runs list").await;
    assert!(u2.contains("🚫"), "{u2}");
    let looked_up = fake.calls_of("usergroups.users.list");
    assert!(
        looked_up
            .iter()
            .any(|c| c.param("usergroup") == Some("S0ONCALL")),
        "{looked_up:?}"
    );
    // A group whose lookup failed grants nothing, and the refusal's audit line says why.
    let u1_friction = mention(&server.base, &fake, 2, "U1", "friction propose x").await;
    assert!(u1_friction.contains("🚫"), "{u1_friction}");
    let line = audit_line(
        dir.path(),
        &[
            "actor=slack:U1",
            "action=friction:write",
            "unresolved_groups=group:slack:S0GONE",
        ],
    );
    assert!(line.contains("lookup failed"), "{line}");

    // An identity provider's group, from the signed token's groups claim.
    let with_groups = |sub: &str, groups: Value| {
        let mut c = claims(ISSUER, AUDIENCE, sub);
        c["groups"] = groups;
        key.sign(&c)
    };
    let fired = api_fire(&server.base, &with_groups("alice", json!(["eng", "web"]))).await;
    assert!(fired != 403 && fired < 500, "a member of eng: {fired}");
    for (who, groups) in [
        ("bob", json!(["web"])),
        ("carol", json!("web")),
        ("dave", json!([{"name": "eng"}])),
        // A claim that does not read as group names grants no group, never a part of one.
        ("erin", json!(["eng", 7])),
        ("frank", json!({"eng": true})),
    ] {
        assert_eq!(
            api_fire(&server.base, &with_groups(who, groups)).await,
            403,
            "{who}"
        );
    }
    let no_claim = key.sign(&claims(ISSUER, AUDIENCE, "grace"));
    assert_eq!(api_fire(&server.base, &no_claim).await, 403);
    drop(server);

    // `authz explain` names the group each grant came from.
    let explain = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .current_dir(dir.path())
            .env_remove("SWITCHBOARD_CONFIG")
            .env("NO_COLOR", "1")
            .args(["authz", "explain", "--config", "switchboard.toml"])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    for (who, group, action, resource, verdict, says) in [
        (
            "http:ops",
            None,
            "status:read",
            "command:id=status",
            "ALLOW",
            "granted by group:oncall",
        ),
        (
            "slack:U1",
            Some("group:slack:S0ONCALL"),
            "runs:read",
            "command:id=runs.list",
            "ALLOW",
            "granted by group:slack:S0ONCALL",
        ),
        (
            "http:other",
            None,
            "status:read",
            "command:id=status",
            "DENY",
            "held by none",
        ),
    ] {
        let mut args = vec!["--actor", who, "--action", action, "--resource", resource];
        args.extend(group.iter().flat_map(|g| ["--group", *g]));
        let said = explain(&args);
        assert!(said.starts_with(verdict) && said.contains(says), "{said}");
    }
    let json_out = explain(&[
        "--json",
        "--actor",
        "access:alice",
        "--group",
        "group:access:eng",
        "--action",
        "schedule:exec",
        "--resource",
        "command:id=schedule.fire",
    ]);
    let v: Value = serde_json::from_str(&json_out).unwrap_or_else(|e| panic!("{e}: {json_out}"));
    assert_eq!(v["verdict"], "allow");
    assert_eq!(v["granted_by"], json!(["group:access:eng"]));
    // A Slack user group may not be handed what any member could give themself.
    let refused = format!(
        "{}[grants.\"group:slack:S0ADMINS\"]\nactions = [\"config:write\"]\n",
        std::fs::read_to_string(dir.path().join("switchboard.toml")).unwrap()
    );
    std::fs::write(dir.path().join("refused.toml"), refused).unwrap();
    let check = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .current_dir(dir.path())
        .env_remove("SWITCHBOARD_CONFIG")
        .args(["config", "check", "--config", "refused.toml"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&check.stderr).into_owned()
        + &String::from_utf8_lossy(&check.stdout);
    assert!(!check.status.success(), "{said}");
    assert!(
        said.contains("grants.\"group:slack:S0ADMINS\"")
            && said.contains("may not hold config:write"),
        "{said}"
    );
}
