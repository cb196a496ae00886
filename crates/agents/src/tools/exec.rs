//! Running one tool, only with a `broker::Decision` in hand. The decision was lexical; here the
//! real path (symlinks resolved) is checked again against the winning grant's paths before the
//! disk is touched, denied files are refused by name, and every program runs under the sandbox
//! with the network unshared. Outputs are capped.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

use broker::Decision;
use broker::args::{HttpMethod, ToolArgs};
use tokio::io::AsyncReadExt;

use super::mcp::McpServers;
use crate::sandbox::{Network, Sandbox, SandboxSpec};

/// What `read_file` and `write_file` answer for a denied path, after the path.
pub const REFUSED_READ: &str = "is denied by this project (deny_read in .switchboard/agent-policy.toml); its contents are not available to you, so do not ask for it again";

/// Bounds on one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecLimits {
    /// A file read, a command's output, a fetched body: cut here.
    pub output_bytes: usize,
    pub shell_timeout: Duration,
    pub fetch_timeout: Duration,
}

impl Default for ExecLimits {
    fn default() -> Self {
        ExecLimits {
            output_bytes: 64 * 1024,
            shell_timeout: Duration::from_secs(120),
            fetch_timeout: Duration::from_secs(30),
        }
    }
}

pub(crate) struct Executor {
    /// Canonical.
    pub(crate) workspace: PathBuf,
    pub(crate) deny_read: Vec<String>,
    pub(crate) limits: ExecLimits,
    pub(crate) scratch: PathBuf,
    /// The run's sandbox for `shell` and `git`, prepared at the first such call (the stub
    /// written, missing denied names made) and reused after.
    pub(crate) sandbox: OnceLock<Result<Sandbox, String>>,
    pub(crate) mcp: McpServers,
}

/// The fetch client, one per process, made at the first fetch. No redirects: the host a grant
/// was checked against is the only host reached.
fn fetch_client() -> Result<&'static reqwest::Client, String> {
    static CLIENT: OnceLock<Result<reqwest::Client, String>> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .connect_timeout(Duration::from_secs(10))
                .build()
                .map_err(|e| format!("the fetch client could not be made: {e}"))
        })
        .as_ref()
        .map_err(Clone::clone)
}

impl Executor {
    /// The tool's result, or a refusal; both are text the model reads.
    pub(crate) async fn run(&self, decision: &Decision) -> Result<String, String> {
        match decision.args() {
            ToolArgs::ReadFile { path } => self.read(decision, Path::new(path)).await,
            ToolArgs::WriteFile { path, content } => {
                self.write(decision, Path::new(path), content).await
            }
            ToolArgs::Shell { command, cwd } => {
                let dir = cwd.as_deref().map_or(self.workspace.clone(), PathBuf::from);
                self.program(
                    decision,
                    &dir,
                    "/bin/sh",
                    &["-c".to_owned(), command.clone()],
                )
                .await
            }
            ToolArgs::Git {
                subcommand,
                args,
                cwd,
            } => {
                let mut argv = vec![subcommand.clone()];
                argv.extend(args.iter().cloned());
                self.program(decision, Path::new(cwd), "git", &argv).await
            }
            ToolArgs::HttpFetch { url, method, .. } => self.fetch(url, *method).await,
            ToolArgs::Mcp {
                server,
                tool,
                arguments,
            } => {
                self.mcp
                    .call(server, tool, arguments, self.limits.output_bytes)
                    .await
            }
        }
    }

    /// The denied name `path` is, when it is one (lexically, and by its real path).
    fn denied(&self, path: &Path) -> Option<String> {
        let relative = path.strip_prefix(&self.workspace).ok()?;
        let relative = relative.to_string_lossy();
        self.deny_read.iter().find(|d| **d == relative).cloned()
    }

    fn refuse_denied(&self, lexical: &Path, real: Option<&Path>) -> Result<(), String> {
        let hit = self
            .denied(lexical)
            .or_else(|| real.and_then(|r| self.denied(r)));
        match hit {
            Some(name) => Err(format!("{name} {REFUSED_READ}")),
            None => Ok(()),
        }
    }

    /// The real path must still lie under one of the winning grant's paths.
    async fn inside_grant(&self, decision: &Decision, real: &Path) -> Result<(), String> {
        for granted in decision.paths() {
            if let Ok(granted) = tokio::fs::canonicalize(granted).await
                && real.starts_with(&granted)
            {
                return Ok(());
            }
        }
        Err(format!(
            "{} resolves outside the paths you were granted; nothing was done",
            real.display()
        ))
    }

