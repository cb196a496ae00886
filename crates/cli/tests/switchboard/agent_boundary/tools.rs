//! The tools under attack: git's refusals, write_file and read_file, http_fetch, an output flood.

use super::*;

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
