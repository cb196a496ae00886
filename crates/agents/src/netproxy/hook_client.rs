//! `switchboard sandbox-hook pre-tool-use | post-tool-use`: Claude Code's hook inside the
//! sandbox. It hands the call Claude Code gives it on stdin to the run's proxy socket, with the
//! run's credential, and says what the broker decided.
//!
//! It fails closed: an allow is only ever the broker's `{"allow": true}`; every other outcome
//! (a refusal, no socket, no credential, a timeout, an answer that does not read, a panic) exits
//! with [`BLOCK`], the status with which Claude Code blocks the call and shows the model why.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use super::agent_routes::{CREDENTIAL_HEADER, HOOK_POST, HOOK_PRE};

/// The exit status with which Claude Code blocks a call (and, after one, tells the model).
pub const BLOCK: i32 = 2;
/// The environment variable holding the run's credential.
pub const CREDENTIAL_ENV: &str = "SWITCHBOARD_AGENT_TOKEN";
/// The most of the hook's input read, and of the answer.
const MAX_INPUT: u64 = 8 * 1024 * 1024;
const MAX_ANSWER: u64 = 64 * 1024;

/// Which hook this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookEvent {
    PreToolUse,
    PostToolUse,
}

impl HookEvent {
    pub fn parse(name: &str) -> Option<HookEvent> {
        match name {
            "pre-tool-use" => Some(HookEvent::PreToolUse),
            "post-tool-use" => Some(HookEvent::PostToolUse),
            _ => None,
        }
    }

    fn path(self) -> &'static str {
        match self {
            HookEvent::PreToolUse => HOOK_PRE,
            HookEvent::PostToolUse => HOOK_POST,
        }
    }
}

/// What the hook prints and exits with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookExit {
    pub stdout: String,
    pub stderr: String,
    pub status: i32,
}

fn blocked(why: impl std::fmt::Display) -> HookExit {
    HookExit {
        stdout: String::new(),
        stderr: format!("switchboard: {why}"),
        status: BLOCK,
    }
}

/// Runs one hook: `input` is what Claude Code wrote on stdin.
pub fn run(
    event: HookEvent,
    socket: &Path,
    credential: Option<&str>,
    timeout: Duration,
    input: impl Read,
) -> HookExit {
    let Some(credential) = credential.filter(|c| !c.is_empty()) else {
        return blocked(format!(
            "refused: {CREDENTIAL_ENV} is not set; the broker cannot be asked"
        ));
    };
    let mut body = Vec::new();
    if let Err(e) = input.take(MAX_INPUT + 1).read_to_end(&mut body) {
        return blocked(format!("refused: the hook's input could not be read: {e}"));
    }
    if body.len() as u64 > MAX_INPUT {
        return blocked(format!(
            "refused: the call is larger than {MAX_INPUT} bytes"
        ));
    }
    let answer = match ask(event, socket, credential, timeout, &body) {
        Ok(answer) => answer,
        Err(why) => return blocked(format!("refused: the broker could not be asked: {why}")),
    };
    match answer {
        Answer::Allow => HookExit {
            stdout: match event {
                HookEvent::PreToolUse => serde_json::json!({"hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "allow",
                    "permissionDecisionReason": "allowed by Switchboard's broker",
                }})
                .to_string(),
                HookEvent::PostToolUse => String::new(),
            },
            stderr: String::new(),
            status: 0,
        },
        Answer::Refuse(why) => blocked(why),
    }
}

enum Answer {
    Allow,
    Refuse(String),
}

fn ask(
    event: HookEvent,
    socket: &Path,
    credential: &str,
    timeout: Duration,
    body: &[u8],
) -> Result<Answer, String> {
    let deadline = Instant::now() + timeout;
    let mut stream =
        UnixStream::connect(socket).map_err(|e| format!("{}: {e}", socket.display()))?;
    stream
        .set_write_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: switchboard\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{CREDENTIAL_HEADER}: {credential}\r\nConnection: close\r\n\r\n",
        event.path(),
        body.len()
    );
    stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(body))
        .map_err(|e| format!("sending: {e}"))?;
    let mut reply = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!("no answer within {} s", timeout.as_secs_f32()));
        }
        stream
            .set_read_timeout(Some(left))
            .map_err(|e| e.to_string())?;
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                reply.extend_from_slice(chunk.get(..n).unwrap_or_default());
                if reply.len() as u64 > MAX_ANSWER {
                    return Err("the answer is too long".to_owned());
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // The read timeout, set to what is left of the deadline.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(format!("no answer within {} s", timeout.as_secs_f32()));
            }
            Err(e) => return Err(format!("reading the answer: {e}")),
        }
    }
    read_answer(&reply)
}

