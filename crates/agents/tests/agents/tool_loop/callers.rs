//! `shell` is decided the same whichever agent calls it: the `openai` loop's call (the gate's
//! own entry), Claude Code's `Bash` through its `PreToolUse` hook on the run's socket, and the
//! broker's MCP tool on the same socket. One table of rules and grants, three callers.

use super::*;
use agents::netproxy::agent_routes::{BROKER_MCP, CREDENTIAL_HEADER, HOOK_PRE};
use agents::netproxy::{Routes, RunProxy};
use agents::tools::ToolGate;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The proxy's answer body to one POST of `body` to `path`.
async fn post(socket: &Path, path: &str, body: &Value) -> Value {
    let body = body.to_string();
    let mut s = tokio::net::UnixStream::connect(socket).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{CREDENTIAL_HEADER}: the-run\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    let out = String::from_utf8_lossy(&out).into_owned();
    let (_, json) = out.split_once("\r\n\r\n").unwrap();
    serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn drained_sink() -> EventSink {
    let (sink, mut rx) =
        EventSink::channel(OutputCaps::default(), Arc::new(Sanitizer::new(vec![])));
    tokio::spawn(async move {
        while let Some(item) = rx.recv().await {
            if let SinkItem::Event { stored, .. } = item {
                stored.answer(true);
            }
        }
    });
    sink
}

/// How each caller answered: `Ok(())` allowed (and, for the two that run it, run), or the
/// refusal's text.
async fn three_callers(
    fx: &Fixture,
    rules: &[&str],
    shell_mode: Option<Mode>,
    person: Arc<dyn Approver>,
    cwd: &str,
) -> [Result<(), String>; 3] {
    let gate = || {
        let mut s = fx.settings(Ratchet::default(), person.clone());
        s.table = RuleTable::new(
            vec![],
            vec![],
            rules.iter().map(|r| parse_run_rule(r).unwrap()).collect(),
        );
        let mut grants: Vec<Grant> = grants(fx.ws.path())
            .into_iter()
            .filter(|g| g.tool != "shell")
            .collect();
        if let Some(mode) = shell_mode {
            grants.push(Grant {
                paths: vec![root(fx)],
                mode,
                ..grant("shell-ws", "shell")
            });
        }
        s.grants = ToolGrants::new(grants).unwrap();
        Arc::new(BrokerGate::new(s).unwrap())
    };
    let command = "echo decided";
    // 1. The openai loop: the gate's own entry, as the loop calls it.
    let loop_gate = gate();
    let said = loop_gate
        .call(
            &agents::tools::ToolCall {
                id: "c1".into(),
                name: "shell".into(),
                arguments: json!({"command": command, "cwd": cwd}).to_string(),
            },
            &drained_sink(),
        )
        .await;
    let by_loop = if said.starts_with("refused:") {
        Err(said)
    } else {
        Ok(())
    };
    // 2 and 3: through a run's proxy socket.
    let socket_of = |gate: Arc<BrokerGate>| {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("proxy.sock");
        let routes = Routes {
            credential: Some("the-run".into()),
            ..Routes::default()
        };
        let proxy = RunProxy::start(&socket, gate, routes, drained_sink()).unwrap();
        (dir, socket, proxy)
    };
    let (_d1, hook_socket, _p1) = socket_of(gate());
    let hook = post(
        &hook_socket,
        HOOK_PRE,
        &json!({"tool_name": "Bash", "tool_input": {"command": command}, "cwd": cwd, "tool_use_id": "t1"}),
    )
    .await;
    let by_hook = if hook["allow"] == true {
        Ok(())
    } else {
        Err(hook["reason"].as_str().unwrap_or_default().to_owned())
    };
    let (_d2, mcp_socket, _p2) = socket_of(gate());
    let mcp = post(
        &mcp_socket,
        BROKER_MCP,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "shell", "arguments": {"command": command, "cwd": cwd}}}),
    )
    .await;
    let text = mcp["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let by_mcp = if mcp["result"]["isError"] == true {
        Err(text)
    } else {
        Ok(())
    };
    [by_loop, by_hook, by_mcp]
}

/// (run rules, the shell grant's mode, who answers an ask, cwd, the refusal expected or
/// `None` for an allow)
type Row<'a> = (
    &'a [&'a str],
    Option<Mode>,
    &'a Arc<dyn Approver>,
    &'a str,
    Option<&'a str>,
);

