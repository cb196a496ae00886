//! A denied file's bytes and blob ids, sought by every route a run has: git, shell, links, a sweep.

use super::*;

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
