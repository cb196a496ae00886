//! git as the server runs it, outside every sandbox: on the repo's base (the user's checkout
//! or Switchboard's mirror of a URL), on a run's repository when its workspace is made, and on
//! a copy of a run's objects when its branch is kept. It never runs a program that a
//! repository's config or a run named: no system or user config is read, hooks and the file
//! system monitor are off, and what a run could have written (its repository) is never
//! the `GIT_DIR` of a command that reads config with programs in it (`keep.rs` copies the
//! run's objects into a repository of Switchboard's own first).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long one local git command may take.
const LOCAL: Duration = Duration::from_secs(120);
/// How long a clone or fetch of a URL repo may take.
pub(super) const NETWORK: Duration = Duration::from_secs(300);
/// The most of a command's output kept (a tree listing of a large repository fits).
const MAX_OUTPUT: usize = 64 * 1024 * 1024;

/// Config on every command: no program named by any repository runs, and git may read a
/// checkout owned by another user (it runs only plumbing there, with the above off).
/// Packing a run's new files holds at most 256 MiB of them for its delta search, and a
/// file over 32 MiB is stored whole, never searched.
const SAFE: [&str; 8] = [
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.pager=cat",
    "credential.helper=",
    "safe.directory=*",
    "gc.auto=0",
    "core.bigFileThreshold=32m",
    "pack.windowMemory=256m",
];

/// `text` with the user part (`user:password@`) of every URL in it removed.
pub(crate) fn without_user_parts(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let end = tail
            .find(|c: char| c == '/' || c.is_whitespace() || "'\"<>`".contains(c))
            .unwrap_or(tail.len());
        let (authority, after) = tail.split_at(end);
        out.push_str(
            authority
                .rsplit_once('@')
                .map_or(authority, |(_, host)| host),
        );
        rest = after;
    }
    out.push_str(rest);
    out
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("git {command} failed: {detail}")]
pub struct GitError {
    pub command: String,
    pub detail: String,
}

/// One repository as git sees it: its git directory, and optionally a work tree, an index
/// file and an object directory other than its own.
#[derive(Debug, Clone)]
pub(super) struct Git {
    /// `None` for a command that makes a repository (clone).
    git_dir: Option<PathBuf>,
    work_tree: Option<PathBuf>,
    index: Option<PathBuf>,
    objects: Option<PathBuf>,
    /// Objects read besides the repository's own (`GIT_ALTERNATE_OBJECT_DIRECTORIES`).
    alternates: Option<PathBuf>,
    /// Network operations keep the operator's environment (credentials for a private URL);
    /// everything else reads no system or user config at all.
    operator_env: bool,
    /// Set for one command (a commit's author and committer).
    env: Vec<(&'static str, String)>,
    /// Config given after [`SAFE`], so it wins over it.
    config: Vec<String>,
}

impl Git {
    pub(super) fn at(git_dir: impl Into<PathBuf>) -> Git {
        Git {
            git_dir: Some(git_dir.into()),
            work_tree: None,
            index: None,
            objects: None,
            alternates: None,
            operator_env: false,
            env: Vec::new(),
            config: Vec::new(),
        }
    }

    /// git outside any repository (a clone makes its own).
    pub(super) fn outside() -> Git {
        Git {
            git_dir: None,
            work_tree: None,
            index: None,
            objects: None,
            alternates: None,
            operator_env: false,
            env: Vec::new(),
            config: Vec::new(),
        }
    }

    /// `git init` of `dir` in `object_format`, with no template (no hooks, no sample files).
    pub(super) async fn init(dir: &Path, object_format: &str, bare: bool) -> Result<(), GitError> {
        let mut args: Vec<std::ffi::OsString> = vec!["init".into(), "--quiet".into()];
        if bare {
            args.push("--bare".into());
        }
        args.push("--template=".into());
        args.push(format!("--object-format={object_format}").into());
        args.push(dir.as_os_str().to_owned());
        Git::outside().run(args).await.map(drop)
    }

    /// Config for this command, given after [`SAFE`] (`core.bigFileThreshold=…`).
    pub(super) fn with_config(mut self, config: &str) -> Git {
        self.config.push(config.to_owned());
        self
    }

