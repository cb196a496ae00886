//! Properties: `decide` and `redecide` against the oracle in `support/oracle.rs` over generated
//! grant sets, requests, states and instants; `args::inside` and `args::host_matches` against
//! their plain readings. 4,096 cases each (PROPTEST_CASES overrides).

use crate::support::build::{at, request};
use crate::support::oracle::{self, Expected, observed};
use broker::args::{host_matches, inside};
use broker::{
    DataClass, Grant, GrantId, Mode, Outcome, SessionState, ToolGrants, decide, redecide,
};
use proptest::prelude::*;

const PATHS: [&str; 6] = ["/", "/w", "/w/a", "/w/a/b", "/x", "/w/ab"];
const HOSTS: [&str; 6] = [
    "example.com",
    "*.example.com",
    "api.example.com",
    "*.a.example.com",
    "api.example.com:8443",
    "example.com:443",
];
const TOOLS: [&str; 7] = [
    "read_file",
    "write_file",
    "shell",
    "http_fetch",
    "git",
    "mcp.gh.list",
    "mcp.gh.*",
];

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 4096,
        ..ProptestConfig::default()
    }
}

fn class() -> impl Strategy<Value = DataClass> {
    prop_oneof![
        Just(DataClass::Private),
        Just(DataClass::Sensitive),
        Just(DataClass::Secret)
    ]
}

fn mode() -> impl Strategy<Value = Mode> {
    prop_oneof![Just(Mode::Deny), Just(Mode::Ask), Just(Mode::Auto)]
}

fn pick<T: Clone + std::fmt::Debug + 'static>(
    items: &'static [T],
) -> impl Strategy<Value = Vec<T>> {
    proptest::sample::subsequence(items.to_vec(), 0..=items.len())
}

/// A grant whose fields fit its tool (the shapes `ToolGrants::new` accepts).
fn grant(index: usize) -> impl Strategy<Value = Grant> {
    (
        proptest::sample::select(TOOLS.to_vec()),
        pick(&PATHS),
        pick(&HOSTS),
        mode(),
        class(),
        proptest::option::of(0i64..6),
        class(),
        any::<bool>(),
    )
        .prop_map(
            move |(
                tool,
                mut paths,
                mut hosts,
                mode,
                max_taint,
                expires,
                result_class,
                untrusted,
            )| {
                match tool {
                    "read_file" | "write_file" | "git" if paths.is_empty() => paths.push("/w"),
                    "http_fetch" if hosts.is_empty() => hosts.push("example.com"),
                    _ => {}
                }
                if tool != "http_fetch" {
                    hosts.clear();
                }
                if tool == "http_fetch" || tool.starts_with("mcp.") {
                    paths.clear();
                }
                Grant {
                    id: GrantId::new(format!("g{index}")).unwrap(),
                    tool: tool.to_string(),
                    paths: paths.into_iter().map(String::from).collect(),
                    hosts: hosts.into_iter().map(String::from).collect(),
                    mode,
                    max_taint,
                    expires: expires.map(broker::Timestamp::from_micros),
                    result_class,
                    untrusted,
                }
            },
        )
}

fn grants() -> impl Strategy<Value = ToolGrants> {
    (0usize..7)
        .prop_flat_map(|n| (0..n).map(grant).collect::<Vec<_>>())
        .prop_map(|grants| ToolGrants::new(grants).unwrap())
}

