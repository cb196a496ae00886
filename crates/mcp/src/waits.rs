//! The `ask` calls waiting for their runs, so a `notifications/cancelled` can stop a wait.
//!
//! The server is stateless: a cancellation arrives as its own POST, which rmcp acknowledges and
//! drops. The gate reads it first and cancels the wait it names — only a wait of the same
//! caller (the same bearer subject, or the same agent in the same run), so nobody can stop
//! another caller's wait by guessing a request id. A cancelled wait answers at once; the run
//! goes on. A wait on another replica is not reached (its client's disconnect still ends it).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio_util::sync::CancellationToken;

/// Waits in progress, by (caller, JSON-RPC request id).
#[derive(Debug, Default)]
pub(crate) struct Waits {
    waiting: Mutex<HashMap<(String, String), CancellationToken>>,
}

/// A registered wait; dropping it forgets the wait.
pub(crate) struct Waiting {
    waits: Arc<Waits>,
    key: (String, String),
    pub(crate) cancelled: CancellationToken,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.waits.map().remove(&self.key);
    }
}

impl Waits {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), CancellationToken>> {
        // A panic elsewhere while holding the lock leaves a map that is still consistent.
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers the wait of `caller`'s request `request_id` (its JSON form).
    pub(crate) fn register(self: &Arc<Self>, caller: String, request_id: String) -> Waiting {
        let cancelled = CancellationToken::new();
        let key = (caller, request_id);
        self.map().insert(key.clone(), cancelled.clone());
        Waiting {
            waits: self.clone(),
            key,
            cancelled,
        }
    }

    /// Cancels `caller`'s wait for `request_id`, if there is one; true when there was.
    pub(crate) fn cancel(&self, caller: &str, request_id: &str) -> bool {
        let key = (caller.to_owned(), request_id.to_owned());
        match self.map().get(&key) {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_caller_cancels_and_a_finished_wait_is_forgotten() {
        let waits = Arc::new(Waits::default());
        let w = waits.register("mcp:ops".into(), "7".into());
        assert!(
            !waits.cancel("mcp:other", "7"),
            "another caller's id is not theirs"
        );
        assert!(!waits.cancel("mcp:ops", "8"));
        assert!(!w.cancelled.is_cancelled());
        assert!(waits.cancel("mcp:ops", "7"));
        assert!(w.cancelled.is_cancelled());
        drop(w);
        assert_eq!(waits.len(), 0);
        assert!(!waits.cancel("mcp:ops", "7"));
    }
}
