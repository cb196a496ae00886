//! Running a program under bubblewrap (Debian's `bubblewrap`, the `bwrap` binary): the run's
//! own workspace bound read-write at [`SANDBOX_WORKSPACE`] (its `.git`, when it is a
//! repository, pinned in place with its config read-only), a read-only toolchain (`/usr` and
//! the few files of `/etc` programs need), each denied path covered by a stub file, the whole
//! `.switchboard/` directory and each protected path read-only, `/proc/sys` read-only, a
//! size-bounded `/tmp`, a bounded number of processes, the OOM killer's first choice (a score
//! adjustment of 1000), fresh user, pid, ipc and uts namespaces, every capability dropped, a
//! system-call filter ([`crate::seccomp`]), and the network unshared unless asked for. An
//! agent's configured binds never reach a private path ([`SandboxSpec::private`]).
//!
//! Never host root: under a root server every command is staged and becomes the sandbox's
//! unprivileged host user before bubblewrap starts ([`host_user`]).
//!
//! Fail closed: without `bwrap`, or where it cannot make its namespaces (user namespaces off),
//! [`Sandbox::prepare`] is an error that says so, and the caller does not start the program
//! unsandboxed. Linux only.

mod host_user;
mod per_run;
mod places;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub use host_user::{HostUser, give_file, hand_over, host_user, readable_by, set_host_user};
use host_user::{OverlayWork, Staging};
pub use per_run::{PER_RUN_COPY_BYTES, copied_for_run};
use places::{ensure_dir, ensure_file, inside, real_entry};

/// What a denied path reads as inside the sandbox.
pub const STUB_TEXT: &str = "switchboard: this file is denied by the project (deny_read in .switchboard/agent-policy.toml). Its bytes are not in this sandbox.\n";

/// The files of `/etc` a program may need (name resolution, TLS roots, users, the dynamic
/// linker's cache, Debian's alternatives). The rest of `/etc` is not in the sandbox.
const ETC_READ_ONLY: [&str; 10] = [
    "/etc/alternatives",
    "/etc/ca-certificates",
    "/etc/group",
    "/etc/hosts",
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/resolv.conf",
    "/etc/ssl",
];

/// Top-level names that are links into `/usr` on a merged-/usr system, or directories.
const USR_ROOTS: [&str; 4] = ["/bin", "/lib", "/lib64", "/sbin"];

/// The directory every sandbox holds read-only: the project's policy and what goes with it.
pub const POLICY_DIR: &str = ".switchboard";

/// Sets the process limit inside the sandbox, then runs the program (util-linux, on every
/// Debian system).
const PRLIMIT: &str = "/usr/bin/prlimit";
/// Where the run's workspace is inside every sandbox: no host path (the server's data
/// directory) is a mount point a program can read in `/proc/self/mountinfo`.
pub const SANDBOX_WORKSPACE: &str = "/workspace";
/// Where a command agent's memory file is inside its sandbox.
pub const SANDBOX_MEMORY: &str = "/run/switchboard/memory.md";
/// The file descriptor bubblewrap reads the system-call filter from ([`crate::seccomp`]).
const SECCOMP_FD: &str = "9";
/// Opens the filter at [`SECCOMP_FD`] and becomes bubblewrap: `sh -c SCRIPT name filter bwrap
/// args…` (no descriptor of the server's is left open for it).
const WITH_FILTER: &str = "filter=$1; shift; exec \"$@\" 9<\"$filter\"";
/// Sets the program's OOM score adjustment (util-linux too).
const CHOOM: &str = "/usr/bin/choom";
/// Every sandboxed program is the first the kernel's OOM killer picks: memory a program holds
/// outside its own pages (System V shared memory it made and detached, counted to no
/// process) would otherwise have the kernel kill the server. Killing the sandbox's program
/// ends its IPC namespace, which frees that memory.
const OOM_SCORE_ADJ: &str = "1000";

/// How much one sandbox may hold and start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SandboxLimits {
    /// The size of the sandbox's own `/tmp` (a tmpfs): writing past it fails with ENOSPC.
    pub tmp_bytes: u64,
    /// The size of its `/dev/shm` (a tmpfs; the rest of its `/dev` is read-only).
    pub shm_bytes: u64,
    /// `RLIMIT_NPROC` inside the sandbox: processes (and threads) its user may have at once.
    /// The kernel does not apply it to a process whose real user is root, and no sandboxed
    /// program is: under a root server it is the sandbox's host user ([`host_user`]).
    pub processes: u32,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        SandboxLimits {
            tmp_bytes: 128 * 1024 * 1024,
            shm_bytes: 64 * 1024 * 1024,
            processes: 256,
        }
    }
}