/// The broker's answer from the raw reply; anything but a 200 whose body reads is an error.
fn read_answer(reply: &[u8]) -> Result<Answer, String> {
    let text = std::str::from_utf8(reply).map_err(|_| "the answer is not text".to_owned())?;
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| "the answer has no end of head".to_owned())?;
    let status = head.lines().next().unwrap_or_default();
    if status != "HTTP/1.1 200 OK" {
        let said = body.trim();
        return Err(format!("{status}: {said}"));
    }
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Decided {
        allow: bool,
        #[serde(default)]
        reason: Option<String>,
    }
    let decided: Decided =
        serde_json::from_str(body).map_err(|e| format!("the answer does not read: {e}"))?;
    Ok(match (decided.allow, decided.reason) {
        (true, None) => Answer::Allow,
        (true, Some(_)) => return Err("the answer allows and gives a reason".to_owned()),
        (false, reason) => Answer::Refuse(reason.unwrap_or_else(|| "refused".to_owned())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_plain_allow_allows() {
        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 14\r\n\r\n{\"allow\":true}";
        assert!(matches!(read_answer(ok), Ok(Answer::Allow)));
        let table: [&[u8]; 9] = [
            b"",
            b"HTTP/1.1 200 OK\r\n",
            b"HTTP/1.1 403 Forbidden\r\n\r\n{\"allow\":true}",
            b"HTTP/1.1 200 OK\r\n\r\n{\"allow\":\"yes\"}",
            b"HTTP/1.1 200 OK\r\n\r\n{\"allow\":true,\"extra\":1}",
            b"HTTP/1.1 200 OK\r\n\r\n{\"allow\":true,\"reason\":\"x\"}",
            b"HTTP/1.1 200 OK\r\n\r\nallow",
            b"HTTP/1.0 200 OK\r\n\r\n{\"allow\":true}",
            b"\xff\xfe",
        ];
        for reply in table {
            assert!(
                read_answer(reply).is_err(),
                "{:?}",
                String::from_utf8_lossy(reply)
            );
        }
        let no = b"HTTP/1.1 200 OK\r\n\r\n{\"allow\":false,\"reason\":\"refused: no\"}";
        assert!(matches!(read_answer(no), Ok(Answer::Refuse(r)) if r == "refused: no"));
    }

    #[test]
    fn every_fault_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nothing.sock");
        let t = Duration::from_secs(2);
        let no_server = run(HookEvent::PreToolUse, &missing, Some("c"), t, &b"{}"[..]);
        assert_eq!(no_server.status, BLOCK);
        assert!(no_server.stdout.is_empty());
        assert!(
            no_server.stderr.contains("could not be asked"),
            "{no_server:?}"
        );
        let no_credential = run(HookEvent::PreToolUse, &missing, None, t, &b"{}"[..]);
        assert_eq!(no_credential.status, BLOCK);
        assert!(no_credential.stderr.contains(CREDENTIAL_ENV));
        // A server that accepts and never answers: refused at the deadline.
        let path = dir.path().join("silent.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let (done, wait) = std::sync::mpsc::channel::<()>();
        let held = std::thread::spawn(move || {
            let (s, _) = listener.accept().unwrap();
            let _ = wait.recv();
            drop(s);
        });
        let silent = run(
            HookEvent::PreToolUse,
            &path,
            Some("c"),
            Duration::from_millis(300),
            &b"{}"[..],
        );
        done.send(()).unwrap();
        assert_eq!(silent.status, BLOCK);
        assert!(silent.stderr.contains("no answer within"), "{silent:?}");
        held.join().unwrap();
    }
}
