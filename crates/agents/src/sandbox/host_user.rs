//! Who a sandboxed program is on the host when the server runs as root: never root.
//!
//! bubblewrap maps the uid that starts it into the sandbox, so a root server's sandbox would
//! hold the host's root (a `kernel.core_pattern` it could write runs a program as host root).
//! Under a root server the child that becomes bubblewrap first stages every bind's source
//! (reached as root, so a private data directory stays private) in a mount namespace of its
//! own, then becomes [`HostUser`] and only then runs bubblewrap, which makes its user
//! namespace as that unprivileged user ([`Staging`]). The workspace and every per-run writable bind
//! are handed to that user first ([`hand_over`]), so the program can write its own files and
//! nothing else.
//!
//! Invariants: nothing here runs unless the effective uid is 0; [`HostUser`] is never uid 0 or
//! gid 0; the hand-over never follows a link (each step is taken from an open directory).

use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{Mode, SFlag, fstatat};

use super::SandboxError;

/// Where the child mounts the sources, in its own mount namespace (a tmpfs over it there;
/// the host's `/mnt` is never touched). bubblewrap uses `/tmp` for its own root, so not that.
pub(super) const STAGE: &str = "/mnt";

/// The unprivileged host user and group a root server's sandboxed programs run as
/// (`[sandbox] user_id` / `group_id`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostUser {
    pub uid: u32,
    pub gid: u32,
}

impl HostUser {
    /// `nobody:nogroup` on Debian. A host that runs other services as `nobody` should name a
    /// uid of its own: processes of one uid may signal each other.
    pub const DEFAULT: HostUser = HostUser {
        uid: 65534,
        gid: 65534,
    };

    /// Refuses root's uid or gid.
    pub fn new(uid: u32, gid: u32) -> Result<HostUser, SandboxError> {
        if uid == 0 || gid == 0 {
            return Err(SandboxError::Io(
                "the sandbox's host user may not be uid 0 or gid 0 (root)".to_owned(),
            ));
        }
        Ok(HostUser { uid, gid })
    }
}

static CONFIGURED: OnceLock<HostUser> = OnceLock::new();

/// Sets the user a root server's sandboxes run as, once per process, before the first
/// sandbox starts; setting a different one later is an error.
pub fn set_host_user(user: HostUser) -> Result<(), SandboxError> {
    let set = *CONFIGURED.get_or_init(|| user);
    if set == user {
        Ok(())
    } else {
        Err(SandboxError::Io(format!(
            "the sandbox's host user is already {}:{}",
            set.uid, set.gid
        )))
    }
}

/// The user sandboxed programs become: `Some` only when this process is root.
pub fn host_user() -> Option<HostUser> {
    nix::unistd::geteuid()
        .is_root()
        .then(|| *CONFIGURED.get_or_init(|| HostUser::DEFAULT))
}

/// Gives `root` and everything beneath it to `user`, never following a link (each entry is
/// changed and entered from its open parent directory). Entries that already belong to the
/// user are left as they are.
pub fn hand_over(root: &Path, user: HostUser) -> Result<(), SandboxError> {
    let io = |e: nix::errno::Errno| SandboxError::Io(format!("{}: {e}", root.display()));
    let top = nix::fcntl::open(
        root,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(io)?;
    give(&top, None, user).map_err(io)?;
    // Depth first, holding open only the directories on the way down (one per level), each
    // with the names it has left: a directory of thousands of directories costs one
    // descriptor, not thousands.
    let names = entries(&top).map_err(io)?;
    let mut path = vec![(top, names)];
    while let Some((dir, names)) = path.last_mut() {
        let Some(name) = names.pop() else {
            path.pop();
            continue;
        };
        let stat = fstatat(&*dir, name.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW).map_err(io)?;
        if stat.st_uid != user.uid || stat.st_gid != user.gid {
            give(dir, Some(&name), user).map_err(io)?;
        }
        if SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR {
            let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
            let child =
                nix::fcntl::openat(&*dir, name.as_c_str(), flags, Mode::empty()).map_err(io)?;
            let names = entries(&child).map_err(io)?;
            path.push((child, names));
        }
    }
    Ok(())
}

/// Refuses a read-only bind the host user could not read through its mount (the directories
/// above it do not matter: the mount skips them), with the fix.
pub fn readable_by(path: &Path, user: HostUser) -> Result<(), SandboxError> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path)
        .map_err(|e| SandboxError::Io(format!("{}: {e}", path.display())))?;
    let need = if meta.is_dir() { 0o5 } else { 0o4 };
    let mode = meta.mode();
    let granted = if meta.uid() == user.uid {
        (mode >> 6) & 0o7
    } else if meta.gid() == user.gid {
        (mode >> 3) & 0o7
    } else {
        mode & 0o7
    };
    if granted & need == need {
        return Ok(());
    }
    Err(SandboxError::Io(format!(
        "{} (the agent's sandbox_read_only) cannot be read by the sandbox's host user (uid {}, gid {}: serve runs as root, and [sandbox] user_id names who its programs are); make it readable to them (chmod o+rX), or bind a copy that is",
        path.display(),
        user.uid,
        user.gid
    )))
}

