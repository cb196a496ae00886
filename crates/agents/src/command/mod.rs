//! `command`: any program. The request goes on stdin or as the last argument; each stdout
//! line is an event; the last block of stdout (after the last blank line) is the answer; on a
//! non-zero exit, stderr becomes friction. The program runs in its own process group with a
//! scrubbed environment, and the whole group is killed on stop, timeout, or when it exits
//! leaving children behind. The memory block is in the file `SWITCHBOARD_MEMORY_FILE` names.
//!
//! What it keeps in memory is bounded however much the program prints: a line is read up to
//! `OutputCaps::event_bytes` (the rest of a longer line is read and dropped), events past
//! `OutputCaps::total_bytes` are dropped (the program is not killed), the answer's block is
//! kept up to `OutputCaps::answer_bytes`, and stderr up to 16 KiB.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use async_trait::async_trait;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

mod network;
mod output;

pub use network::CommandNetwork;

use crate::netproxy::{RunProxy, SANDBOX_PROXY_PORT, SANDBOX_PROXY_SOCKET};
use crate::sandbox::{
    ConfiguredBind, Network, SANDBOX_MEMORY, Sandbox, SandboxLimits, SandboxSpec, copied_for_run,
    find_in, host_user,
};

/// The run's proxy socket, in its sandbox's scratch directory.
pub(super) const PROXY_SOCKET_NAME: &str = "proxy.sock";
use crate::{AgentBackend, AgentJob, AgentOutcome, EventSink, SettingsError, Workspace};
use output::{AnswerBlock, read_capped_line};

/// How the request reaches the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RequestVia {
    #[default]
    Stdin,
    Argument,
}

#[derive(Debug, Clone)]
pub struct CommandSettings {
    /// The program and its leading arguments: `["claude", "-p"]`.
    pub argv: Vec<String>,
    pub request_via: RequestVia,
    /// The environment the program gets (already filtered to the allow-list by the server),
    /// before `SWITCHBOARD_*` are added.
    pub env: Vec<(String, String)>,
    /// Run the program under bubblewrap (`[agents.<name>] sandbox`, on unless set to false).
    /// A workspace whose project denies files (deny_read) is sandboxed whatever this says, so
    /// a project's denial is never silently skipped.
    pub sandbox: bool,
    /// Paths outside the workspace bound in (`sandbox_bind` read-write: the agent's login,
    /// say; `sandbox_read_only`: its tools). Absolute; each must exist.
    pub sandbox_binds: Vec<ConfiguredBind>,
    /// Host paths none of `sandbox_binds` may reach (the config file, the store, the data
    /// directory): refused when the back end is made, and again before each run with the
    /// run's own ([`Workspace::private`]).
    pub private: Vec<PathBuf>,
    /// How a sandboxed program reaches the network (an unsandboxed one has the host's).
    pub network: CommandNetwork,
    /// The program is Claude Code, started so every tool call passes the broker
    /// ([`crate::claude_code`]): its managed settings bound in, its environment set, all of
    /// stdout its answer. It needs the sandbox and the broker's network.
    pub claude_code: Option<crate::claude_code::ClaudeCodeSettings>,
}

/// A run's sandbox, the program it starts (found once), and the directory of its stub file.
struct Boxed {
    sandbox: Sandbox,
    program: PathBuf,
    /// The forwarder that starts the program, when its network goes through the broker.
    forwarder: Option<PathBuf>,
    /// The run's proxy; it serves until the run returns.
    proxy: Option<RunProxy>,
    scratch: tempfile::TempDir,
}

/// Where one call of the program works: the run's workspace, or (for a call that is not a
/// run: the memory model, the reviewer) a temporary directory of its own, removed after.
enum WorkDir {
    Run(Workspace),
    Own(tempfile::TempDir),
}

