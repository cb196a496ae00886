//! decide and redecide, case by case (matching by tool, path, host and mode, and the winner's mode).

use crate::support::build::*;
use crate::support::oracle::{Expected, observed};
use broker::{DataClass, DenyReason, Mode, Outcome, SessionState, decide, redecide};

const CLEAN: SessionState = SessionState {
    taint: DataClass::Private,
    untrusted: false,
};

fn allowed(grant: &str, path: Option<&str>) -> Expected {
    Expected::Allowed {
        grant: grant.into(),
        matched_path: path.map(String::from),
        class: DataClass::Private,
        untrusted: false,
    }
}

fn denied(reason: DenyReason) -> Expected {
    Expected::Denied {
        reason,
        grant: None,
    }
}

#[test]
fn decide_table() {
    use DenyReason::*;
    let cases: Vec<(
        &str,
        broker::ToolGrants,
        broker::ToolRequest,
        SessionState,
        i64,
        Expected,
    )> = vec![
        (
            "an unknown tool is NoGrant and its arguments are not parsed",
            set([grant("a", "shell")]),
            request("restrict_self", "not json"),
            CLEAN,
            0,
            denied(NoGrant),
        ),
        (
            "bad arguments",
            set([grant("a", "read_file").paths(&["/w"])]),
            request("read_file", r#"{"path":"w/a"}"#),
            CLEAN,
            0,
            denied(InvalidArguments),
        ),
        (
            "a read inside a grant's path, the longest path matched",
            set([grant("a", "read_file").paths(&["/w", "/w/src", "/x"])]),
            read("/w/src/main.rs"),
            CLEAN,
            0,
            allowed("a", Some("/w/src")),
        ),
        (
            "a .. cannot climb out of the grant",
            set([grant("a", "read_file").paths(&["/w"])]),
            read("/w/../etc/passwd"),
            CLEAN,
            0,
            denied(NoGrant),
        ),
        (
            "a grant for another tool plays no part",
            set([grant("a", "write_file").paths(&["/"])]),
            read("/w/a"),
            CLEAN,
            0,
            denied(NoGrant),
        ),
        (
            "a write to the grant's own path is not covered",
            set([grant("a", "write_file").paths(&["/w/notes.md"])]),
            write("/w/notes.md"),
            CLEAN,
            0,
            denied(NoGrant),
        ),
        (
            "a write below it is",
            set([grant("a", "write_file").paths(&["/w"])]),
            write("/w/notes.md"),
            CLEAN,
            0,
            allowed("a", Some("/w")),
        ),
        (
            "deny beats auto whatever the paths",
            set([
                grant("a", "read_file").paths(&["/w/src/deep"]),
                grant("z", "read_file").paths(&["/w"]).mode(Mode::Deny),
            ]),
            read("/w/src/deep/x"),
            CLEAN,
            0,
            Expected::Denied {
                reason: DeniedByGrant,
                grant: Some("z".into()),
            },
        ),
        (
            "within a mode, the longer matched path wins",
            set([
                grant("a", "read_file").paths(&["/w"]).mode(Mode::Ask),
                grant("b", "read_file").paths(&["/w/src"]).mode(Mode::Ask),
            ]),
            read("/w/src/x"),
            CLEAN,
            0,
            Expected::Ask {
                grant: "b".into(),
                matched_path: Some("/w/src".into()),
                class: DataClass::Private,
                untrusted: false,
            },
        ),
        (
            "then the lowest id",
            set([
                grant("b", "read_file").paths(&["/w"]),
                grant("a", "read_file").paths(&["/w"]),
            ]),
            read("/w/x"),
            CLEAN,
            0,
            allowed("a", Some("/w")),
        ),
        (
            "ask beats auto",
            set([
                grant("a", "read_file").paths(&["/w/src"]),
                grant("b", "read_file").paths(&["/w"]).mode(Mode::Ask),
            ]),
            read("/w/src/x"),
            CLEAN,
            0,
            Expected::Ask {
                grant: "b".into(),
                matched_path: Some("/w".into()),
                class: DataClass::Private,
                untrusted: false,
            },
        ),
        (
            "a shell call without cwd: only a grant without paths",
            set([grant("a", "shell").paths(&["/w"]), grant("b", "shell")]),
            request("shell", r#"{"command":"ls"}"#),
            CLEAN,
            0,
            allowed("b", None),
        ),
        (
            "a shell call with cwd: only a grant with paths",
            set([grant("a", "shell").paths(&["/w"]), grant("b", "shell")]),
            request("shell", r#"{"command":"ls","cwd":"/w/src"}"#),
            CLEAN,
            0,
            allowed("a", Some("/w")),
        ),
        (
            "git is covered through cwd",
            set([grant("g", "git").paths(&["/w"])]),
            request("git", r#"{"subcommand":"status","cwd":"/w"}"#),
            CLEAN,
            0,
            allowed("g", Some("/w")),
        ),
        (
            "a host pattern covers subdomains",
            set([grant("n", "http_fetch").hosts(&["*.example.com"])]),
            fetch("https://api.EXAMPLE.com/v1"),
            CLEAN,
            0,
            allowed("n", None),
        ),
        (
            "and not a look-alike",
            set([grant("n", "http_fetch").hosts(&["example.com", "*.example.com"])]),
            fetch("https://example.com.evil/x"),
            CLEAN,
            0,
            denied(NoGrant),
        ),
        (
            "an MCP server's tools by name or by the server's star",
            set([grant("m", "mcp.github.*"), grant("o", "mcp.other.list")]),
            request(
                "mcp",
                r#"{"server":"github","tool":"list_issues","arguments":{}}"#,
            ),
            CLEAN,
            0,
            allowed("m", None),
        ),
        (
            "another server's tool is not covered",
            set([grant("o", "mcp.other.list_issues")]),
            request("mcp", r#"{"server":"github","tool":"list_issues"}"#),
            CLEAN,
            0,
            denied(NoGrant),
        ),
        (
            "expired at the instant",
            set([grant("a", "read_file").paths(&["/w"]).expires(10)]),
            read("/w/x"),
            CLEAN,
            10,
            denied(GrantExpired),
        ),
        (
            "not before",
            set([grant("a", "read_file").paths(&["/w"]).expires(10)]),
            read("/w/x"),
            CLEAN,
            9,
            allowed("a", Some("/w")),
        ),
        (
            "taint above the grant's ceiling",
            set([grant("a", "http_fetch")
                .hosts(&["a.com"])
                .max_taint(DataClass::Sensitive)]),
            fetch("https://a.com"),
            SessionState {
                taint: DataClass::Secret,
                untrusted: false,
            },
            0,
            denied(TaintTooHigh),
        ),
        (
            "taint at the ceiling is fine",
            set([grant("a", "http_fetch")
                .hosts(&["a.com"])
                .max_taint(DataClass::Sensitive)]),
            fetch("https://a.com"),
            SessionState {
                taint: DataClass::Sensitive,
                untrusted: false,
            },
            0,
            allowed("a", None),
        ),
        (
            "expired and tainted at once remembers neither",
            set([grant("a", "read_file")
                .paths(&["/w"])
                .expires(5)
                .max_taint(DataClass::Private)]),
            read("/w/x"),
            SessionState {
                taint: DataClass::Secret,
                untrusted: false,
            },
            9,
            denied(NoGrant),
        ),
        (
            "expiry is named before taint",
            set([
                grant("a", "read_file")
                    .paths(&["/w"])
                    .max_taint(DataClass::Private),
                grant("b", "read_file").paths(&["/w"]).expires(5),
            ]),
            read("/w/x"),
            SessionState {
                taint: DataClass::Secret,
                untrusted: false,
            },
            9,
            denied(GrantExpired),
        ),
        (
            "the label is over every grant left, not the winner alone",
            set([
                grant("a", "read_file").paths(&["/w/src"]),
                grant("b", "read_file")
                    .paths(&["/w"])
                    .result_class(DataClass::Secret)
                    .untrusted(),
                grant("c", "read_file")
                    .paths(&["/w"])
                    .result_class(DataClass::Sensitive)
                    .expires(1),
            ]),
            read("/w/src/x"),
            CLEAN,
            5,
            Expected::Allowed {
                grant: "a".into(),
                matched_path: Some("/w/src".into()),
                class: DataClass::Secret,
                untrusted: true,
            },
        ),
        (
            "an untrusted session is not an input to matching",
            set([grant("a", "read_file").paths(&["/w"])]),
            read("/w/x"),
            SessionState {
                taint: DataClass::Private,
                untrusted: true,
            },
            0,
            allowed("a", Some("/w")),
        ),
    ];
    for (what, grants, request, state, now, want) in cases {
        let outcome = decide(request, &grants, state, at(now));
        assert_eq!(observed(&outcome), want, "{what}");
    }
}

#[test]
fn a_deny_names_its_grant_and_the_grant_text() {
    let deny = grant("no-secrets", "read_file")
        .paths(&["/w/.env"])
        .mode(Mode::Deny);
    let sha = deny.sha256();
    let grants = set([deny, grant("all", "read_file").paths(&["/w"])]);
    let Outcome::Denied(denial) = decide(read("/w/.env"), &grants, CLEAN, at(0)) else {
        panic!("not denied");
    };
    assert_eq!(denial.grant.as_deref(), Some("no-secrets"));
    assert_eq!(denial.grant_sha256, Some(sha));
    let Outcome::Denied(other) = decide(read("/x"), &grants, CLEAN, at(0)) else {
        panic!("not denied");
    };
    assert_eq!((other.grant, other.grant_sha256), (None, None));
}

#[test]
fn a_decision_carries_the_winning_grant_for_the_executor() {
    let grants = set([grant("n", "http_fetch")
        .hosts(&["*.example.com", "example.com"])
        .expires(99)]);
    let Outcome::Allowed(decision) = decide(fetch("https://example.com/a"), &grants, CLEAN, at(0))
    else {
        panic!("not allowed");
    };
    assert_eq!(decision.hosts(), ["*.example.com", "example.com"]);
    assert!(decision.paths().is_empty());
    assert_eq!(decision.expires(), Some(at(99)));
    assert_eq!(decision.request().tool, "http_fetch");
    assert_eq!(decision.args().action(), "net.fetch");
    assert_eq!(
        decision.grant_sha256(),
        grants.grants().next().unwrap().sha256()
    );
}

fn ask_for(path: &str, grants: &broker::ToolGrants) -> broker::Ask {
    match decide(read(path), grants, CLEAN, at(0)) {
        Outcome::Ask(ask) => ask,
        other => panic!("expected an ask, got {other:?}"),
    }
}

#[test]
fn redecide_table() {
    let asking = set([grant("a", "read_file")
        .paths(&["/w"])
        .mode(Mode::Ask)
        .expires(100)]);
    /// Granted by this grant, or denied for this reason naming this grant.
    type Want = Result<&'static str, (DenyReason, Option<&'static str>)>;
    let cases: Vec<(&str, broker::ToolGrants, SessionState, i64, Want)> = vec![
        (
            "the same grants, in time",
            asking.clone(),
            CLEAN,
            50,
            Ok("a"),
        ),
        (
            "approved after the grant expired",
            asking.clone(),
            CLEAN,
            100,
            Err((DenyReason::GrantExpired, None)),
        ),
        (
            "the session's taint rose above the grant",
            set([grant("a", "read_file")
                .paths(&["/w"])
                .mode(Mode::Ask)
                .max_taint(DataClass::Private)]),
            SessionState {
                taint: DataClass::Sensitive,
                untrusted: false,
            },
            50,
            Err((DenyReason::TaintTooHigh, None)),
        ),
        (
            "a deny grant appeared meanwhile",
            set([
                grant("a", "read_file").paths(&["/w"]).mode(Mode::Ask),
                grant("d", "read_file").paths(&["/w"]).mode(Mode::Deny),
            ]),
            CLEAN,
            50,
            Err((DenyReason::DeniedByGrant, Some("d"))),
        ),
        (
            "the grant was removed",
            set([]),
            CLEAN,
            50,
            Err((DenyReason::NoGrant, None)),
        ),
        (
            "the grant that wins now is the one recorded",
            set([grant("b", "read_file").paths(&["/w/src"])]),
            CLEAN,
            50,
            Ok("b"),
        ),
    ];
    for (what, now_grants, state, now, want) in cases {
        let ask = ask_for("/w/src/x", &asking);
        assert_eq!(ask.grant(), "a", "{what}");
        let got = redecide(ask, &now_grants, state, at(now));
        match (got, want) {
            (Ok(decision), Ok(grant)) => {
                assert_eq!(decision.grant(), grant, "{what}");
                assert_eq!(
                    decision.request().arguments,
                    r#"{"path":"/w/src/x"}"#,
                    "{what}"
                );
            }
            (Err(denial), Err((reason, grant))) => {
                assert_eq!(denial.reason, reason, "{what}");
                assert_eq!(denial.grant.as_deref(), grant, "{what}");
            }
            (got, want) => panic!("{what}: got {got:?}, want {want:?}"),
        }
    }
}
