//! Registry commands from the command line, as cli:local against a real store: the split of
//! local verbs and registry commands, help from the schema, exit codes, `--json`.

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    /// A config with a SQLite store that does not exist yet.
    fn fresh() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("runs.db");
        std::fs::write(
            dir.path().join("switchboard.toml"),
            format!(
                "[store]\nurl = \"sqlite://{}\"\n[agents.echo]\n",
                db.display()
            ),
        )
        .unwrap();
        Env { dir }
    }

    /// A config with its SQLite store made (`db migrate`).
    fn sqlite() -> Env {
        let e = Env::fresh();
        let migrated = e.run(&["db", "migrate"]);
        assert_eq!(migrated.status.code(), Some(0), "{}", err(&migrated));
        e
    }

    fn with_store_url(url: &str) -> Env {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("switchboard.toml"),
            format!("[store]\nurl = \"{url}\"\n"),
        )
        .unwrap();
        Env { dir }
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .args(args)
            .current_dir(self.dir.path())
            .env_remove("SWITCHBOARD_CONFIG")
            .output()
            .unwrap()
    }
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn registry_commands_run_as_cli_local_against_sqlite() {
    let e = Env::fresh();
    let db = e.dir.path().join("runs.db");
    // A command that only reads never makes a store: it says there is none, and how to
    // start one. `help` reads no store and answers.
    for words in [
        &["runs", "list", "--status", "all"][..],
        &["status"],
        &["memory", "list"],
        &["runs", "get", "0000000000000NOSUCHRUN0000"],
        &["schedule", "list"],
    ] {
        let o = e.run(words);
        assert_eq!(o.status.code(), Some(1), "{words:?}: {}", err(&o));
        assert!(
            err(&o).contains(&format!(
                "there is no store here: {} does not exist",
                db.display()
            )) && err(&o).contains("`switchboard serve` or `switchboard ask"),
            "{words:?}: {}",
            err(&o)
        );
        assert!(!db.exists(), "{words:?} made a store");
    }
    let help = e.run(&["help"]);
    assert_eq!(help.status.code(), Some(0), "{}", err(&help));
    assert!(!db.exists(), "help made a store");
    assert!(
        std::fs::read_dir(e.dir.path()).unwrap().count() == 1,
        "only the config is there: {:?}",
        std::fs::read_dir(e.dir.path()).unwrap().collect::<Vec<_>>()
    );
    // A repo's path is read where the server runs, so it must say where: absolute.
    let relative = e.run(&["repo", "add", "acme/web", "--path", "./web"]);
    assert_eq!(relative.status.code(), Some(2), "{}", err(&relative));
    assert!(
        err(&relative).contains("--path must be an absolute path"),
        "{}",
        err(&relative)
    );

    // A command that writes makes it.
    let set = e.run(&["config", "set", "agent", "coding", "--org"]);
    assert_eq!(set.status.code(), Some(0), "{}", err(&set));
    assert!(Path::new(&db).exists(), "the store was created by a write");
    let list = e.run(&["runs", "list", "--status", "all"]);
    assert_eq!(list.status.code(), Some(0), "{}", err(&list));
    assert_eq!(out(&list).trim(), "no runs");
    let get = e.run(&["config", "get", "agent"]);
    assert_eq!(out(&get).trim(), "agent = coding (from the org)");

    let json = e.run(&["status", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["store"]["backend"], "sqlite");
    let global = e.run(&["--json", "config", "get", "agent"]);
    let v: serde_json::Value = serde_json::from_slice(&global.stdout).unwrap();
    assert_eq!(v["value"], "coding");
}

#[test]
fn exit_codes_mean_something() {
    let e = Env::sqlite();
    let missing = e.run(&["runs", "get", "0000000000000NOSUCHRUN0000"]);
    assert_eq!(missing.status.code(), Some(1));
    assert_eq!(err(&missing).trim(), "run not found");
    let usage = e.run(&["runs", "list", "--bogus"]);
    assert_eq!(usage.status.code(), Some(2));
    assert!(err(&usage).contains("usage: runs list"), "{}", err(&usage));
    let unknown = e.run(&["frobnicate", "now"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(err(&unknown).contains("unknown command `frobnicate`"));
    let fired = e.run(&["schedule", "fire", "self-improvement"]);
    assert_eq!(fired.status.code(), Some(0), "{}", err(&fired));
    assert!(
        out(&fired).contains("as schedule:self-improvement: run ")
            && out(&fired).contains(" completed (read it with `runs get "),
        "{}",
        out(&fired)
    );
    let no_such = e.run(&["schedule", "fire", "nightly"]);
    assert_eq!(no_such.status.code(), Some(2));
    assert!(err(&no_such).contains("no schedule `nightly`; the schedules are self-improvement"));
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let serve = e.run(&["serve", "--listen", &addr]);
    assert_eq!(serve.status.code(), Some(2));
    assert!(
        err(&serve).contains(&format!(
            "listening on {addr} failed; pass --listen HOST:PORT or set [server] listen"
        )),
        "{}",
        err(&serve)
    );
}

#[test]
fn every_registry_command_is_reachable_with_help_from_its_schema() {
    let e = Env::sqlite();
    for c in commands::Registry::catalogue().commands() {
        let mut args: Vec<String> = c.id.as_str().split('.').map(str::to_owned).collect();
        args.push("--help".into());
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = e.run(&refs);
        assert_eq!(o.status.code(), Some(0), "{}: {}", c.id, err(&o));
        assert!(
            out(&o).contains(&format!("usage: {}", c.text_form())),
            "{}: {}",
            c.id,
            out(&o)
        );
    }
    let group = e.run(&["runs", "--help"]);
    assert!(
        out(&group).contains("runs list") && out(&group).contains("runs stop"),
        "{}",
        out(&group)
    );
}

#[test]
fn config_check_is_local_and_config_get_set_reach_the_registry() {
    let e = Env::sqlite();
    let check = e.run(&["config", "check"]);
    assert_eq!(check.status.code(), Some(0));
    assert!(out(&check).contains("policy table"));
    let get = e.run(&["config", "get", "nothing", "--org"]);
    assert_eq!(out(&get).trim(), "`nothing` is not set on the org");
    let help = e.run(&["config", "set", "--help"]);
    assert!(out(&help).contains("usage: config set <key> <value>"));
}

#[test]
fn db_migrate_authz_matrix_and_completions() {
    let e = Env::sqlite();
    let m = e.run(&["db", "migrate"]);
    assert_eq!(m.status.code(), Some(0), "{}", err(&m));
    assert!(out(&m).starts_with("migrated the sqlite store at sqlite://"));
    let matrix = e.run(&["authz", "matrix"]);
    assert!(
        out(&matrix).contains("| `runs list` (runs:read) |"),
        "{}",
        out(&matrix)
    );
    let json = e.run(&["authz", "matrix", "--json"]);
    let cells: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let cli_help = cells
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["command"] == "help" && c["id"] == "cli:local")
        .unwrap();
    assert_eq!(cli_help["cell"], "✅");
    let comp = e.run(&["completions", "bash"]);
    assert!(out(&comp).contains("switchboard"));
    let bad_store = Env::with_store_url("mysql://nope");
    let o = bad_store.run(&["runs", "list"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(err(&o).contains("store.url"), "{}", err(&o));
}

#[test]
fn postgres_registry_commands_from_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("switchboard.toml"),
        common::postgres_store_section(),
    )
    .unwrap();
    let e = Env { dir };
    let set = e.run(&["config", "set", "agent", "coding", "--org"]);
    assert_eq!(set.status.code(), Some(0), "{}", err(&set));
    assert_eq!(
        out(&e.run(&["config", "get", "agent"])).trim(),
        "agent = coding (from the org)"
    );
    let status = e.run(&["status", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(v["store"]["backend"], "postgres");
}

/// A registry command that starts a run (`repo test`) runs it in this process, recorded in
/// `cli:local`, and follows it to its end before exiting: the process never leaves a run
/// behind for another to tombstone.
#[test]
fn a_run_a_cli_command_starts_is_followed_to_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    // A git repository with one commit: a run starts from its HEAD.
    agents::testing::init_repository(workspace.path()).unwrap();
    std::fs::write(
        dir.path().join("switchboard.toml"),
        format!(
            "[store]\nurl = \"sqlite://{}\"\n[server]\ndata_dir = {:?}\n[agents]\ndefault = \"echo\"\n[agents.echo]\n[agents.coding]\n",
            dir.path().join("runs.db").display(),
            dir.path().join("data").display().to_string()
        ),
    )
    .unwrap();
    let e = Env { dir };
    let add = e.run(&[
        "repo",
        "add",
        "acme/tools",
        "--path",
        &workspace.path().display().to_string(),
    ]);
    assert_eq!(add.status.code(), Some(0), "{}", err(&add));
    let test = e.run(&["repo", "test", "acme/tools"]);
    assert_eq!(test.status.code(), Some(0), "{}", err(&test));
    assert!(
        out(&test).contains("with agent `coding` in cli:local"),
        "{}",
        out(&test)
    );
    assert!(err(&test).contains("completed"), "{}", err(&test));
    let list = e.run(&["runs", "list", "--status", "all", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["status"], "completed", "{v}");
    assert_eq!(runs[0]["repo"], "acme/tools");
    let unknown = e.run(&["summarise", "the", "deploy"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        err(&unknown).contains("switchboard ask"),
        "{}",
        err(&unknown)
    );
}

/// Only `serve` runs the schedule timer: a one-shot command over a store whose every-minute
/// schedule is many slots behind fires nothing (a `serve` would catch the slot up).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cli_command_never_fires_a_due_schedule() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    std::fs::write(
        dir.path().join("switchboard.toml"),
        format!(
            "[store]\nurl = \"sqlite://{}\"\n[[schedules]]\nname = \"minutely\"\ncron = \"* * * * *\"\ncommand = \"help\"\n[grants.\"schedule:minutely\"]\nactions = [\"help:read\"]\n",
            db.display()
        ),
    )
    .unwrap();
    let e = Env { dir };
    assert_eq!(e.run(&["db", "migrate"]).status.code(), Some(0));
    let store = store::open(&format!("sqlite://{}", db.display()))
        .await
        .unwrap();
    let name = "minutely".parse().unwrap();
    let long_ago = store::FiringSlot::Timer(store::Timestamp::from_micros(
        (store::wall_clock().micros() / 60_000_000 - 10) * 60_000_000,
    ));
    assert!(
        store
            .claim_firing(&name, &long_ago, long_ago.at())
            .await
            .unwrap()
    );
    let listed = e.run(&["runs", "list", "--status", "all"]);
    assert_eq!(listed.status.code(), Some(0), "{}", err(&listed));
    assert_eq!(out(&listed).trim(), "no runs");
    let firings = store.recent_firings(&name, 10).await.unwrap();
    assert_eq!(firings.len(), 1, "nothing fired: {firings:?}");
}

/// `db backup` copies a live SQLite store. Runs recorded before it are in the copy, and a
/// write another connection holds uncommitted meanwhile (and commits after) is not (one snapshot, taken while
/// that writer holds its lock). The copy opens as a store of its own. An existing file is
/// never overwritten, and Postgres, `memory:`, a missing store and a missing directory each
/// get a clear error (exit 2) and leave nothing behind.
#[test]
fn db_backup_copies_a_live_sqlite_store_and_refuses_what_it_cannot() {
    let e = Env::sqlite();
    let config = e.dir.path().join("switchboard.toml");
    let with_agent = std::fs::read_to_string(&config).unwrap() + "[agents]\ndefault = \"echo\"\n";
    std::fs::write(&config, with_agent).unwrap();
    for _ in 0..3 {
        let asked = e.run(&["ask", "--agent", "echo", "hello"]);
        assert_eq!(asked.status.code(), Some(0), "{}", err(&asked));
    }
    let db = e.dir.path().join("runs.db");
    // Another writer in the middle of a transaction: a run it has not committed.
    let mut writer = Command::new("python3")
        .args([
            "-c",
            "import sqlite3,sys; c=sqlite3.connect(sys.argv[1], isolation_level=None); c.execute('BEGIN IMMEDIATE'); \
             c.execute(\"INSERT INTO config_values(tier, tier_id, key, value, updated_by, updated_at) VALUES ('org','','uncommitted','x','cli:local',0)\"); \
             print('held', flush=True); sys.stdin.readline(); c.execute('COMMIT')",
            db.to_str().unwrap(),
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(writer.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "held");
    let copy = e.dir.path().join("copy.db");
    let backed = e.run(&["db", "backup", copy.to_str().unwrap(), "--json"]);
    std::io::Write::write_all(writer.stdin.as_mut().unwrap(), b"commit\n").unwrap();
    assert!(writer.wait().unwrap().success());
    // The write was real: committed after the copy, it is in the store and not in the copy.
    let live = e.run(&["config", "get", "uncommitted", "--org"]);
    assert!(out(&live).contains('x'), "{}{}", out(&live), err(&live));
    assert_eq!(backed.status.code(), Some(0), "{}", err(&backed));
    let reply: serde_json::Value = serde_json::from_slice(&backed.stdout).unwrap();
    assert_eq!(reply["runs"], 3, "{reply}");
    assert_eq!(reply["bytes"], std::fs::metadata(&copy).unwrap().len());
    let leftovers: Vec<_> = std::fs::read_dir(e.dir.path())
        .unwrap()
        .flatten()
        .map(|f| f.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("partial"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // The copy is a store: its runs list, and the uncommitted write is not in it.
    let restored = Env::with_store_url(&format!("sqlite://{}", copy.display()));
    let runs = restored.run(&["runs", "list", "--status", "all", "--json"]);
    assert_eq!(runs.status.code(), Some(0), "{}", err(&runs));
    assert_eq!(out(&runs).matches("\"id\"").count(), 3, "{}", out(&runs));
    let got = restored.run(&["config", "get", "uncommitted", "--org"]);
    assert!(out(&got).contains("is not set"), "{}", out(&got));
    let human = e.run(&[
        "db",
        "backup",
        e.dir.path().join("again.db").to_str().unwrap(),
    ]);
    assert!(
        out(&human).starts_with("backed up the store at sqlite://")
            && out(&human).contains("(3 runs,"),
        "{}",
        out(&human)
    );

    let before = std::fs::read(&copy).unwrap();
    let missing_dir = e.dir.path().join("no/such/dir/x.db");
    let pg = Env::with_store_url("postgres://postgres@127.0.0.1:5432/test");
    let memory = Env::with_store_url("memory:");
    let absent = Env::with_store_url(&format!(
        "sqlite://{}",
        e.dir.path().join("never.db").display()
    ));
    for (env, file, says) in [
        (
            &e,
            copy.to_str().unwrap(),
            "already exists; name a new file",
        ),
        (
            &e,
            missing_dir.to_str().unwrap(),
            "is not a directory here; make it first",
        ),
        (&pg, "pg.db", "back a Postgres store up with pg_dump"),
        (&memory, "m.db", "keeps nothing to back up"),
        (&absent, "a.db", "there is no SQLite store at"),
    ] {
        let o = env.run(&["db", "backup", file]);
        assert_ne!(o.status.code(), Some(0), "{file}");
        assert!(err(&o).contains(says), "{file}: {}", err(&o));
    }
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        before,
        "an existing file was written"
    );
    assert!(
        !e.dir.path().join("never.db").exists(),
        "a missing store was created"
    );
    for env in [&pg, &memory, &absent] {
        let names: Vec<_> = std::fs::read_dir(env.dir.path())
            .unwrap()
            .flatten()
            .map(|f| f.file_name().to_string_lossy().into_owned())
            .filter(|n| n != "switchboard.toml")
            .collect();
        assert!(names.is_empty(), "{names:?}");
    }
}
