//! An HTTP pass over every route of `serve` with every surface on (ingress and MCP with a
//! token map, Slack against a fake Web API, Access with a key set): 1,500 requests generated
//! from a fixed seed (method, route, query, credentials good and bad, headers, bodies taken
//! from the fuzz corpora, random bytes and JSON), eight at a time. No answer is a 5xx but the
//! documented 503, none hangs, and the server's log holds no panic; it still answers after. A
//! connection closed without an answer (the server answered early, before a body it did not
//! need was sent whole) is no failure, up to 1% of the requests.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use access_api::testing::{SigningKey, claims, key_set};
use serde_json::{Value, json};
use server::fuzzing::SeededRng as Rng;
use test_support::slack::{FakeSlack, callback, signed_headers};

const ISSUER: &str = "https://issuer.test";
const AUDIENCE: &str = "aud-http-pass";
const TOKEN: &str = "http-pass-token-0123456789";
const SIGNING: &str = "http-pass-signing-secret";
const REQUESTS: usize = 1_500;
const SEED: u64 = 0x5eed_2026_1205;

/// Every corpus input of the fuzz targets: bodies shaped like what each surface reads.
fn corpus() -> Vec<Vec<u8>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .flat_map(|d| std::fs::read_dir(d.unwrap().path()).unwrap())
        .map(|f| f.unwrap().path())
        .collect();
    files.sort();
    files.iter().map(|f| std::fs::read(f).unwrap()).collect()
}

