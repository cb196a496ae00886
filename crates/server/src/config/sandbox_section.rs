//! `[sandbox]`: who a root server's sandboxed programs are on the host.

use serde::Deserialize;

use super::numbers::Whole;
use super::{LoadError, Text};

/// `[sandbox]`: the raw section.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxSection {
    pub user_id: Option<Whole>,
    pub group_id: Option<Whole>,
}

/// `[sandbox]`, checked: the host user and group every sandboxed program runs as when
/// `serve` runs as root (a server of its own user runs them as that user).
pub(super) fn sandbox_user(
    t: &Text<'_>,
    section: &SandboxSection,
) -> Result<::agents::sandbox::HostUser, LoadError> {
    let default = ::agents::sandbox::HostUser::DEFAULT;
    let id = |key: &str, value: Option<Whole>, default: u32| match value {
        None => Ok(default),
        Some(Whole(n)) => match u32::try_from(n) {
            Ok(n) if n != 0 && n != u32::MAX => Ok(n),
            _ => Err(t.key(
                &["sandbox", key],
                "expected an unprivileged id from 1 to 4294967294 (never 0, root), like 65534",
            )),
        },
    };
    let uid = id("user_id", section.user_id, default.uid)?;
    let gid = id("group_id", section.group_id, default.gid)?;
    ::agents::sandbox::HostUser::new(uid, gid).map_err(|e| t.key(&["sandbox"], e.to_string()))
}

#[cfg(test)]
mod tests {
    use crate::config::tests::{err, ok};

    #[test]
    fn the_default_is_nobody_and_root_is_refused() {
        let config = ok("");
        assert_eq!(config.sandbox_user, ::agents::sandbox::HostUser::DEFAULT);
        let config = ok("[sandbox]\nuser_id = 4000\ngroup_id = 4001\n");
        assert_eq!(
            config.sandbox_user,
            ::agents::sandbox::HostUser {
                uid: 4000,
                gid: 4001
            }
        );
        for bad in [
            "[sandbox]\nuser_id = 0\n",
            "[sandbox]\ngroup_id = 0\n",
            "[sandbox]\nuser_id = 4294967295\n",
            "[sandbox]\nuser_id = 99999999999\n",
            "[sandbox]\nuser_id = -1\n",
            "[sandbox]\nuser_id = \"nobody\"\n",
            "[sandbox]\nuid = 1000\n",
        ] {
            let why = err(bad);
            assert!(why.contains("sandbox"), "{bad}: {why}");
        }
    }
}
