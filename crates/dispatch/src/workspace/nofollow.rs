//! Reading a run's directories without following a link on the way. Each name is opened
//! relative to a directory already open (`openat` with `O_NOFOLLOW`), so a run that swaps a
//! directory for a link while Switchboard reads it (a process outliving its run, say) changes
//! nothing Switchboard reads, links or changes: a checked path is never looked up again.
//!
//! The roots passed in are Switchboard's own directories (a run's `work`, `gather.git`, the
//! snapshot's scratch repository), which no run can rename or replace.

use std::ffi::CStr;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

use nix::dir::Dir;
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, open, openat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat, fstatat};
use nix::unistd::{UnlinkatFlags, linkat, unlinkat};

/// A directory, opened for reading, never through a link.
const DIRECTORY: OFlag = OFlag::O_RDONLY
    .union(OFlag::O_DIRECTORY)
    .union(OFlag::O_NOFOLLOW)
    .union(OFlag::O_CLOEXEC);

/// Opens `root`, then each part of `relative` below it, never through a link. A part that is
/// not a plain name (`..`, `/`) is refused.
pub(super) fn open_dir(root: &Path, relative: &Path) -> nix::Result<OwnedFd> {
    let mut dir = open(root, DIRECTORY, Mode::empty())?;
    for part in relative.components() {
        let Component::Normal(name) = part else {
            return Err(Errno::EINVAL);
        };
        dir = openat(&dir, name, DIRECTORY, Mode::empty())?;
    }
    Ok(dir)
}

fn kind(stat: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT
}

/// The entries of `dir` but `.` and `..`, with their kind as `lstat` gives it.
fn entries(dir: &OwnedFd) -> nix::Result<Vec<(std::ffi::CString, SFlag)>> {
    let mut listing = Dir::from_fd(dir.try_clone().map_err(|_| Errno::EBADF)?)?;
    let mut found = Vec::new();
    for entry in listing.iter() {
        let entry = entry?;
        let name: &CStr = entry.file_name();
        if matches!(name.to_bytes(), b"." | b"..") {
            continue;
        }
        let stat = fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW)?;
        found.push((name.to_owned(), kind(&stat)));
    }
    Ok(found)
}

/// Hard-links every regular file of `from` into `to` (made if missing) under its own name;
/// when `top`, each subdirectory but `info` is linked the same way one level down. Links and
/// anything else are skipped; a name already in `to` is kept. A hard link costs nothing
/// whatever the file's size (a sparse file of a terabyte included).
pub(super) fn link_files(from: &OwnedFd, to: &Path, top: bool) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    let into = open(to, DIRECTORY, Mode::empty())?;
    for (name, kind) in entries(from)? {
        if kind == SFlag::S_IFREG {
            match linkat(
                from,
                name.as_c_str(),
                &into,
                name.as_c_str(),
                AtFlags::empty(),
            ) {
                Ok(()) | Err(Errno::EEXIST) => {}
                Err(e) => return Err(e.into()),
            }
            // The name may have become a link between the look and the link (linkat then
            // links the link itself): what landed in `to` is checked, and removed unless it
            // is a regular file. `to` is Switchboard's, so this look is the last word.
            let landed = fstatat(&into, name.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW)?;
            if self::kind(&landed) != SFlag::S_IFREG {
                unlinkat(&into, name.as_c_str(), UnlinkatFlags::NoRemoveDir)?;
            }
        } else if kind == SFlag::S_IFDIR && top && name.to_bytes() != b"info" {
            let sub = openat(from, name.as_c_str(), DIRECTORY, Mode::empty())?;
            let path = to.join(std::ffi::OsStr::from_bytes(name.to_bytes()));
            link_files(&sub, &path, false)?;
        }
    }
    Ok(())
}

/// The text of the regular file `relative` below `root`, at most `max` bytes long, reached
/// through real directories only; `None` for anything else.
pub(super) fn read_regular(root: &Path, relative: &Path, max: u64) -> Option<String> {
    let name = relative.file_name()?;
    let dir = open_dir(root, relative.parent()?).ok()?;
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    let fd = openat(&dir, name, flags, Mode::empty()).ok()?;
    let stat = fstat(&fd).ok()?;
    if kind(&stat) != SFlag::S_IFREG || u64::try_from(stat.st_size).ok()? > max {
        return None;
    }
    let mut text = String::new();
    File::from(fd).take(max).read_to_string(&mut text).ok()?;
    Some(text)
}

