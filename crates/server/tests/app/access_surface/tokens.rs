//! Identity: which Access tokens verify, how the key set is fetched and kept, what a refusal logs.

use super::*;

/// Every way a token can be wrong is the same 401; the good forms pass.
#[tokio::test]
async fn tokens_are_verified_and_every_refusal_looks_alike() {
    let h = start(Options::default()).await;
    let good = |sub: &str| claims(ISSUER, AUDIENCE, sub);
    let with = |mut c: Value, k: &str, v: Value| {
        c[k] = v;
        c
    };
    let hs256 = {
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(key().kid.clone());
        jsonwebtoken::encode(
            &header,
            &good("mallory"),
            &EncodingKey::from_secret(&key().public_der).unwrap(),
        )
        .unwrap()
    };
    let none = {
        use base64::Engine;
        let b = |v: Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
        format!(
            "{}.{}.",
            b(json!({"alg": "none", "kid": key().kid})),
            b(good("mallory"))
        )
    };
    let unknown_kid = {
        let mut header = Header::new(Algorithm::RS256);
        header.kid = Some("not-a-key".into());
        jsonwebtoken::encode(&header, &good("mallory"), &key().encoding).unwrap()
    };
    let refused: Vec<(&str, String)> = vec![
        (
            "expired",
            key().sign(&with(good("a"), "exp", json!(now() - 3600))),
        ),
        (
            "not yet valid",
            key().sign(&with(good("a"), "nbf", json!(now() + 3600))),
        ),
        (
            "wrong audience",
            key().sign(&with(good("a"), "aud", json!(["someone-else"]))),
        ),
        (
            "wrong issuer",
            key().sign(&with(good("a"), "iss", json!("https://evil.test"))),
        ),
        ("alg none", none),
        ("HS256 with the public key as secret", hs256),
        ("unknown kid", unknown_kid),
        (
            "signed by a key not in the set",
            other_key().sign(&good("a")),
        ),
        ("a tampered payload", {
            let t = token_for("alice");
            let mut parts: Vec<String> = t.split('.').map(str::to_owned).collect();
            let forged = token_for("fleet");
            parts[1] = forged.split('.').nth(1).unwrap().to_owned();
            parts.join(".")
        }),
        ("malformed header", "not.a.jwt".to_owned()),
        ("garbage", "garbage".to_owned()),
        (
            "no subject",
            key().sign(&json!({"iss": ISSUER, "aud": AUDIENCE, "exp": now() + 60})),
        ),
        (
            "a session posing as a service token",
            token_for("svc:deploy"),
        ),
        (
            "no exp",
            key().sign(&json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "a"})),
        ),
    ];
    let baseline = h.get("/api/runs.list", None).await;
    assert_eq!(baseline.status, 401);
    for (case, token) in &refused {
        let a = h.get("/api/runs.list", Some(token)).await;
        assert_eq!(a, baseline, "{case}");
    }
    // Good tokens: the header, the cookie alone, an `aud` string, a service token.
    let a = h.get("/api/runs.list", Some(&token_for("alice"))).await;
    assert_eq!(a.status, 200, "{}", a.body);
    let cookie = h
        .http
        .client
        .get(format!("{}/api/runs.list", h.http.base))
        .header(
            "cookie",
            format!("theme=dark; CF_Authorization={}", token_for("alice")),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(cookie.status(), 200);
    let aud_string = key().sign(&with(good("alice"), "aud", json!(AUDIENCE)));
    assert_eq!(h.get("/api/runs.list", Some(&aud_string)).await.status, 200);
    let service = key().sign(&json!({"iss": ISSUER, "aud": [AUDIENCE], "sub": "", "common_name": "deploy.access", "exp": now() + 60}));
    // A service token holds nothing until granted: its runs.list is a 🚫, which proves who it is.
    let s = h.get("/api/runs.list", Some(&service)).await;
    assert_eq!(s.status, 403, "{}", s.body);
    let line = h.audit.lines().into_iter().last().unwrap();
    assert_eq!(line.actor.as_str(), "access:svc:deploy.access");
}

