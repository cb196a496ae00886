//! Places inside a run's workspace that a sandbox binds over: each reached through real
//! directories only, never through a link (a link on the way is refused, never followed).

use std::path::{Component, Path, PathBuf};

use super::SandboxError;

/// `workspace/name` for a project-relative name that stays inside the workspace.
pub(super) fn inside(workspace: &Path, name: &str) -> Result<PathBuf, SandboxError> {
    let relative = Path::new(name);
    let normal = relative
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if name.is_empty() || !normal {
        return Err(SandboxError::DeniedName(name.to_owned()));
    }
    Ok(workspace.join(relative))
}

/// Whether `path` (inside `workspace`) is a directory (`Some(true)`) or a file (`Some(false)`)
/// reached through real directories; `None` when it is missing, a link, or a link is on the
/// way.
pub(super) fn real_entry(workspace: &Path, path: &Path) -> Option<bool> {
    let relative = path.strip_prefix(workspace).ok()?;
    let mut at = workspace.to_path_buf();
    for component in relative.components() {
        at.push(component);
        let meta = std::fs::symlink_metadata(&at).ok()?;
        if meta.file_type().is_symlink() {
            return None;
        }
        if at != path && !meta.is_dir() {
            return None;
        }
    }
    let meta = std::fs::symlink_metadata(path).ok()?;
    (meta.is_dir() || meta.is_file()).then_some(meta.is_dir())
}

/// The directory exists (created when it did not) and is a directory, not a link.
pub(super) fn ensure_dir(path: &Path) -> Result<(), SandboxError> {
    let io = |e: std::io::Error| SandboxError::Io(format!("{}: {e}", path.display()));
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(SandboxError::Io(format!(
            "{}: must be a directory, not a link or a file",
            path.display()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir(path).map_err(io),
        Err(e) => Err(io(e)),
    }
}

/// The file `path` (inside `workspace`) exists and is a file, reached through real
/// directories: each directory on the way is made when missing and refused when it is a link
/// (never followed), and the file is made empty when missing.
pub(super) fn ensure_file(workspace: &Path, path: &Path) -> Result<(), SandboxError> {
    let io = |e: std::io::Error| SandboxError::Io(format!("{}: {e}", path.display()));
    let relative = path
        .strip_prefix(workspace)
        .map_err(|_| SandboxError::Io(format!("{}: not in the workspace", path.display())))?;
    let mut dir = workspace.to_path_buf();
    let parents: Vec<_> = relative
        .parent()
        .map(|p| p.components().collect())
        .unwrap_or_default();
    for component in parents {
        dir.push(component);
        ensure_dir(&dir)?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_file() => Ok(()),
        Ok(_) => Err(SandboxError::Io(format!(
            "{}: a denied name must be a file, not a directory or a link",
            path.display()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map(drop)
            .map_err(io),
        Err(e) => Err(io(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denied_names_must_stay_inside_the_workspace() {
        let ws = Path::new("/w");
        assert_eq!(inside(ws, ".env").unwrap(), Path::new("/w/.env"));
        assert_eq!(inside(ws, "a/b.txt").unwrap(), Path::new("/w/a/b.txt"));
        for bad in ["", "/etc/passwd", "../x", "a/../../x"] {
            assert!(inside(ws, bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_missing_name_becomes_an_empty_file_and_a_directory_or_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let later = dir.path().join("config/later.env");
        ensure_file(dir.path(), &later).unwrap();
        assert_eq!(std::fs::read(&later).unwrap(), b"");
        std::fs::write(&later, "kept").unwrap();
        ensure_file(dir.path(), &later).unwrap();
        assert_eq!(std::fs::read_to_string(&later).unwrap(), "kept");
        assert!(ensure_file(dir.path(), &dir.path().join("config")).is_err());
        // A directory on the way that is a link is never followed, nor made through.
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), dir.path().join("linked")).unwrap();
        assert!(ensure_file(dir.path(), &dir.path().join("linked/secret.toml")).is_err());
        assert!(!elsewhere.path().join("secret.toml").exists());
    }
}
