//! SQLite on a full disk, through the binary: `serve` keeps its data directory and store on a
//! 8 MiB tmpfs (bubblewrap's `--size`; its log is written elsewhere), and ingress requests of
//! 1 KB each arrive until it is full. A request the store could not record gets a clear answer
//! (a 503 saying to try again, never a 500 or a dropped connection), the server keeps serving,
//! and after it stops the file passes `PRAGMA integrity_check` and holds every run whose start
//! was acknowledged.

use std::process::Command;

const SCRIPT: &str = r#"
set -u
D=/tmp/switchboard-full-disk
cat >"$D/sb.toml" <<TOML
[server]
data_dir = "$D/data"
[store]
url = "sqlite://$D/sb.db"
[agents]
default = "echo"
max_per_actor = 100000
max_concurrent = 100000
[agents.echo]
[grants."http:fill"]
actions = ["runs:read", "runs:write", "agent:run:echo"]
channels = ["http:fill"]
TOML
SWITCHBOARD_INGRESS_TOKENS='{"fill-token-0123456789": {"subject": "fill", "channel": "http:fill"}}' \
  NO_COLOR=1 "$BIN" --config "$D/sb.toml" serve --listen "127.0.0.1:$PORT" >"$LOG/out" 2>"$LOG/err" &
pid=$!
for _ in $(seq 1 300); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/readyz")" = 200 ] && break
  sleep 0.05
done
text=$(head -c 1000 /dev/zero | tr '\0' 'x')
refused=0
for n in $(seq 1 2000); do
  body=$(curl -s --max-time 20 -H 'authorization: Bearer fill-token-0123456789' \
    -H 'accept: application/json' -d "fill $n $text" -w '\n%{http_code}' "http://127.0.0.1:$PORT/ingress")
  code=$(tail -n1 <<<"$body")
  case "$code" in
    2*) sed -n 's/.*"run_id":"\([^"]*\)".*/ack \1/p' <<<"$body" ;;
    *) echo "refused $code $(head -n -1 <<<"$body" | head -c 200)"; refused=$((refused + 1)) ;;
  esac
  [ "$refused" -ge 20 ] && break
done
echo "alive $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/healthz")"
kill -TERM "$pid"; wait "$pid"; echo "exit $?"
grep -c panicked "$LOG/err" | sed "s/^/panics /"; grep -o "error=[a-z:0-9-]*" "$LOG/err" | sort | uniq -c | sed "s/^/log /"
grep "a run could not be recorded" "$LOG/err" | grep -o "error=[a-z:0-9-]*" | sort | uniq -c | sed "s/^/refusal-log /"
python3 - "$D/sb.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
print("integrity", db.execute("PRAGMA integrity_check").fetchone()[0])
for (rid,) in db.execute("SELECT id FROM runs"):
    print("stored", rid)
PY
"#;

#[test]
fn a_full_disk_refuses_clearly_and_loses_nothing_acknowledged() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mount = "/tmp/switchboard-full-disk";
    std::fs::create_dir_all(mount).unwrap();
    // The server's log is kept off the full disk, so every line it writes is read back (a
    // log on the tmpfs would lose lines once it filled, and the test would read luck).
    let log = tempfile::tempdir().unwrap();
    let out = Command::new("bwrap")
        .args([
            "--dev-bind",
            "/",
            "/",
            "--size",
            "8388608",
            "--tmpfs",
            mount,
        ])
        .args(["--", "/bin/bash", "-c", SCRIPT])
        .env("BIN", env!("CARGO_BIN_EXE_switchboard"))
        .env("PORT", port.to_string())
        .env("LOG", log.path())
        .output()
        .expect("bubblewrap runs (apt-get install bubblewrap)");
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = said.lines().collect();
    // What failure messages show: everything but the hundreds of run ids.
    let summary = lines
        .iter()
        .copied()
        .filter(|l| !l.starts_with("ack ") && !l.starts_with("stored "))
        .collect::<Vec<_>>()
        .join("\n");
    let acked: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("ack "))
        .collect();
    let refused: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("refused "))
        .collect();
    let stored: std::collections::BTreeSet<&str> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("stored "))
        .collect();
    assert!(
        acked.len() > 20,
        "the disk filled too early: {summary}\n{stderr}"
    );
    assert!(
        !refused.is_empty(),
        "the disk never filled: {} acknowledged",
        acked.len()
    );
    for r in &refused {
        assert!(r.starts_with("503 "), "not a clear 503: {r}\n{summary}");
        assert!(r.contains("try again"), "{r}");
    }
    assert!(lines.contains(&"alive 200"), "{summary}");
    assert!(lines.contains(&"panics 0"), "{summary}");
    assert!(lines.contains(&"integrity ok"), "{summary}");
    // The operator's log names what happened by SQLite's code, as docs/operations.md says, on
    // the refusal itself (not only on a started run's later writes, which may all succeed).
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("refusal-log ") && l.ends_with("error=database:13")),
        "{summary}"
    );
    let lost: Vec<&&str> = acked.iter().filter(|id| !stored.contains(**id)).collect();
    assert!(lost.is_empty(), "acknowledged runs lost: {lost:?}");
    println!(
        "{} acknowledged, {} refused, all stored",
        acked.len(),
        refused.len()
    );
}
