//! The file tools resolve a path beneath the grant that allows it, never on the host: a link
//! out of the workspace (to a host path, to `/proc/self/…`) reads as a missing file, and the
//! refusal names only the path the model sent.

use super::*;

/// Links the run plants in its workspace to what lies outside it: a host file, a host path
/// that does not exist, Switchboard's own store (by `..`), a process's file descriptor, the
/// host's root through `/proc`, and a directory of the host. Each read through them, and a
/// plain missing file, answers the same sentence with only the path the model sent in it;
/// a write and a working directory through them are refused the same way.
#[tokio::test(flavor = "multi_thread")]
async fn a_path_out_of_the_grant_reads_as_missing_and_names_nothing_of_the_host() {
    let project = Project::new(true);
    let plant = "ln -s /etc/hostname host; ln -s /etc/no-such-file-here gone; \
         ln -s ../../../../sb.db store; ln -s /proc/self/fd/1 fd; ln -s /proc/self/root/etc/hostname root; \
         ln -s /etc etc; ln -s ../../.. up; ls -la";
    let reads = [
        "absent",
        "host",
        "gone",
        "store",
        "fd",
        "root",
        "etc/hostname",
        "etc/no-such-file-here",
        "up/sb.db",
    ];
    let mut turns = vec![shell(plant)];
    turns.extend(reads.iter().map(|name| {
        (
            "read_file",
            json!({"path": format!("{{workspace}}/{name}")}),
        )
    }));
    turns.push((
        "write_file",
        json!({"path": "{workspace}/etc/written", "content": "x"}),
    ));
    turns.push(("shell", json!({"command": "pwd", "cwd": "{workspace}/etc"})));
    turns.push((
        "git",
        json!({"subcommand": "status", "args": [], "cwd": "{workspace}/up"}),
    ));
    let model = Model::serve(turns).await;
    let sb = Switchboard::new(&model, PERMISSIVE);
    sb.add(&project);
    let data = sb.data();
    tokio::task::spawn_blocking(move || {
        sb.repo_run();
        drop(sb);
    })
    .await
    .unwrap();
    let results = model.tool_results();
    let requests = model.requests_json();
    // The path each call sent, as the model wrote it.
    let sent: Vec<String> = requests
        .iter()
        .skip(1)
        .map(|r| {
            let call = &r["messages"]
                .as_array()
                .unwrap()
                .iter()
                .rev()
                .nth(1)
                .unwrap()["tool_calls"][0]["function"];
            let args: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
            args["path"]
                .as_str()
                .or(args["cwd"].as_str())
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(results.len(), 1 + reads.len() + 3, "{results:?}");
    let shapes: Vec<String> = results
        .iter()
        .zip(&sent)
        .skip(1)
        .map(|(result, path)| result.replace(path.as_str(), "<path>"))
        .collect();
    let read = &shapes[0];
    assert!(read.starts_with("refused: <path> "), "{shapes:?}");
    for shape in &shapes[..reads.len()] {
        assert_eq!(shape, read, "{shapes:?}");
    }
    for shape in &shapes[reads.len()..] {
        assert!(shape.starts_with("refused: <path> "), "{shapes:?}");
    }
    // Nothing but the path it sent: no host path, no file's bytes, no errno that tells
    // a missing host file from one that is there.
    let host = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
    let data = data.display().to_string();
    for (result, path) in results.iter().zip(&sent).skip(1) {
        let rest = result.replace(path.as_str(), "");
        for leak in ["/etc", "/proc", "sb.db", &data, "No such file", "pipe:"] {
            assert!(!rest.contains(leak), "{leak} in {result}");
        }
        assert!(
            host.trim().is_empty() || !rest.contains(host.trim()),
            "{result}"
        );
    }
}

/// The two path forms agree: `shell` runs in `/workspace`, and the file tools take a path
/// there as the workspace's own; a denied file is refused in either form, and `..` out of
/// `/workspace` stays out.
#[tokio::test(flavor = "multi_thread")]
async fn the_sandbox_path_and_the_host_path_name_the_same_file() {
    let project = Project::new(true);
    let turns = vec![
        (
            "write_file",
            json!({"path": "/workspace/form.txt", "content": "written-by-the-sandbox-form"}),
        ),
        shell("pwd; cat form.txt; echo; echo from-shell > /workspace/shell.txt"),
        ("read_file", json!({"path": "/workspace/shell.txt"})),
        ("read_file", json!({"path": format!("/workspace/{SECRET}")})),
        ("read_file", json!({"path": "/workspace/../etc/hostname"})),
        ("read_file", json!({"path": "/workspacex/form.txt"})),
    ];
    let (_, _, seen) = attack(&project, PERMISSIVE, turns).await;
    assert!(seen.contains("wrote 27 bytes to"), "{seen}");
    assert!(
        seen.contains("/workspace\\nwritten-by-the-sandbox-form"),
        "{seen}"
    );
    assert!(seen.contains("from-shell"), "{seen}");
    assert!(seen.contains("is denied by this project"), "{seen}");
    let hostname = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
    assert!(
        hostname.trim().is_empty() || !seen.contains(hostname.trim()),
        "{seen}"
    );
    // Both outside every grant: the broker refuses them before anything is opened.
    let last = seen.lines().last().unwrap_or_default();
    assert_eq!(
        last.matches("refused: fs.read: no-grant").count(),
        2,
        "{last}"
    );
}
