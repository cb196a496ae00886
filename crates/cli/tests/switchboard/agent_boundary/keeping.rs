//! Keeping answers nothing about the base: what a run's readers see after its changes are kept
//! (the `branch` event, the reply, what reached the branch) is the same whether what the run
//! wrote matches something the base hides or not.

use super::*;

/// A project whose denied file holds `secret` (committed over the usual one).
fn denying(secret: &str) -> Project {
    let mut project = Project::new(true);
    std::fs::write(project.repo.join(SECRET), secret).unwrap();
    git(&project.repo, &["commit", "-q", "-am", "a short secret"]);
    project.head = git(&project.repo, &["rev-parse", "HEAD"]);
    project
}

/// What the run's readers can see of a run once it ended, with the run's id and its data
/// directory written the same for every run.
#[derive(PartialEq, Eq)]
struct Seen {
    status: Value,
    answer: Value,
    error: Value,
    events: Vec<(String, String)>,
    branch: String,
}

impl std::fmt::Debug for Seen {
    /// Whole, but for the branch's names past the first few hundred bytes.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cut = self
            .branch
            .char_indices()
            .nth(400)
            .map_or(self.branch.len(), |(i, _)| i);
        f.debug_struct("Seen")
            .field("status", &self.status)
            .field("answer", &self.answer)
            .field("error", &self.error)
            .field("events", &self.events)
            .field(
                "branch",
                &format!(
                    "{} names: {}…",
                    self.branch.lines().count(),
                    &self.branch[..cut]
                ),
            )
            .finish()
    }
}

/// Runs `turns` as one repo run in `project`; what its readers see.
async fn outcome(project: &Project, turns: Vec<Turn>) -> Seen {
    let model = Model::serve(turns).await;
    let sb = Switchboard::new(&model, PERMISSIVE);
    sb.add(project);
    let data = sb.data().display().to_string();
    let (id, run, events) = tokio::task::spawn_blocking(move || {
        let id = sb.repo_run();
        let run = sb.json(&["runs", "get", &id]);
        let events = sb.json(&["runs", "events", &id]);
        (id, run, events)
    })
    .await
    .unwrap();
    let same = |text: &str| text.replace(&id, "<run>").replace(&data, "<data>");
    let events = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["kind"].as_str().unwrap().to_owned(),
                same(e["body"].as_str().unwrap()),
            )
        })
        .collect();
    let branch = format!("switchboard/{id}");
    let listed = git(&project.repo, &["branch", "--list", &branch]);
    let branch = if listed.is_empty() {
        "no branch".to_owned()
    } else {
        git(
            &project.repo,
            &["diff", "--name-only", &project.head, &branch],
        )
    };
    let field = |name: &str| serde_json::from_str::<Value>(&same(&run[name].to_string())).unwrap();
    Seen {
        status: run["status"].clone(),
        answer: field("answer"),
        error: field("error"),
        events,
        branch,
    }
}

/// The denied file holds a four-digit PIN; a run writes every candidate as a file of its
/// own. Keeping keeps all ten thousand, the one equal to the denied file among them (the run
/// wrote those bytes itself), and says exactly what it says when no candidate matches.
#[tokio::test(flavor = "multi_thread")]
async fn keeping_says_the_same_whether_a_written_file_equals_a_denied_one_or_not() {
    let sweep = "mkdir -p guesses && for i in $(seq -w 0 9999); do printf 'pin = %s\\n' $i > guesses/pin-$i; done; ls guesses | wc -l";
    let right = denying("pin = 0954\n");
    let wrong = denying("pin = 09541\n");
    let guessed = outcome(&right, vec![shell(sweep)]).await;
    let missed = outcome(&wrong, vec![shell(sweep)]).await;
    assert_eq!(guessed, missed);
    assert_eq!(guessed.status, "completed", "{guessed:?}");
    assert!(
        guessed
            .events
            .iter()
            .any(|(kind, body)| kind == "branch" && body.starts_with("kept 1 commit on")),
        "{guessed:?}"
    );
    assert_eq!(guessed.branch.lines().count(), 10_000);
    let kept = git(
        &right.repo,
        &["show", &format!("{}:guesses/pin-0954", branch_of(&right))],
    );
    assert_eq!(kept, "pin = 0954");
}