/// The workspace's canonical path, as a grant names it.
fn root(fx: &Fixture) -> String {
    fx.ws
        .path()
        .canonicalize()
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

struct No;

#[async_trait]
impl Approver for No {
    async fn approve(&self, _question: &Question) -> Answer {
        Answer::No
    }
}

#[tokio::test]
async fn shell_is_decided_the_same_whichever_agent_calls_it() {
    let fx = Fixture::new();
    let ws = root(&fx);
    let elsewhere = tempfile::tempdir().unwrap();
    let elsewhere = elsewhere.path().to_string_lossy().into_owned();
    let yes: Arc<dyn Approver> = Arc::new(Yes);
    let no: Arc<dyn Approver> = Arc::new(No);
    // (rules, the shell grant's mode, who answers an ask, cwd, None = allowed or the refusal)
    let table: Vec<Row<'_>> = vec![
        (&["shell.exec=allow"], Some(Mode::Auto), &yes, &ws, None),
        // The sandbox's name for the workspace, as Claude Code reports its cwd.
        (
            &["shell.exec=allow"],
            Some(Mode::Auto),
            &yes,
            "/workspace",
            None,
        ),
        (
            &["shell.exec=deny"],
            Some(Mode::Auto),
            &yes,
            &ws,
            Some("the run policy denies shell.exec"),
        ),
        (
            &["shell.exec=allow"],
            None,
            &yes,
            &ws,
            Some("shell.exec: no-grant"),
        ),
        (
            &["shell.exec=allow"],
            Some(Mode::Deny),
            &yes,
            &ws,
            Some("shell.exec: denied-by-grant"),
        ),
        (
            &["shell.exec=allow"],
            Some(Mode::Auto),
            &yes,
            &elsewhere,
            Some("shell.exec: no-grant"),
        ),
        (
            &[],
            Some(Mode::Auto),
            &no,
            &ws,
            Some("needs a person's approval: refused"),
        ),
        (&[], Some(Mode::Auto), &yes, &ws, None),
        (
            &["shell.exec=allow"],
            Some(Mode::Ask),
            &no,
            &ws,
            Some("needs a person's approval: refused"),
        ),
    ];
    for (rules, mode, person, cwd, want) in table {
        let answers = three_callers(&fx, rules, mode, (*person).clone(), cwd).await;
        for (caller, answer) in ["openai loop", "Claude Code hook", "broker MCP"]
            .iter()
            .zip(&answers)
        {
            match (want, answer) {
                (None, Ok(())) => {}
                (Some(why), Err(said)) if said.contains(why) => {}
                _ => panic!(
                    "{rules:?} {mode:?} {cwd}: the {caller} said {answer:?}, expected {want:?}: {answers:?}"
                ),
            }
        }
    }
}

/// The hook routes ask nothing of a request without the run's credential, and a result no
/// decision of the run is waiting for is refused.
#[tokio::test]
async fn a_hook_without_the_credential_or_a_decision_is_refused() {
    let fx = Fixture::new();
    let yes: Arc<dyn Approver> = Arc::new(Yes);
    let gate = Arc::new(BrokerGate::new(fx.settings(Ratchet::default(), yes)).unwrap());
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("proxy.sock");
    let routes = Routes {
        credential: Some("the-run".into()),
        ..Routes::default()
    };
    let _proxy = RunProxy::start(&socket, gate, routes, drained_sink()).unwrap();
    let call = json!({"tool_name": "Bash", "tool_input": {"command": "ls"}, "cwd": "/workspace", "tool_use_id": "t1"}).to_string();
    for credential in ["", "x-switchboard-run-credential: another-run\r\n"] {
        let mut s = tokio::net::UnixStream::connect(&socket).await.unwrap();
        let head = format!(
            "POST {HOOK_PRE} HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n{credential}\r\n",
            call.len()
        );
        s.write_all(head.as_bytes()).await.unwrap();
        s.write_all(call.as_bytes()).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        assert!(out.starts_with("HTTP/1.1 403"), "{credential:?}: {out}");
        assert!(out.contains("this run's credential"), "{out}");
    }
    let orphan = post(
        &socket,
        agents::netproxy::agent_routes::HOOK_POST,
        &json!({"tool_name": "Bash", "tool_use_id": "never-decided", "tool_response": "x"}),
    )
    .await;
    assert_eq!(orphan["allow"], false, "{orphan}");
    assert!(
        orphan["reason"]
            .as_str()
            .unwrap()
            .contains("no decision of this run allowed"),
        "{orphan}"
    );
}

/// Counts the questions it is asked, and says yes.
struct Counting(std::sync::atomic::AtomicUsize);

#[async_trait]
impl Approver for Counting {
    async fn approve(&self, question: &Question) -> Answer {
        assert_eq!(question.tool, "Bash");
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Answer::Yes
    }
}

/// A call whose actions each ask (`Bash` running `git commit`: `shell.exec` and `git.commit`,
/// both `ask` by the shipped rules) is one question about the whole call, and a `deny` among
/// them refuses it before anyone is asked.
#[tokio::test]
async fn a_call_is_one_question_however_many_of_its_actions_ask() {
    let fx = Fixture::new();
    let counting = Arc::new(Counting(std::sync::atomic::AtomicUsize::new(0)));
    let mut settings = fx.settings(Ratchet::default(), counting.clone());
    settings.table = RuleTable::new(vec![], vec![], vec![]);
    let mut grants: Vec<Grant> = grants(fx.ws.path())
        .into_iter()
        .filter(|g| g.tool != "shell")
        .collect();
    grants.push(Grant {
        paths: vec![root(&fx)],
        ..grant("shell-ws", "shell")
    });
    settings.grants = ToolGrants::new(grants).unwrap();
    let gate = BrokerGate::new(settings).unwrap();
    let call = |command: &str| {
        agents::claude_code::mapping::agent_call(&agents::claude_code::mapping::HookInput {
            tool_name: "Bash".into(),
            tool_input: json!({"command": command}),
            cwd: "/workspace".into(),
            tool_use_id: "t".into(),
        })
        .unwrap()
    };
    let commit = call("git commit -qm x");
    assert_eq!(commit.actions, ["shell.exec", "git.commit"]);
    let allowed = gate.agent_call(&commit, &drained_sink()).await.unwrap();
    assert!(allowed.person_said_yes);
    assert_eq!(counting.0.load(std::sync::atomic::Ordering::SeqCst), 1);
    // git.push is denied by the shipped rules: refused, and nobody asked.
    let push = call("git push");
    let refused = gate.agent_call(&push, &drained_sink()).await.unwrap_err();
    assert!(refused.contains("denies git.push"), "{refused}");
    assert_eq!(counting.0.load(std::sync::atomic::Ordering::SeqCst), 1);
}
