//! A user's repository with a denied secret, and a Switchboard whose agents are scripted
//! models, for the tests that run the binary against both.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use test_support::model::Model;

/// The file every project here denies.
pub const SECRET: &str = "config/production-secrets.toml";

pub fn random_marker() -> String {
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

pub fn git(dir: &Path, args: &[&str]) -> String {
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
pub struct Project {
    _root: tempfile::TempDir,
    pub repo: PathBuf,
    pub markers: [String; 2],
    /// In a committed file nothing denies: what a sweep must find.
    pub control: String,
    pub head: String,
}

impl Project {
    pub fn new(policy: bool) -> Project {
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
    pub fn assert_untouched(&self) {
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
    pub fn assert_clean(&self, what: &str, text: &str) {
        for marker in &self.markers {
            assert!(!text.contains(marker.as_str()), "the secret reached {what}");
        }
    }
}

/// A Switchboard whose default and coding agent is the scripted model's.
pub struct Switchboard {
    pub dir: tempfile::TempDir,
}

impl Switchboard {
    pub fn new(model: &Model, org: &str) -> Switchboard {
        Switchboard::with_agents(&[("coding", model)], org, "")
    }

    /// `agents` (the first the default), each an `openai` agent of its scripted model, with
    /// grants for the file tools, shell and git in the workspace; `org` is the body of
    /// `[agent_policy]`; `extra` is more config.
    pub fn with_agents(agents: &[(&str, &Model)], org: &str, extra: &str) -> Switchboard {
        let dir = tempfile::tempdir().unwrap();
        let grants: String = ["read_file", "write_file", "shell", "git"]
            .iter()
            .map(|tool| {
                format!(
                    "[[agent_grants]]\nid = \"{tool}\"\ntool = \"{tool}\"\npaths = [\"{{workspace}}\"]\nmode = \"auto\"\n"
                )
            })
            .collect();
        let declared: String = agents
            .iter()
            .map(|(name, model)| {
                format!(
                    "[agents.{name}]\nbackend = \"openai\"\nbase_url = \"{}\"\nmodel = \"scripted\"\nkind = \"main\"\n",
                    model.base
                )
            })
            .collect();
        let default = agents.first().map_or("echo", |(name, _)| name);
        std::fs::write(
            dir.path().join("switchboard.toml"),
            format!(
                "[server]\ndata_dir = \"{data}\"\n[store]\nurl = \"sqlite://{db}\"\n\
                 [agents]\ndefault = \"{default}\"\n[agents.echo]\n{declared}\
                 [agent_policy]\n{org}\n{grants}{extra}",
                data = dir.path().join("data").display(),
                db = dir.path().join("sb.db").display(),
            ),
        )
        .unwrap();
        Switchboard { dir }
    }

    /// `switchboard ask --json <args…>`: the run's outcome.
    pub fn ask(&self, args: &[&str]) -> Value {
        let mut all = vec!["ask", "--json"];
        all.extend_from_slice(args);
        let out = self.run(&all);
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{e}: {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }

    /// Where the data directory is.
    pub fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .arg("--config")
            .arg(self.dir.path().join("switchboard.toml"))
            .args(args)
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    }

    pub fn add(&self, project: &Project) {
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
    pub fn repo_run(&self) -> String {
        let out = self.run(&["repo", "test", "acme/web", "--json"]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let reply: Value = serde_json::from_str(stdout.trim())
            .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
        reply["run_id"].as_str().unwrap().to_owned()
    }

    pub fn json(&self, args: &[&str]) -> Value {
        let mut args = args.to_vec();
        args.push("--json");
        let out = self.run(&args);
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
    }

    /// The run's record and its events, as text.
    pub fn record(&self, id: &str) -> (Value, String) {
        let run = self.json(&["runs", "get", id]);
        let events = self.json(&["runs", "events", id]);
        (run, events.to_string())
    }
}

/// Whether the user's repository has branch `branch` (a run that kept nothing makes none).
pub fn has_branch(project: &Project, branch: &str) -> bool {
    !git(&project.repo, &["branch", "--list", branch]).is_empty()
}

/// A run that kept nothing made no branch, and the user's `main` is where it was.
pub fn assert_no_branch(project: &Project, branch: &str) {
    assert!(!has_branch(project, branch), "{branch} was made");
    assert_eq!(git(&project.repo, &["rev-parse", "main"]), project.head);
}

/// What the run's branch holds beyond the base it started from.
pub fn branch_diff(project: &Project, run: &Value) -> String {
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