    async fn read(&self, decision: &Decision, path: &Path) -> Result<String, String> {
        self.refuse_denied(path, None)?;
        let real = tokio::fs::canonicalize(path)
            .await
            .map_err(|e| format!("{}: {e}", path.display()))?;
        self.refuse_denied(path, Some(&real))?;
        self.inside_grant(decision, &real).await?;
        let file = tokio::fs::File::open(&real)
            .await
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let mut bytes = Vec::new();
        file.take(self.limits.output_bytes as u64)
            .read_to_end(&mut bytes)
            .await
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Written to a temporary file beside the target and renamed over it: a reader sees the
    /// old content or the new, never half.
    async fn write(
        &self,
        decision: &Decision,
        path: &Path,
        content: &str,
    ) -> Result<String, String> {
        self.refuse_denied(path, None)?;
        if path.strip_prefix(&self.workspace).ok()
            == Some(Path::new(broker::file::PROJECT_POLICY_FILE))
        {
            return Err("the project's policy file is read-only; nothing was written".to_owned());
        }
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(format!("{}: not a file path", path.display()));
        };
        let parent = tokio::fs::canonicalize(parent)
            .await
            .map_err(|e| format!("{}: {e}", parent.display()))?;
        let real = parent.join(name);
        if tokio::fs::symlink_metadata(&real)
            .await
            .is_ok_and(|m| m.file_type().is_symlink())
        {
            return Err(format!(
                "{} is a symbolic link; write_file does not follow links",
                path.display()
            ));
        }
        self.refuse_denied(path, Some(&real))?;
        if real.strip_prefix(&self.workspace).ok()
            == Some(Path::new(broker::file::PROJECT_POLICY_FILE))
        {
            return Err("the project's policy file is read-only; nothing was written".to_owned());
        }
        self.inside_grant(decision, &parent).await?;
        let temp = parent.join(format!(".{}.switchboard-write", name.to_string_lossy()));
        tokio::fs::write(&temp, content)
            .await
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if let Err(e) = tokio::fs::rename(&temp, &real).await {
            let _ = tokio::fs::remove_file(&temp).await;
            return Err(format!("{}: {e}", path.display()));
        }
        Ok(format!(
            "wrote {} bytes to {}",
            content.len(),
            path.display()
        ))
    }

    /// A program under the sandbox, network unshared, in `dir`, bounded in time and output.
    async fn program(
        &self,
        decision: &Decision,
        dir: &Path,
        program: &str,
        args: &[String],
    ) -> Result<String, String> {
        let real_dir = tokio::fs::canonicalize(dir)
            .await
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        if !decision.paths().is_empty() {
            self.inside_grant(decision, &real_dir).await?;
        }
        let sandbox = self
            .sandbox
            .get_or_init(|| {
                Sandbox::prepare(&SandboxSpec {
                    workspace: self.workspace.clone(),
                    deny_read: self.deny_read.clone(),
                    read_only_in_workspace: vec![broker::file::PROJECT_POLICY_FILE.to_owned()],
                    read_only: Vec::new(),
                    configured: Vec::new(),
                    network: Network::Unshared,
                    scratch: self.scratch.clone(),
                })
                .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(Clone::clone)?;
        let mut command = sandbox.command_in(&real_dir, program, args);
        command
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", "/tmp")
            .env("LANG", "C.UTF-8")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let output = tokio::time::timeout(self.limits.shell_timeout, command.output())
            .await
            .map_err(|_| format!("stopped after {} s", self.limits.shell_timeout.as_secs()))?
            .map_err(|e| format!("could not start {program}: {e}"))?;
        let cap = self.limits.output_bytes;
        let status = output.status.code().map_or_else(
            || "killed by a signal".to_owned(),
            |c| format!("exit status {c}"),
        );
        Ok(format!(
            "{status}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            capped(&output.stdout, cap),
            capped(&output.stderr, cap)
        ))
    }

    async fn fetch(&self, url: &str, method: HttpMethod) -> Result<String, String> {
        let method = match method {
            HttpMethod::Get => reqwest::Method::GET,
            HttpMethod::Head => reqwest::Method::HEAD,
            HttpMethod::Post => reqwest::Method::POST,
        };
        let mut response = fetch_client()?
            .request(method, url)
            .timeout(self.limits.fetch_timeout)
            .send()
            .await
            .map_err(|e| {
                format!(
                    "the fetch failed: {}",
                    if e.is_timeout() {
                        "timed out"
                    } else {
                        "could not connect or read"
                    }
                )
            })?;
        let status = response.status();
        let mut body = Vec::new();
        while let Ok(Some(chunk)) = response.chunk().await {
            body.extend_from_slice(&chunk);
            if body.len() >= self.limits.output_bytes {
                break;
            }
        }
        Ok(format!(
            "HTTP {status}\n{}",
            capped(&body, self.limits.output_bytes)
        ))
    }
}

/// `bytes` as text, cut at `cap` bytes and marked when cut (every tool's output).
pub(super) fn capped(bytes: &[u8], cap: usize) -> String {
    let text = String::from_utf8_lossy(bytes.get(..cap.min(bytes.len())).unwrap_or(bytes));
    if bytes.len() > cap {
        format!("{text}\n[cut at {cap} bytes]")
    } else {
        text.into_owned()
    }
}