/// Whether the program may reach the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Network {
    /// A fresh network namespace with only a loopback of its own: every `shell` call, and a
    /// command agent whose network goes through the broker (its proxy socket bound in).
    Unshared,
    /// The host's network: a command agent with `network = "host"`, whose traffic nothing
    /// decides.
    Shared,
}

/// What one sandbox holds.
#[derive(Debug, Clone)]
pub struct SandboxSpec {
    /// The run's workspace, bound at [`SANDBOX_WORKSPACE`]: read-write, unless
    /// `workspace_read_only`.
    pub workspace: PathBuf,
    /// Bind the workspace read-only (a look at what a run left, never a change to it).
    pub workspace_read_only: bool,
    /// Whether `workspace/.git` is the run's own repository: bound in place (so it cannot be
    /// renamed or replaced) with its `config` read-only.
    pub repository: bool,
    /// Project-relative names kept out (broker's `ProjectPolicy::deny_read`, already checked).
    pub deny_read: Vec<String>,
    /// Project-relative paths bound read-only over themselves, when they are a file or a
    /// directory reached through real directories (what git on a person's machine runs from
    /// the tree, the project's `protected` list).
    pub protected: Vec<String>,
    /// Paths outside the workspace the program may read (its own program), bound at their
    /// own place when they exist.
    pub read_only: Vec<PathBuf>,
    /// A command agent's memory file, bound read-only at [`SANDBOX_MEMORY`].
    pub memory: Option<PathBuf>,
    /// Paths the agent's config binds in at their own place (its login, its tools): each must
    /// exist. Bound before the workspace, so nothing here can cover the workspace's stubs or
    /// its read-only policy file.
    pub configured: Vec<ConfiguredBind>,
    /// Host paths no configured bind may reach, hold or lie in: Switchboard's data directory,
    /// its store and config, the repository a run's base is read from. A bind of `/var/lib`
    /// or of a checkout would hand the program every run's workspace, the store's tokens or the
    /// denied files' real bytes.
    pub private: Vec<PathBuf>,
    pub network: Network,
    /// The run's proxy socket (a command agent whose network goes through the broker),
    /// bound at [`crate::netproxy::SANDBOX_PROXY_SOCKET`]. Meant for an unshared network.
    pub proxy_socket: Option<PathBuf>,
    /// Small files or directories of Switchboard's, each bound read-only at its place inside
    /// (host path, then where): a Claude Code agent's managed settings directory. A file is
    /// copied, not bound, under a root server's staging.
    pub files: Vec<(PathBuf, PathBuf)>,
    /// A directory outside the workspace for the stub file.
    pub scratch: PathBuf,
    pub limits: SandboxLimits,
}

/// One path of an agent's `sandbox_bind` or `sandbox_read_only`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfiguredBind {
    /// Absolute.
    pub path: PathBuf,
    pub writable: bool,
    /// Where it appears inside the sandbox, when not at `path` itself.
    pub at: Option<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    #[error(
        "bubblewrap is not installed (no bwrap on PATH); install Debian's bubblewrap package. A sandboxed run does not start without it"
    )]
    Missing,
    #[error(
        "bubblewrap cannot make a sandbox on this machine (are user namespaces disabled? see sysctl kernel.unprivileged_userns_clone): {0}. The run does not start unsandboxed"
    )]
    Unavailable(String),
    #[error("the sandbox's workspace {0} must be an existing absolute directory")]
    Workspace(PathBuf),
    #[error("deny_read {0:?} must be a project-relative file name inside the workspace")]
    DeniedName(String),
    #[error(
        "{0} does not exist, so it cannot be bound into the sandbox; create it, or take it out of the agent's sandbox_bind / sandbox_read_only"
    )]
    ConfiguredMissing(PathBuf),
    #[error(
        "{bind} (the agent's sandbox_bind / sandbox_read_only) reaches {private}, which holds Switchboard's data or a repository's own files; bind a directory that holds neither and lies in neither"
    )]
    ConfiguredPrivate { bind: PathBuf, private: PathBuf },
    #[error("preparing the sandbox: {0}")]
    Io(String),
}