fn random_json(rng: &mut Rng, depth: usize) -> Value {
    match rng.below(if depth > 2 { 5 } else { 7 }) {
        0 => Value::Null,
        1 => json!(rng.next_u64() as i64),
        2 => json!(rng.below(2) == 0),
        3 => {
            let n = rng.below(40);
            json!(String::from_utf8_lossy(&rng.bytes(n)).into_owned())
        }
        4 => json!(
            *rng.pick(&[
                "runs_list",
                "2.0",
                "tools/call",
                "initialize",
                "",
                "<@UBOT> runs list"
            ])
            .unwrap()
        ),
        5 => Value::Array(
            (0..rng.below(4))
                .map(|_| random_json(rng, depth + 1))
                .collect(),
        ),
        _ => {
            let keys = [
                "jsonrpc",
                "method",
                "id",
                "params",
                "type",
                "event",
                "text",
                "run_id",
                "limit",
                "cursor",
                "name",
                "arguments",
                "payload",
            ];
            let mut map = serde_json::Map::new();
            for _ in 0..rng.below(5) {
                map.insert(
                    (*rng.pick(&keys).unwrap()).to_owned(),
                    random_json(rng, depth + 1),
                );
            }
            Value::Object(map)
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_requests_on_every_route_get_no_5xx_and_no_panic() {
    let fake = FakeSlack::new();
    let api_url = fake.serve().await.unwrap();
    let key = SigningKey::generate("pass-key");
    let dir = tempfile::tempdir().unwrap();
    let jwks = dir.path().join("jwks.json");
    std::fs::write(&jwks, key_set(&[&key]).to_string()).unwrap();
    let config = format!(
        "[server]\ndata_dir = \"{data}\"\n[store]\nurl = \"sqlite://{db}\"\n[agents]\ndefault = \"echo\"\nmax_per_actor = 1000\nmax_concurrent = 1000\n[agents.echo]\n\
         [slack]\napi_url = \"{api_url}\"\n\
         [access]\nissuer = \"{ISSUER}\"\naudience = \"{AUDIENCE}\"\njwks_file = {jwks:?}\n",
        data = dir.path().join("data").display(),
        db = dir.path().join("sb.db").display(),
        jwks = jwks.display().to_string(),
    );
    std::fs::write(dir.path().join("switchboard.toml"), &config).unwrap();
    let tokens = json!({TOKEN: {"subject": "passbot", "channel": "http:pass"}}).to_string();
    let log = dir.path().join("serve.log");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"));
    cmd.current_dir(dir.path())
        .env_remove("SWITCHBOARD_CONFIG")
        .env("SWITCHBOARD_INGRESS_TOKENS", &tokens)
        .env("SLACK_BOT_TOKEN", "xoxb-http-pass")
        .env("SLACK_SIGNING_SECRET", SIGNING)
        .env("NO_COLOR", "1")
        .env("RUST_BACKTRACE", "1")
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stderr(std::fs::File::create(&log).unwrap());
    let (child, addr, summary) = common::spawn_serve(cmd);
    let _server = common::Replica {
        child,
        base: format!("http://{addr}"),
    };
    for surface in ["events at POST /slack/events", "Access JWTs from", "/mcp"] {
        assert!(summary.contains(surface), "{surface}: {summary}");
    }
    let base = format!("http://{addr}");
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    // A real run, so routes naming a run id reach one.
    let started: Value = client
        .post(format!("{base}/ingress"))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body(json!({"text": "ask hello"}).to_string())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .map(|t| serde_json::from_str(&t).unwrap_or(Value::Null))
        .unwrap();
    let run = started["run_id"]
        .as_str()
        .unwrap_or("01JABCDEFGHJKMNPQRSTVWXYZ0")
        .to_owned();
    let good_jwt = key.sign(&claims(ISSUER, AUDIENCE, "person@example.com"));
    let foreign_jwt = SigningKey::generate("pass-key").sign(&claims(ISSUER, AUDIENCE, "x"));
    let corpus = corpus();
    let mut rng = Rng(SEED);
    let mut planned = Vec::with_capacity(REQUESTS);
    for _ in 0..REQUESTS {
        let id = rng
            .pick(&[
                run.as_str(),
                "01JABCDEFGHJKMNPQRSTVWXYZ0",
                "x",
                "%00",
                "..%2f..",
                &"9".repeat(300),
            ])
            .unwrap()
            .to_string();
        let routes = [
            ("GET", "/healthz".to_owned()),
            ("GET", "/readyz".to_owned()),
            ("POST", "/ingress".to_owned()),
            ("POST", "/mcp".to_owned()),
            ("GET", "/mcp".to_owned()),
            ("POST", "/slack/events".to_owned()),
            ("POST", "/slack/interactions".to_owned()),
            ("GET", "/api/runs.list".to_owned()),
            ("GET", "/api/runs.get".to_owned()),
            ("POST", "/api/runs.stop".to_owned()),
            ("GET", format!("/api/{id}")),
            ("GET", "/runs".to_owned()),
            ("GET", "/runs/scheduled".to_owned()),
            ("GET", "/runs/assets/style.css".to_owned()),
            ("GET", format!("/runs/{id}")),
            ("GET", format!("/runs/{id}/events")),
            ("GET", format!("/runs/{id}/friction")),
            ("POST", format!("/runs/{id}/stop")),
            ("POST", format!("/runs/{id}/approvals/{id}")),
            ("GET", "/".to_owned()),
            ("GET", "/nope".to_owned()),
            ("GET", "/traces".to_owned()),
        ];
        let (own_method, route) = rng.pick(&routes).unwrap().clone();
        let mut path = route;
        if rng.below(4) == 0 {
            let query = rng
                .pick(&[
                    "?limit=-1",
                    "?limit=99999999999999999999",
                    "?cursor=%ff%fe",
                    "?run_id=x&run_id=y",
                    "?since=abc",
                    "?channel=slack:C1&status=running",
                    "?%zz",
                ])
                .unwrap();
            path.push_str(query);
        }
        // Mostly the route's own method, so most requests reach what reads them.
        let method = if rng.below(4) == 0 {
            *rng.pick(&["GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH"])
                .unwrap()
        } else {
            own_method
        };
        let body: Vec<u8> = match rng.below(5) {
            0 => Vec::new(),
            1 => rng.pick(&corpus).unwrap().clone(),
            2 => {
                let n = rng.below(4096);
                rng.bytes(n)
            }
            3 => random_json(&mut rng, 0).to_string().into_bytes(),
            _ => callback("EvPass", random_json(&mut rng, 1)),
        };
        let auth = rng.below(6);
        let content_type = *rng
            .pick(&[
                "application/json",
                "application/x-www-form-urlencoded",
                "text/plain",
                "application/json; charset=utf-8",
                "multipart/form-data; boundary=x",
                "\u{7f}",
            ])
            .unwrap();
        let origin = *rng
            .pick(&["", "", "http://evil.example", "null", "http://localhost"])
            .unwrap();
        let signed = rng.below(2) == 0;
        planned.push((
            method.to_owned(),
            path,
            body,
            auth,
            content_type,
            origin,
            signed,
        ));
    }
    let mut failures = Vec::new();
    let mut closed_early = Vec::new();
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    for chunk in planned.chunks(8) {
        let mut pending = Vec::new();
        for (method, path, body, auth, content_type, origin, signed) in chunk.iter().cloned() {
            let mut req = client.request(method.parse().unwrap(), format!("{base}{path}"));
            req = match auth {
                0 => req,
                1 => req.bearer_auth(TOKEN),
                2 => req.bearer_auth("not-a-token"),
                3 => req.header("cf-access-jwt-assertion", good_jwt.clone()),
                4 => req.header("cf-access-jwt-assertion", foreign_jwt.clone()),
                _ => req.header("cookie", format!("CF_Authorization={}", "a.b.c")),
            };
            if let Ok(value) = reqwest::header::HeaderValue::from_str(content_type) {
                req = req.header("content-type", value);
            }
            if !origin.is_empty() {
                req = req.header("origin", origin);
            }
            if signed && path.starts_with("/slack") {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_secs() as i64;
                for (k, v) in signed_headers(SIGNING, now, &body) {
                    req = req.header(k, v);
                }
            }
            let what = format!("{method} {path}");
            pending.push(tokio::spawn(async move {
                (
                    what,
                    req.body(body).send().await.map(|r| r.status().as_u16()),
                )
            }));
        }
        for p in pending {
            let (what, answer) = p.await.unwrap();
            match answer {
                Ok(status) => {
                    *statuses.entry(status).or_default() += 1;
                    if status >= 500 && status != 503 {
                        failures.push(format!("{what}: {status}"));
                    }
                }
                // A hang is a failure; a connection the server closed after answering early
                // (a body it had no use for, still being sent) is counted apart, below.
                Err(e) if e.is_timeout() => failures.push(format!("{what}: {e}")),
                Err(e) => closed_early.push(format!("{what}: {e:?}")),
            }
        }
    }
    let alive = client.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(alive.status(), 200);
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        !logged.contains("panicked"),
        "a panic in the log:\n{logged}"
    );
    assert!(
        failures.is_empty(),
        "{} failures: {failures:#?}\nstatuses {statuses:?}",
        failures.len()
    );
    // The server is alive and logged no panic (above), so a closed connection was no crash;
    // more than 1% of them would still say something is wrong.
    assert!(
        closed_early.len() * 100 <= REQUESTS,
        "connections closed before an answer: {closed_early:#?}\nstatuses {statuses:?}"
    );
    println!(
        "{REQUESTS} requests, statuses {statuses:?}, {} closed early: {closed_early:?}",
        closed_early.len()
    );
    drop(fake);
}