/// One identity per request: two `CF_Authorization` cookies (a sibling subdomain can set one
/// beside the viewer's), in one header or two, or the assertion header twice, are refused
/// like a bad token, whichever comes first and even when both are good.
#[tokio::test]
async fn two_tokens_in_one_request_are_refused() {
    let h = start(Options::default()).await;
    let (alice, mallory) = (token_for("alice"), token_for("mallory"));
    let send = |headers: Vec<(&'static str, String)>| {
        let mut req = h.http.client.get(format!("{}/api/runs.list", h.http.base));
        for (k, v) in headers {
            req = req.header(k, v);
        }
        async move { Answer::read(req.send().await.unwrap()).await }
    };
    let baseline = h.get("/api/runs.list", None).await;
    assert_eq!(baseline.status, 401);
    let cases: Vec<(&str, Vec<(&'static str, String)>)> = vec![
        (
            "two cookies in one header",
            vec![(
                "cookie",
                format!("CF_Authorization={mallory}; theme=dark; CF_Authorization={alice}"),
            )],
        ),
        (
            "two cookie headers",
            vec![
                ("cookie", format!("CF_Authorization={alice}")),
                ("cookie", format!("CF_Authorization={mallory}")),
            ],
        ),
        (
            "the same good cookie twice",
            vec![(
                "cookie",
                format!("CF_Authorization={alice}; CF_Authorization={alice}"),
            )],
        ),
        (
            "the header twice",
            vec![
                ("cf-access-jwt-assertion", alice.clone()),
                ("cf-access-jwt-assertion", mallory.clone()),
            ],
        ),
    ];
    for (case, headers) in cases {
        assert_eq!(send(headers).await, baseline, "{case}");
    }
    // The header stands over a cookie (a sibling site can set a cookie, not a header): a
    // service token's header with a session's cookie is the service token (a 🚫 for it).
    let service = key().sign(&json!({"iss": ISSUER, "aud": [AUDIENCE], "sub": "", "common_name": "deploy.access", "exp": now() + 60}));
    let one = send(vec![
        ("cf-access-jwt-assertion", service),
        ("cookie", format!("CF_Authorization={alice}")),
    ])
    .await;
    assert_eq!(one.status, 403, "{}", one.body);
    let line = h.audit.lines().into_iter().last().unwrap();
    assert_eq!(line.actor.as_str(), "access:svc:deploy.access");
}

/// An unknown `kid` fetches the key set once; a second unknown `kid` within the minute does not.
#[tokio::test]
async fn unknown_kids_fetch_at_most_once_a_minute() {
    let h = start(Options::default()).await;
    let with_kid = |kid: &str| {
        let mut header = Header::new(Algorithm::RS256);
        header.kid = Some(kid.into());
        jsonwebtoken::encode(&header, &claims(ISSUER, AUDIENCE, "a"), &key().encoding).unwrap()
    };
    assert_eq!(h.jwks.hits(), 0);
    assert_eq!(
        h.get("/api/runs.list", Some(&with_kid("nope-1")))
            .await
            .status,
        401
    );
    assert_eq!(h.jwks.hits(), 1, "the first unknown kid fetches");
    for i in 0..20 {
        let a = h
            .get("/api/runs.list", Some(&with_kid(&format!("flood-{i}"))))
            .await;
        assert_eq!(a.status, 401);
    }
    assert_eq!(
        h.jwks.hits(),
        1,
        "a flood of unknown kids costs the issuer nothing more"
    );
    assert_eq!(
        h.get("/api/runs.list", Some(&token_for("alice")))
            .await
            .status,
        200
    );
    assert_eq!(h.jwks.hits(), 1);
}

/// The key set's endpoint down: within the TTL the keys already held still verify (a token
/// never seen before included), a token of a `kid` they lack is refused; past the TTL every
/// token is refused (a key set that cannot be fetched again is not kept).
#[tokio::test]
async fn a_key_set_endpoint_down_serves_the_held_keys_then_fails_closed() {
    let h = start(Options {
        ttl_seconds: 2,
        ..Options::default()
    })
    .await;
    let fresh = |sub: &str| {
        let mut c = claims(ISSUER, AUDIENCE, sub);
        c["jti"] = serde_json::json!(format!("{sub}-{}", h.jwks.hits()));
        key().sign(&c)
    };
    assert_eq!(
        h.get("/api/runs.list", Some(&fresh("alice"))).await.status,
        200
    );
    h.jwks.set_down(true);
    assert_eq!(
        h.get("/api/runs.list", Some(&fresh("bob"))).await.status,
        200
    );
    let foreign = other_key().sign(&claims(ISSUER, AUDIENCE, "carol"));
    assert_eq!(h.get("/api/runs.list", Some(&foreign)).await.status, 401);
    tokio::time::sleep(Duration::from_millis(2_300)).await;
    assert_eq!(
        h.get("/api/runs.list", Some(&fresh("dave"))).await.status,
        401
    );
}

/// A token verified before a rotation is refused once the refreshed set lacks its key.
#[tokio::test]
async fn a_key_removed_from_the_set_stops_verifying_after_the_ttl() {
    let h = start(Options {
        ttl_seconds: 1,
        ..Options::default()
    })
    .await;
    let token = token_for("alice");
    assert_eq!(h.get("/api/runs.list", Some(&token)).await.status, 200);
    assert_eq!(h.get("/api/runs.list", Some(&token)).await.status, 200);
    assert_eq!(h.jwks.hits(), 1, "a verified token is remembered");
    h.jwks.replace(&[other_key()]);
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    assert_eq!(h.get("/api/runs.list", Some(&token)).await.status, 401);
    let new = other_key().sign(&claims(ISSUER, AUDIENCE, "alice"));
    assert_eq!(h.get("/api/runs.list", Some(&new)).await.status, 200);
}

/// Refusals log a reason token, never the token itself.
#[test]
fn refusal_log_lines_carry_a_reason_and_never_the_token() {
    let captured = test_support::log::CapturedLog::default();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _guard = captured.install();
    let expired = {
        let mut c = claims(ISSUER, AUDIENCE, "alice");
        c["exp"] = json!(now() - 3600);
        key().sign(&c)
    };
    runtime.block_on(async {
        let h = start(Options::default()).await;
        assert_eq!(h.get("/api/runs.list", Some(&expired)).await.status, 401);
    });
    let log = captured.text();
    assert!(
        log.contains("[access]") && log.contains("reason=expired"),
        "{log}"
    );
    let signature = expired.rsplit('.').next().unwrap();
    assert!(
        !log.contains(signature) && !log.contains(&expired[..40]),
        "the token reached the log"
    );
}
