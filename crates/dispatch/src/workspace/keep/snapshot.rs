//! What the run left uncommitted, read by `git add -A` inside a sandbox, and the copying of
//! its objects through real directories only.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use agents::sandbox::{
    ConfiguredBind, Network, SANDBOX_WORKSPACE, Sandbox, SandboxLimits, SandboxSpec,
};
use tokio::io::AsyncReadExt;

use crate::workspace::WorkspaceError;
use crate::workspace::base::Base;
use crate::workspace::git::Git;
use crate::workspace::make::RunDir;
use crate::workspace::nofollow;

use super::bounds::GIT_ALLOC_LIMIT;
use super::fail;

/// How long reading the run's working tree (in its sandbox) may take.
pub(super) const SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(120);
/// Where the snapshot's scratch repository is inside its sandbox (no host path is a mount
/// point there).
const SNAPSHOT_SCRATCH: &str = "/scratch";

/// The tree of the run's working tree as `git add -A` sees it, on top of `start`: git runs in
/// a sandbox with the working tree read-only, the network unshared, and a scratch repository
/// of its own (its config Switchboard's and read-only, the kept objects linked in) as the
/// only thing it writes. The objects it wrote are then copied into the
/// gathering repository; its answer is one object id, checked for shape.
pub(super) async fn snapshot(
    base: &Base,
    dir: &RunDir,
    start: &str,
) -> Result<String, WorkspaceError> {
    let gather = dir.gather();
    let scratch = dir.root.join("snapshot.git");
    let io = |e: std::io::Error| WorkspaceError::KeepFault(format!("{}: {e}", scratch.display()));
    Git::init(&scratch, &base.object_format, true)
        .await
        .map_err(fail)?;
    let format_line = if base.object_format == "sha1" {
        String::new()
    } else {
        format!("[extensions]\n\tobjectFormat = {}\n", base.object_format)
    };
    let version = if format_line.is_empty() { 0 } else { 1 };
    std::fs::write(
        scratch.join("config"),
        format!(
            "[core]\n\trepositoryformatversion = {version}\n\tbare = false\n\thooksPath = /dev/null\n\tfsmonitor = false\n{format_line}"
        ),
    )
    .map_err(io)?;
    // The objects kept so far, linked in rather than named as an alternate: git freshens an
    // object it finds instead of writing it (it touches the file), and a file it cannot touch
    // (a read-only alternate) makes it write the object again, once per racily clean file.
    // Called before Switchboard writes any object there, the links are the run's own files;
    // nothing else of gather.git is in the sandbox.
    copy_objects(&gather, "objects", &scratch.join("objects")).await?;
    let sandboxed = |e: agents::sandbox::SandboxError| {
        WorkspaceError::KeepFault(format!(
            "the run's working tree could not be read in a sandbox: {e}"
        ))
    };
    // Where the sandbox keeps its stub file (it covers no name here).
    let stub_dir = dir.root.join("snapshot-stub");
    std::fs::create_dir_all(&stub_dir).map_err(io)?;
    let sandbox = Sandbox::prepare(&SandboxSpec {
        workspace: dir.work(),
        workspace_read_only: true,
        repository: false,
        deny_read: Vec::new(),
        protected: Vec::new(),
        read_only: Vec::new(),
        memory: None,
        configured: vec![
            ConfiguredBind {
                path: scratch.clone(),
                writable: true,
                at: Some(SNAPSHOT_SCRATCH.into()),
            },
            ConfiguredBind {
                path: scratch.join("config"),
                writable: false,
                at: Some(Path::new(SNAPSHOT_SCRATCH).join("config")),
            },
        ],
        private: Vec::new(),
        network: Network::Unshared,
        proxy_socket: None,
        files: Vec::new(),
        scratch: stub_dir,
        limits: SandboxLimits::default(),
    })
    .map_err(sandboxed)?;
    // The run's own index spares hashing every file again (it runs only in here, and what it
    // claims is checked outside like any change); one that does not read is replaced by the
    // tree the run started from.
    // Linked, never copied (a sparse index of a terabyte costs nothing); git in the sandbox
    // writes a new index file beside it rather than into it.
    // `.git` itself is checked too: `symlink_metadata` follows every component but the last.
    let copied = std::fs::symlink_metadata(dir.work().join(".git")).is_ok_and(|m| m.is_dir())
        && std::fs::symlink_metadata(dir.work().join(".git/index")).is_ok_and(|m| m.is_file())
        && std::fs::hard_link(dir.work().join(".git/index"), scratch.join("index")).is_ok();
    if !copied {
        let _ = std::fs::remove_file(scratch.join("index"));
    }
    let script = "set -e; if ! { test -f \"$GIT_INDEX_FILE\" && git add -A 2>/dev/null; }; then \
                  rm -f \"$GIT_INDEX_FILE\"; git read-tree \"$1\"; git add -A; fi; \
                  git write-tree --missing-ok";
    let mut command = sandbox.command("/bin/sh", ["-c", script, "snapshot", start]);
    command
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", "/tmp")
        .env("GIT_DIR", SNAPSHOT_SCRATCH)
        .env("GIT_COMMON_DIR", SNAPSHOT_SCRATCH)
        .env("GIT_WORK_TREE", SANDBOX_WORKSPACE)
        .env("GIT_INDEX_FILE", Path::new(SNAPSHOT_SCRATCH).join("index"))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_NO_LAZY_FETCH", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ALLOC_LIMIT", GIT_ALLOC_LIMIT.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command
        .spawn()
        .map_err(|e| WorkspaceError::KeepFault(format!("could not start the snapshot: {e}")))?;
    let mut out = Vec::new();
    let mut err = Vec::new();
    let (mut stdout, mut stderr) = (child.stdout.take(), child.stderr.take());
    // Both at once, each kept up to its cap and the rest drained, so a flood on one (a
    // warning per file on stderr) never stalls the program.
    let reading = async {
        tokio::join!(
            read_capped(stdout.as_mut(), &mut out),
            read_capped(stderr.as_mut(), &mut err)
        );
        child.wait().await
    };
    let status = tokio::time::timeout(SNAPSHOT_TIMEOUT, reading)
        .await
        .map_err(|_| WorkspaceError::Keep("reading the run's working tree timed out".to_owned()))?
        .map_err(|e| WorkspaceError::KeepFault(format!("the snapshot: {e}")))?;
    if !status.success() {
        let said = String::from_utf8_lossy(&err);
        let first = said.lines().next().unwrap_or("no message");
        return Err(WorkspaceError::KeepFault(format!(
            "reading the run's working tree failed: {}",
            first.chars().take(300).collect::<String>()
        )));
    }
    let tree = String::from_utf8_lossy(&out)
        .lines()
        .last()
        .unwrap_or_default()
        .trim()
        .to_owned();
    if !base.is_object_id(&tree) {
        return Err(WorkspaceError::Keep(
            "reading the run's working tree gave no tree".to_owned(),
        ));
    }
    copy_objects(&scratch, "objects", &gather.join("objects")).await?;
    Ok(tree)
}