impl WorkDir {
    fn of(job: &AgentJob) -> Result<WorkDir, String> {
        match &job.workspace {
            Some(w) => Ok(WorkDir::Run(w.clone())),
            None => tempfile::Builder::new()
                .prefix("switchboard-call-")
                .tempdir()
                .map(WorkDir::Own)
                .map_err(|e| format!("could not make a working directory: {e}")),
        }
    }

    fn path(&self) -> &Path {
        match self {
            WorkDir::Run(w) => &w.dir,
            WorkDir::Own(dir) => dir.path(),
        }
    }

    fn repository(&self) -> bool {
        matches!(self, WorkDir::Run(w) if w.repository)
    }

    fn deny_read(&self) -> &[String] {
        match self {
            WorkDir::Run(w) => &w.deny_read,
            WorkDir::Own(_) => &[],
        }
    }

    fn protected(&self) -> &[String] {
        match self {
            WorkDir::Run(w) => &w.protected,
            WorkDir::Own(_) => &[],
        }
    }

    fn private(&self) -> &[PathBuf] {
        match self {
            WorkDir::Run(w) => &w.private,
            WorkDir::Own(_) => &[],
        }
    }
}

/// Where a program is looked up when its environment has no `PATH`.
pub const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Whether stderr is the sandbox's own complaint (its first line starts `bwrap:` or `choom:`,
/// the launcher that starts the program inside), not the program's.
fn launcher_failed(stderr: &str) -> bool {
    stderr.trim_start().lines().next().is_some_and(|first| {
        first.starts_with("bwrap: ")
            || first.starts_with("choom: ")
            || first.starts_with(crate::netproxy::forwarder::SAID_BY)
    })
}

/// What a run's readers are told when its program never started.
const NOT_STARTED: &str =
    "the agent's program could not be started; the operator's log has the details";

/// stderr kept for friction, at most.
const STDERR_KEEP: usize = 16 * 1024;
/// How long a stopped program is waited for once killed.
const REAP_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

pub struct CommandBackend {
    settings: CommandSettings,
}

impl CommandBackend {
    pub fn new(settings: CommandSettings) -> Result<Self, SettingsError> {
        if settings.argv.first().is_none_or(|p| p.trim().is_empty()) {
            return Err(SettingsError::Invalid(
                "command: name the program, like command = [\"claude\", \"-p\"]".into(),
            ));
        }
        if settings.claude_code.is_some()
            && (!settings.sandbox || matches!(settings.network, CommandNetwork::Host))
        {
            return Err(SettingsError::Invalid(
                "claude-code: Claude Code runs only sandboxed with its network through the broker, where its hooks reach the broker".into(),
            ));
        }
        for bind in &settings.sandbox_binds {
            crate::sandbox::reaches_private(&bind.path, &settings.private)
                .map_err(|e| SettingsError::Invalid(e.to_string()))?;
        }
        Ok(CommandBackend { settings })
    }

