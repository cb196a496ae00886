//! The forwarder inside a sandbox (`switchboard sandbox-forward`): it listens on the
//! sandbox's own loopback, starts the agent's program, relays each connection to the run's
//! proxy socket, and exits with the program's status when the program exits. It decides
//! nothing: every decision is the server's, on the socket's other side.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;

use tokio::net::{TcpListener, UnixStream};

/// The `switchboard` binary this process is, once its `main` said so: the forwarder a
/// sandbox runs. Unset (a library's test binary), a command agent whose network goes through
/// the broker does not start.
static BINARY: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// Called once by the binary's `main` with its own path.
pub fn set_binary(path: std::path::PathBuf) {
    let _ = BINARY.set(path);
}

/// The forwarder's binary, when this process is the `switchboard` binary.
pub fn binary() -> Option<std::path::PathBuf> {
    BINARY.get().cloned()
}

/// What the forwarder's own failures start with (the command back end reads a first line
/// starting so as the sandbox failing, not the program).
pub const SAID_BY: &str = "sandbox-forward: ";

/// Listens on `127.0.0.1:port`, runs `program`, relays to `socket`; the program's exit
/// status (128 + the signal's number when a signal ended it), or 125 when nothing could
/// start.
pub async fn run(socket: &Path, port: u16, program: &[OsString]) -> i32 {
    let listener = match TcpListener::bind(("127.0.0.1", port)).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("{SAID_BY}cannot listen on 127.0.0.1:{port}: {e}");
            return 125;
        }
    };
    let Some((name, args)) = program.split_first() else {
        eprintln!("{SAID_BY}no program to run");
        return 125;
    };
    let mut child = match tokio::process::Command::new(name).args(args).spawn() {
        Ok(child) => child,
        Err(e) => {
            eprintln!("{SAID_BY}cannot start {}: {e}", name.to_string_lossy());
            return 125;
        }
    };
    loop {
        tokio::select! {
            status = child.wait() => {
                return match status {
                    Ok(s) => s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)),
                    Err(_) => 125,
                };
            }
            accepted = listener.accept() => {
                if let Ok((mut tcp, _)) = accepted {
                    let socket = socket.to_owned();
                    tokio::spawn(async move {
                        if let Ok(mut unix) = UnixStream::connect(&socket).await {
                            let _ = tokio::io::copy_bidirectional_with_sizes(&mut tcp, &mut unix, super::RELAY_BUFFER, super::RELAY_BUFFER).await;
                        }
                    });
                }
            }
        }
    }
}
