//! `runs diff` through the binary, on every surface: a sandboxed `command` agent edits files in
//! its workspace of a repo whose policy hides a file; the change shows on the CLI, the ingress,
//! MCP, `/api` and Slack (escaped there: a `<!channel>` in a diff line never pings), cleaned
//! like any agent text, no commit id shown; a reader denied the run (or, in a restricted repo,
//! the repo) gets the missing-run answer byte for byte; a
//! file the run wrote equal to the hidden one is the run's own new file and shows nothing of
//! the hidden one; and a run that kept nothing made no branch.

use std::path::Path;
use std::time::Duration;

use access_api::testing::{SigningKey, claims, key_set};
use serde_json::{Value, json};
use test_support::slack::{FakeSlack, callback, signed_headers};

use crate::common;
use crate::common::project::{Project, SECRET, git};

const SIGNING: &str = "run-diff-signing-secret";
const ISSUER: &str = "https://issuer.diff.test";
const AUDIENCE: &str = "aud-diff";
const OPS: &str = "ops-token-diff-0123456789";
const OTHER: &str = "other-token-diff-0123456789";
/// A well-formed run id no run has.
const MISSING: &str = "001K0000000000000000000000";

/// The agent: one commit of its own, then uncommitted changes (its request, written as a new
/// file; a credential-shaped line; a `.gitattributes`, which is never kept).
const EDITOR: &str = r#"set -e
echo "hello <!channel> from the agent" >> README.md
sed -i s/answer/reply/ src/lib.rs
git add -A
git -c user.name=Agent -c user.email=agent@example.com commit -qm "Say reply, not answer"
printf "%s\n" "$0" > copy.toml
echo "slack token xoxb-1111111111-2222222222-abcdefabcdef" > notes.txt
echo "*.toml diff=leak" > .gitattributes
echo done"#;

fn config(dir: &Path, api_url: &str, key: &SigningKey) -> String {
    let jwks = dir.join("jwks.json");
    std::fs::write(&jwks, key_set(&[key]).to_string()).unwrap();
    format!(
        "[server]\ndata_dir = {data:?}\n[store]\nurl = \"sqlite://{db}\"\n\
         [agents]\ndefault = \"echo\"\n[agents.echo]\n\
         [agents.editor]\nbackend = \"command\"\ncommand = [\"sh\", \"-c\", '''{EDITOR}''']\nrequest_via = \"argument\"\n\
         [mcp]\nenabled = true\n[slack]\napi_url = \"{api_url}\"\n\
         [access]\nissuer = \"{ISSUER}\"\naudience = \"{AUDIENCE}\"\njwks_file = {jwks:?}\n\
         [restrict]\nrepos = [\"acme/web\"]\n\
         [grants.\"http:ops\"]\nactions = [\"agent:run:editor\", \"repo:use\", \"runs:read\"]\nchannels = [\"http:ops\"]\nrepos = [\"acme/web\"]\n\
         [grants.\"http:other\"]\nactions = [\"runs:read\"]\n\
         [grants.\"mcp:ops\"]\nactions = [\"runs:read\"]\nchannels = [\"http:ops\"]\nrepos = [\"acme/web\"]\n\
         [grants.\"mcp:other\"]\nactions = [\"runs:read\"]\n\
         [grants.\"slack:U1\"]\nactions = [\"runs:read\"]\nchannels = [\"http:ops\"]\nrepos = [\"acme/web\"]\n\
         [grants.\"access:reader\"]\nactions = [\"runs:read\"]\nchannels = [\"http:ops\"]\nrepos = [\"acme/web\"]\n\
         [grants.\"access:watcher\"]\nactions = [\"runs:read\"]\nchannels = [\"http:ops\"]\n",
        data = dir.join("data"),
        db = dir.join("sb.db").display(),
    )
}

/// `switchboard <args>` on the test's config: stdout, and whether it succeeded.
fn cli(dir: &Path, args: &[&str]) -> (String, bool) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .arg("--config")
        .arg(dir.join("switchboard.toml"))
        .args(args)
        .env_remove("SWITCHBOARD_INGRESS_TOKENS")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.success(),
    )
}

