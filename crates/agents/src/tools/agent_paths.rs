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

use super::exec::Executor;

impl Executor {
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
                let stat = nix::sys::stat::fstatat(
                    &dir.fd,
                    name,
                    nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
                );
                match stat {
                    Ok(st) if (st.st_mode & nix::libc::S_IFMT) == nix::libc::S_IFLNK => {
                        Err(format!(
                            "{} is a symbolic link; a file tool does not write through links",
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