    /// An environment variable for this command (`GIT_AUTHOR_NAME`, …).
    pub(super) fn with_env(mut self, name: &'static str, value: String) -> Git {
        self.env.push((name, value));
        self
    }

    pub(super) fn work_tree(mut self, dir: &Path) -> Git {
        self.work_tree = Some(dir.to_owned());
        self
    }

    pub(super) fn index(mut self, file: &Path) -> Git {
        self.index = Some(file.to_owned());
        self
    }

    /// Reads objects from `dir` instead of the repository's own (its alternates included).
    pub(super) fn objects(mut self, dir: &Path) -> Git {
        self.objects = Some(dir.to_owned());
        self
    }

    /// Reads objects from `dir` too, besides its own (a quarantine reads the base's).
    pub(super) fn alternates(mut self, dir: &Path) -> Git {
        self.alternates = Some(dir.to_owned());
        self
    }

    /// For a URL repo's clone and fetch: the operator's environment (HOME, SSH agent,
    /// credential helpers of their own config) reaches git; hooks still do not run.
    pub(super) fn operator(mut self) -> Git {
        self.operator_env = true;
        self
    }

    fn command<I, S>(&self, args: I) -> tokio::process::Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut command = tokio::process::Command::new("git");
        if !self.operator_env {
            command
                .env_clear()
                .env("PATH", system_path())
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("HOME", "/nonexistent")
                .env("LANG", "C");
        }
        // Replace refs (`refs/replace/`) would swap the objects a command reads for others.
        command
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_NO_LAZY_FETCH", "1")
            .env("GIT_NO_REPLACE_OBJECTS", "1");
        if let Some(git_dir) = &self.git_dir {
            command.env("GIT_DIR", git_dir);
        }
        if let Some(work_tree) = &self.work_tree {
            command.env("GIT_WORK_TREE", work_tree);
        }
        if let Some(index) = &self.index {
            command.env("GIT_INDEX_FILE", index);
        }
        if let Some(objects) = &self.objects {
            command.env("GIT_OBJECT_DIRECTORY", objects);
        }
        if let Some(alternates) = &self.alternates {
            command.env("GIT_ALTERNATE_OBJECT_DIRECTORIES", alternates);
        }
        for (name, value) in &self.env {
            command.env(name, value);
        }
        for config in SAFE
            .iter()
            .copied()
            .chain(self.config.iter().map(String::as_str))
        {
            command.arg("-c").arg(config);
        }
        command.args(args).kill_on_drop(true);
        command
    }

