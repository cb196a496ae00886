//! A command agent's read-write `sandbox_bind`, copied for one run: what a run writes there
//! (a session file, a refreshed token, a planted hook) is gone when the run ends, so no run
//! ever reads what an earlier run of the same agent, started by someone else, left behind.
//!
//! The copy never follows a link (a link is copied as a link, which inside the sandbox points
//! into the sandbox), holds only directories, regular files and links, and stops at its cap.

use std::path::{Path, PathBuf};

use super::SandboxError;

/// The most one run's copies of its read-write binds may hold together.
pub const PER_RUN_COPY_BYTES: u64 = 256 * 1024 * 1024;

/// Copies each read-write bind of `binds` beneath `into` (the run's own scratch directory)
/// and returns the binds with each such one bound from its copy, at its own path. Read-only
/// binds are bound as they are, but for one the sandbox's host user (under a root server)
/// could not read, which is copied too, read-only, and given to that user. Every bind is
/// checked against `private` first, as it is on the host: a copy of a checkout would carry
/// its denied files.
pub fn copied_for_run(
    binds: &[super::ConfiguredBind],
    private: &[PathBuf],
    into: &Path,
) -> Result<Vec<super::ConfiguredBind>, SandboxError> {
    for bind in binds {
        if !bind.path.is_absolute() || !bind.path.exists() {
            return Err(SandboxError::ConfiguredMissing(bind.path.clone()));
        }
        super::reaches_private(&bind.path, private)?;
    }
    let user = super::host_user();
    let mut left = PER_RUN_COPY_BYTES;
    let mut out = Vec::with_capacity(binds.len());
    for (n, bind) in binds.iter().enumerate() {
        let unreadable = user.is_some_and(|user| super::readable_by(&bind.path, user).is_err());
        if !bind.writable && !unreadable {
            out.push(bind.clone());
            continue;
        }
        let copy = into.join(format!("bind-{n}"));
        copy_tree(&bind.path, &copy, &mut left)?;
        if let Some(user) = user.filter(|_| !bind.writable) {
            super::hand_over(&copy, user)?;
        }
        out.push(super::ConfiguredBind {
            path: copy,
            writable: bind.writable,
            at: Some(bind.at.clone().unwrap_or_else(|| bind.path.clone())),
        });
    }
    Ok(out)
}

/// Copies `from` (a directory or a file) to `to`, which must not exist, taking at most `left`
/// bytes of file contents.
fn copy_tree(from: &Path, to: &Path, left: &mut u64) -> Result<(), SandboxError> {
    let io = |p: &Path, e: std::io::Error| SandboxError::Io(format!("{}: {e}", p.display()));
    // The bind itself is taken by its real path (a configured `~/.claude` that is a link is
    // the directory it names); nothing beneath it is followed.
    let from = from
        .canonicalize()
        .map_err(|_| SandboxError::ConfiguredMissing(from.to_path_buf()))?;
    let meta = std::fs::symlink_metadata(&from)
        .map_err(|_| SandboxError::ConfiguredMissing(from.clone()))?;
    let mut pending: Vec<(PathBuf, PathBuf, std::fs::Metadata)> =
        vec![(from.clone(), to.to_path_buf(), meta)];
    while let Some((source, target, meta)) = pending.pop() {
        let kind = meta.file_type();
        if kind.is_dir() {
            std::fs::create_dir(&target).map_err(|e| io(&target, e))?;
            std::fs::set_permissions(&target, meta.permissions()).map_err(|e| io(&target, e))?;
            for entry in std::fs::read_dir(&source).map_err(|e| io(&source, e))? {
                let entry = entry.map_err(|e| io(&source, e))?;
                let meta = entry.metadata().map_err(|e| io(&entry.path(), e))?;
                pending.push((entry.path(), target.join(entry.file_name()), meta));
            }
        } else if kind.is_symlink() {
            let points = std::fs::read_link(&source).map_err(|e| io(&source, e))?;
            std::os::unix::fs::symlink(points, &target).map_err(|e| io(&target, e))?;
        } else if kind.is_file() {
            *left = left.checked_sub(meta.len()).ok_or_else(|| {
                SandboxError::Io(format!(
                    "{}: the agent's read-write sandbox_bind holds more than {} MiB, which is copied for each run; bind less, or bind it read-only (sandbox_read_only)",
                    from.display(),
                    PER_RUN_COPY_BYTES / (1024 * 1024)
                ))
            })?;
            copy_file(&source, &target, &meta).map_err(|e| io(&source, e))?;
        }
        // A socket, a FIFO or a device is not copied: no run talks to the host through one.
    }
    Ok(())
}

