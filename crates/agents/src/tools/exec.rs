//! Running one tool, only with a `broker::Decision` in hand. The decision was lexical; here a
//! path is opened beneath the root of the grant that allows it, by the kernel ([`beneath`]),
//! never resolved on the host, and a refusal names only the path the model sent. Denied files
//! are refused by name (as sent, and where the open landed), `write_file` never writes into
//! the run's `.git` or `.switchboard/`, and every program runs under the sandbox with the
//! network unshared. A program's output is read with its cap while it streams, and the program is
//! stopped at the cap. `http_fetch` connects only to the address it checked.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

use broker::Decision;
use broker::args::{HttpMethod, ToolArgs};
use nix::fcntl::OFlag;
use tokio::io::{AsyncRead, AsyncReadExt};

use super::beneath::{self, Beneath, NOT_WITHIN};
use super::capped::capped;
use super::mcp::McpServers;
use super::net::checked;
use crate::sandbox::{
    Network, POLICY_DIR, SANDBOX_WORKSPACE, Sandbox, SandboxLimits, SandboxSpec, give_file,
    host_user,
};

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
    /// Whether `workspace/.git` is the run's own repository.
    pub(crate) repository: bool,
    pub(crate) deny_read: Vec<String>,
    /// Project-relative paths no file tool writes, and the sandbox binds read-only.
    pub(crate) protected: Vec<String>,
    pub(crate) limits: ExecLimits,
    pub(crate) scratch: PathBuf,
    /// The run's sandbox for `shell` and `git`, prepared at the first such call (the stub
    /// written, missing denied names made) and reused after.
    pub(crate) sandbox: OnceLock<Result<Sandbox, String>>,
    pub(crate) mcp: McpServers,
}

/// What git reads as config in the `git` tool: nothing of the system's or the user's, the
/// repository's own (Switchboard wrote it, and it is read-only in the sandbox), and these,
/// which name no program: no hooks, no file-system monitor, no pager, no network, and no
/// descent into a nested repository (a gitlink the run made, whose config the run wrote and
/// could name any program: `diff.external`, a filter). Given with `-c`, they also bind every
/// git that git starts.
const GIT_SAFE_CONFIG: [&str; 8] = [
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.pager=cat",
    "protocol.allow=never",
    "credential.helper=",
    "submodule.recurse=false",
    "diff.ignoreSubmodules=all",
    "status.submoduleSummary=false",
];