    fn command(
        &self,
        job: &AgentJob,
        dir: &Path,
        memory_file: &Path,
        boxed: Option<&Boxed>,
    ) -> Command {
        let (program, args) = match self.settings.argv.split_first() {
            Some((p, a)) => (p.as_str(), a),
            None => ("false", &[][..]),
        };
        let mut network_env = boxed.map_or_else(Vec::new, |b| self.network_env(job, b));
        if let Some(claude) = &self.settings.claude_code {
            network_env.extend(claude.environment());
        }
        // What the proxy's variables name is never the operator's environment's.
        let env: Vec<(String, String)> = self
            .settings
            .env
            .iter()
            .filter(|(k, _)| !network_env.iter().any(|(n, _)| n == k))
            .cloned()
            .chain(network_env.iter().cloned())
            .collect();
        let mut cmd = match boxed {
            Some(Boxed {
                sandbox,
                program,
                forwarder: Some(forwarder),
                ..
            }) => {
                let mut forwarded: Vec<std::ffi::OsString> = vec![
                    "sandbox-forward".into(),
                    "--socket".into(),
                    SANDBOX_PROXY_SOCKET.into(),
                    "--port".into(),
                    SANDBOX_PROXY_PORT.to_string().into(),
                    "--".into(),
                    program.clone().into_os_string(),
                ];
                forwarded.extend(args.iter().map(Into::into));
                sandbox.command_with_env(forwarder, forwarded, &env)
            }
            Some(boxed) => boxed.sandbox.command_with_env(&boxed.program, args, &env),
            None => {
                let mut cmd = Command::new(program);
                cmd.args(args).current_dir(dir);
                cmd
            }
        };
        // Inside a sandbox the memory file is at its neutral place, and bubblewrap sets the
        // working directory (the host's path may not be open to the sandbox's user).
        let memory_file = match boxed {
            Some(_) => Path::new(SANDBOX_MEMORY),
            None => memory_file,
        };
        if self.settings.request_via == RequestVia::Argument {
            cmd.arg(&job.request);
        }
        // Under a root server the agent's own environment is the sandbox's to set, never
        // the staging's (which runs as root).
        let own_env = boxed.is_none_or(|b| !b.sandbox.stages());
        cmd.env_clear()
            .envs(env.iter().filter(|_| own_env).map(|(k, v)| (k, v)))
            .env("SWITCHBOARD_RUN_ID", job.run_id.as_str())
            .env("SWITCHBOARD_AGENT_TOKEN", &job.agent_token)
            .env("SWITCHBOARD_MEMORY_FILE", memory_file)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        if let Some(url) = &job.mcp_url
            && network_env.is_empty()
        {
            cmd.env("SWITCHBOARD_MCP_URL", url);
        }
        cmd
    }

    /// The `PATH` the program gets (its own, else [`DEFAULT_PATH`]).
    fn path(&self) -> &str {
        self.settings
            .env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map_or(DEFAULT_PATH, |(_, v)| v.as_str())
    }

    /// Why the program cannot start, before anything is made for it: it is not where it is
    /// looked for (a path that is no file, a bare name not on its `PATH`).
    fn missing_program(&self) -> Option<String> {
        let program = self.settings.argv.first()?;
        if program.contains('/') {
            return (!Path::new(program).is_file())
                .then(|| format!("the program `{program}` was not found: no file there"));
        }
        find_in(program, std::ffi::OsStr::new(self.path()))
            .is_none()
            .then(|| {
                format!(
                    "the program `{program}` was not found on the PATH it gets ({})",
                    self.path()
                )
            })
    }

    /// The program a sandbox starts: a bare name is looked up on the `PATH` the program gets
    /// (the sandbox's own lookup sees only what is bound), a path is taken as it is.
    fn sandboxed_program(&self, program: &str) -> PathBuf {
        if program.contains('/') {
            return PathBuf::from(program);
        }
        find_in(program, std::ffi::OsStr::new(self.path()))
            .unwrap_or_else(|| PathBuf::from(program))
    }