/// One regular file, opened without following a link (a file swapped for one since it was
/// listed is refused, never its target copied), written new with its mode.
fn copy_file(source: &Path, target: &Path, meta: &std::fs::Metadata) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut from = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(source)?;
    if !from.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut to = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(meta.permissions().mode() & 0o777)
        .open(target)?;
    // No more than was counted against the cap, however the file grew since.
    std::io::copy(&mut std::io::Read::take(&mut from, meta.len()), &mut to)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_writable_bind_is_a_copy_and_a_link_stays_a_link() {
        let host = tempfile::tempdir().unwrap();
        let login = host.path().join("login");
        std::fs::create_dir_all(login.join("sessions")).unwrap();
        std::fs::write(login.join("token"), "t").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", login.join("sessions/link")).unwrap();
        let run = tempfile::tempdir().unwrap();
        let binds = copied_for_run(
            &[super::super::ConfiguredBind {
                path: login.clone(),
                writable: true,
                at: None,
            }],
            &[],
            run.path(),
        )
        .unwrap();
        let copy = &binds[0].path;
        assert_eq!(binds[0].at.as_deref(), Some(login.as_path()));
        assert!(copy.starts_with(run.path()));
        assert_eq!(std::fs::read_to_string(copy.join("token")).unwrap(), "t");
        assert_eq!(
            std::fs::read_link(copy.join("sessions/link")).unwrap(),
            Path::new("/etc/passwd")
        );
        std::fs::write(copy.join("token"), "changed by a run").unwrap();
        assert_eq!(std::fs::read_to_string(login.join("token")).unwrap(), "t");
    }

    #[test]
    fn a_bind_past_the_cap_is_refused_with_the_fix() {
        let host = tempfile::tempdir().unwrap();
        let big = host.path().join("big");
        std::fs::create_dir(&big).unwrap();
        let file = std::fs::File::create(big.join("sparse")).unwrap();
        file.set_len(PER_RUN_COPY_BYTES + 1).unwrap();
        let run = tempfile::tempdir().unwrap();
        let refused = copied_for_run(
            &[super::super::ConfiguredBind {
                path: big,
                writable: true,
                at: None,
            }],
            &[],
            run.path(),
        )
        .unwrap_err();
        assert!(
            refused.to_string().contains("sandbox_read_only"),
            "{refused}"
        );
    }

    /// Under a root server, a read-only bind its host user could not read (a directory of
    /// root's, mode 0700) is a read-only copy of theirs; one they can read is bound as it is.
    #[test]
    fn a_read_only_bind_the_sandbox_cannot_read_is_a_copy_under_root() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let host = tempfile::tempdir().unwrap();
        let (closed, open) = (host.path().join("closed"), host.path().join("open"));
        for (dir, mode) in [(&closed, 0o700), (&open, 0o755)] {
            std::fs::create_dir(dir).unwrap();
            std::fs::write(dir.join("tool"), "t").unwrap();
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let run = tempfile::tempdir().unwrap();
        let bind = |path: &Path| super::super::ConfiguredBind {
            path: path.to_owned(),
            writable: false,
            at: None,
        };
        let binds = copied_for_run(&[bind(&closed), bind(&open)], &[], run.path()).unwrap();
        assert_eq!(binds[1], bind(&open));
        match super::super::host_user() {
            Some(user) => {
                assert!(binds[0].path.starts_with(run.path()));
                assert!(!binds[0].writable);
                assert_eq!(binds[0].at.as_deref(), Some(closed.as_path()));
                let meta = std::fs::metadata(binds[0].path.join("tool")).unwrap();
                assert_eq!(meta.uid(), user.uid);
            }
            None => assert_eq!(binds[0], bind(&closed)),
        }
    }

    #[test]
    fn a_bind_reaching_a_private_path_is_refused_before_anything_is_copied() {
        let host = tempfile::tempdir().unwrap();
        let checkout = host.path().join("checkout");
        std::fs::create_dir(&checkout).unwrap();
        std::fs::write(checkout.join(".env"), "SECRET").unwrap();
        let run = tempfile::tempdir().unwrap();
        let refused = copied_for_run(
            &[super::super::ConfiguredBind {
                path: host.path().to_owned(),
                writable: true,
                at: None,
            }],
            &[checkout],
            run.path(),
        );
        assert!(matches!(
            refused,
            Err(SandboxError::ConfiguredPrivate { .. })
        ));
        assert_eq!(std::fs::read_dir(run.path()).unwrap().count(), 0);
    }
}