/// One bind: a host path, where it appears inside, and whether the program may write it.
#[derive(Debug, Clone)]
struct Mount {
    source: PathBuf,
    dest: PathBuf,
    writable: bool,
    /// A small file (the stub, the memory block) a root server's staging copies rather than
    /// binds, so its host path is no mount's source.
    copied: bool,
}

/// A prepared sandbox: the stub written and every denied name present to mount over.
#[derive(Debug, Clone)]
pub struct Sandbox {
    bwrap: PathBuf,
    /// The system-call filter's file, opened for bubblewrap at each start.
    filter: PathBuf,
    args: Vec<std::ffi::OsString>,
    mounts: Vec<Mount>,
    processes: u32,
    /// Canonical.
    workspace: PathBuf,
    deny_read: Vec<String>,
    /// Under a root server: where the workspace's overlay keeps its work directory.
    overlay: Option<std::sync::Arc<OverlayWork>>,
    /// Whether `.git` and its config are bound.
    repository: bool,
    /// The protected paths bound read-only, and whether each is a directory.
    protected: Vec<(PathBuf, bool)>,
}

impl Sandbox {
    /// Checks bubblewrap works here (once per process), writes the stub, and makes sure each
    /// denied name exists so it can be covered: a name that does not exist yet becomes an empty
    /// file (the one trace a sandbox leaves in the workspace). Under a root server the
    /// workspace and the writable binds are handed to the sandbox's host user.
    pub fn prepare(spec: &SandboxSpec) -> Result<Sandbox, SandboxError> {
        let bwrap = usable_bwrap()?;
        let workspace = spec
            .workspace
            .canonicalize()
            .ok()
            .filter(|w| w.is_dir())
            .ok_or_else(|| SandboxError::Workspace(spec.workspace.clone()))?;
        let stub = spec.scratch.join("switchboard-denied-stub");
        std::fs::write(&stub, STUB_TEXT)
            .map_err(|e| SandboxError::Io(format!("{}: {e}", stub.display())))?;
        // Named by the network it is for: two sandboxes sharing a scratch directory never
        // read each other's filter.
        let filter = spec.scratch.join(match spec.network {
            Network::Unshared => "switchboard-seccomp-unshared.bpf",
            Network::Shared => "switchboard-seccomp-shared.bpf",
        });
        let program =
            crate::seccomp::program(spec.network == Network::Unshared).ok_or_else(|| {
                SandboxError::Unavailable(
                "no system-call filter is written for this architecture (x86_64 and aarch64 are)"
                    .to_owned(),
            )
            })?;
        std::fs::write(&filter, program)
            .map_err(|e| SandboxError::Io(format!("{}: {e}", filter.display())))?;
        let user = host_user();
        let mut mounts = Vec::new();
        let mut mount = |source: &Path, dest: &Path, writable: bool| {
            let copied = source == stub
                || spec.memory.as_deref() == Some(source)
                || spec
                    .files
                    .iter()
                    .any(|(file, _)| file == source && file.is_file());
            mounts.push(Mount {
                source: source.to_path_buf(),
                dest: dest.to_path_buf(),
                writable,
                copied,
            })
        };
        let inner = |host: &Path| inside_path(&workspace, host);
        for configured in &spec.configured {
            if !configured.path.is_absolute() || !configured.path.exists() {
                return Err(SandboxError::ConfiguredMissing(configured.path.clone()));
            }
            reaches_private(&configured.path, &spec.private)?;
            match user {
                Some(user) if configured.writable => hand_over(&configured.path, user)?,
                // A command agent's unreadable ones are copies by now ([`copied_for_run`]).
                Some(user) => readable_by(&configured.path, user)?,
                None => {}
            }
            let at = configured.at.as_deref().unwrap_or(&configured.path);
            mount(&configured.path, at, configured.writable);
        }
        mount(
            &workspace,
            Path::new(SANDBOX_WORKSPACE),
            !spec.workspace_read_only,
        );
        for path in &spec.read_only {
            if path.exists() {
                mount(path, path, false);
            }
        }
        if let Some(memory) = &spec.memory {
            mount(memory, Path::new(SANDBOX_MEMORY), false);
        }
        for (file, at) in &spec.files {
            mount(file, at, false);
        }
        if let Some(socket) = &spec.proxy_socket {
            // Connecting needs write permission on the socket, never a writable mount.
            mount(
                socket,
                Path::new(crate::netproxy::SANDBOX_PROXY_SOCKET),
                false,
            );
        }
        if spec.repository {
            // Pinned: a mount point cannot be renamed or replaced, so `.git` stays the run's
            // own repository, and its config (which names what git runs) stays Switchboard's.
            let git = workspace.join(".git");
            let config = git.join("config");
            if real_entry(&workspace, &git) != Some(true)
                || real_entry(&workspace, &config) != Some(false)
            {
                return Err(SandboxError::Io(format!(
                    "{}: the run's repository is not there",
                    git.display()
                )));
            }
            mount(&git, &inner(&git), true);
            mount(&config, &inner(&config), false);
        }
        let policy_dir = workspace.join(POLICY_DIR);
        ensure_dir(&policy_dir)?;
        for name in &spec.deny_read {
            let path = inside(&workspace, name)?;
            ensure_file(&workspace, &path)?;
        }
        mount(&policy_dir, &inner(&policy_dir), false);
        let mut protected = Vec::new();
        for name in &spec.protected {
            let path = inside(&workspace, name)?;
            // One that is missing, or a link (on the way or at its end: never followed), is
            // not bound; none of it is ever kept.
            if let Some(is_dir) = real_entry(&workspace, &path) {
                mount(&path, &inner(&path), false);
                protected.push((path, is_dir));
            }
        }
        for name in &spec.deny_read {
            let path = inside(&workspace, name)?;
            mount(&stub, &inner(&path), false);
        }
        if let Some(user) = user {
            hand_over(&workspace, user)?;
        }
        let overlay = user
            .and_then(|_| OverlayWork::make(&workspace))
            .map(std::sync::Arc::new);
        Ok(Sandbox {
            bwrap,
            filter,
            args: base_args(spec.network, spec.limits),
            mounts,
            processes: spec.limits.processes,
            workspace,
            deny_read: spec.deny_read.clone(),
            overlay,
            repository: spec.repository,
            protected,
        })
    }