/// Where the workspace's directories that no file tool may write to start.
const UNWRITABLE: [&str; 2] = [".git", POLICY_DIR];

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
                let mut argv: Vec<String> = GIT_SAFE_CONFIG
                    .iter()
                    .flat_map(|c| ["-c".to_owned(), (*c).to_owned()])
                    .collect();
                argv.push(subcommand.clone());
                argv.extend(args.iter().cloned());
                self.program(decision, Path::new(cwd), "git", &argv).await
            }
            ToolArgs::HttpFetch { url, method, .. } => self.fetch(decision, url, *method).await,
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
        // As a case-insensitive file system would match it (a casefolded directory, a
        // mounted volume): another spelling of a denied name is the denied name.
        self.deny_read
            .iter()
            .find(|d| crate::names::same_path(d, &relative))
            .cloned()
    }

    pub(super) fn refuse_denied(&self, lexical: &Path, real: Option<&Path>) -> Result<(), String> {
        let hit = self
            .denied(lexical)
            .or_else(|| real.and_then(|r| self.denied(r)));
        match hit {
            Some(name) => Err(format!("{name} {REFUSED_READ}")),
            None => Ok(()),
        }
    }

    /// `path` opened beneath the broadest of `roots` that holds it ([`beneath`]); a refusal
    /// names `shown`, the path the model sent.
    pub(super) fn beneath(
        &self,
        roots: &[String],
        path: &Path,
        shown: &Path,
        flags: OFlag,
    ) -> Result<Beneath, String> {
        let root = beneath::root_of(roots, path)
            .ok_or_else(|| format!("{} {NOT_WITHIN}", shown.display()))?;
        beneath::open(root, path, shown, flags)
    }

    async fn read(&self, decision: &Decision, path: &Path) -> Result<String, String> {
        self.refuse_denied(path, None)?;
        // Never waiting on a FIFO: only a regular file is read, bounded in time.
        let opened = self.beneath(
            decision.paths(),
            path,
            path,
            OFlag::O_RDONLY | OFlag::O_NONBLOCK,
        )?;
        self.refuse_denied(path, Some(&opened.real))?;
        let file = tokio::fs::File::from_std(std::fs::File::from(opened.fd));
        let regular = file.metadata().await.is_ok_and(|m| m.is_file());
        if !regular {
            return Err(format!(
                "{} is not a regular file; read_file reads only files",
                path.display()
            ));
        }
        let mut bytes = Vec::new();
        let mut limited = file.take(self.limits.output_bytes as u64);
        let reading = limited.read_to_end(&mut bytes);
        tokio::time::timeout(self.limits.fetch_timeout, reading)
            .await
            .map_err(|_| format!("{}: the read timed out", path.display()))?
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// The directory of the run's `.git` or `.switchboard/` that `path` is in, if it is in one:
    /// neither is written by a file tool (the repository's config names what git runs; the
    /// policy directory is the project's).
    fn unwritable(&self, path: &Path) -> Option<&'static str> {
        let relative = path.strip_prefix(&self.workspace).ok()?;
        match relative.components().next() {
            Some(std::path::Component::Normal(first)) => UNWRITABLE
                .into_iter()
                .find(|u| first == std::ffi::OsStr::new(u)),
            _ => None,
        }
    }

    /// The protected path `path` is, or lies in (compared as a case-insensitive file system
    /// would), if any.
    fn protected_by(&self, path: &Path) -> Option<&str> {
        let relative = path.strip_prefix(&self.workspace).ok()?.to_str()?;
        let relative = crate::names::fold_path(relative);
        self.protected.iter().map(String::as_str).find(|p| {
            let p = crate::names::fold_path(p);
            relative == p
                || relative
                    .strip_prefix(p.as_str())
                    .is_some_and(|rest| rest.starts_with('/'))
        })
    }

    /// Refuses `shown` (the path the model sent) when it, or where it lands (`real`), is in
    /// `.git`, `.switchboard/` or a protected path.
    pub(super) fn refuse_unwritable(
        &self,
        shown: &Path,
        real: Option<&Path>,
    ) -> Result<(), String> {
        let hit = self
            .unwritable(shown)
            .or_else(|| real.and_then(|r| self.unwritable(r)));
        if let Some(dir) = hit {
            return Err(format!(
                "{} is in {dir}/, which no tool writes to; nothing was written",
                shown.display()
            ));
        }
        let guarded = self
            .protected_by(shown)
            .or_else(|| real.and_then(|r| self.protected_by(r)));
        match guarded {
            Some(path) => Err(format!(
                "{} is in {path}, which this project protects (git on a person's machine runs or reads it, or .switchboard/agent-policy.toml lists it); nothing was written",
                shown.display()
            )),
            None => Ok(()),
        }
    }

    /// Written to a temporary file beside the target and renamed over it: a reader sees the
    /// old content or the new, never half. Every step is taken from the directory opened
    /// beneath the grant, never by a path the host resolves again.
    async fn write(
        &self,
        decision: &Decision,
        path: &Path,
        content: &str,
    ) -> Result<String, String> {
        self.refuse_denied(path, None)?;
        self.refuse_unwritable(path, None)?;
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(format!("{}: not a file path", path.display()));
        };
        let dir = self.beneath(
            decision.paths(),
            parent,
            path,
            OFlag::O_PATH | OFlag::O_DIRECTORY,
        )?;
        let real = dir.real.join(name);
        self.refuse_denied(path, Some(&real))?;
        self.refuse_unwritable(path, Some(&real))?;
        let name = name.to_owned();
        let content = content.as_bytes().to_vec();
        let shown = path.display().to_string();
        // Under a root server a file in the workspace is the sandbox's host user's, like the
        // rest of it; one under another grant keeps root's.
        let owner = host_user().filter(|_| dir.real.starts_with(&self.workspace));
        let written =
            tokio::task::spawn_blocking(move || write_in(&dir.fd, &name, &content, owner))
                .await
                .map_err(|e| format!("{shown}: {e}"))?;
        match written {
            Ok(len) => Ok(format!("wrote {len} bytes to {shown}")),
            Err(WriteRefusal::Link) => Err(format!(
                "{shown} is a symbolic link; write_file does not follow links"
            )),
            Err(WriteRefusal::Io(e)) => Err(format!("{shown}: {e}")),
        }
    }

    /// A program under the sandbox, network unshared, in `dir`, bounded in time and output:
    /// each of stdout and stderr is read up to the cap as it streams, and the program is
    /// stopped (its whole sandbox) the moment either passes it.
    async fn program(
        &self,
        decision: &Decision,
        dir: &Path,
        program: &str,
        args: &[String],
    ) -> Result<String, String> {
        // Beneath the grant's paths; a grant without paths (a shell anywhere) still starts
        // its program in the workspace or beneath it, never in a directory of the host's.
        let workspace = [self.workspace.display().to_string()];
        let roots = if decision.paths().is_empty() {
            &workspace[..]
        } else {
            decision.paths()
        };
        let real_dir = self
            .beneath(roots, dir, dir, OFlag::O_PATH | OFlag::O_DIRECTORY)?
            .real;
        let sandbox = self
            .sandbox
            .get_or_init(|| {
                Sandbox::prepare(&SandboxSpec {
                    workspace: self.workspace.clone(),
                    workspace_read_only: false,
                    repository: self.repository,
                    deny_read: self.deny_read.clone(),
                    protected: self.protected.clone(),
                    read_only: Vec::new(),
                    memory: None,
                    configured: Vec::new(),
                    private: Vec::new(),
                    network: Network::Unshared,
                    proxy_socket: None,
                    files: Vec::new(),
                    scratch: self.scratch.clone(),
                    limits: SandboxLimits::default(),
                })
                .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(Clone::clone)?;
        // The run may have moved things since the last call: every stub's place is checked
        // again before bubblewrap mounts onto it.
        sandbox.verify().map_err(|e| e.to_string())?;
        let mut command = sandbox.command_in(&real_dir, program, args);
        command
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", "/tmp")
            .env("LANG", "C.UTF-8")
            // git reads no system or user config, fetches no missing object (a denied file's
            // bytes are missing on purpose), and asks nobody anything.
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_NO_LAZY_FETCH", "1")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_PAGER", "cat")
            // An abbreviated option (`--open-files` for `--open-files-in-pager`) is an error,
            // so the git tool's vetting of whole option names holds.
            .env("GIT_TEST_DISALLOW_ABBREVIATED_OPTIONS", "true")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if program == "git" && self.repository {
            // The run's own repository, and no other: a `commondir` or `.git` file the run
            // wrote cannot point git elsewhere.
            let git_dir = Path::new(SANDBOX_WORKSPACE).join(".git");
            command
                .env("GIT_DIR", &git_dir)
                .env("GIT_COMMON_DIR", &git_dir)
                .env("GIT_WORK_TREE", SANDBOX_WORKSPACE);
        }
        let mut child = command
            .spawn()
            .map_err(|e| format!("could not start {program}: {e}"))?;
        let cap = self.limits.output_bytes;
        let stdout = read_capped(child.stdout.take(), cap);
        let stderr = read_capped(child.stderr.take(), cap);
        let deadline = tokio::time::sleep(self.limits.shell_timeout);
        tokio::pin!(stdout, stderr, deadline);
        let (mut out, mut err) = (None, None);
        let mut stopped = None;
        while out.is_none() || err.is_none() {
            tokio::select! {
                o = &mut stdout, if out.is_none() => out = Some(o),
                e = &mut stderr, if err.is_none() => err = Some(e),
                () = &mut deadline => {
                    stopped = Some(Stopped::Timeout);
                    break;
                }
            }
            if out.as_ref().is_some_and(|o| o.cut) || err.as_ref().is_some_and(|e| e.cut) {
                stopped = Some(Stopped::Cap);
                break;
            }
        }
        let status = if stopped.is_some() {
            let _ = child.start_kill();
            child.wait().await.ok()
        } else {
            tokio::select! {
                status = child.wait() => status.ok(),
                () = &mut deadline => {
                    stopped = Some(Stopped::Timeout);
                    let _ = child.start_kill();
                    child.wait().await.ok()
                }
            }
        };
        if stopped == Some(Stopped::Timeout) {
            return Err(format!(
                "stopped after {} s",
                self.limits.shell_timeout.as_secs()
            ));
        }
        let status = match (stopped, status.and_then(|s| s.code())) {
            (Some(_), _) => "stopped at the output cap".to_owned(),
            (None, Some(c)) => format!("exit status {c}"),
            (None, None) => "killed by a signal".to_owned(),
        };
        let shown = |read: Option<Capped>| read.map(|r| r.text(cap)).unwrap_or_default();
        Ok(format!(
            "{status}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            shown(out),
            shown(err)
        ))
    }

    /// `http_fetch`: the host resolved once, each address checked, and the connection made to
    /// a checked address only (no second lookup, no proxy from the environment, no redirect).
    /// An internal address is refused unless the winning grant names it literally.
    async fn fetch(
        &self,
        decision: &Decision,
        url: &str,
        method: HttpMethod,
    ) -> Result<String, String> {
        let parsed = reqwest::Url::parse(url).map_err(|_| "the URL does not parse".to_owned())?;
        let port = parsed
            .port_or_known_default()
            .ok_or_else(|| "the URL has no port".to_owned())?;
        let host = match parsed.host() {
            Some(url::Host::Ipv4(ip)) => ip.to_string(),
            Some(url::Host::Ipv6(ip)) => ip.to_string(),
            Some(url::Host::Domain(name)) => name.to_owned(),
            None => return Err("the URL has no host".to_owned()),
        };
        let (name, allowed) = checked(&host, port, decision.hosts()).await?;
        let mut client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .connect_timeout(Duration::from_secs(10));
        if let Some(name) = &name {
            client = client.resolve_to_addrs(name, &allowed);
        }
        let client = client
            .build()
            .map_err(|e| format!("the fetch client could not be made: {e}"))?;
        let method = match method {
            HttpMethod::Get => reqwest::Method::GET,
            HttpMethod::Head => reqwest::Method::HEAD,
            HttpMethod::Post => reqwest::Method::POST,
        };
        let mut response = client
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

/// Why `write_in` wrote nothing.
enum WriteRefusal {
    /// The target is a symbolic link (never followed, never replaced).
    Link,
    Io(std::io::Error),
}

/// Writes `content` to `name` in `dir`: a new file of its own name (created, never opened
/// through a link), then renamed over `name` (which replaces a file, never follows a link).
fn write_in(
    dir: &std::os::fd::OwnedFd,
    name: &std::ffi::OsStr,
    content: &[u8],
    owner: Option<crate::sandbox::HostUser>,
) -> Result<usize, WriteRefusal> {
    use nix::sys::stat::{FileStat, Mode, SFlag, fstatat};
    use std::io::Write;
    let io = |e: nix::errno::Errno| WriteRefusal::Io(std::io::Error::from(e));
    let is_link =
        |st: FileStat| SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFLNK;
    match fstatat(dir, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) if is_link(st) => return Err(WriteRefusal::Link),
        Ok(_) | Err(nix::errno::Errno::ENOENT) => {}
        Err(e) => return Err(io(e)),
    }
    let temp = format!(
        ".switchboard-write-{}",
        random_suffix().map_err(WriteRefusal::Io)?
    );
    let fd = nix::fcntl::openat(
        dir,
        temp.as_str(),
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o644),
    )
    .map_err(io)?;
    let mut file = std::fs::File::from(fd);
    let handed = match owner {
        Some(user) => give_file(&file, user),
        None => Ok(()),
    };
    let written = handed
        .and_then(|()| file.write_all(content))
        .and_then(|()| file.flush())
        .map_err(WriteRefusal::Io)
        .and_then(|()| nix::fcntl::renameat(dir, temp.as_str(), dir, name).map_err(io));
    if written.is_err() {
        let _ = nix::unistd::unlinkat(dir, temp.as_str(), nix::unistd::UnlinkatFlags::NoRemoveDir);
    }
    written.map(|()| content.len())
}