    /// Runs `args`; its stdout, or the error with the first line of stderr.
    pub(super) async fn run<I, S>(&self, args: I) -> Result<Vec<u8>, GitError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.run_with(args, None, LOCAL).await
    }

    /// [`Git::run`] as trimmed text.
    pub(super) async fn text<I, S>(&self, args: I) -> Result<String, GitError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let out = self.run(args).await?;
        Ok(String::from_utf8_lossy(&out).trim().to_owned())
    }

    /// Runs `args` with `input` on stdin.
    pub(super) async fn input<I, S>(&self, args: I, input: Vec<u8>) -> Result<Vec<u8>, GitError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.run_with(args, Some(input), LOCAL).await
    }

    /// Whether `args` succeeds (for `merge-base --is-ancestor`, `cat-file -e`).
    pub(super) async fn holds<I, S>(&self, args: I) -> Result<bool, GitError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let args: Vec<std::ffi::OsString> =
            args.into_iter().map(|a| a.as_ref().to_owned()).collect();
        let name = command_name(&args);
        let status = tokio::time::timeout(
            LOCAL,
            self.command(&args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status(),
        )
        .await
        .map_err(|_| timed_out(&name, LOCAL))?
        .map_err(|e| GitError {
            command: name,
            detail: format!("could not run git: {e}"),
        })?;
        Ok(status.success())
    }

    /// A network command (clone, fetch): bounded by [`NETWORK`]. Its stderr is kept in the
    /// error with every URL's user part removed (git can echo a URL's credentials); the error
    /// goes to the operator's log, never to a run's caller.
    pub(super) async fn network<I, S>(&self, args: I) -> Result<(), GitError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let args: Vec<std::ffi::OsString> =
            args.into_iter().map(|a| a.as_ref().to_owned()).collect();
        let name = command_name(&args);
        let output =
            tokio::time::timeout(NETWORK, self.command(&args).stdin(Stdio::null()).output())
                .await
                .map_err(|_| timed_out(&name, NETWORK))?
                .map_err(|e| GitError {
                    command: name.clone(),
                    detail: format!("could not run git: {e}"),
                })?;
        if output.status.success() {
            Ok(())
        } else {
            let said = String::from_utf8_lossy(&output.stderr);
            let said = said.trim();
            Err(GitError {
                command: name,
                detail: if said.is_empty() {
                    format!("git exited with {}", output.status)
                } else {
                    format!(
                        "git exited with {}: {}",
                        output.status,
                        without_user_parts(&agents::cap(said, 4096))
                    )
                },
            })
        }
    }

    async fn run_with<I, S>(
        &self,
        args: I,
        input: Option<Vec<u8>>,
        limit: Duration,
    ) -> Result<Vec<u8>, GitError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let args: Vec<std::ffi::OsString> =
            args.into_iter().map(|a| a.as_ref().to_owned()).collect();
        let name = command_name(&args);
        let fail = |detail: String| GitError {
            command: name.clone(),
            detail,
        };
        let mut child = self
            .command(&args)
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| fail(format!("could not run git: {e}")))?;
        let stdin = child.stdin.take();
        let feed = async move {
            if let (Some(mut stdin), Some(input)) = (stdin, input) {
                let _ = stdin.write_all(&input).await;
                let _ = stdin.shutdown().await;
            }
        };
        let mut stdout = child.stdout.take();
        let mut stderr = child.stderr.take();
        // Past the bound the rest is drained (so git never blocks on a full pipe) and the
        // command fails: a listing cut short would read as a shorter one.
        let read_out = async {
            let mut out = Vec::new();
            if let Some(s) = stdout.as_mut() {
                let mut bounded = s.take(MAX_OUTPUT as u64 + 1);
                let _ = bounded.read_to_end(&mut out).await;
                if out.len() > MAX_OUTPUT {
                    let _ = tokio::io::copy(bounded.get_mut(), &mut tokio::io::sink()).await;
                }
            }
            out
        };
        let read_err = async {
            let mut err = Vec::new();
            if let Some(s) = stderr.as_mut() {
                let _ = s.take(64 * 1024).read_to_end(&mut err).await;
            }
            err
        };
        let all = async { tokio::join!(feed, read_out, read_err, child.wait()) };
        let ((), out, err, status) = tokio::time::timeout(limit, all)
            .await
            .map_err(|_| timed_out(&name, limit))?;
        let status = status.map_err(|e| fail(format!("waiting for git: {e}")))?;
        if out.len() > MAX_OUTPUT {
            Err(fail(format!(
                "its output passed the {} MiB read of one command",
                MAX_OUTPUT >> 20
            )))
        } else if status.success() {
            Ok(out)
        } else {
            Err(fail(first_line(&err)))
        }
    }

    /// Runs `args` and reads at most `max` bytes of its stdout: the bytes, and whether the
    /// output went on past them (git is then stopped, and its status not read).
    pub(super) async fn head<I, S>(&self, args: I, max: usize) -> Result<(Vec<u8>, bool), GitError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let args: Vec<std::ffi::OsString> =
            args.into_iter().map(|a| a.as_ref().to_owned()).collect();
        let name = command_name(&args);
        let fail = |detail: String| GitError {
            command: name.clone(),
            detail,
        };
        // Its stderr is not read: a reader stopped at `max` must never wait on it.
        let mut child = self
            .command(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| fail(format!("could not run git: {e}")))?;
        let mut out = Vec::new();
        if let Some(stdout) = child.stdout.take() {
            let mut bounded = stdout.take(max as u64 + 1);
            tokio::time::timeout(LOCAL, bounded.read_to_end(&mut out))
                .await
                .map_err(|_| timed_out(&name, LOCAL))?
                .map_err(|e| fail(format!("reading git: {e}")))?;
        }
        if out.len() > max {
            out.truncate(max);
            let _ = child.kill().await;
            return Ok((out, true));
        }
        let status = tokio::time::timeout(LOCAL, child.wait())
            .await
            .map_err(|_| timed_out(&name, LOCAL))?
            .map_err(|e| fail(format!("waiting for git: {e}")))?;
        if status.success() {
            Ok((out, false))
        } else {
            Err(fail(format!("git exited with {status}")))
        }
    }

    /// `self args…` piped into `to args…` (pack-objects into index-pack): nothing of the stream
    /// is held here. Returns the second command's stdout.
    pub(super) async fn pipe(
        &self,
        args: &[&str],
        input: Vec<u8>,
        to: &Git,
        to_args: &[&str],
    ) -> Result<Vec<u8>, GitError> {
        let name = command_name(&args.iter().map(|a| (*a).into()).collect::<Vec<_>>());
        let fail = |detail: String| GitError {
            command: name.clone(),
            detail,
        };
        let mut from = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| fail(format!("could not run git: {e}")))?;
        let mut into = to
            .command(to_args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| fail(format!("could not run git: {e}")))?;
        let (Some(mut from_in), Some(mut from_out), Some(mut into_in)) =
            (from.stdin.take(), from.stdout.take(), into.stdin.take())
        else {
            return Err(fail("no pipes".to_owned()));
        };
        let feed = async move {
            let _ = from_in.write_all(&input).await;
            let _ = from_in.shutdown().await;
        };
        let carry = async move {
            let copied = tokio::io::copy(&mut from_out, &mut into_in).await;
            let _ = into_in.shutdown().await;
            copied
        };
        let mut into_out = into.stdout.take();
        let read_out = async {
            let mut out = Vec::new();
            if let Some(s) = into_out.as_mut() {
                let _ = s.read_to_end(&mut out).await;
            }
            out
        };
        let mut errs = (from.stderr.take(), into.stderr.take());
        let read_errs = async {
            let mut a = Vec::new();
            let mut b = Vec::new();
            if let Some(s) = errs.0.as_mut() {
                let _ = s.take(64 * 1024).read_to_end(&mut a).await;
            }
            if let Some(s) = errs.1.as_mut() {
                let _ = s.take(64 * 1024).read_to_end(&mut b).await;
            }
            (a, b)
        };
        let all =
            async { tokio::join!(feed, carry, read_out, read_errs, from.wait(), into.wait()) };
        let ((), _, out, (err_from, err_into), from_status, into_status) =
            tokio::time::timeout(LOCAL, all)
                .await
                .map_err(|_| timed_out(&name, LOCAL))?;
        let ok = |s: std::io::Result<std::process::ExitStatus>| s.is_ok_and(|s| s.success());
        if !ok(from_status) {
            return Err(fail(first_line(&err_from)));
        }
        if !ok(into_status) {
            return Err(GitError {
                command: command_name(&to_args.iter().map(|a| (*a).into()).collect::<Vec<_>>()),
                detail: first_line(&err_into),
            });
        }
        Ok(out)
    }
}