    /// Checks, before a program starts in a sandbox prepared earlier, that each place a stub
    /// is mounted is still a file inside the workspace reached through real directories: a run
    /// that moved a directory and left a symbolic link in its place would otherwise have
    /// bubblewrap follow the link when it mounts the stub (onto the host). A name that went
    /// missing is made again.
    pub fn verify(&self) -> Result<(), SandboxError> {
        ensure_dir(&self.workspace.join(POLICY_DIR))?;
        if self.repository {
            // Bound by path (as root under a root server): never a link in their place.
            let git = self.workspace.join(".git");
            if real_entry(&self.workspace, &git) != Some(true)
                || real_entry(&self.workspace, &git.join("config")) != Some(false)
            {
                return Err(SandboxError::Io(format!(
                    "{}: the run's repository was moved or replaced since the sandbox was made",
                    git.display()
                )));
            }
        }
        for name in &self.deny_read {
            let path = inside(&self.workspace, name)?;
            ensure_file(&self.workspace, &path)?;
        }
        for (path, is_dir) in &self.protected {
            if real_entry(&self.workspace, path) != Some(*is_dir) {
                return Err(SandboxError::Io(format!(
                    "{}: a protected path was moved or replaced since the sandbox was made",
                    path.display()
                )));
            }
        }
        Ok(())
    }

    /// Where a host path inside the workspace is inside the sandbox (beneath
    /// [`SANDBOX_WORKSPACE`]); any other path is where it is.
    pub fn inside(&self, host: &Path) -> PathBuf {
        inside_path(&self.workspace, host)
    }

