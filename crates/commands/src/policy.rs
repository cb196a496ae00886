//! The policy in force: the grants table (grants, groups, restrict) and the org's agent
//! policy rules, swapped whole by a reload and read as one snapshot per decision.
//!
//! A request resolves its caller's grants once, under the snapshot it read first, and keeps
//! them to its end; a fact a handler reads from the table later (whether a repo is
//! restricted) comes from the snapshot in force then. The next request, the next tool call of
//! a live run and the live feed's next re-check read the one in force then.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use authz_core::GrantsTable;
use broker::rules::ToolRule;

/// One policy, as a reload installs it whole.
#[derive(Debug, Clone, Default)]
pub struct PolicyInForce {
    pub table: Arc<GrantsTable>,
    /// `[agent_policy]`'s rules: the org's ceiling on every run's tool calls.
    pub org_rules: Vec<ToolRule>,
    /// The hash of the policy's sections as read (`sha256:<hex>`): what each replica
    /// reports, so an operator sees when replicas disagree.
    pub hash: String,
}

/// The cell the policy in force lives in. Readers never wait on a reload for longer than a
/// pointer swap.
#[derive(Debug, Default)]
pub struct LivePolicy {
    current: RwLock<Arc<PolicyInForce>>,
    generation: AtomicU64,
}

impl LivePolicy {
    pub fn new(policy: PolicyInForce) -> LivePolicy {
        LivePolicy {
            current: RwLock::new(Arc::new(policy)),
            generation: AtomicU64::new(0),
        }
    }

    /// The policy in force now: a snapshot that stays whole whatever a reload does next.
    pub fn now(&self) -> Arc<PolicyInForce> {
        match self.current.read() {
            Ok(p) => p.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Installs `policy` whole; returns the new generation.
    pub fn replace(&self, policy: PolicyInForce) -> u64 {
        let policy = Arc::new(policy);
        match self.current.write() {
            Ok(mut p) => *p = policy,
            Err(poisoned) => *poisoned.into_inner() = policy,
        }
        self.generation.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// How many reloads were installed: a reader that cached a resolution compares this.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }
}