/// Reads `pipe` into `kept` up to 4 KiB, then drains the rest.
pub(super) async fn read_capped<R: tokio::io::AsyncRead + Unpin>(
    pipe: Option<&mut R>,
    kept: &mut Vec<u8>,
) {
    if let Some(pipe) = pipe {
        let mut capped = pipe.take(4096);
        let _ = capped.read_to_end(kept).await;
        let _ = tokio::io::copy(capped.into_inner(), &mut tokio::io::sink()).await;
    }
}

/// Links the object files under `root`/`objects` (loose objects and packs; regular files
/// only, never a link, never `info/`, so no alternates) into `to`, never through a link on
/// the way. Nothing there is nothing to copy.
pub(super) async fn copy_objects(
    root: &Path,
    objects: &str,
    to: &Path,
) -> Result<(), WorkspaceError> {
    let (root, objects, to) = (root.to_owned(), objects.to_owned(), to.to_owned());
    let copied = tokio::task::spawn_blocking(move || {
        let from = match nofollow::open_dir(&root, Path::new(&objects)) {
            Ok(fd) => fd,
            Err(nix::errno::Errno::ENOENT) => return Ok(()),
            // A link in its place is never followed: it could lead to any repository's
            // objects.
            Err(_) => {
                return Err(WorkspaceError::KeepFault(format!(
                    "{} is not a directory of the run's own; nothing of its repository was kept",
                    root.join(&objects).display()
                )));
            }
        };
        nofollow::link_files(&from, &to, true)
            .map_err(|e| WorkspaceError::KeepFault(format!("{}: {e}", to.display())))
    })
    .await;
    copied.map_err(|e| WorkspaceError::KeepFault(format!("copying the run's objects: {e}")))?
}