    /// [`Sandbox::command`] with `dir` (a host path inside the workspace) as the working
    /// directory. Under a root server the command stages its sources and becomes the
    /// sandbox's host user before bubblewrap starts ([`host_user`]).
    pub fn command_in<I, S>(
        &self,
        dir: &Path,
        program: impl AsRef<OsStr>,
        args: I,
    ) -> tokio::process::Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.build(dir, program.as_ref(), args, &[])
    }

    /// Whether this process stages its sandboxes as root ([`host_user`]): then nothing of a
    /// command's own environment may reach the staging (a `PATH` or `LD_PRELOAD` of the
    /// agent's would run as root), so [`Sandbox::command_with_env`] hands it to bubblewrap.
    pub fn stages(&self) -> bool {
        host_user().is_some()
    }

    /// [`Sandbox::command`] for a program whose environment (`env`) is configured by an
    /// operator: under a root server it is set by the sandbox's bubblewrap (`--setenv`), after
    /// the staging, and the caller sets none of it on the command; otherwise the caller sets
    /// it as usual.
    pub fn command_with_env<I, S>(
        &self,
        program: impl AsRef<OsStr>,
        args: I,
        env: &[(String, String)],
    ) -> tokio::process::Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let env = if self.stages() { env } else { &[] };
        self.build(&self.workspace, program.as_ref(), args, env)
    }

    fn build<I, S>(
        &self,
        dir: &Path,
        program: &OsStr,
        args: I,
        env: &[(String, String)],
    ) -> tokio::process::Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut staging = host_user().map(Staging::new);
        // The workspace (and every path in it) comes from its overlay in the staging
        // namespace, when there is one: no mount in the sandbox has a host path as its source.
        let staged_workspace = match (&mut staging, &self.overlay) {
            (Some(staging), Some(o)) => Some(staging.workspace(&o.parent, &o.upper, &o.work)),
            _ => None,
        };
        let mut stage = |source: &Path, copied: bool| {
            if let (Some(at), Ok(rest)) = (&staged_workspace, source.strip_prefix(&self.workspace))
            {
                return at.join(rest);
            }
            match &mut staging {
                Some(staging) => staging.add(source, copied),
                None => source.to_path_buf(),
            }
        };
        let filter = stage(&self.filter, false);
        let mut inner: Vec<std::ffi::OsString> = Vec::new();
        for mount in &self.mounts {
            let how = if mount.writable {
                "--bind"
            } else {
                "--ro-bind"
            };
            inner.push(how.into());
            inner.push(stage(&mount.source, mount.copied).into_os_string());
            inner.push(mount.dest.clone().into_os_string());
        }
        let mut command = match &staging {
            Some(staging) => {
                let (program, args) = staging.prefix();
                let mut command = tokio::process::Command::new(program);
                command.args(args).arg("/bin/sh");
                command
            }
            None => tokio::process::Command::new("/bin/sh"),
        };
        command
            .args(["-c", WITH_FILTER, "switchboard-sandbox"])
            .arg(filter)
            .arg(&self.bwrap)
            .args(&self.args)
            .args(["--seccomp", SECCOMP_FD])
            .args(inner);
        for (key, value) in env {
            command.arg("--setenv").arg(key).arg(value);
        }
        command.arg("--chdir").arg(self.inside(dir));
        self.limited(&mut command, program, args);
        command
    }

    /// `-- prlimit --nproc=N:N -- choom -n 1000 -- program args…`: the process limit is set
    /// inside the sandbox's user namespace, where it counts only the sandbox's own processes,
    /// and the program is the OOM killer's first choice ([`OOM_SCORE_ADJ`]).
    fn limited<I, S>(&self, command: &mut tokio::process::Command, program: &OsStr, args: I)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let nproc = format!("--nproc={0}:{0}", self.processes);
        command
            .arg("--")
            .arg(PRLIMIT)
            .arg(nproc)
            .arg("--")
            .arg(CHOOM)
            .args(["-n", OOM_SCORE_ADJ, "--"])
            .arg(program)
            .args(args);
    }

    /// `program args…` under this sandbox, in the workspace, as a command the caller
    /// finishes (environment, stdio, process group) and spawns.
    pub fn command<I, S>(&self, program: impl AsRef<OsStr>, args: I) -> tokio::process::Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.command_in(&self.workspace, program, args)
    }
}

/// `host` beneath [`SANDBOX_WORKSPACE`] when it is in `workspace` (canonical); else itself.
fn inside_path(workspace: &Path, host: &Path) -> PathBuf {
    match host.strip_prefix(workspace) {
        Ok(rest) if rest.as_os_str().is_empty() => PathBuf::from(SANDBOX_WORKSPACE),
        Ok(rest) => Path::new(SANDBOX_WORKSPACE).join(rest),
        Err(_) => host.to_path_buf(),
    }
}

