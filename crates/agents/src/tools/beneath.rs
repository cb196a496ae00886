//! Paths resolved beneath the grant that allows them, by the kernel: `openat2` from the grant
//! root's directory with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`, so a `..`, an absolute
//! link or a link that climbs out, and every `/proc/…/fd` or `/proc/…/root` link, fail the
//! open itself. Nothing is canonicalised on the host: what the model learns is whether a path
//! is there beneath its grant, never anything of what lies outside it (a missing file and one
//! outside read the same, [`NOT_WITHIN`]), and a refusal names only the path it sent.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};

/// Said, after the path the model sent, of every path that is not there beneath its grant:
/// missing, outside, or reached through a link out.
pub const NOT_WITHIN: &str =
    "is not there within the paths you were granted (missing, or outside them); nothing was done";

/// Said when the kernel cannot resolve beneath a directory: the file tools fail closed.
const NO_OPENAT2: &str = "this server's kernel cannot resolve paths beneath a directory (openat2, Linux 5.6 or later), so the file tools are off; nothing was done";

/// How many times a walk the kernel saw raced (EAGAIN) is taken again before it is refused.
const EAGAIN_TRIES: usize = 64;

/// A path opened beneath its grant's root: the open file (or directory), and where it is on
/// the host, for Switchboard's own checks (a denied name, `.git/`) and never to be shown.
#[derive(Debug)]
pub(crate) struct Beneath {
    pub(crate) fd: OwnedFd,
    pub(crate) real: PathBuf,
}

/// The broadest of `roots` (a grant's paths, absolute and normalised) that holds `path`
/// lexically: a link anywhere beneath it may lead anywhere else beneath it.
pub(crate) fn root_of<'a>(roots: &'a [String], path: &Path) -> Option<&'a str> {
    let path = path.to_str()?;
    roots
        .iter()
        .map(String::as_str)
        .filter(|root| broker::args::inside(root, path))
        .min_by_key(|root| root.len())
}

/// Opens `path` beneath `root` with `flags` (`O_CLOEXEC` added). Every failure to find it
/// there, whatever the reason, is the one refusal [`NOT_WITHIN`] naming `shown` (the path
/// the model sent: `path` itself, or the file whose directory `path` is).
pub(crate) fn open(root: &str, path: &Path, shown: &Path, flags: OFlag) -> Result<Beneath, String> {
    open_errno(root, path, flags).map_err(|e| match e {
        Errno::ENOSYS => NO_OPENAT2.to_owned(),
        _ => format!("{} {NOT_WITHIN}", shown.display()),
    })
}

/// [`open`], with the kernel's reason when it fails (`ENOENT`: a part of the path is not
/// there; `EXDEV`, `ELOOP`: a link leads out); for Switchboard's own checks, never shown.
pub(crate) fn open_errno(root: &str, path: &Path, flags: OFlag) -> Result<Beneath, Errno> {
    let not_within = || Errno::EXDEV;
    let relative = path
        .strip_prefix(root)
        .map_err(|_| not_within())?
        .to_path_buf();
    let relative = if relative.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        relative
    };
    // The root is the operator's (a grant's path): opened as the host names it.
    let dir = nix::fcntl::open(
        root,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(|_| not_within())?;
    let how = OpenHow::new()
        .flags(flags | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    // The kernel answers EAGAIN when a rename or a mount anywhere on the machine raced a
    // `..` of the walk (every sandbox that starts mounts): the walk is taken again.
    let mut tries = 0;
    let fd = loop {
        match openat2(dir.as_fd(), relative.as_path(), how) {
            Err(Errno::EAGAIN) if tries < EAGAIN_TRIES => tries += 1,
            other => break other,
        }
    }?;
    let real = real_path(&fd).ok_or_else(not_within)?;
    Ok(Beneath { fd, real })
}

/// Where an open file is on the host, as the kernel names it.
fn real_path(fd: &OwnedFd) -> Option<PathBuf> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_broadest_root_holding_a_path_is_its_root() {
        let roots = vec!["/w/src".to_owned(), "/w".to_owned(), "/other".to_owned()];
        assert_eq!(root_of(&roots, Path::new("/w/src/a.rs")), Some("/w"));
        assert_eq!(root_of(&roots, Path::new("/w")), Some("/w"));
        assert_eq!(root_of(&roots, Path::new("/wx/a")), None);
        assert_eq!(root_of(&roots, Path::new("/")), None);
    }

    #[test]
    fn missing_outside_and_through_a_link_out_read_the_same() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("there"), "x").unwrap();
        std::fs::write(root.path().join("inside"), "y").unwrap();
        let link = |name: &str, to: &str| {
            std::os::unix::fs::symlink(to, root.path().join(name)).unwrap();
        };
        link("out", &outside.path().join("there").display().to_string());
        link(
            "gone",
            &outside.path().join("not-there").display().to_string(),
        );
        link("up", "../");
        link("fd", "/proc/self/fd/0");
        link("proc-root", "/proc/self/root/etc");
        link("in", "inside");
        let root_str = root.path().to_str().unwrap();
        let flags = OFlag::O_RDONLY;
        let said: Vec<String> = ["absent", "out", "gone", "up/x", "fd", "proc-root/hostname"]
            .iter()
            .map(|name| {
                let path = root.path().join(name);
                open(root_str, &path, &path, flags)
                    .unwrap_err()
                    .replace(&path.display().to_string(), "<path>")
            })
            .collect();
        assert!(
            said.iter().all(|s| s == &format!("<path> {NOT_WITHIN}")),
            "{said:?}"
        );
        let opened = open(root_str, &root.path().join("in"), Path::new("in"), flags).unwrap();
        assert_eq!(
            opened.real,
            std::fs::canonicalize(root.path().join("inside")).unwrap()
        );
        // A path no root holds lexically is refused the same way.
        let elsewhere = outside.path().join("there");
        assert_eq!(
            open(root_str, &elsewhere, &elsewhere, flags).unwrap_err(),
            format!("{} {NOT_WITHIN}", elsewhere.display())
        );
    }
}
