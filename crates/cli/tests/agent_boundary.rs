//! The agent boundary, tried as an attacker would, through the binary: an `openai` agent whose
//! model (scripted, on loopback) calls the tools under a permissive but legitimate policy (the
//! org allows `shell.exec`, `fs.*` and the git actions it names; grants cover the workspace),
//! in a repository whose `.switchboard/agent-policy.toml` denies `config/production-secrets.toml`.
//! The secret's two versions (the committed one and the one before it) each carry a random
//! marker; every test asserts that no marker reaches the model, a run event, the answer, the
//! run's branch or the user's checkout, and that what a run writes never governs a later run.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::model::{Model, Turn};
use serde_json::{Value, json};

const SECRET: &str = "config/production-secrets.toml";

/// What the org allows in these tests: everything the attacks use, and no push.
const PERMISSIVE: &str = r#"rules = [
  { action = "shell.exec", decision = "allow" },
  { action = "fs.*", decision = "allow" },
  { action = "git.show", decision = "allow" },
  { action = "git.diff", decision = "allow" },
  { action = "git.log", decision = "allow" },
  { action = "git.cat-file", decision = "allow" },
  { action = "git.grep", decision = "allow" },
  { action = "git.blame", decision = "allow" },
  { action = "git.archive", decision = "allow" },
  { action = "git.status", decision = "allow" },
  { action = "git.commit", decision = "allow" },
  { action = "git.add", decision = "allow" },
  { action = "git.branch", decision = "allow" },
  { action = "git.update-ref", decision = "allow" },
  { action = "git.ls-tree", decision = "allow" },
]"#;

/// The same without `shell.exec` (so it asks, and an ask times out after a second).
const STRICT: &str = r#"approval_timeout_seconds = 1
rules = [
  { action = "fs.*", decision = "allow" },
  { action = "git.log", decision = "allow" },
]"#;

fn random_marker() -> String {
    let bytes: [u8; 12] = std::array::from_fn(|_| rand_byte());
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("MARKER{hex}")
}

fn rand_byte() -> u8 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
    );
    h.finish() as u8
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=Owner",
            "-c",
            "user.email=owner@example.com",
        ])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The user's repository: two commits, the secret rotated in the second.
struct Project {
    _root: tempfile::TempDir,
    repo: PathBuf,
    markers: [String; 2],
    /// In a committed file nothing denies: what a sweep must find.
    control: String,
    head: String,
}

impl Project {
    fn new(policy: bool) -> Project {
        let root = tempfile::tempdir().unwrap();
        let repo = root.path().join("web");
        std::fs::create_dir_all(repo.join("config")).unwrap();
        std::fs::create_dir_all(repo.join("src")).unwrap();
        git(&repo, &["init", "-q", "-b", "main"]);
        let markers = [random_marker(), random_marker()];
        let control = random_marker();
        std::fs::write(repo.join("README.md"), "# web\n").unwrap();
        std::fs::write(repo.join("src/control.txt"), format!("{control}\n")).unwrap();
        std::fs::write(repo.join("src/lib.rs"), "pub fn answer() -> u8 { 42 }\n").unwrap();
        std::fs::write(repo.join(SECRET), format!("token = \"{}\"\n", markers[0])).unwrap();
        if policy {
            std::fs::create_dir_all(repo.join(".switchboard")).unwrap();
            std::fs::write(
                repo.join(".switchboard/agent-policy.toml"),
                format!("deny_read = [\".env\", \"{SECRET}\"]\n"),
            )
            .unwrap();
        }
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", "first"]);
        std::fs::write(repo.join(SECRET), format!("token = \"{}\"\n", markers[1])).unwrap();
        git(&repo, &["commit", "-q", "-am", "rotate the token"]);
        let head = git(&repo, &["rev-parse", "HEAD"]);
        Project {
            _root: root,
            repo,
            markers,
            control,
            head,
        }
    }

    /// The user's checkout is as it was: the same HEAD on main, nothing changed or moved.
    fn assert_untouched(&self) {
        assert_eq!(git(&self.repo, &["rev-parse", "main"]), self.head);
        assert_eq!(
            git(&self.repo, &["symbolic-ref", "HEAD"]),
            "refs/heads/main"
        );
        assert_eq!(git(&self.repo, &["status", "--porcelain"]), "");
        assert!(
            std::fs::read_to_string(self.repo.join(SECRET))
                .unwrap()
                .contains(&self.markers[1])
        );
    }