/// Removes `root` and everything under it, never through a link and without recursion: a
/// run can nest directories deeper than any stack or path length (30,000 levels overflowed
/// the worker's stack before), so one directory is held open at a time, entered from its
/// parent and left through `..`, which must be the directory that was entered. Each
/// directory is given back to its owner first (`chmod 700`), so one a run made unreadable
/// (`chmod 000`) is removed too. A missing `root` is nothing to remove.
pub(super) fn remove_tree(root: &Path) -> std::io::Result<()> {
    let invalid = || std::io::Error::from(std::io::ErrorKind::InvalidInput);
    let parent = root.parent().ok_or_else(invalid)?;
    let name = std::ffi::CString::new(root.file_name().ok_or_else(invalid)?.as_bytes())
        .map_err(|_| invalid())?;
    let top = open(parent, DIRECTORY, Mode::empty())?;
    match fstatat(&top, name.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
        Err(Errno::ENOENT) => return Ok(()),
        Err(e) => return Err(e.into()),
        Ok(stat) if kind(&stat) != SFlag::S_IFDIR => {
            return Ok(unlinkat(&top, name.as_c_str(), UnlinkatFlags::NoRemoveDir)?);
        }
        Ok(_) => {}
    }
    let mut cur = enter(&top, name.as_c_str())?;
    let mut names = vec![name];
    let mut ids = vec![identity(&cur)?];
    loop {
        if let Some(sub) = clear_files(&cur)? {
            let next = enter(&cur, sub.as_c_str())?;
            ids.push(identity(&next)?);
            names.push(sub);
            cur = next;
            continue;
        }
        // `cur` is empty: step out of it and remove it.
        let (Some(done), Some(_)) = (names.pop(), ids.pop()) else {
            return Err(invalid());
        };
        let Some(expected) = ids.last() else {
            return Ok(unlinkat(&top, done.as_c_str(), UnlinkatFlags::RemoveDir)?);
        };
        let up = openat(&cur, "..", DIRECTORY, Mode::empty())?;
        if identity(&up)? != *expected {
            return Err(std::io::Error::other(
                "a directory was moved while the tree was removed",
            ));
        }
        unlinkat(&up, done.as_c_str(), UnlinkatFlags::RemoveDir)?;
        cur = up;
    }
}

/// A directory's device and inode.
fn identity(dir: &OwnedFd) -> nix::Result<(u64, u64)> {
    let stat = fstat(dir)?;
    Ok((stat.st_dev, stat.st_ino))
}

/// Opens the directory `name` of `parent` for reading, never through a link, after giving
/// its owner every permission on it.
fn enter(parent: &OwnedFd, name: &CStr) -> nix::Result<OwnedFd> {
    use std::os::unix::fs::PermissionsExt;
    let path_only = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let handle = openat(parent, name, path_only, Mode::empty())?;
    // An O_PATH handle cannot be given to fchmod; its /proc name is the directory it holds,
    // whatever happened to its path since.
    let held = format!("/proc/self/fd/{}", handle.as_raw_fd());
    let _ = std::fs::set_permissions(&held, std::fs::Permissions::from_mode(0o700));
    openat(&handle, ".", DIRECTORY, Mode::empty())
}

