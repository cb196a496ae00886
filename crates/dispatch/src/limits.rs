//! Concurrency limits: a global one and one per actor. A slot is taken before anything is
//! started and given back when its guard drops (the run ended, or dispatch gave up).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use authz_core::ActorId;

pub use commands::Busy;

#[derive(Default)]
struct Counts {
    global: usize,
    per_actor: HashMap<ActorId, usize>,
}

pub struct Slots {
    max_global: usize,
    max_per_actor: usize,
    counts: Arc<Mutex<Counts>>,
}

/// A held slot; dropping it gives the slot back.
pub struct Slot {
    actor: ActorId,
    counts: Arc<Mutex<Counts>>,
}

impl Slots {
    pub fn new(max_global: usize, max_per_actor: usize) -> Self {
        Slots {
            max_global,
            max_per_actor,
            counts: Arc::default(),
        }
    }

    /// Takes a slot for `actor`, or says which limit is full. A poisoned lock is busy (fail
    /// closed: nothing starts).
    pub fn acquire(&self, actor: &ActorId) -> Result<Slot, Busy> {
        let Ok(mut c) = self.counts.lock() else {
            return Err(Busy::Global {
                limit: self.max_global,
            });
        };
        let mine = c.per_actor.get(actor).copied().unwrap_or(0);
        if mine >= self.max_per_actor {
            return Err(Busy::Actor {
                limit: self.max_per_actor,
            });
        }
        if c.global >= self.max_global {
            return Err(Busy::Global {
                limit: self.max_global,
            });
        }
        c.global += 1;
        *c.per_actor.entry(actor.clone()).or_insert(0) += 1;
        Ok(Slot {
            actor: actor.clone(),
            counts: self.counts.clone(),
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Ok(mut c) = self.counts.lock() {
            c.global = c.global.saturating_sub(1);
            if let Some(n) = c.per_actor.get_mut(&self.actor) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    c.per_actor.remove(&self.actor);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_actor_then_global_and_slots_come_back() {
        let slots = Slots::new(3, 2);
        let a: ActorId = "http:a".parse().unwrap();
        let b: ActorId = "http:b".parse().unwrap();
        let a1 = slots.acquire(&a).unwrap();
        let _a2 = slots.acquire(&a).unwrap();
        assert_eq!(slots.acquire(&a).err(), Some(Busy::Actor { limit: 2 }));
        let _b1 = slots.acquire(&b).unwrap();
        assert_eq!(slots.acquire(&b).err(), Some(Busy::Global { limit: 3 }));
        drop(a1);
        assert!(slots.acquire(&b).is_ok());
    }
}
