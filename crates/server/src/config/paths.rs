//! Every path the config names, made absolute once, as the file is loaded: relative to the
//! working directory the process started in (what a relative path has always meant, so no
//! deployment's store or data moves). Nothing after the load joins a relative path again: a
//! run's workspace, its git directory and a sandbox's binds are all built from these.

use std::path::{Path, PathBuf};

use super::{LoadedConfig, Source};

/// `path` under `dir` when relative (a leading `./` dropped), else as it is.
pub fn absolute(dir: &Path, path: &Path) -> PathBuf {
    if path.is_absolute() {
        return path.to_path_buf();
    }
    dir.join(path.strip_prefix("./").unwrap_or(path))
}

/// `config` with every path it names absolute under `dir`: the config file itself,
/// `data_dir`, the SQLite file, `audit_file`, `jwks_file` and the `*_file` secrets. (A
/// `command` agent's program is not one of them: a bare name is looked up on its `PATH`, and
/// a relative one, like its arguments, is read in the run's own workspace.)
pub(super) fn made_absolute(mut config: LoadedConfig, dir: &Path) -> LoadedConfig {
    let abs = |p: &mut PathBuf| *p = absolute(dir, p);
    if let Source::File(file) = &mut config.source {
        abs(file);
    }
    abs(&mut config.server.data_dir);
    if let Some(file) = &mut config.server.agent_token_secret_file {
        abs(file);
    }
    config.store.url = config.store.url.absolute_in(dir);
    if let Some(file) = &mut config.telemetry.audit_file {
        abs(file);
    }
    if let Some(file) = &mut config.ingress.tokens_file {
        abs(file);
    }
    if let Some(access_api::JwksSource::File(file)) =
        config.access.as_mut().and_then(|a| a.jwks.as_mut())
    {
        abs(file);
    }
    config
}

#[cfg(test)]
mod tests {
    use super::super::BackendSpec;
    use super::super::tests::ok;
    use super::*;

    #[test]
    fn every_relative_path_is_made_absolute_under_the_start_directory() {
        let config = ok(r#"
[server]
data_dir = "./data"
agent_token_secret_file = "secrets/agent"
[store]
url = "sqlite://./sb.db"
[telemetry]
audit_file = "logs/audit.log"
[ingress]
tokens_file = "./tokens.json"
[access]
issuer = "https://acme.cloudflareaccess.com"
audience = "aud"
jwks_file = "keys.json"
[agents.script]
backend = "command"
command = ["./agent.sh", "--flag"]
[agents.claude]
backend = "command"
command = ["claude", "-p"]
"#);
        // The load made them absolute under the working directory; doing it again changes
        // nothing.
        let start = std::env::current_dir().unwrap();
        let c = made_absolute(config, Path::new("/elsewhere"));
        let under = |p: &str| start.join(p);
        assert_eq!(c.source, Source::File(under("t.toml")));
        assert_eq!(c.server.data_dir, under("data"));
        assert_eq!(
            c.server.agent_token_secret_file.as_deref(),
            Some(under("secrets/agent").as_path())
        );
        assert_eq!(c.store.url.sqlite_file(), under("sb.db").to_str());
        assert_eq!(
            c.telemetry.audit_file.as_deref(),
            Some(under("logs/audit.log").as_path())
        );
        assert_eq!(
            c.ingress.tokens_file.as_deref(),
            Some(under("tokens.json").as_path())
        );
        assert_eq!(
            c.access.unwrap().jwks,
            Some(access_api::JwksSource::File(under("keys.json")))
        );
        let argv = |name: &str| match &c.agent_specs[&authz_core::AgentName::parse(name).unwrap()]
            .backend
        {
            BackendSpec::Command { argv, .. } => argv.clone(),
            _ => unreachable!(),
        };
        assert_eq!(
            argv("script"),
            ["./agent.sh", "--flag"],
            "read in the run's workspace"
        );
        assert_eq!(
            argv("claude"),
            ["claude", "-p"],
            "a bare name is found on PATH"
        );
    }

    #[test]
    fn absolute_paths_and_the_embedded_default_keep_their_meaning() {
        let dir = Path::new("/srv/start");
        assert_eq!(
            absolute(dir, Path::new("/var/lib/sb")),
            Path::new("/var/lib/sb")
        );
        assert_eq!(
            absolute(dir, Path::new("./data")),
            Path::new("/srv/start/data")
        );
        assert_eq!(
            absolute(dir, Path::new("data/x")),
            Path::new("/srv/start/data/x")
        );
        let start = std::env::current_dir().unwrap();
        let default = ok(super::super::EMBEDDED_DEFAULT);
        assert_eq!(
            default.store.url.sqlite_file(),
            start.join("switchboard.db").to_str()
        );
        assert_eq!(default.server.data_dir, start.join("switchboard-data"));
    }
}