/// 16 random hex digits for a temporary file's name.
fn random_suffix() -> std::io::Result<String> {
    let mut bytes = [0u8; 8];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Why a program was stopped before it ended by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stopped {
    Cap,
    Timeout,
}

/// A stream read up to its cap: the bytes kept, and whether more came.
struct Capped {
    bytes: Vec<u8>,
    cut: bool,
}

impl Capped {
    fn text(&self, cap: usize) -> String {
        let text = String::from_utf8_lossy(&self.bytes);
        if self.cut {
            format!("{text}\n[cut at {cap} bytes; the program was stopped]")
        } else {
            text.into_owned()
        }
    }
}

/// Reads `stream` until its end or until it passes `cap` bytes; never holds more than `cap`.
async fn read_capped<R: AsyncRead + Unpin>(stream: Option<R>, cap: usize) -> Capped {
    let mut bytes = Vec::new();
    let Some(mut stream) = stream else {
        return Capped { bytes, cut: false };
    };
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return Capped { bytes, cut: false },
            Ok(n) => {
                let room = cap.saturating_sub(bytes.len());
                let read = chunk.get(..n).unwrap_or_default();
                if n > room {
                    bytes.extend_from_slice(read.get(..room).unwrap_or_default());
                    return Capped { bytes, cut: true };
                }
                bytes.extend_from_slice(read);
            }
        }
    }
}
