//! Making agent text safe where it enters (operations.md): control sequences removed,
//! credentials redacted, another run's or thread's identifiers replaced.

use std::sync::LazyLock;

use regex::Regex;

/// What replaces a credential.
pub const REDACTED: &str = "[redacted]";

/// ANSI/VT escape sequences: CSI, OSC (to BEL or ST) and two-byte escapes.
static ESCAPES: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?").ok()
});

/// Credentials by shape. Explicit ASCII classes: the regex is built without Unicode tables.
static CREDENTIALS: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [
        r"xox[abposr]-[A-Za-z0-9-]+",
        r"(?:ghp|gho|ghs|ghu|ghr)_[A-Za-z0-9]{16,}",
        r"github_pat_[A-Za-z0-9_]{16,}",
        r"sk-[A-Za-z0-9_-]{16,}",
        r"AKIA[0-9A-Z]{16}",
        r"[Bb][Ee][Aa][Rr][Ee][Rr][ \t]+[A-Za-z0-9._~+/=-]+",
        r"eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*",
        r"(?s)-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)",
        // A run's capability token (a person's or a machine's), wherever it stands, and any
        // link's `token=` value: a link in agent text opens a run for every reader of it.
        r"sb[pm]_[0-9A-Za-z]{16,}",
    ]
    .iter()
    .filter_map(|p| Regex::new(p).ok())
    .collect()
});

/// A link's `token=` value (`/runs/<id>?token=…`), whatever its shape: the name stays, the
/// value goes.
static QUERY_TOKENS: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r#"((?i-u:token)=)[^ \t\r\n&#'"<>]+"#).ok());

/// Run ids (26 Crockford base32 digits) and Slack thread keys (`1700000000.123456`).
static RUN_IDS: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?-u:\b)[0-9A-HJKMNP-TV-Z]{26}(?-u:\b)").ok());
static THREAD_KEYS: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?-u:\b)[0-9]{10}\.[0-9]{6}(?-u:\b)").ok());

/// The cleaner for one run's text: the process's own secrets (by value), and this run's id
/// and thread key (which stay; any other is replaced).
#[derive(Debug, Clone, Default)]
pub struct Sanitizer {
    secrets: Vec<String>,
    own_run: Option<String>,
    own_thread: Option<String>,
}

/// Configured secrets shorter than this are not redacted by value (they would redact
/// ordinary words); the shapes above still apply.
const MIN_SECRET_LEN: usize = 8;

impl Sanitizer {
    pub fn new(secrets: Vec<String>) -> Self {
        let mut secrets: Vec<String> = secrets
            .into_iter()
            .filter(|s| s.len() >= MIN_SECRET_LEN)
            .collect();
        // Longest first, so a secret containing another is redacted whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        Sanitizer {
            secrets,
            own_run: None,
            own_thread: None,
        }
    }

    /// The same cleaner, for one run.
    pub fn for_run(&self, run_id: &str, thread_key: Option<&str>) -> Self {
        Sanitizer {
            secrets: self.secrets.clone(),
            own_run: Some(run_id.to_owned()),
            own_thread: thread_key.map(str::to_owned),
        }
    }

    /// Agent text made safe to store, show and log.
    pub fn clean(&self, text: &str) -> String {
        let text = strip_controls(text);
        let mut text = redact_shapes(&text);
        for secret in &self.secrets {
            if text.contains(secret.as_str()) {
                text = text.replace(secret.as_str(), REDACTED);
            }
        }
        let text = replace_foreign(&text, &RUN_IDS, self.own_run.as_deref(), "[another run]");
        replace_foreign(
            &text,
            &THREAD_KEYS,
            self.own_thread.as_deref(),
            "[another thread]",
        )
    }
}

/// Removes escape sequences, C0/C1 controls (but newline and tab) and bidi controls.
pub fn strip_controls(text: &str) -> String {
    let without_escapes = match ESCAPES.as_ref() {
        Some(re) => re.replace_all(text, ""),
        None => text.into(),
    };
    without_escapes
        .chars()
        .filter(|&c| {
            let control = (c.is_control() && c != '\n' && c != '\t') || is_bidi_control(c);
            !control
        })
        .collect()
}

fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{200E}' | '\u{200F}' | '\u{061C}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

fn redact_shapes(text: &str) -> String {
    let mut out = match QUERY_TOKENS.as_ref() {
        Some(re) => re
            .replace_all(text, format!("${{1}}{REDACTED}"))
            .into_owned(),
        None => text.to_owned(),
    };
    for re in CREDENTIALS.iter() {
        if re.is_match(&out) {
            out = re.replace_all(&out, REDACTED).into_owned();
        }
    }
    out
}

