//! A Postgres store of a test's own: a `[store]` section on `SWITCHBOARD_TEST_POSTGRES_URL`
//! in a schema no other test uses, so concurrent tests never see each other's rows.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Every schema a test makes starts with this; `.ci/run` drops what earlier runs left.
pub const SCHEMA_PREFIX: &str = "sb_test_";

/// The server the Postgres tests run against. Unset is a failure, never a skip:
/// `scripts/test.sh` leaves those tests out, and says so, when it is unset.
pub fn url() -> String {
    std::env::var("SWITCHBOARD_TEST_POSTGRES_URL").unwrap_or_else(|_| {
        panic!(
            "SWITCHBOARD_TEST_POSTGRES_URL is not set: Postgres tests need a server \
             (scripts/test.sh sets it when one is reachable)"
        )
    })
}

/// A schema name of this test's own: `sb_test_<tag>_<micros>_<pid>_<n>`.
pub fn unique_schema(tag: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let micros = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros())
        .unwrap_or_default();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{SCHEMA_PREFIX}{tag}_{micros}_{}_{n}", std::process::id())
}

/// `[store]` with `url` and a [`unique_schema`], as a config file's text.
pub fn store_section(tag: &str) -> String {
    format!(
        "[store]\nurl = {:?}\nschema = {:?}\n",
        url(),
        unique_schema(tag)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_are_distinct_and_carry_the_prefix() {
        let (a, b) = (unique_schema("x"), unique_schema("x"));
        assert_ne!(a, b);
        assert!(a.starts_with("sb_test_x_"), "{a}");
        assert!(
            a.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
            "{a}"
        );
    }
}
