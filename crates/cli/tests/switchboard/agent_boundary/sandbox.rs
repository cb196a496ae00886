//! The sandbox's walls: a stub's place, binds, system calls, abstract sockets, the OOM score.

use super::*;

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
    // The run's readers are told its sandbox could not be made; the cause is the operator's,
    // on the command line that started it.
    assert!(
        run.to_string()
            .contains("the agent's sandbox could not be made"),
        "{run} {events}"
    );
    assert!(
        !format!("{run}{events}").contains("bind a directory that holds neither"),
        "{run} {events}"
    );
    assert!(
        said.contains("bind a directory that holds neither"),
        "{said}"
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
                       ("unshare", 272, (0x10000000,)), ("clone3", 435, (0, 0)),
                       ("vsock", 41, (40, 1, 0))]:
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
        "vsock",
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