/// Gives one open file to `user` when it is root's or another's.
pub fn give_file(file: &impl AsFd, user: HostUser) -> std::io::Result<()> {
    nix::unistd::fchown(file, Some(user.uid.into()), Some(user.gid.into()))
        .map_err(std::io::Error::from)
}

fn give(dir: &OwnedFd, name: Option<&CString>, user: HostUser) -> nix::Result<()> {
    let (uid, gid) = (Some(user.uid.into()), Some(user.gid.into()));
    match name {
        None => nix::unistd::fchown(dir, uid, gid),
        Some(name) => {
            nix::unistd::fchownat(dir, name.as_c_str(), uid, gid, AtFlags::AT_SYMLINK_NOFOLLOW)
        }
    }
}

/// The names in an open directory, without `.` and `..`.
fn entries(dir: &OwnedFd) -> nix::Result<Vec<CString>> {
    let copy = dir.try_clone().map_err(|_| nix::errno::Errno::EMFILE)?;
    let mut listing = nix::dir::Dir::from_fd(copy)?;
    let mut names = Vec::new();
    for entry in listing.iter() {
        let entry = entry?;
        let name = entry.file_name();
        if name.to_bytes() != b"." && name.to_bytes() != b".." {
            names.push(name.to_owned());
        }
    }
    Ok(names)
}

/// Under a root server, the start of every sandboxed command, one process throughout (each
/// step execs the next, so nothing of root outlives the staging): `unshare` gives it a mount
/// namespace of its own, a shell there mounts a tmpfs at `STAGE`, makes the workspace an
/// overlay there, binds each other source (reached as root, so a private data directory stays
/// private) at `STAGE/<n>` or copies it when it is a small file, then `setpriv` becomes the
/// host user, whose own bubblewrap (the sandbox) binds from there. The host's `/mnt` is never
/// touched.
pub(super) struct Staging {
    items: Vec<OsString>,
    count: usize,
    user: HostUser,
}

/// The staging shell: `sh -c SCRIPT name mount item… -- command…`, each item `b SOURCE` (bound
/// at `/mnt/<n>`), `c SOURCE` (a small file copied to `/mnt/<n>`, readable) or `w PARENT UPPER
/// WORK` (the workspace `PARENT/UPPER` as an overlay at `/mnt/ws`, its work directory
/// `PARENT/WORK`; a plain bind where overlays cannot be made).
const STAGE_SCRIPT: &str = "set -e; m=$1; shift; \
    \"$m\" -t tmpfs -o mode=0755,size=16m switchboard-stage /mnt; i=0; \
    while [ \"$1\" != -- ]; do \
      case $1 in \
      w) /usr/bin/mkdir /mnt/p /mnt/lower /mnt/ws; \"$m\" --bind \"$2\" /mnt/p; \
         \"$m\" -t overlay -o \"lowerdir=/mnt/lower,upperdir=/mnt/p/$3,workdir=/mnt/p/$4\" \
           switchboard-workspace /mnt/ws 2>/dev/null || \"$m\" --bind \"/mnt/p/$3\" /mnt/ws; \
         shift 4;; \
      c) /usr/bin/cp -- \"$2\" \"/mnt/$i\"; /usr/bin/chmod 0444 \"/mnt/$i\"; i=$((i+1)); shift 2;; \
      *) if [ -d \"$2\" ]; then /usr/bin/mkdir \"/mnt/$i\"; else : > \"/mnt/$i\"; fi; \
         \"$m\" --bind \"$2\" \"/mnt/$i\"; i=$((i+1)); shift 2;; \
      esac; \
    done; shift; exec \"$@\"";

/// Where the workspace is in the staging namespace, for the sandbox's bubblewrap to bind.
pub(super) const STAGED_WORKSPACE: &str = "/mnt/ws";

impl Staging {
    pub(super) fn new(user: HostUser) -> Staging {
        Staging {
            items: Vec::new(),
            count: 0,
            user,
        }
    }

    /// Where the sandbox's bubblewrap finds `source`, bound (`copy` false) or, for a small
    /// file, copied into the staging tmpfs, so no host path is the source of its mount.
    pub(super) fn add(&mut self, source: &Path, copy: bool) -> PathBuf {
        let at = Path::new(STAGE).join(self.count.to_string());
        self.count += 1;
        self.items.push(if copy { "c" } else { "b" }.into());
        self.items.push(absolute(source).into_os_string());
        at
    }

