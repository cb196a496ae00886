//! The reviewer agent as the broker's `agent_review` approver: a real `command` back end is
//! asked the question, and only a first-word `yes` approves.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::sync::Arc;
use std::time::Duration;

use agents::tools::{Answer, Approver, Question, Who};
use agents::{CommandBackend, CommandSettings, OutputCaps, RequestVia, Sanitizer};
use authz_core::AgentName;
use broker::SessionId;
use dispatch::{BackendModel, ReviewerAgent};

fn reviewer(script: &str, timeout: Duration) -> ReviewerAgent {
    let backend = CommandBackend::new(CommandSettings {
        argv: vec!["/bin/sh".into(), "-c".into(), script.into()],
        request_via: RequestVia::Stdin,
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        default_dir: None,
        sandbox: false,
        sandbox_binds: vec![],
    })
    .unwrap();
    ReviewerAgent(BackendModel {
        agent: AgentName::parse("reviewer").unwrap(),
        backend: Arc::new(backend),
        caps: OutputCaps::default(),
        timeout,
        sanitizer: Arc::new(Sanitizer::new(vec![])),
    })
}

fn question() -> Question {
    Question {
        run: SessionId::parse("01JREVIEW").unwrap(),
        principal: None,
        action: "fs.write".into(),
        tool: "write_file".into(),
        arguments: r#"{"path":"/w/notes.md","content":"x"}"#.into(),
        who: Who::Reviewer,
    }
}

#[tokio::test]
async fn only_a_reviewers_first_word_yes_approves() {
    let second = Duration::from_secs(5);
    let cases = [
        // It reads the question on stdin, and the question names the action and the arguments.
        (
            "q=$(cat); case \"$q\" in *fs.write*notes.md*) printf 'Yes.\\nIt only writes notes.';; *) echo no;; esac",
            Answer::Yes,
        ),
        (
            "cat >/dev/null; printf 'no\\nit writes outside the docs'",
            Answer::No,
        ),
        ("cat >/dev/null; printf 'I would say yes'", Answer::No),
        ("cat >/dev/null; exit 3", Answer::No),
    ];
    for (script, want) in cases {
        assert_eq!(
            reviewer(script, second).approve(&question()).await,
            want,
            "{script}"
        );
    }
    // No answer in time is a refusal.
    let slow = reviewer("sleep 5; echo yes", Duration::from_millis(300));
    assert_eq!(slow.approve(&question()).await, Answer::No);
}