/// The branch a project's only run kept.
fn branch_of(project: &Project) -> String {
    git(
        &project.repo,
        &[
            "branch",
            "--list",
            "switchboard/*",
            "--format=%(refname:short)",
        ],
    )
}

/// A page of filler around the PIN, so a guessed file weighs more than the trees a run's
/// snapshot writes.
fn padded(pin: &str) -> String {
    format!(
        "# {}\npin = {pin}\n",
        "production secrets, do not share. ".repeat(120)
    )
}

/// A run fills its objects to just under the bound on what is kept of one run, then writes
/// one file guessing the denied file. Counted or not, the guess decides nothing: the run is
/// over the bound either way, and says so the same way.
#[tokio::test(flavor = "multi_thread")]
async fn the_keep_bounds_count_what_the_run_wrote_whatever_it_matches() {
    let pad = r#"python3 - <<'PY'
import zlib, hashlib, os
left = (512 << 20) - 2048
letter = 0
while left > 0:
    size = min(left, 64 << 20); left -= size; letter += 1
    h = hashlib.sha1(); c = zlib.compressobj(1)
    out = open(".git/objects/tmppad", "wb")
    def put(b):
        h.update(b); out.write(c.compress(b))
    put(b"blob %d\0" % size)
    chunk = bytes([64 + letter]) * (1 << 22)
    while size > 0:
        n = min(size, len(chunk)); put(chunk[:n]); size -= n
    out.write(c.flush()); out.close()
    oid = h.hexdigest(); d = ".git/objects/" + oid[:2]
    os.makedirs(d, exist_ok=True); os.replace(".git/objects/tmppad", d + "/" + oid[2:])
print("padded")
PY
"#
    .to_owned();
    let guess = format!(
        "{pad}printf '%s' '{}' > guess.txt; git add guess.txt; echo done",
        padded("0954")
    );
    let right = denying(&padded("0954"));
    let wrong = denying(&padded("0955"));
    let guessed = outcome(&right, vec![shell(&guess)]).await;
    let missed = outcome(&wrong, vec![shell(&guess)]).await;
    assert_eq!(guessed, missed);
    assert_eq!(guessed.branch, "no branch", "{guessed:?}");
    assert!(
        guessed.events.iter().any(|(kind, body)| kind == "branch"
            && body.contains("more than the 512 MiB of objects kept of one run")),
        "{guessed:?}"
    );
}

/// A run works out the id the base's hidden root tree would have if its guess of the denied
/// file were right, and stores other bytes under that name. Whether the name is the base's
/// or not, keeping keeps the same: the run's objects are never set beside the base's.
#[tokio::test(flavor = "multi_thread")]
async fn an_object_named_like_a_hidden_tree_of_the_base_decides_nothing() {
    let forge = "set -e; g=$(printf 'pin = 0954\\n' | git hash-object --stdin); \
         cfg=$(git ls-tree HEAD:config | sed \"s/[0-9a-f]\\{40\\}\\tproduction-secrets.toml/$g\\tproduction-secrets.toml/\" | git mktree --missing); \
         root=$(git ls-tree HEAD | sed \"s/[0-9a-f]\\{40\\}\\tconfig\\$/$cfg\\tconfig/\" | git mktree --missing); \
         f=.git/objects/$(echo $root | cut -c1-2)/$(echo $root | cut -c3-); chmod u+w $f; \
         python3 -c 'import zlib,sys; open(sys.argv[1],\"wb\").write(zlib.compress(b\"blob 3\\0abc\"))' $f; \
         echo kept > notes.txt; echo forged";
    let right = denying("pin = 0954\n");
    let wrong = denying("pin = 1234\n");
    let guessed = outcome(&right, vec![shell(forge)]).await;
    let missed = outcome(&wrong, vec![shell(forge)]).await;
    assert_eq!(guessed, missed);
    assert_eq!(guessed.branch, "notes.txt", "{guessed:?}");
}