/// The first two words of a command (`rev-parse --verify`), for its error.
fn command_name(args: &[std::ffi::OsString]) -> String {
    args.iter()
        .take(2)
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

fn timed_out(name: &str, limit: Duration) -> GitError {
    GitError {
        command: name.to_owned(),
        detail: format!("timed out after {} s", limit.as_secs()),
    }
}

fn first_line(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no message");
    line.chars().take(300).collect()
}

/// The directories git is looked for in: the system's, never the caller's environment.
fn system_path() -> &'static str {
    "/usr/local/bin:/usr/bin:/bin"
}

#[cfg(test)]
mod tests {
    use super::without_user_parts;

    #[test]
    fn a_urls_user_part_never_survives_into_a_message() {
        let cases = [
            (
                "fatal: unable to access 'https://tok:x-secret@github.com/a/b.git/': 403",
                "fatal: unable to access 'https://github.com/a/b.git/': 403",
            ),
            (
                "Cloning into https://ghp_TOKEN@host:8443/r and http://u@h",
                "Cloning into https://host:8443/r and http://h",
            ),
            ("no url here", "no url here"),
            ("ssh://git@host/repo and a@b", "ssh://host/repo and a@b"),
            ("trailing https://", "trailing https://"),
        ];
        for (text, want) in cases {
            assert_eq!(without_user_parts(text), want, "{text}");
        }
    }
}