    /// The sandbox this run needs, if any: asked for in the settings, or required by the
    /// project denying files. A sandbox that cannot be made is an error: the program does
    /// not start.
    fn sandbox(&self, work: &WorkDir, memory_file: &Path) -> Result<Option<Boxed>, String> {
        if !self.settings.sandbox && work.deny_read().is_empty() {
            return Ok(None);
        }
        let program = self
            .settings
            .argv
            .first()
            .map_or_else(|| PathBuf::from("false"), |p| self.sandboxed_program(p));
        let mut read_only = Vec::new();
        // The program must be visible inside: a script beside the config, or one PATH finds
        // outside /usr (`~/.local/bin/claude`), is bound read-only where it is.
        // (Not when a bind the agent's config names holds it already: it is there.)
        let bound = |p: &Path| {
            self.settings
                .sandbox_binds
                .iter()
                .any(|b| p.starts_with(&b.path))
        };
        if program.is_absolute() && !program.starts_with("/usr") && !bound(&program) {
            read_only.push(program.clone());
        }
        let forwarder = match &self.settings.network {
            CommandNetwork::Host => None,
            CommandNetwork::Broker {
                forwarder: Some(f), ..
            } => Some(f.clone()),
            CommandNetwork::Broker {
                forwarder: None, ..
            } => {
                return Err(
                    "the agent's network goes through the broker, and this process knows no forwarder (the switchboard binary) to run in its sandbox".to_owned(),
                );
            }
        };
        if let Some(forwarder) = &forwarder {
            read_only.push(forwarder.clone());
        }
        let scratch = tempfile::Builder::new()
            .prefix("switchboard-sandbox-")
            .tempdir()
            .map_err(|e| format!("could not make the run's sandbox directory: {e}"))?;
        let files = match (&self.settings.claude_code, &forwarder) {
            (None, _) => Vec::new(),
            (Some(claude), Some(hook)) => vec![managed_settings(claude, hook, scratch.path())?],
            (Some(_), None) => {
                return Err("Claude Code runs only with its network through the broker (its hooks reach the broker over the run's socket)".to_owned());
            }
        };
        // Under a root server the program is the sandbox's host user, who reads the memory
        // block through its bind: a copy in the run's own directory (root's, mode 0700, so no
        // other process of that user can swap it for a link before it is bound).
        let memory_file = match host_user() {
            Some(user) => {
                let copy = scratch.path().join("memory.md");
                let io = |e: std::io::Error| format!("{}: {e}", copy.display());
                std::fs::copy(memory_file, &copy).map_err(io)?;
                std::os::unix::fs::lchown(&copy, Some(user.uid), Some(user.gid)).map_err(io)?;
                copy
            }
            None => memory_file.to_path_buf(),
        };
        let private: Vec<PathBuf> = self
            .settings
            .private
            .iter()
            .chain(work.private())
            .cloned()
            .collect();
        // Each run writes only its own copy of a read-write bind.
        let configured = copied_for_run(&self.settings.sandbox_binds, &private, scratch.path())
            .map_err(|e| e.to_string())?;
        let spec = SandboxSpec {
            workspace: work.path().to_owned(),
            workspace_read_only: false,
            repository: work.repository(),
            deny_read: work.deny_read().to_vec(),
            protected: work.protected().to_vec(),
            read_only,
            memory: Some(memory_file),
            configured,
            private,
            // Through the broker: no network but the proxy's socket.
            network: if forwarder.is_some() {
                Network::Unshared
            } else {
                Network::Shared
            },
            proxy_socket: forwarder
                .as_ref()
                .map(|_| scratch.path().join(PROXY_SOCKET_NAME)),
            files,
            scratch: scratch.path().to_path_buf(),
            limits: SandboxLimits::default(),
        };
        let sandbox = Sandbox::prepare(&spec).map_err(|e| e.to_string())?;
        Ok(Some(Boxed {
            sandbox,
            program,
            forwarder,
            proxy: None,
            scratch,
        }))
    }
}

/// Claude Code's managed settings for the run, in a directory of their own in its scratch
/// directory, and where it is bound: the whole of `/etc/claude-code`, read-only, so nothing
/// can be added beside them (a drop-in of `managed-settings.d` would be managed too).
fn managed_settings(
    claude: &crate::claude_code::ClaudeCodeSettings,
    hook: &Path,
    scratch: &Path,
) -> Result<(PathBuf, PathBuf), String> {
    use std::os::unix::fs::PermissionsExt;
    if hook.to_string_lossy().contains(['\'', '\n']) {
        return Err(format!(
            "{}: the switchboard binary's path holds a quote or a line break, which the hook's command cannot name",
            hook.display()
        ));
    }
    let dir = scratch.join("claude-code-managed");
    let file = dir.join("managed-settings.json");
    let io = |e: std::io::Error| format!("{}: {e}", dir.display());
    std::fs::create_dir(&dir).map_err(io)?;
    std::fs::write(&file, claude.managed_settings(hook)).map_err(io)?;
    // Read by the sandbox's user under a root server (the directory it is in is root's).
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).map_err(io)?;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).map_err(io)?;
    let managed = Path::new(crate::claude_code::MANAGED_SETTINGS);
    let at = managed.parent().unwrap_or(managed).to_path_buf();
    Ok((dir, at))
}