fn call() -> impl Strategy<Value = (String, String)> {
    let path = proptest::sample::select(vec![
        "/w",
        "/w/a",
        "/w/a/b/c",
        "/w/ab",
        "/x/y",
        "/w/../x",
        "/w/a/../ab",
        "/",
        "/etc/passwd",
        "rel",
        "/..",
    ]);
    let url = proptest::sample::select(vec![
        "https://example.com/",
        "https://API.example.com:8443/x",
        "http://a.b.example.com",
        "https://example.com.evil/",
        "https://notexample.com/",
        "ftp://example.com/",
    ]);
    prop_oneof![
        path.clone()
            .prop_map(|p| ("read_file".to_string(), format!(r#"{{"path":{p:?}}}"#))),
        path.clone().prop_map(|p| (
            "write_file".to_string(),
            format!(r#"{{"path":{p:?},"content":""}}"#)
        )),
        proptest::option::of(path.clone()).prop_map(|cwd| (
            "shell".to_string(),
            match cwd {
                Some(c) => format!(r#"{{"command":"ls","cwd":{c:?}}}"#),
                None => r#"{"command":"ls"}"#.to_string(),
            }
        )),
        path.prop_map(|p| (
            "git".to_string(),
            format!(r#"{{"subcommand":"status","cwd":{p:?}}}"#)
        )),
        url.prop_map(|u| ("http_fetch".to_string(), format!(r#"{{"url":{u:?}}}"#))),
        proptest::sample::select(vec!["list", "create"]).prop_map(|t| (
            "mcp".to_string(),
            format!(r#"{{"server":"gh","tool":{t:?}}}"#)
        )),
        Just(("restrict_self".to_string(), "{}".to_string())),
        Just((
            "read_file".to_string(),
            r#"{"path":"/w","x":1}"#.to_string()
        )),
    ]
}

fn state() -> impl Strategy<Value = SessionState> {
    (class(), any::<bool>()).prop_map(|(taint, untrusted)| SessionState { taint, untrusted })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn decide_agrees_with_the_oracle(grants in grants(), (tool, args) in call(), state in state(), now in 0i64..7) {
        let want = oracle::expect(&tool, &args, &grants, state, at(now));
        let got = decide(request(&tool, &args), &grants, state, at(now));
        prop_assert_eq!(observed(&got), want, "grants: {:#?}", grants);
    }

    #[test]
    fn redecide_agrees_with_the_oracle(
        before in grants(), after in grants(), (tool, args) in call(), state in state(), now in 0i64..7,
    ) {
        if let Outcome::Ask(ask) = decide(request(&tool, &args), &before, SessionState::default(), at(0)) {
            let parsed = ask.args().clone();
            let want = oracle::matching(&parsed, &after, state, at(now));
            let got = redecide(ask, &after, state, at(now));
            match (got, want) {
                (Ok(d), Expected::Allowed { grant, matched_path, class, untrusted })
                | (Ok(d), Expected::Ask { grant, matched_path, class, untrusted }) => {
                    prop_assert_eq!(d.grant(), grant.as_str());
                    prop_assert_eq!(d.matched_path(), matched_path.as_deref());
                    prop_assert_eq!((d.label().class, d.label().untrusted), (class, untrusted));
                }
                (Err(denial), Expected::Denied { reason, grant }) => {
                    prop_assert_eq!(denial.reason, reason);
                    prop_assert_eq!(denial.grant, grant);
                }
                (got, want) => prop_assert!(false, "got {:?}, want {:?}, grants now {:#?}", got, want, after),
            }
        }
    }

    #[test]
    fn no_dot_dot_escapes_a_path(segments in proptest::collection::vec(
        proptest::sample::select(vec!["a", "b", "..", ".", "", "w"]), 0..8,
    )) {
        let path = format!("/w/{}", segments.join("/"));
        prop_assert_eq!(inside("/w", &path), oracle::inside("/w", &path), "{}", path);
        if inside("/w", &path) {
            let normal = broker::args::normalise(&path).unwrap();
            prop_assert!(normal == "/w" || normal.starts_with("/w/"), "{} -> {}", path, normal);
        }
    }

    #[test]
    fn host_patterns_match_only_their_domain(label in "[a-zA-Z0-9.-]{0,12}", upper in any::<bool>()) {
        let domain = if upper { "EXAMPLE.com" } else { "example.com" };
        for host in [format!("{label}{domain}"), format!("{domain}.{label}"), format!("{label}.{domain}"), label.clone()] {
            prop_assert_eq!(host_matches("example.com", &host), oracle::host_matches("example.com", &host), "{}", host);
            prop_assert_eq!(host_matches("*.example.com", &host), oracle::host_matches("*.example.com", &host), "{}", host);
        }
        // `example.com.<tld>` is a look-alike, never the domain or one of its subdomains.
        let tld: String = label.chars().filter(|c| *c != '.').collect();
        let look_alike = format!("example.com.{}", if tld.is_empty() { "evil" } else { tld.as_str() });
        prop_assert!(!host_matches("example.com", &look_alike), "{}", look_alike);
        prop_assert!(!host_matches("*.example.com", &look_alike), "{}", look_alike);
    }
}