/// POST /ingress as `token`: status and body.
async fn ingress(base: &str, token: &str, text: &str, wait: bool) -> (u16, String) {
    let query = if wait { "?wait=120" } else { "" };
    let response = reqwest::Client::new()
        .post(format!("{base}/ingress{query}"))
        .bearer_auth(token)
        .header("content-type", "text/plain")
        .header("accept", "application/json")
        .body(text.to_owned())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

/// A run of the editor whose request (its new file's content) is `content`: its id, once it
/// has ended.
async fn edit(base: &str, content: &str) -> String {
    let (status, body) = ingress(base, OPS, &format!("@editor in acme/web: {content}"), true).await;
    assert_eq!(status, 200, "{body}");
    let outcome: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(outcome["status"], "completed", "{outcome}");
    outcome["run_id"].as_str().unwrap().to_owned()
}

/// `tools/call runs_diff` on `/mcp` as `token`: the JSON-RPC answer.
async fn mcp_diff(base: &str, token: &str, id: &str) -> Value {
    let body = reqwest::Client::new()
        .post(format!("{base}/mcp"))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "runs_diff", "arguments": {"id": id}}})
            .to_string(),
        )
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// `GET /api/runs.diff?id=…` with an Access token: status and body.
async fn api_diff(base: &str, jwt: &str, id: &str) -> (u16, String) {
    let response = reqwest::Client::new()
        .get(format!("{base}/api/runs.diff?id={id}"))
        .header("cf-access-jwt-assertion", jwt)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// Posts a signed mention of U1 saying `text`; every ephemeral reply to U1 after it, joined,
/// once one holds `until` (60 s at most).
async fn slack_reply(base: &str, fake: &FakeSlack, text: &str, until: &str) -> String {
    let replies = || {
        fake.calls_of("chat.postEphemeral")
            .iter()
            .filter(|c| c.param("user") == Some("U1"))
            .filter_map(|c| c.param("text").map(str::to_owned))
            .collect::<Vec<_>>()
    };
    let before = replies().len();
    let body = callback(
        "EvDiff1",
        json!({"type": "app_mention", "user": "U1", "channel": "C1",
            "ts": "1700000400.000001", "text": format!("<@UBOT> {text}")}),
    );
    let mut req = reqwest::Client::new()
        .post(format!("{base}/slack/events"))
        .body(body.clone());
    for (k, v) in signed_headers(SIGNING, now(), &body) {
        req = req.header(k, v);
    }
    assert_eq!(req.send().await.unwrap().status(), 200);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let joined = replies().get(before..).unwrap_or_default().join("\n");
        if joined.contains(until) {
            return joined;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no reply holding {until:?}: {:?}",
            fake.calls()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The diff's data with what differs between two guesses (the guessed line, the run's id and
/// its commits' ids) written the same.
fn shape(diff: &Value, id: &str, guess: &str) -> String {
    let mut diff = diff.clone();
    for key in ["tip", "run", "branch"] {
        diff[key] = Value::Null;
    }
    if let Some(commits) = diff["commits"].as_array_mut() {
        for c in commits {
            c["id"] = Value::Null;
        }
    }
    diff.to_string()
        .replace(id, "<run>")
        .replace(guess, "<guess>")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_diff_shows_what_a_run_kept_on_every_surface_and_nothing_it_was_denied() {
    let project = Project::new(true);
    let fake = FakeSlack::new();
    let api_url = fake.serve().await.unwrap();
    let key = SigningKey::generate("diff-key");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("switchboard.toml"),
        config(dir.path(), &api_url, &key),
    )
    .unwrap();
    let repo = project.repo.display().to_string();
    assert!(cli(dir.path(), &["repo", "add", "acme/web", "--path", &repo]).1);
    let tokens = json!({
        OPS: {"subject": "ops", "channel": "http:ops"},
        OTHER: {"subject": "other", "channel": "http:other"},
    })
    .to_string();
    let env = [
        ("SLACK_BOT_TOKEN", "xoxb-diff"),
        ("SLACK_SIGNING_SECRET", SIGNING),
        ("SWITCHBOARD_INGRESS_TOKENS", tokens.as_str()),
    ];
    let text = std::fs::read_to_string(dir.path().join("switchboard.toml")).unwrap();
    let (server, _) = common::start_replica(dir.path(), &text, &env);
    let base = server.base.as_str();

    // The run writes, as its own new file, exactly what the hidden file holds.
    let secret = std::fs::read_to_string(project.repo.join(SECRET)).unwrap();
    let right = secret.trim_end().to_owned();
    let id = edit(base, &right).await;

    // The CLI: the file list, the commits, what was not kept, the diff.
    let (shown, ok) = cli(dir.path(), &["runs", "diff", &id]);
    assert!(ok, "{shown}");
    for expected in [
        "2 commits kept on switchboard/",
        "Say reply, not answer",
        "M  +1 -0",
        "README.md",
        "A  +1 -0",
        "copy.toml",
        "not kept (1;",
        "\".gitattributes\"",
        "+hello <!channel> from the agent",
        "-pub fn answer() -> u8 { 42 }",
        "+pub fn reply() -> u8 { 42 }",
        "+slack token [redacted]",
    ] {
        assert!(shown.contains(expected), "{expected:?} is not in:\n{shown}");
    }
    assert!(!shown.contains("xoxb-1111111111"), "{shown}");
    let (json_out, _) = cli(dir.path(), &["runs", "diff", &id, "--json"]);
    let diff: Value = serde_json::from_str(&json_out).unwrap();
    let paths: Vec<&str> = diff["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        ["README.md", "copy.toml", "notes.txt", "src/lib.rs"],
        "{diff}"
    );
    let copy = &diff["files"][1];
    assert_eq!(copy["status"], "added");
    assert_eq!(copy["hunks"][0]["lines"], json!([format!("+{right}")]));
    assert_eq!(diff["stats"]["files"], 4);
    assert_eq!(
        diff["not_kept"],
        json!({"names": [".gitattributes"], "count": 1})
    );
    // No commit id is shown: each hashes the base's whole tree, the hidden file's blob in it.
    let tip = git(&project.repo, &["rev-parse", &format!("switchboard/{id}")]);
    for commit in [project.head.as_str(), &project.head[..12], &tip, &tip[..12]] {
        assert!(
            !json_out.contains(commit) && !shown.contains(commit),
            "{commit}"
        );
    }
    // Nothing of the hidden file: not its name, nor its earlier secret, anywhere.
    // The guessed secret is there once, as the run's own line; the earlier one never.
    for (what, out) in [("text", &shown), ("json", &json_out)] {
        assert!(!out.contains("production-secrets"), "{what}: {out}");
        assert_eq!(
            out.matches(project.markers[1].as_str()).count(),
            1,
            "{what}: {out}"
        );
        project.assert_clean(what, &out.replace(project.markers[1].as_str(), ""));
    }

    // A wrong guess of the same length reads the same but for its own line.
    let guess = common::project::random_marker();
    let wrong = format!("token = \"{guess}\"");
    assert_eq!(wrong.len(), right.len());
    let other_run = edit(base, &wrong).await;
    let (wrong_json, _) = cli(dir.path(), &["runs", "diff", &other_run, "--json"]);
    let wrong_diff: Value = serde_json::from_str(&wrong_json).unwrap();
    assert_eq!(
        shape(&diff, &id, &project.markers[1]),
        shape(&wrong_diff, &other_run, &guess)
    );

    // The ingress: the same text; a reader denied the run reads what a missing run reads.
    let (status, body) = ingress(base, OPS, &format!("runs diff {id}"), false).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("+hello <!channel> from the agent"), "{body}");
    let denied = ingress(base, OTHER, &format!("runs diff {id}"), false).await;
    let missing = ingress(base, OTHER, &format!("runs diff {MISSING}"), false).await;
    assert_eq!(denied.0, 404);
    assert_eq!(denied, missing);

    // MCP: the tool's text carries the diff; a denied token's answer is a missing run's.
    let answer = mcp_diff(base, OPS, &id).await;
    let said = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("");
    assert!(said.contains("+pub fn reply() -> u8 { 42 }"), "{answer}");
    let denied = mcp_diff(base, OTHER, &id).await;
    let missing = mcp_diff(base, OTHER, MISSING).await;
    assert!(!denied.to_string().contains("reply()"), "{denied}");
    assert_eq!(denied, missing);

    // /api: the same JSON as the CLI's --json; a viewer who may not read it gets the 404.
    let reader = key.sign(&claims(ISSUER, AUDIENCE, "reader"));
    let (status, body) = api_diff(base, &reader, &id).await;
    assert_eq!(status, 200, "{body}");
    let api: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(api, diff);
    let stranger = key.sign(&claims(ISSUER, AUDIENCE, "stranger"));
    let denied = api_diff(base, &stranger, &id).await;
    let missing = api_diff(base, &stranger, MISSING).await;
    assert_eq!(denied.0, 404);
    assert_eq!(denied, missing);
    // The repo is restricted: a reader of the run who may not use the repo reads the run, but
    // its diff (the repo's files) is the missing run's answer.
    let watcher = key.sign(&claims(ISSUER, AUDIENCE, "watcher"));
    let run = reqwest::Client::new()
        .get(format!("{base}/api/runs.get?id={id}"))
        .header("cf-access-jwt-assertion", &watcher)
        .send()
        .await
        .unwrap();
    assert_eq!(run.status(), 200);
    let denied = api_diff(base, &watcher, &id).await;
    let missing = api_diff(base, &watcher, MISSING).await;
    assert_eq!(denied.0, 404);
    assert_eq!(denied, missing);
    // The run's page: the repo's owner sees its Changes; the watcher, the run without them.
    let url = format!("{base}/runs/{id}");
    let page = |jwt: String| {
        let url = url.clone();
        async move {
            reqwest::Client::new()
                .get(url)
                .header("cf-access-jwt-assertion", jwt)
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        }
    };
    let owners = page(reader.clone()).await;
    assert!(
        owners.contains("id=\"changes\"") && owners.contains("pub fn reply()"),
        "{owners}"
    );
    let watchers = page(watcher.clone()).await;
    assert!(watchers.contains(id.as_str()), "{watchers}");
    assert!(
        !watchers.contains("id=\"changes\"") && !watchers.contains("pub fn reply()"),
        "{watchers}"
    );

    // Slack: escaped, so the diff line never pings the channel.
    let reply = slack_reply(base, &fake, &format!("runs diff {id}"), "from the agent").await;
    assert!(
        reply.contains("+hello &lt;!channel&gt; from the agent"),
        "{reply}"
    );
    assert!(!reply.contains("<!channel>"), "{reply}");

    // Only the two runs that kept commits made branches; the user's main is where it was.
    let branches = git(
        &project.repo,
        &[
            "branch",
            "--list",
            "switchboard/*",
            "--format=%(refname:short)",
        ],
    );
    let mut made: Vec<&str> = branches.lines().collect();
    made.sort();
    let mut expected = vec![
        format!("switchboard/{id}"),
        format!("switchboard/{other_run}"),
    ];
    expected.sort();
    assert_eq!(made, expected);
    project.assert_untouched();
}

/// A run that changed nothing keeps nothing and makes no branch; `runs diff` says so.
#[test]
fn a_run_that_keeps_no_commit_makes_no_branch() {
    let project = Project::new(true);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("switchboard.toml"),
        format!(
            "[server]\ndata_dir = {data:?}\n[store]\nurl = \"sqlite://{db}\"\n\
             [agents]\ndefault = \"idle\"\n[agents.idle]\nbackend = \"command\"\ncommand = [\"sh\", \"-c\", \"ls > /dev/null; echo looked\"]\n",
            data = dir.path().join("data"),
            db = dir.path().join("sb.db").display(),
        ),
    )
    .unwrap();
    let repo = project.repo.display().to_string();
    assert!(cli(dir.path(), &["repo", "add", "acme/web", "--path", &repo]).1);
    let (out, ok) = cli(
        dir.path(),
        &["ask", "--json", "--repo", "acme/web", "look around"],
    );
    assert!(ok, "{out}");
    let id = serde_json::from_str::<Value>(&out).unwrap()["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        git(&project.repo, &["branch", "--list", "switchboard/*"]),
        ""
    );
    let (events, _) = cli(dir.path(), &["runs", "events", &id]);
    assert!(events.contains("kept 0 commits"), "{events}");
    assert!(events.contains("no branch was made"), "{events}");
    let (shown, ok) = cli(dir.path(), &["runs", "diff", &id]);
    assert!(ok, "{shown}");
    assert!(
        shown.contains("no changes were kept (no branch was made)"),
        "{shown}"
    );
    let (json_out, _) = cli(dir.path(), &["runs", "diff", &id, "--json"]);
    let diff: Value = serde_json::from_str(&json_out).unwrap();
    assert_eq!(diff["branch"], Value::Null);
    assert_eq!(diff["files"], json!([]));
    project.assert_untouched();
}