/// The memory block in a file of its own (mode 0600, in the system's temp directory), for
/// `SWITCHBOARD_MEMORY_FILE` whatever `request_via` is; empty when there is nothing to
/// remember.
fn memory_file(job: &AgentJob) -> std::io::Result<tempfile::NamedTempFile> {
    let mut file = tempfile::Builder::new()
        .prefix(&format!("switchboard-memory-{}-", job.run_id))
        .suffix(".md")
        .tempfile()?;
    std::io::Write::write_all(&mut file, job.memory.text().as_bytes())?;
    std::io::Write::flush(&mut file)?;
    Ok(file)
}

/// Kills the program's whole process group. An already-gone group is not an error.
fn kill_group(pid: Option<u32>) {
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
    }
}

#[async_trait]
impl AgentBackend for CommandBackend {
    fn kind(&self) -> &'static str {
        "command"
    }

    async fn run(&self, job: AgentJob, sink: EventSink, cancel: CancellationToken) -> AgentOutcome {
        if let Some(cause) = self.missing_program() {
            return sink.failed_because(NOT_STARTED, &cause);
        }
        // Held until the run returns: dropping it removes the file.
        let memory_file = match memory_file(&job) {
            Ok(f) => f,
            Err(e) => {
                return sink.failed_because(
                    NOT_STARTED,
                    &format!("could not write the memory block's file: {e}"),
                );
            }
        };
        // Held until the run returns, like the memory file.
        let work = match WorkDir::of(&job) {
            Ok(work) => work,
            Err(why) => return sink.failed_because(NOT_STARTED, &why),
        };
        // Held until the run returns, like the memory file: its stub file lives beside it.
        let mut boxed = match self.sandbox(&work, memory_file.path()) {
            Ok(boxed) => boxed,
            Err(why) => {
                return sink.failed_because(
                    "the agent's sandbox could not be made; the operator's log has the details",
                    &why,
                );
            }
        };
        if let Some(boxed) = boxed.as_mut() {
            if let Err(why) = self.start_proxy(&job, boxed, &sink) {
                return sink.failed_because(
                    "the agent's network could not be set up; the operator's log has the details",
                    &why,
                );
            }
            sink.event("network", &self.network_said(boxed)).await;
        } else {
            sink.event(
                "network",
                "the agent runs unsandboxed, with the host's network: its traffic is not decided",
            )
            .await;
        }
        let mut child = match self
            .command(&job, work.path(), memory_file.path(), boxed.as_ref())
            .spawn()
        {
            Ok(c) => c,
            Err(e) => {
                let program = self.settings.argv.first().map_or("", String::as_str);
                return sink
                    .failed_because(NOT_STARTED, &format!("could not start `{program}`: {e}"));
            }
        };
        let pid = child.id();
        let stdin = child.stdin.take();
        let request = (self.settings.request_via == RequestVia::Stdin).then(|| job.request.clone());
        let feed = async move {
            if let (Some(mut stdin), Some(request)) = (stdin, request) {
                // A program that does not read stdin closes it; that is not a failure.
                let _ = stdin.write_all(request.as_bytes()).await;
                let _ = stdin.shutdown().await;
            }
        };
        let stderr = child.stderr.take();
        let collect_stderr = async move {
            let mut kept = Vec::new();
            if let Some(stderr) = stderr {
                let mut limited = stderr.take(STDERR_KEEP as u64);
                let _ = limited.read_to_end(&mut kept).await;
                // Drain the rest so the program never blocks on a full pipe.
                let mut rest = limited.into_inner();
                let _ = tokio::io::copy(&mut rest, &mut tokio::io::sink()).await;
            }
            String::from_utf8_lossy(&kept).into_owned()
        };
        let stdout = child.stdout.take();
        let caps = sink.caps();
        let sink_for_lines = sink.clone();
        let whole = self.settings.claude_code.is_some();
        let read_stdout = async move {
            let mut block = if whole {
                AnswerBlock::whole(caps.answer_bytes)
            } else {
                AnswerBlock::new(caps.answer_bytes)
            };
            if let Some(stdout) = stdout {
                let mut reader = BufReader::new(stdout);
                while let Ok(Some(line)) = read_capped_line(&mut reader, caps.event_bytes).await {
                    if !line.trim().is_empty() {
                        sink_for_lines.event("output", &line).await;
                    }
                    block.push(line);
                }
            }
            block
        };
        // When the program exits, anything it left running in its group goes with it (so a
        // background child holding stdout open cannot keep the run alive).
        let wait = async {
            let status = child.wait().await;
            kill_group(pid);
            status
        };
        let running = async {
            let ((), stderr, block, status) = tokio::join!(feed, collect_stderr, read_stdout, wait);
            (status, stderr, block)
        };
        let finished = tokio::select! {
            done = running => Some(done),
            () = cancel.cancelled() => None,
        };
        let Some((status, stderr, block)) = finished else {
            kill_group(pid);
            // Reaped before the run is said to be over, so keeping its workspace starts once
            // the program is gone (a sandbox's own processes are killed with it; keeping never
            // follows a link in the workspace in any case).
            let _ = tokio::time::timeout(REAP_WAIT, child.wait()).await;
            return sink.cancelled();
        };
        match status {
            Ok(s) if s.success() => sink.answered(&block.text()),
            // The sandbox itself failed (bubblewrap, or `choom` exec'ing the program): the
            // program never ran, so what was printed is the server's, not the agent's.
            Ok(s) if launcher_failed(&stderr) => sink.failed_because(
                NOT_STARTED,
                &format!(
                    "the sandbox exited with {s} before the program ran: {}",
                    stderr.trim()
                ),
            ),
            Ok(s) => {
                if !stderr.trim().is_empty() {
                    sink.friction("tool_error", stderr.trim()).await;
                }
                let how = s.code().map_or_else(
                    || "was killed by a signal".to_owned(),
                    |c| format!("exited with status {c}"),
                );
                sink.failed(&format!("the agent program {how}"))
            }
            Err(e) => sink.failed_because(
                "the agent program was lost; the operator's log has the details",
                &format!("waiting for the agent program failed: {e}"),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sandboxed_program_named_bare_is_found_on_its_own_path() {
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("my-agent");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        let backend = |path: &str| {
            CommandBackend::new(CommandSettings {
                network: CommandNetwork::Host,
                argv: vec!["my-agent".into()],
                request_via: RequestVia::Stdin,
                env: vec![("PATH".into(), path.to_owned())],
                sandbox: true,
                sandbox_binds: vec![],
                private: vec![],
                claude_code: None,
            })
            .unwrap()
        };
        let on_path = backend(&format!("/usr/bin:{}", dir.path().display()));
        assert_eq!(on_path.sandboxed_program("my-agent"), tool);
        assert_eq!(
            on_path.sandboxed_program("./agent.sh"),
            Path::new("./agent.sh")
        );
        // Not on the program's PATH: left for the sandbox to refuse by name.
        let elsewhere = backend("/usr/bin");
        assert_eq!(
            elsewhere.sandboxed_program("my-agent"),
            Path::new("my-agent")
        );
    }

    #[test]
    fn an_empty_argv_is_refused() {
        let e = CommandBackend::new(CommandSettings {
            network: CommandNetwork::Host,
            argv: vec![],
            request_via: RequestVia::Stdin,
            env: vec![],
            sandbox: false,
            sandbox_binds: vec![],
            private: vec![],
            claude_code: None,
        })
        .err()
        .unwrap();
        assert!(e.to_string().contains("name the program"));
    }
}
