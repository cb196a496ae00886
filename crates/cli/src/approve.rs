//! Approvals on the terminal for `switchboard ask`: when the broker asks a person about a
//! tool call, the question goes to stderr and one line of stdin answers it (`y` or `yes`
//! approves; anything else, or the end of input, refuses). Asks are answered one at a time.

use std::io::BufRead;

use async_trait::async_trait;
use tokio::sync::Mutex;

use agents::tools::{Answer, Approver, Question, Who};

pub struct TerminalApprover {
    /// One question at a time.
    turn: Mutex<()>,
}

impl TerminalApprover {
    pub fn new() -> TerminalApprover {
        TerminalApprover {
            turn: Mutex::new(()),
        }
    }
}

/// One line of stdin, read on a blocking thread; `None` at the end of input or on an error.
async fn read_line() -> Option<String> {
    let read = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        match std::io::stdin().lock().read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line),
        }
    });
    read.await.ok().flatten()
}

/// What the person reads: the run, the action, the tool and its arguments, whole (the broker
/// asks only about a call it can show whole and as it is).
fn prompt(question: &Question) -> String {
    format!(
        "run {}: the agent asks to {} ({} {}). Allow? [y/N] ",
        question.run, question.action, question.tool, question.arguments
    )
}

/// `y` or `yes`, any case, approves; anything else refuses.
fn approves(line: &str) -> bool {
    matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

#[async_trait]
impl Approver for TerminalApprover {
    async fn approve(&self, question: &Question) -> Answer {
        if question.who != Who::Person {
            return Answer::Nobody;
        }
        let _turn = self.turn.lock().await;
        eprint!("{}", prompt(question));
        match read_line().await {
            Some(line) if approves(&line) => Answer::Yes,
            _ => Answer::No,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_yes_approves() {
        for yes in ["y", "Y\n", " yes \n", "YES"] {
            assert!(approves(yes), "{yes:?}");
        }
        for no in ["", "\n", "n", "no", "yes please", "ja", "y y"] {
            assert!(!approves(no), "{no:?}");
        }
    }
}
