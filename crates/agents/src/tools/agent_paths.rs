//! The path an outside agent's own file tool names (Claude Code's `Read`, `Write`, `Edit`,
//! `Grep`, `Glob`), checked on the host the way the executor checks its own before it opens
//! one: beneath the root of the grant that allows it without a link out (`openat2`,
//! `RESOLVE_BENEATH`), never a deny_read name, and for a write never `.git/`, `.switchboard/`,
//! a protected path or a symbolic link. The agent opens the path itself afterwards: a program
//! of the run that swaps a link in between is the one race this leaves (docs/broker.md).

use std::path::Path;

use broker::Decision;
use broker::args::ToolArgs;
use nix::fcntl::OFlag;

use super::NOT_WITHIN;
use super::beneath::{self, Beneath};
use super::exec::Executor;

impl Executor {
    /// Where a write of `path` lands: its nearest directory that is there, opened beneath the
    /// grant's root (the agent makes the rest, as Claude Code's `Write` does), with the name
    /// in it that comes next; and the landing's real path, for the checks.
    fn existing_ancestor(
        &self,
        decision: &Decision,
        path: &Path,
    ) -> Result<(std::path::PathBuf, (Beneath, std::ffi::OsString)), String> {
        let not_within = || format!("{} {NOT_WITHIN}", path.display());
        let root = beneath::root_of(decision.paths(), path).ok_or_else(not_within)?;
        let mut missing: Vec<&std::ffi::OsStr> = Vec::new();
        let mut at = path;
        loop {
            let (Some(dir), Some(name)) = (at.parent(), at.file_name()) else {
                return Err(not_within());
            };
            missing.push(name);
            match beneath::open_errno(root, dir, OFlag::O_PATH | OFlag::O_DIRECTORY) {
                Ok(opened) => {
                    let mut real = opened.real.clone();
                    for name in missing.iter().rev() {
                        real.push(name);
                    }
                    let next = missing.last().copied().unwrap_or_default().to_owned();
                    return Ok((real, (opened, next)));
                }
                // A directory not there yet: the one above it, still beneath the root.
                Err(nix::errno::Errno::ENOENT) if Path::new(root) != dir => at = dir,
                Err(_) => return Err(not_within()),
            }
        }
    }

    /// `Ok` when the path of `decision` passes what the executor would check; the refusal
    /// names only the path the agent sent.
    pub(crate) fn check_agent_path(&self, decision: &Decision) -> Result<(), String> {
        match decision.args() {
            ToolArgs::ReadFile { path } => {
                let path = Path::new(path);
                self.refuse_denied(path, None)?;
                let opened = self.beneath(decision.paths(), path, path, OFlag::O_PATH)?;
                self.refuse_denied(path, Some(&opened.real))
            }
            ToolArgs::WriteFile { path, .. } => {
                let path = Path::new(path);
                self.refuse_denied(path, None)?;
                self.refuse_unwritable(path, None)?;
                let (real, last) = self.existing_ancestor(decision, path)?;
                self.refuse_denied(path, Some(&real))?;
                self.refuse_unwritable(path, Some(&real))?;
                // The first name not there yet, or the file itself: never a link.
                let stat = nix::sys::stat::fstatat(
                    &last.0.fd,
                    last.1.as_os_str(),
                    nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
                );
                match stat {
                    Ok(st) if (st.st_mode & nix::libc::S_IFMT) == nix::libc::S_IFLNK => {
                        Err(format!(
                            "{} is a symbolic link, or lies through one; a file tool does not write through links",
                            path.display()
                        ))
                    }
                    _ => Ok(()),
                }
            }
            // The others are checked where they run (a shell's directory by its grant's path,
            // a fetch's host by the proxy).
            _ => Ok(()),
        }
    }
}