/// Unlinks every entry of `dir` that is not a directory, up to its first subdirectory, and
/// returns that one's name (`None` once only files were there, and they are gone).
fn clear_files(dir: &OwnedFd) -> nix::Result<Option<std::ffi::CString>> {
    let mut listing = Dir::from_fd(dir.try_clone().map_err(|_| Errno::EBADF)?)?;
    for entry in listing.iter() {
        let entry = entry?;
        let name: &CStr = entry.file_name();
        if matches!(name.to_bytes(), b"." | b"..") {
            continue;
        }
        let stat = fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW)?;
        if kind(&stat) == SFlag::S_IFDIR {
            return Ok(Some(name.to_owned()));
        }
        unlinkat(dir, name, UnlinkatFlags::NoRemoveDir)?;
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{PermissionsExt, symlink};

    use super::*;

    #[test]
    fn a_link_on_the_way_is_never_followed() {
        let place = tempfile::tempdir().unwrap();
        let root = place.path().join("root");
        let elsewhere = place.path().join("elsewhere");
        std::fs::create_dir_all(root.join("real")).unwrap();
        std::fs::create_dir_all(elsewhere.join("inner")).unwrap();
        std::fs::write(elsewhere.join("inner/HEAD"), "secret").unwrap();
        std::fs::write(root.join("real/HEAD"), "mine").unwrap();
        symlink(&elsewhere, root.join("link")).unwrap();
        symlink(elsewhere.join("inner/HEAD"), root.join("real/linked")).unwrap();

        assert!(open_dir(&root, Path::new("real")).is_ok());
        assert!(
            matches!(
                open_dir(&root, Path::new("link/inner")).err(),
                Some(Errno::ENOTDIR | Errno::ELOOP)
            ),
            "a link in place of a directory"
        );
        assert!(open_dir(&root, Path::new("../elsewhere")).is_err());
        assert_eq!(
            read_regular(&root, Path::new("real/HEAD"), 100).as_deref(),
            Some("mine")
        );
        for (path, max) in [
            ("link/inner/HEAD", 100),
            ("real/linked", 100),
            ("real/HEAD", 2),
            ("real", 100),
            ("real/missing", 100),
        ] {
            assert_eq!(read_regular(&root, Path::new(path), max), None, "{path}");
        }
    }

    #[test]
    fn only_regular_files_are_linked_and_info_is_left() {
        let place = tempfile::tempdir().unwrap();
        let from = place.path().join("from");
        let to = place.path().join("to");
        let outside = place.path().join("outside");
        std::fs::create_dir_all(from.join("pack/deeper")).unwrap();
        std::fs::create_dir_all(from.join("info")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("pack-x.pack"), "theirs").unwrap();
        std::fs::write(from.join("pack/pack-1.pack"), "mine").unwrap();
        std::fs::write(from.join("pack/deeper/too-deep"), "x").unwrap();
        std::fs::write(from.join("info/alternates"), "/elsewhere").unwrap();
        symlink(outside.join("pack-x.pack"), from.join("pack/pack-x.pack")).unwrap();
        symlink(&outside, from.join("ab")).unwrap();

        let fd = open_dir(&from, Path::new("")).unwrap();
        link_files(&fd, &to, true).unwrap();
        assert_eq!(
            std::fs::read_to_string(to.join("pack/pack-1.pack")).unwrap(),
            "mine"
        );
        for absent in ["pack/pack-x.pack", "pack/deeper", "info", "ab"] {
            assert!(
                std::fs::symlink_metadata(to.join(absent)).is_err(),
                "{absent} was carried over"
            );
        }
        // Again, over what is there: nothing fails, nothing changes.
        link_files(&fd, &to, true).unwrap();
        assert_eq!(
            std::fs::read_to_string(to.join("pack/pack-1.pack")).unwrap(),
            "mine"
        );
    }

    #[test]
    fn a_tree_is_removed_whatever_its_depth_its_modes_and_its_links() {
        let place = tempfile::tempdir().unwrap();
        let tree = place.path().join("tree");
        let outside = place.path().join("outside");
        std::fs::create_dir_all(tree.join("a/b")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("keep"), "theirs").unwrap();
        std::fs::write(tree.join("a/b/file"), "x").unwrap();
        symlink(&outside, tree.join("a/link")).unwrap();
        symlink(outside.join("keep"), tree.join("a/b/file-link")).unwrap();
        // Deeper than a stack's recursion or PATH_MAX: built from fds, one level at a time.
        let mut dir = open_dir(&tree, Path::new("")).unwrap();
        for _ in 0..30_000 {
            nix::sys::stat::mkdirat(&dir, "d", Mode::S_IRWXU).unwrap();
            dir = openat(&dir, "d", DIRECTORY, Mode::empty()).unwrap();
        }
        std::fs::write(format!("/proc/self/fd/{}/deep-file", dir.as_raw_fd()), "x").unwrap();
        drop(dir);
        for locked in ["a/b", "a"] {
            std::fs::set_permissions(tree.join(locked), std::fs::Permissions::from_mode(0o000))
                .unwrap();
        }
        std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o555)).unwrap();
        // On a small stack, as a worker thread has.
        let root = tree.clone();
        std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || remove_tree(&root).unwrap())
            .unwrap()
            .join()
            .unwrap();
        assert!(
            std::fs::symlink_metadata(&tree).is_err(),
            "the tree is gone"
        );
        assert_eq!(
            std::fs::read_to_string(outside.join("keep")).unwrap(),
            "theirs"
        );
        let mode = std::fs::metadata(&outside).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o555, "a link's target was changed");
        // Gone already, or a link in the root's place: nothing else is touched.
        remove_tree(&tree).unwrap();
        symlink(&outside, &tree).unwrap();
        remove_tree(&tree).unwrap();
        assert!(outside.join("keep").exists());
        std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}
