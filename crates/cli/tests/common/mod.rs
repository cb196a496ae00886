//! Helpers shared by the CLI's test binaries.

/// A `[store]` section on the Postgres of `SWITCHBOARD_TEST_POSTGRES_URL`, in a schema of its
/// own so concurrent tests never see each other's runs.
pub fn postgres_store_section() -> String {
    let url = std::env::var("SWITCHBOARD_TEST_POSTGRES_URL")
        .expect("SWITCHBOARD_TEST_POSTGRES_URL is not set");
    let schema = format!(
        "sb_cli_{}",
        store::new_id(store::Timestamp::now()).to_ascii_lowercase()
    );
    format!("[store]\nurl = \"{url}\"\nschema = \"{schema}\"\n")
}