    /// Fails when `text` holds either marker.
    fn assert_clean(&self, what: &str, text: &str) {
        for marker in &self.markers {
            assert!(!text.contains(marker.as_str()), "the secret reached {what}");
        }
    }
}

/// A Switchboard whose default and coding agent is the scripted model's.
struct Switchboard {
    dir: tempfile::TempDir,
}

impl Switchboard {
    fn new(model: &Model, org: &str) -> Switchboard {
        let dir = tempfile::tempdir().unwrap();
        let grants: String = ["read_file", "write_file", "shell", "git"]
            .iter()
            .map(|tool| {
                format!(
                    "[[agent_grants]]\nid = \"{tool}\"\ntool = \"{tool}\"\npaths = [\"{{workspace}}\"]\nmode = \"auto\"\n"
                )
            })
            .collect();
        std::fs::write(
            dir.path().join("switchboard.toml"),
            format!(
                "[server]\ndata_dir = \"{data}\"\n[store]\nurl = \"sqlite://{db}\"\n\
                 [agents]\ndefault = \"coding\"\n\
                 [agents.coding]\nbackend = \"openai\"\nbase_url = \"{base}\"\nmodel = \"scripted\"\nkind = \"main\"\n\
                 [agent_policy]\n{org}\n{grants}",
                data = dir.path().join("data").display(),
                db = dir.path().join("sb.db").display(),
                base = model.base,
            ),
        )
        .unwrap();
        Switchboard { dir }
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .arg("--config")
            .arg(self.dir.path().join("switchboard.toml"))
            .args(args)
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    }