fn replace_foreign(
    text: &str,
    re: &LazyLock<Option<Regex>>,
    own: Option<&str>,
    with: &str,
) -> String {
    let Some(re) = re.as_ref() else {
        return text.to_owned();
    };
    re.replace_all(text, |caps: &regex::Captures<'_>| {
        let found = caps.get(0).map_or("", |m| m.as_str());
        if Some(found) == own {
            found.to_owned()
        } else {
            with.to_owned()
        }
    })
    .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const KNOWN: [&str; 11] = [
        "xoxb-1234567890-abcdefghij",
        "ghp_abcdefghijklmnopqrstuvwxyz0123",
        "github_pat_11ABCDEFG0123456789_abcdef",
        "sk-proj-abcdefghijklmnopqrstuv",
        "AKIAIOSFODNN7EXAMPLE",
        "Bearer abc.def.ghi-123",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----",
        "my-configured-secret-value",
        "sbp_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "https://sb.example.com/runs/01JABCDEFGHJKMNPQRSTVWXYZ0?token=opaque-value-9",
    ];

    fn sanitizer() -> Sanitizer {
        Sanitizer::new(vec!["my-configured-secret-value".into(), "short".into()])
    }

    #[test]
    fn controls_and_escapes_go_newlines_and_tabs_stay() {
        let s = sanitizer();
        assert_eq!(s.clean("\x1b[31mred\x1b[0m\tok\nnext"), "red\tok\nnext");
        assert_eq!(s.clean("a\u{202E}b\u{0007}c\u{009B}d"), "abcd");
        assert_eq!(s.clean("\x1b]0;title\x07text"), "text");
    }

    #[test]
    fn every_known_shape_is_redacted() {
        let s = sanitizer();
        for secret in KNOWN {
            let out = s.clean(&format!("before {secret} after"));
            assert!(!out.contains(secret), "{secret} survived: {out}");
            assert!(out.contains(REDACTED), "{out}");
        }
        assert_eq!(
            s.clean("short words"),
            "short words",
            "short secrets are not redacted by value"
        );
    }

    #[test]
    fn a_capability_links_token_is_redacted_and_the_link_kept() {
        let s = sanitizer().for_run("01JABCDEFGHJKMNPQRSTVWXYZ0", None);
        let link = "https://sb.example.com/runs/01JABCDEFGHJKMNPQRSTVWXYZ0?token=sbm_00ff";
        assert_eq!(
            s.clean(&format!("follow {link} now")),
            "follow https://sb.example.com/runs/01JABCDEFGHJKMNPQRSTVWXYZ0?token=[redacted] now"
        );
        assert_eq!(
            s.clean("a=1&TOKEN=abc&b=2"),
            "a=1&TOKEN=[redacted]&b=2",
            "any case, and the rest of the query stays"
        );
        assert_eq!(s.clean("the token is here"), "the token is here");
    }

    #[test]
    fn every_pattern_compiles() {
        // A pattern the regex build cannot compile would silently redact nothing.
        assert_eq!(CREDENTIALS.len(), 9);
        assert!(QUERY_TOKENS.is_some() && ESCAPES.is_some());
        assert!(RUN_IDS.is_some() && THREAD_KEYS.is_some());
    }

    #[test]
    fn another_runs_id_is_replaced_and_our_own_kept() {
        let s = sanitizer().for_run("01JABCDEFGHJKMNPQRSTVWXYZ0", Some("1700000000.000100"));
        let out = s.clean("see 01JABCDEFGHJKMNPQRSTVWXYZ0 and 01JZZZZZZZZZZZZZZZZZZZZZZZ in 1700000000.000100 or 1700000001.000200");
        assert_eq!(
            out,
            "see 01JABCDEFGHJKMNPQRSTVWXYZ0 and [another run] in 1700000000.000100 or [another thread]"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn no_known_secret_survives_random_surroundings(
            before in proptest::collection::vec(any::<u8>(), 0..64),
            after in proptest::collection::vec(any::<u8>(), 0..64),
            which in 0usize..KNOWN.len(),
        ) {
            let secret = KNOWN[which];
            let text = format!(
                "{} {secret} {}",
                String::from_utf8_lossy(&before),
                String::from_utf8_lossy(&after)
            );
            let out = sanitizer().clean(&text);
            prop_assert!(!out.contains(secret));
            prop_assert!(!out.chars().any(|c| c.is_control() && c != '\n' && c != '\t'));
        }
    }
}