fn base_args(network: Network, limits: SandboxLimits) -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = [
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/usr",
        "/usr",
        "--dev",
        "/dev",
    ]
    .into_iter()
    .map(Into::into)
    .collect();
    // Every tmpfs the sandbox can write is sized: its /dev/shm, then /dev read-only, its /tmp.
    for (size, mount) in [(limits.shm_bytes, "/dev/shm"), (limits.tmp_bytes, "/tmp")] {
        args.push("--size".into());
        args.push(size.to_string().into());
        args.push("--tmpfs".into());
        args.push(mount.into());
        if mount == "/dev/shm" {
            args.push("--remount-ro".into());
            args.push("/dev".into());
        }
    }
    args.push("--proc".into());
    args.push("/proc".into());
    // The kernel's settings are read-only whoever the program is.
    bind(
        &mut args,
        "--ro-bind",
        Path::new("/proc/sys"),
        Path::new("/proc/sys"),
    );
    if network == Network::Shared {
        args.push("--share-net".into());
    }
    for root in USR_ROOTS {
        match std::fs::read_link(root) {
            Ok(target) => {
                args.push("--symlink".into());
                args.push(target.into_os_string());
                args.push(root.into());
            }
            Err(_) if Path::new(root).is_dir() => {
                bind(&mut args, "--ro-bind", Path::new(root), Path::new(root))
            }
            Err(_) => {}
        }
    }
    for etc in ETC_READ_ONLY {
        if Path::new(etc).exists() {
            bind(&mut args, "--ro-bind", Path::new(etc), Path::new(etc));
        }
    }
    args
}

/// Refuses a configured bind that is, holds or lies in one of `private`, compared by their
/// real paths (a link to the data directory is the data directory).
pub fn reaches_private(bind: &Path, private: &[PathBuf]) -> Result<(), SandboxError> {
    let real = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let bound = real(bind);
    for private in private {
        let private_real = real(private);
        if bound.starts_with(&private_real) || private_real.starts_with(&bound) {
            return Err(SandboxError::ConfiguredPrivate {
                bind: bind.to_path_buf(),
                private: private.clone(),
            });
        }
    }
    Ok(())
}

fn bind(args: &mut Vec<std::ffi::OsString>, how: &str, source: &Path, target: &Path) {
    args.push(how.into());
    args.push(source.as_os_str().to_owned());
    args.push(target.as_os_str().to_owned());
}

/// `bwrap` on PATH, once it has made a sandbox here: probed once per process.
fn usable_bwrap() -> Result<PathBuf, SandboxError> {
    static PROBE: OnceLock<Result<PathBuf, SandboxError>> = OnceLock::new();
    PROBE.get_or_init(probe).clone()
}

fn probe() -> Result<PathBuf, SandboxError> {
    let bwrap = find_on_path("bwrap").ok_or(SandboxError::Missing)?;
    if !Path::new(PRLIMIT).is_file() {
        return Err(SandboxError::Unavailable(format!(
            "{PRLIMIT} is missing (Debian's util-linux); the sandbox's process limit needs it"
        )));
    }
    // Under a root server, probed as the programs will run: staged, as the host user.
    let user = host_user();
    let mut command = std::process::Command::new(&bwrap);
    if let Some(user) = user {
        for tool in [host_user::SETPRIV, host_user::UNSHARE, host_user::MOUNT] {
            if !Path::new(tool).is_file() {
                return Err(SandboxError::Unavailable(format!(
                    "{tool} is missing (Debian's util-linux and mount); a root server's sandbox needs it"
                )));
            }
        }
        let (program, args) = Staging::new(user).prefix();
        command = std::process::Command::new(program);
        command.args(args).arg(&bwrap);
    }
    command
        .args(base_args(Network::Unshared, SandboxLimits::default()))
        .args(["--", PRLIMIT, "--nproc=16:16", "--", "/usr/bin/true"]);
    let output = command
        .output()
        .map_err(|e| SandboxError::Unavailable(e.to_string()))?;
    if output.status.success() {
        return Ok(bwrap);
    }
    let said = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    Err(SandboxError::Unavailable(match user {
        Some(user) => format!(
            "{said} (serve runs as root, so sandboxed programs run as uid {} gid {}: [sandbox] user_id and group_id)",
            user.uid, user.gid
        ),
        None => said,
    }))
}

/// Whether a sandbox can be made here (bubblewrap present and able to make its namespaces),
/// probed once per process: the start-up summary says so before any run needs one.
pub fn available() -> Result<(), SandboxError> {
    usable_bwrap().map(drop)
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    find_in(name, &std::env::var_os("PATH")?)
}

/// Where a `PATH` value finds `name` on the host.
pub fn find_in(name: &str, path: &OsStr) -> Option<PathBuf> {
    std::env::split_paths(path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}