    /// The workspace `parent/upper` as an overlay with `parent/work` as its work directory:
    /// mounted so, its files are the workspace's own, and `/proc/self/mountinfo` names only
    /// staging paths for it.
    pub(super) fn workspace(&mut self, parent: &Path, upper: &OsStr, work: &OsStr) -> PathBuf {
        self.items.push("w".into());
        self.items.push(absolute(parent).into_os_string());
        self.items.push(upper.to_owned());
        self.items.push(work.to_owned());
        PathBuf::from(STAGED_WORKSPACE)
    }

    /// The program and arguments that stage the sources and become the host user; the
    /// sandbox's own command line follows.
    pub(super) fn prefix(&self) -> (&'static str, Vec<OsString>) {
        let mut args: Vec<OsString> = [
            "--mount",
            "--propagation",
            "private",
            "--",
            "/bin/sh",
            "-c",
            STAGE_SCRIPT,
            "switchboard-stage",
            MOUNT,
        ]
        .into_iter()
        .map(OsString::from)
        .collect();
        args.extend(self.items.iter().cloned());
        args.extend(
            [
                "--".to_owned(),
                SETPRIV.to_owned(),
                format!("--reuid={}", self.user.uid),
                format!("--regid={}", self.user.gid),
                "--clear-groups".to_owned(),
                "--".to_owned(),
            ]
            .map(OsString::from),
        );
        (UNSHARE, args)
    }
}

/// util-linux's, on every Debian system.
pub(super) const UNSHARE: &str = "/usr/bin/unshare";
pub(super) const MOUNT: &str = "/usr/bin/mount";

/// The overlay work directory beside a workspace (`.<name>.overlay-<pid>-<n>`, root's), made
/// for a root server's sandbox and removed with the last clone of it.
#[derive(Debug)]
pub(super) struct OverlayWork {
    pub(super) parent: PathBuf,
    pub(super) upper: OsString,
    pub(super) work: OsString,
}

impl OverlayWork {
    pub(super) fn make(workspace: &Path) -> Option<OverlayWork> {
        let (parent, upper) = (workspace.parent()?, workspace.file_name()?);
        // One per sandbox (two sandboxes of one workspace, a run's and its keeping's, never
        // share or remove each other's).
        static MADE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut work = std::ffi::OsString::from(".");
        work.push(upper);
        work.push(format!(".overlay-{}-{n}", std::process::id()));
        std::fs::create_dir_all(parent.join(&work)).ok()?;
        Some(OverlayWork {
            parent: parent.to_path_buf(),
            upper: upper.to_owned(),
            work,
        })
    }
}

impl Drop for OverlayWork {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.parent.join(&self.work));
    }
}

/// A relative path given as `./…`, so none reads as an option or as the list's end (`--`).
fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        Path::new(".").join(path)
    }
}

/// Becomes another user and runs a program (util-linux, on every Debian system).
pub(super) const SETPRIV: &str = "/usr/bin/setpriv";

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn root_and_gid_zero_are_refused() {
        assert!(HostUser::new(0, 1000).is_err());
        assert!(HostUser::new(1000, 0).is_err());
        assert!(HostUser::new(1000, 1000).is_ok());
    }

    /// Everything beneath the workspace changes hands, and nothing a link points at does.
    #[test]
    fn the_hand_over_never_follows_a_link() {
        let root = nix::unistd::geteuid().is_root();
        // As root, a user of its own; otherwise the only one a user may give files to.
        let user = if root {
            HostUser::new(4242, 4243).unwrap()
        } else {
            HostUser {
                uid: nix::unistd::getuid().as_raw(),
                gid: nix::unistd::getgid().as_raw(),
            }
        };
        let host = tempfile::tempdir().unwrap();
        let outside = host.path().join("outside");
        std::fs::write(&outside, "host").unwrap();
        let ws = host.path().join("ws");
        std::fs::create_dir_all(ws.join("a/b")).unwrap();
        std::fs::write(ws.join("a/b/f"), "x").unwrap();
        std::os::unix::fs::symlink(&outside, ws.join("a/link")).unwrap();
        std::os::unix::fs::symlink(host.path(), ws.join("dirlink")).unwrap();
        let before = std::fs::metadata(&outside).unwrap();
        hand_over(&ws, user).unwrap();
        for path in ["", "a", "a/b", "a/b/f"] {
            let meta = std::fs::symlink_metadata(ws.join(path)).unwrap();
            assert_eq!((meta.uid(), meta.gid()), (user.uid, user.gid), "{path}");
        }
        let link = std::fs::symlink_metadata(ws.join("a/link")).unwrap();
        assert_eq!(link.uid(), user.uid);
        let after = std::fs::metadata(&outside).unwrap();
        assert_eq!((after.uid(), after.gid()), (before.uid(), before.gid()));
        let parent = std::fs::metadata(host.path()).unwrap();
        assert_eq!(parent.uid(), nix::unistd::getuid().as_raw());
        // A link in the workspace's own place is refused, not followed.
        assert!(hand_over(&ws.join("dirlink"), user).is_err());
    }
}
