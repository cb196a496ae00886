//! What holds every run's text is its owner's alone, whatever the umask: the SQLite store and
//! its `-wal` and `-shm` files and every backup are mode 0600, the data directory 0700; a
//! store made readable by others before (by hand, or by an older version) is made private
//! when it is opened.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

/// The binary with `args`, under umask 022 (files 0644 and directories 0755 by default).
fn run(dir: &Path, args: &[&str]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg("umask 022; exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_switchboard"))
        .args(args)
        .current_dir(dir)
        .env_remove("SWITCHBOARD_CONFIG")
        .output()
        .unwrap()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

#[test]
fn the_store_its_journal_the_data_directory_and_backups_are_their_owners_alone() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // An agent that works in a directory, so its run makes the data directory.
    std::fs::write(
        d.join("switchboard.toml"),
        "[agents]\ndefault = \"sh\"\n[agents.sh]\nbackend = \"command\"\ncommand = [\"sh\", \"-c\", \"echo done\"]\nsandbox = false\n",
    )
    .unwrap();
    ask_and_see_it_private(d, "hello");

    let backup = d.join("copy.db");
    let copied = run(d, &["db", "backup", backup.to_str().unwrap()]);
    assert_eq!(
        copied.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&copied.stderr)
    );
    assert_eq!(mode(&backup), 0o600);

    // A store left readable by others is made private when it is next opened.
    std::fs::set_permissions(
        d.join("switchboard.db"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    std::fs::set_permissions(
        d.join("switchboard-data"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    ask_and_see_it_private(d, "again");

    // While `serve` holds the store open, its journal is there: private too.
    let mut serve = Command::new("sh");
    serve
        .arg("-c")
        .arg("umask 022; exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_switchboard"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .current_dir(d)
        .env_remove("SWITCHBOARD_CONFIG")
        .stderr(std::process::Stdio::null());
    let (child, addr, _) = crate::common::spawn_serve(serve);
    let _server = crate::common::Replica {
        child,
        base: format!("http://{addr}"),
    };
    for file in ["switchboard.db", "switchboard.db-wal", "switchboard.db-shm"] {
        assert_eq!(mode(&d.join(file)), 0o600, "{file}");
    }
}

/// `ask` in `d`, then the store, its journal and the data directory are their owner's alone.
fn ask_and_see_it_private(d: &Path, request: &str) {
    let asked = run(d, &["ask", request]);
    assert_eq!(
        asked.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&asked.stderr)
    );
    assert_eq!(mode(&d.join("switchboard.db")), 0o600);
    for journal in ["switchboard.db-wal", "switchboard.db-shm"] {
        if d.join(journal).exists() {
            assert_eq!(mode(&d.join(journal)), 0o600, "{journal}");
        }
    }
    assert_eq!(mode(&d.join("switchboard-data")), 0o700);
}
