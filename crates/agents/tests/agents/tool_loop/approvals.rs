//! Asking: a late approval, the shell approved, nobody to ask, the reviewer, what a question shows.

use super::*;

/// Approves after moving the clock past the shell grant's expiry: the approval arrives late.
struct LateApprover {
    now: Arc<AtomicI64>,
    asked: Mutex<Vec<String>>,
}

#[async_trait]
impl Approver for LateApprover {
    async fn approve(&self, question: &Question) -> Answer {
        self.asked.lock().unwrap().push(question.action.clone());
        self.now.store(5_000, Ordering::SeqCst);
        Answer::Yes
    }
}

#[tokio::test]
async fn an_approval_that_arrives_after_the_grant_expired_is_a_denial() {
    let fx = Fixture::new();
    let (base, script) = scripted_model(vec![
        Reply::Call(
            "shell",
            args(json!({"command": "touch ran", "cwd": fx.path("")})),
        ),
        Reply::Text("ok"),
    ])
    .await;
    let approver = Arc::new(LateApprover {
        now: fx.now.clone(),
        asked: Mutex::new(Vec::new()),
    });
    let gate = BrokerGate::new(fx.settings(Ratchet::default(), approver.clone())).unwrap();
    let (_, items) = run_model(&base, gate).await;
    assert_eq!(
        *approver.asked.lock().unwrap(),
        ["shell.exec"],
        "the ask grant asked a person"
    );
    assert_eq!(
        script.tool_results(),
        ["refused: shell.exec: grant-expired"]
    );
    assert!(!fx.ws.path().join("ran").exists(), "the command ran");
    let approvals = events(&items, "approval");
    assert_eq!(approvals.len(), 2, "{approvals:?}");
    assert!(approvals[1].ends_with("approved"), "{approvals:?}");
}

#[tokio::test]
async fn an_approved_shell_call_runs_in_the_sandbox_without_the_network() {
    let fx = Fixture::new();
    let port = page().await;
    let script_text = format!(
        "cat .env; echo made > made.txt; curl -sS --max-time 3 http://127.0.0.1:{port}/changelog || echo no-network"
    );
    let (base, script) = scripted_model(vec![
        Reply::Call(
            "shell",
            args(json!({"command": script_text, "cwd": fx.path("")})),
        ),
        Reply::Text("ok"),
    ])
    .await;
    let gate = BrokerGate::new(fx.settings(Ratchet::default(), Arc::new(Yes))).unwrap();
    run_model(&base, gate).await;
    let results = script.tool_results();
    assert!(
        results[0].starts_with("exit status 0\n--- stdout ---\nswitchboard: this file is denied"),
        "{}",
        results[0]
    );
    assert!(results[0].contains("no-network"), "{}", results[0]);
    assert!(
        !results[0].contains("hunter2") && !results[0].contains("v2: faster"),
        "{}",
        results[0]
    );
    assert_eq!(
        std::fs::read_to_string(fx.ws.path().join("made.txt")).unwrap(),
        "made\n"
    );
}

#[tokio::test]
async fn with_nobody_to_ask_an_asking_rule_is_refused() {
    let fx = Fixture::new();
    let (base, script) = scripted_model(vec![
        // The shipped default for git.commit is ask; nobody is here.
        Reply::Call(
            "git",
            args(json!({"subcommand": "commit", "args": ["-m", "x"], "cwd": fx.path("")})),
        ),
        Reply::Text("ok"),
    ])
    .await;
    let gate = BrokerGate::new(fx.settings(Ratchet::default(), Arc::new(NobodyToAsk))).unwrap();
    run_model(&base, gate).await;
    assert_eq!(
        script.tool_results(),
        ["refused: git.commit needs a person's approval: nobody to ask"]
    );
}

/// Refuses every ask, keeping the questions it was asked.
#[derive(Default)]
struct Recording {
    asked: Mutex<Vec<Question>>,
}

