//! Claude Code's `WebFetch` through the run's proxy: a TLS origin on loopback the broker's
//! grants name, and the run's taint stored before the model reads what it returned.

use super::*;

/// A TLS origin on loopback (a certificate for 127.0.0.1 made with openssl, served by
/// Python): its port, its certificate, and the request lines it served.
struct TlsOrigin {
    port: u16,
    cert: PathBuf,
    child: std::process::Child,
    log: PathBuf,
}

impl TlsOrigin {
    fn start(dir: &Path, body: &str) -> TlsOrigin {
        let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
        let made = Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            ])
            .args([
                "-subj",
                "/CN=127.0.0.1",
                "-addext",
                "subjectAltName=IP:127.0.0.1",
            ])
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .output()
            .unwrap();
        assert!(
            made.status.success(),
            "{}",
            String::from_utf8_lossy(&made.stderr)
        );
        let log = dir.join("origin.log");
        let script = format!(
            r#"
import http.server, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = {body:?}.encode()
        self.send_response(200)
        self.send_header("content-type", "text/plain")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        with open({log:?}, "a") as f:
            f.write(self.requestline + "\n")
s = http.server.HTTPServer(("127.0.0.1", 0), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain({cert:?}, {key:?})
s.socket = ctx.wrap_socket(s.socket, server_side=True)
print(s.server_address[1], flush=True)
s.serve_forever()
"#,
            log = log.display().to_string(),
            cert = cert.display().to_string(),
            key = key.display().to_string(),
        );
        let mut child = Command::new("python3")
            .arg("-c")
            .arg(script)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        TlsOrigin {
            port: line.trim().parse().unwrap(),
            cert,
            child,
            log,
        }
    }

    fn served(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for TlsOrigin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `WebFetch` a grant marks untrusted: the page is fetched through the run's proxy, and the
/// run's taint is stored before the request that carries the result reaches the model.
#[tokio::test(flavor = "multi_thread")]
async fn taint_from_a_fetch_is_recorded_before_the_model_reads_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let marker = random_marker();
    let origin = TlsOrigin::start(dir.path(), &format!("page text {marker}"));
    let api = MessagesApi::serve(vec![
        Reply::Tool(
            "WebFetch",
            json!({"url": format!("https://127.0.0.1:{}/page", origin.port), "prompt": "what does it say"}),
        ),
        Reply::Text("finished".to_owned()),
    ])
    .await;
    let grant = format!(
        "[[agent_grants]]\nid = \"page\"\ntool = \"http_fetch\"\nhosts = [\"127.0.0.1:{}\"]\nmode = \"auto\"\nuntrusted = true\n",
        origin.port
    );
    let setup = Setup::new(
        &api,
        "{ action = \"net.fetch\", decision = \"allow\" }",
        &grant,
    );
    // Claude Code trusts the origin's certificate (NODE_EXTRA_CA_CERTS, bound in read-only).
    let config = std::fs::read_to_string(setup.config())
        .unwrap()
        .replace(
            "[agents]\n",
            "[agents]\nenv_allow = [\"PATH\", \"NODE_EXTRA_CA_CERTS\"]\n",
        )
        .replace(
            "model = \"claude-scripted\"\n",
            &format!(
                "model = \"claude-scripted\"\nsandbox_read_only = [\"{}\"]\n",
                origin.cert.display()
            ),
        );
    std::fs::write(setup.config(), config).unwrap();
    let cert = origin.cert.clone();
    let (outcome, setup) = tokio::task::spawn_blocking(move || {
        let out = setup
            .command()
            .args(["ask", "--json", "fetch it"])
            .env("NODE_EXTRA_CA_CERTS", &cert)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let outcome: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        (outcome, setup)
    })
    .await
    .unwrap();
    assert!(
        origin.served().contains("GET /page"),
        "{outcome}\n{:?}",
        api.tool_results()
    );
    let events = setup.events(&run_id(&outcome));
    let taint = events
        .iter()
        .find(|e| e["kind"] == "taint")
        .unwrap_or_else(|| panic!("no taint event: {events:?}"));
    assert!(
        taint["body"]
            .as_str()
            .unwrap()
            .contains("\"untrusted\":true"),
        "{taint}"
    );
    let stored = SystemTime::UNIX_EPOCH + Duration::from_micros(taint["at"].as_u64().unwrap());
    let read = api
        .first_result_holding("")
        .unwrap_or_else(|| panic!("no result reached the model: {:?}", api.tool_results()));
    assert!(
        stored <= read,
        "the taint was stored after the model read the result"
    );
    // The page itself first reaches a model in WebFetch's own summarising request, during the
    // call: the taint was stored before that too (it rises when the call is allowed).
    let page = api
        .seen()
        .into_iter()
        .find(|s| s.body.to_string().contains(&marker))
        .unwrap_or_else(|| panic!("the page never reached the model"));
    assert!(
        stored <= page.at,
        "the taint was stored after the page reached a model"
    );
}