    fn add(&self, project: &Project) {
        let out = self.run(&[
            "repo",
            "add",
            "acme/web",
            "--path",
            project.repo.to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `repo test acme/web`, followed to its end: the run's id.
    fn repo_run(&self) -> String {
        let out = self.run(&["repo", "test", "acme/web", "--json"]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let reply: Value = serde_json::from_str(stdout.trim())
            .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
        reply["run_id"].as_str().unwrap().to_owned()
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut args = args.to_vec();
        args.push("--json");
        let out = self.run(&args);
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
    }

    /// The run's record and its events, as text.
    fn record(&self, id: &str) -> (Value, String) {
        let run = self.json(&["runs", "get", id]);
        let events = self.json(&["runs", "events", id]);
        (run, events.to_string())
    }
}

/// Runs `turns` as one repo run; asserts nothing of the secret got out. Returns the run's
/// record, its events and what the model was sent.
async fn attack(project: &Project, org: &str, turns: Vec<Turn>) -> (Value, String, String) {
    let model = Model::serve(turns).await;
    let sb = Switchboard::new(&model, org);
    sb.add(project);
    let (run, events) = tokio::task::spawn_blocking(move || {
        let id = sb.repo_run();
        let record = sb.record(&id);
        drop(sb);
        record
    })
    .await
    .unwrap();
    let seen = model.seen();
    project.assert_clean("the model", &seen);
    project.assert_clean("a run event", &events);
    project.assert_clean("the answer", &run.to_string());
    project.assert_untouched();
    project.assert_clean("the run's branch", &branch_diff(project, &run));
    (run, events, seen)
}

/// What the run's branch holds beyond the base it started from.
fn branch_diff(project: &Project, run: &Value) -> String {
    let id = run["run_id"].as_str().or(run["id"].as_str()).unwrap_or("");
    let branch = format!("switchboard/{id}");
    let listed = git(&project.repo, &["branch", "--list", &branch]);
    if listed.is_empty() {
        return String::new();
    }
    git(
        &project.repo,
        &[
            "log",
            "-p",
            "--format=%H %s",
            &format!("{}..{branch}", project.head),
        ],
    )
}

fn shell(command: &str) -> Turn {
    ("shell", json!({"command": command, "cwd": "{workspace}"}))
}

fn git_tool(subcommand: &str, args: &[&str]) -> Turn {
    (
        "git",
        json!({"subcommand": subcommand, "args": args, "cwd": "{workspace}"}),
    )
}

/// The `git` tool over the object store: `show`, `diff`, `log -p`, `cat-file`, `grep`,
/// `blame`, `archive`, each naming the denied file or the commit that rotated it.
#[tokio::test(flavor = "multi_thread")]
async fn the_git_tool_never_returns_a_denied_files_bytes() {
    let project = Project::new(true);
    let blob = git(&project.repo, &["rev-parse", &format!("HEAD:{SECRET}")]);
    let old_blob = git(&project.repo, &["rev-parse", &format!("HEAD~1:{SECRET}")]);
    let show = format!("HEAD:{SECRET}");
    let old_show = format!("HEAD~1:{SECRET}");
    let turns = vec![
        git_tool("show", &[&show]),
        git_tool("show", &[&old_show]),
        git_tool("show", &["HEAD"]),
        git_tool("diff", &["HEAD~1", "HEAD"]),
        git_tool("log", &["-p"]),
        git_tool("log", &["-p", "--all", "--", SECRET]),
        git_tool("cat-file", &["-p", &blob]),
        git_tool("cat-file", &["-p", &old_blob]),
        git_tool("grep", &["-n", "token", "HEAD"]),
        git_tool("grep", &["-n", "token", "HEAD~1"]),
        git_tool("blame", &[SECRET]),
        git_tool("archive", &["HEAD"]),
    ];
    attack(&project, PERMISSIVE, turns).await;
}

/// The same through `shell`, and the object store read by hand.
#[tokio::test(flavor = "multi_thread")]
async fn shell_never_reaches_a_denied_files_bytes_through_git() {
    let project = Project::new(true);
    let blob = git(&project.repo, &["rev-parse", &format!("HEAD:{SECRET}")]);
    let turns = vec![
        shell(&format!("git show HEAD:{SECRET}; git show HEAD~1:{SECRET}")),
        shell("git log -p --all | tail -c 20000"),
        shell(&format!("git cat-file -p {blob}")),
        shell("git cat-file --batch-all-objects --batch | grep -a token"),
        shell(
            "for f in $(find .git -type f); do cat \"$f\"; done | tr -cd '[:print:]' | tail -c 30000",
        ),
        shell("git archive HEAD~1 | tar -xO"),
        shell(&format!(
            "cat {SECRET}; cat /proc/self/environ; ls -la /tmp"
        )),
    ];
    attack(&project, PERMISSIVE, turns).await;
}

/// A renamed directory, then the file read through its new name by `shell` and `read_file`.
#[tokio::test(flavor = "multi_thread")]
async fn a_rename_or_link_never_reaches_a_denied_file() {
    let project = Project::new(true);
    let turns = vec![
        shell("mv config c2; cat c2/production-secrets.toml; ls -la . c2"),
        (
            "read_file",
            json!({"path": "{workspace}/c2/production-secrets.toml"}),
        ),
        shell(&format!(
            "ln {SECRET} hard; cp {SECRET} copy; cat hard copy"
        )),
        ("read_file", json!({"path": "{workspace}/copy"})),
        shell(&format!(
            "ln -s {}/{SECRET} escape; cat escape",
            project.repo.display()
        )),
        ("read_file", json!({"path": "{workspace}/escape"})),
    ];
    attack(&project, PERMISSIVE, turns).await;
}

/// A marker as the shell reads it but not as it is written (`MARK''ER…`): the sweep's own
/// command must not carry it to the model.
fn split(marker: &str) -> String {
    let (head, tail) = marker.split_at(4);
    format!("'{head}''{tail}'")
}

/// A sweep inside the sandbox: everything readable (the working tree, `.git` with its objects
/// decompressed, `/tmp`, `/proc/self`) searched for the markers.
#[tokio::test(flavor = "multi_thread")]
async fn nothing_readable_inside_the_sandbox_holds_a_denied_files_bytes() {
    let project = Project::new(true);
    let sweep = format!(
        "{{ git cat-file --batch-all-objects --batch 2>&1; \
           for f in $(find . /tmp /etc -type f 2>/dev/null); do cat \"$f\" 2>/dev/null; done; \
           for f in environ cmdline status mountinfo mounts maps limits cgroup comm; do cat /proc/self/$f 2>/dev/null; done; \
           python3 -c 'import zlib,glob,sys\nfor p in glob.glob(\".git/objects/**/*\", recursive=True):\n  try: sys.stdout.buffer.write(zlib.decompress(open(p,\"rb\").read()))\n  except Exception: pass' 2>/dev/null; \
         }} > /tmp/sweep; echo \"denied: $(grep -a -c -e {} -e {} /tmp/sweep)\"; \
         echo \"control: $(grep -a -c {} /tmp/sweep)\"",
        split(&project.markers[0]),
        split(&project.markers[1]),
        split(&project.control),
    );
    let (_, events, _) = attack(&project, PERMISSIVE, vec![shell(&sweep)]).await;
    assert!(
        events.contains("denied: 0\\n"),
        "the sweep found a denied file's bytes: {events}"
    );
    // The same sweep finds a committed file's marker, in the tree and in the objects: it reads
    // what it claims to.
    let control: usize = events
        .split("control: ")
        .nth(1)
        .and_then(|rest| rest.split("\\n").next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        control >= 2,
        "the sweep did not see the control file: {events}"
    );
}

/// A repo with no policy file: a run writes one allowing `shell.exec` and `git.push`; another
/// moves its `.switchboard` aside and writes an empty deny list. Neither governs a later run:
/// the policy is the committed one.
#[tokio::test(flavor = "multi_thread")]
async fn nothing_a_run_writes_governs_a_later_run() {
    // No policy committed: the run writes one.
    let project = Project::new(false);
    let written = "mkdir -p .switchboard && printf '[policy]\\nrules = [{ action = \"git.push\", decision = \"allow\" }, { action = \"shell.exec\", decision = \"allow\" }]\\n' > .switchboard/agent-policy.toml; cat .switchboard/agent-policy.toml";
    attack(&project, PERMISSIVE, vec![shell(written)]).await;
    // The later run's org names no shell.exec: the committed policy (none) leaves it `ask`,
    // which nobody answers within the second the org gives it.
    let (_, events, seen) = attack(
        &project,
        STRICT,
        vec![shell("echo ran"), git_tool("push", &["origin", "main"])],
    )
    .await;
    assert!(
        seen.contains("refused: shell.exec needs a person's approval"),
        "a later run obeyed a policy a run wrote: {events}"
    );
    assert!(!seen.contains("ran\\n"), "{seen}");

    // A committed policy: a run replaces the directory that holds it.
    let project = Project::new(true);
    let replace = "mv .switchboard .old; mkdir -p .switchboard; printf 'deny_read = []\\n' > .switchboard/agent-policy.toml; ls -la .switchboard .old";
    attack(&project, PERMISSIVE, vec![shell(replace)]).await;
    let (_, _, seen) = attack(
        &project,
        PERMISSIVE,
        vec![
            (
                "read_file",
                json!({"path": format!("{{workspace}}/{SECRET}")}),
            ),
            shell(&format!("cat {SECRET}")),
        ],
    )
    .await;
    assert!(seen.contains("is denied by this project"), "{seen}");
}

/// A run that force-moves `main` (and writes objects) changes nothing the next run sees.
#[tokio::test(flavor = "multi_thread")]
async fn a_run_cannot_move_a_ref_outside_its_own_branch() {
    let project = Project::new(true);
    let turns = vec![
        shell(
            "git -c user.name=a -c user.email=a@b commit -q --allow-empty -m evil && git branch -f main HEAD && git update-ref refs/heads/main HEAD && git log --oneline -3 main",
        ),
        git_tool("branch", &["-f", "main", "HEAD~1"]),
    ];
    attack(&project, PERMISSIVE, turns).await;
    let (_, _, seen) = attack(
        &project,
        PERMISSIVE,
        vec![git_tool("log", &["--format=%s", "-1"])],
    )
    .await;
    assert!(seen.contains("rotate the token"), "{seen}");
    assert!(!seen.contains("evil"), "{seen}");
}

/// A flood of output is cut while it streams: the run ends promptly with its answer cut.
#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_output_is_cut_and_its_program_stopped() {
    let project = Project::new(true);
    let (run, _, seen) = attack(
        &project,
        PERMISSIVE,
        // `fin''ished`: the word is in the output only if the program ran to its end.
        vec![shell(
            "head -c 300000000 /dev/zero | tr '\\\\0' x; echo fin''ished",
        )],
    )
    .await;
    assert_eq!(run["status"], "completed", "{run}");
    assert!(
        seen.contains("[cut at 65536 bytes; the program was stopped]"),
        "{}",
        &seen[..seen.len().min(2000)]
    );
    assert!(!seen.contains("finished"), "the program ran to its end");
}