#[async_trait]
impl Approver for Recording {
    async fn approve(&self, question: &Question) -> Answer {
        self.asked.lock().unwrap().push(question.clone());
        Answer::No
    }
}

/// What a person is asked is exactly what would run: a call whose arguments hold what the
/// run's sanitiser would change (a bidi override, a credential), that is too long to show
/// whole, or whose blank run would push the rest out of sight is refused before anyone is
/// asked; a call that can be shown is shown whole.
#[tokio::test]
async fn a_question_shows_the_call_whole_or_is_not_asked() {
    let fx = Fixture::new();
    let long = "x".repeat(agents::tools::MAX_SHOWN_ARGUMENTS);
    let (base, script) = scripted_model(vec![
        Reply::Call(
            "write_file",
            args(json!({"path": fx.path("notes.md"), "content": "\u{202e}wiped"})),
        ),
        Reply::Call(
            "write_file",
            args(
                json!({"path": fx.path("notes.md"), "content": "key sk-abcdefghijklmnopqrstuvwx"}),
            ),
        ),
        Reply::Call(
            "write_file",
            args(json!({"path": fx.path("notes.md"), "content": long})),
        ),
        Reply::Call(
            "write_file",
            args(json!({"path": fx.path("notes.md"), "content": format!("ok{}\n\n\n{}rm -rf ~", " ".repeat(30), "\t".repeat(10))})),
        ),
        Reply::Call(
            "write_file",
            args(json!({"path": fx.path("notes.md"), "content": "plain words"})),
        ),
        Reply::Text("ok"),
    ])
    .await;
    let person = Arc::new(Recording::default());
    let mut settings = fx.settings(Ratchet::default(), person.clone());
    // The shipped default for fs.write: ask.
    settings.table = RuleTable::new(vec![], vec![], vec![]);
    run_model(&base, BrokerGate::new(settings).unwrap()).await;
    let results = script.tool_results();
    for refused in &results[..2] {
        assert!(
            refused.starts_with("refused: fs.write needs an approval, and its arguments hold text that cannot be shown as it is"),
            "{results:?}"
        );
    }
    assert!(results[2].contains("too long to show whole"), "{results:?}");
    assert!(
        results[3].contains("43 blank characters in a row"),
        "{results:?}"
    );
    assert_eq!(
        results[4],
        "refused: fs.write needs a person's approval: refused"
    );
    let asked = person.asked.lock().unwrap();
    assert_eq!(
        asked.len(),
        1,
        "only the call that can be shown is asked about"
    );
    assert_eq!(
        asked[0].arguments,
        args(json!({"path": fx.path("notes.md"), "content": "plain words"})),
        "shown exactly as it would run"
    );
}

/// `agent_review` asks the reviewer, not the person.
#[tokio::test]
async fn an_agent_review_rule_asks_the_reviewer() {
    for (reviewer, want) in [
        (Arc::new(Yes) as Arc<dyn Approver>, "wrote 1 bytes"),
        (
            Arc::new(NobodyToAsk) as Arc<dyn Approver>,
            "refused: fs.write needs a reviewer's approval: nobody to ask",
        ),
    ] {
        let fx = Fixture::new();
        let (base, script) = scripted_model(vec![
            Reply::Call(
                "write_file",
                args(json!({"path": fx.path("a.md"), "content": "x"})),
            ),
            Reply::Text("ok"),
        ])
        .await;
        let mut settings = fx.settings(Ratchet::default(), Arc::new(NobodyToAsk));
        settings.table = RuleTable::new(
            vec![],
            vec![],
            vec![parse_run_rule("fs.write=agent_review").unwrap()],
        );
        settings.reviewer = reviewer;
        run_model(&base, BrokerGate::new(settings).unwrap()).await;
        assert!(
            script.tool_results()[0].starts_with(want),
            "{:?}",
            script.tool_results()
        );
    }
}
