//! The binary answering the broker's terminal prompts in a test: its stderr read as it comes
//! (a prompt ends with no newline), a line typed once a given prompt has been shown, and its
//! output once it exits (stderr read to its end, never for a while).

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What every terminal prompt of the broker ends with.
pub const PROMPT: &str = "Allow? [y/N]";

pub struct Prompted {
    child: Child,
    stderr: Arc<Mutex<String>>,
    reader: JoinHandle<()>,
}

impl Prompted {
    /// Starts `cmd` (the binary, its arguments set) with its three streams piped.
    pub fn spawn(mut cmd: Command) -> Prompted {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut pipe = child.stderr.take().unwrap();
        let sink = stderr.clone();
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 1024];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Prompted {
            child,
            stderr,
            reader,
        }
    }

    /// How many prompts it has shown.
    pub fn prompts(&self) -> usize {
        self.stderr.lock().unwrap().matches(PROMPT).count()
    }

    /// Waits (60 s at most) until it has shown prompt number `n`.
    pub fn wait_for_prompt(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.prompts() < n {
            assert!(
                Instant::now() < deadline,
                "no prompt {n}; stderr: {}",
                self.stderr.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for prompt number `n`, then types `line`.
    pub fn answer(&mut self, n: usize, line: &str) {
        self.wait_for_prompt(n);
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    /// stdout and the whole of stderr once it exits, which it must do successfully.
    pub fn finish(mut self) -> (String, String) {
        drop(self.child.stdin.take());
        let mut out = String::new();
        self.child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        let status = self.child.wait().unwrap();
        self.reader.join().unwrap();
        let err = self.stderr.lock().unwrap().clone();
        assert!(
            status.success(),
            "exit {status}; stdout {out}; stderr {err}"
        );
        (out, err)
    }
}
