//! Every command: its happy path, its refusal (right reply, no reason, an audit line) and its
//! bad input — on SQLite, and on Postgres when `SWITCHBOARD_TEST_POSTGRES_URL` is set.

use authz_core::ChannelVisibility as V;
use commands::ReplyKind;
use store::{Finish, FiringSlot, Friction, NewMemory, RunStatus, Timestamp};

use crate::registry_behaviour::harness::*;

macro_rules! on_both {
    ($($name:ident),* $(,)?) => {
        mod sqlite { $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $name() { super::$name(crate::registry_behaviour::harness::sqlite().await).await })* }
        mod postgres { $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $name() { super::$name(crate::registry_behaviour::harness::postgres().await).await })* }
    };
}

/// A 🚫 with no reason in it, and the reason on a fresh audit line.
async fn refused(w: &World, caller: &commands::Caller, text: &str) {
    let before = w.audit.lines().len();
    let r = w.say(caller, text).await;
    assert_eq!(r.kind, ReplyKind::Unauthorized, "{text}: {r:?}");
    assert!(r.text.starts_with("🚫"), "{}", r.text);
    let lines = w.audit.lines();
    assert_eq!(
        lines.len(),
        before + 1,
        "{text}: one audit line per refusal"
    );
    let line = &lines[before];
    assert_eq!(line.actor, caller.actor.id.as_str());
    for leak in [line.reason, "grant", "member", "restricted"] {
        assert!(
            !r.text.contains(leak) && !r.data.to_string().contains(leak),
            "{text}: the reply carries `{leak}`: {}",
            r.text
        );
    }
}

mod config;
mod friction;
mod memory;
mod repo;
mod runs;
mod system;
