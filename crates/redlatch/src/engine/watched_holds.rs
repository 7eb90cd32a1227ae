//! The loss watch's table of watched holds, found by their key's name (an
//! invalidation names keys): one slot per hold, the hold itself (weakly),
//! and nothing keyed by a copy of the key. The key is read through the
//! hold, and the hold keeps its re-read pace (`Hold::pace`), so a slot
//! is 8 bytes where a map from the key to its holds and their pace took 40
//! (docs/BENCHMARKS.md, "Client memory per held lock": 67 bytes a hold
//! with the map's slack, about 15 now).
//!
//! The holds of one key (a named owner's older hold, read holds) are slots
//! of the same hash. A hold that ended leaves a slot whose key can no
//! longer be read: it is found and dropped by the next look at its hash,
//! and every such slot is dropped before the table grows. Its hash is then
//! unknown: a slot moved while its hold ends is placed by a hash of 0,
//! where no look by name ever takes it for a live hold, and the next growth
//! drops it.

use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Weak};
use std::time::Duration;

use hashbrown::HashTable;
use tokio::time::Instant;

use crate::engine::hold::Hold;
use crate::engine::reread::Pacing;

/// One watched hold. Kept small: a client may watch many thousands.
struct Watched {
    hold: Weak<Hold>,
}

/// The watched holds, by key.
pub(crate) struct Keys {
    table: HashTable<Watched>,
    hasher: RandomState,
}

impl Default for Keys {
    fn default() -> Keys {
        Keys {
            table: HashTable::new(),
            hasher: RandomState::new(),
        }
    }
}

impl Keys {
    fn hash(&self, key: &str) -> u64 {
        self.hasher.hash_one(key)
    }

    /// Watches `watched`; its key, unless the hold has already ended.
    pub(crate) fn add(&mut self, watched: Weak<Hold>) -> Option<Arc<str>> {
        let key = watched.upgrade()?.key.to_arc();
        if self.table.len() == self.table.capacity() {
            // About to grow: the ended holds' slots go first (their hash
            // cannot be read again).
            self.table.retain(|slot| slot.hold.strong_count() > 0);
        }
        let hash = self.hash(&key);
        let hasher = &self.hasher;
        self.table
            .insert_unique(hash, Watched { hold: watched }, |slot| {
                slot.hold
                    .upgrade()
                    .map_or(0, |hold| hasher.hash_one(&*hold.key))
            });
        Some(key)
    }

    /// True while a live hold on `key` is watched.
    pub(crate) fn contains_key(&self, key: &str) -> bool {
        self.key(key).is_some()
    }

    /// The watched key named `name` (shared with its holds when long).
    pub(crate) fn key(&self, name: &str) -> Option<Arc<str>> {
        self.table.iter_hash(self.hash(name)).find_map(|slot| {
            slot.hold
                .upgrade()
                .filter(|hold| &*hold.key == name)
                .map(|hold| hold.key.to_arc())
        })
    }

    /// Every watched key, once each; the slots of ended holds are dropped.
    pub(crate) fn keys(&mut self) -> Vec<Arc<str>> {
        self.table.retain(|slot| slot.hold.strong_count() > 0);
        let mut seen: HashSet<Arc<str>> = HashSet::with_capacity(self.table.len());
        self.table
            .iter()
            .filter_map(|slot| slot.hold.upgrade())
            .filter_map(|hold| {
                let key = hold.key.to_arc();
                seen.insert(key.clone()).then_some(key)
            })
            .collect()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// The holds on `key` that `keep` keeps; the others (and the ended
    /// holds of its hash) are no longer watched.
    pub(crate) fn holds(
        &mut self,
        key: &str,
        mut keep: impl FnMut(&Arc<Hold>) -> bool,
    ) -> Vec<Arc<Hold>> {
        let hash = self.hash(key);
        let mut kept = Vec::new();
        while let Ok(slot) = self.table.find_entry(hash, |slot| {
            match slot.hold.upgrade() {
                None => true,
                Some(hold) if &*hold.key == key => {
                    // Asked once: a kept hold is not asked again.
                    !kept.iter().any(|k: &Arc<Hold>| Arc::ptr_eq(k, &hold)) && {
                        if keep(&hold) {
                            kept.push(hold);
                            false
                        } else {
                            true
                        }
                    }
                }
                Some(_) => false,
            }
        }) {
            slot.remove();
        }
        kept
    }

    /// Stops watching `hold` (on `key`).
    pub(crate) fn remove_hold(&mut self, key: &str, hold: &Arc<Hold>) {
        let ended = Arc::as_ptr(hold);
        if let Ok(slot) = self.table.find_entry(self.hash(key), |slot| {
            std::ptr::eq(slot.hold.as_ptr(), ended)
        }) {
            slot.remove();
        }
    }

    /// `key` was invalidated at `now`: how long to wait before reading it
    /// (the soonest its holds' paces allow); `None` when it is not watched.
    pub(crate) fn invalidated(&mut self, key: &str, now: Instant) -> Option<Duration> {
        self.each_pace(key, |pacing| pacing.invalidated(now))
    }

    /// A read at `now` found `key` unchanged.
    pub(crate) fn found_unchanged(&mut self, key: &str, now: Instant) {
        self.each_pace(key, |pacing| {
            pacing.found_unchanged(now);
            Duration::ZERO
        });
    }

    /// A read of `key` got an error about it: how long to wait before the
    /// next; `None` when it is not watched.
    pub(crate) fn read_failed(&mut self, key: &str) -> Option<Duration> {
        self.each_pace(key, Pacing::read_failed)
    }

    /// Applies `step` to the pace of each live hold on `key`; the shortest
    /// delay it gave.
    fn each_pace(
        &mut self,
        key: &str,
        mut step: impl FnMut(&mut Pacing) -> Duration,
    ) -> Option<Duration> {
        let hash = self.hash(key);
        self.table
            .iter_hash(hash)
            .filter_map(|slot| slot.hold.upgrade())
            .filter(|hold| &*hold.key == key)
            .map(|hold| hold.pace(&mut step))
            .min()
    }

    /// Gives room back once most holds have ended.
    pub(crate) fn shrink_if_sparse(&mut self) -> bool {
        if self.table.capacity() <= 4 * self.table.len() + 64 {
            return false;
        }
        self.table.retain(|slot| slot.hold.strong_count() > 0);
        let hasher = &self.hasher;
        self.table.shrink_to_fit(|slot| {
            slot.hold
                .upgrade()
                .map_or(0, |hold| hasher.hash_one(&*hold.key))
        });
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A watched hold is paid once per held lock: the map by key it
    /// replaced took 40 bytes a key (and 1.64 times that at 10,000 keys).
    #[test]
    fn a_watched_hold_takes_little_room() {
        assert!(std::mem::size_of::<Watched>() <= 8);
    }

    fn hold(key: &str) -> Arc<Hold> {
        Arc::new(Hold::new(crate::engine::hold::NewHold {
            key: Arc::from(key),
            owner: Arc::from("client:owner"),
            kind: crate::engine::hold_kind::HoldKind::Batched(
                &crate::engine::hold_kind::TEST_RENEWAL,
            ),
            lease_ms: 30_000,
            renewed: true,
            token: 1,
            named_owner: false,
            sent_at: crate::lease_clock::LeaseInstant::now(),
        }))
    }

    #[test]
    fn the_holds_of_a_key_are_found_by_its_name_and_no_others() {
        let mut keys = Keys::default();
        let a1 = hold("a");
        let a2 = hold("a");
        let b = hold("b");
        for h in [&a1, &a2, &b] {
            keys.add(Arc::downgrade(h));
        }
        assert!(keys.contains_key("a") && keys.contains_key("b"));
        assert!(!keys.contains_key("c"));
        assert_eq!(keys.key("a").as_deref(), Some("a"));
        let mut all = keys.keys();
        all.sort();
        assert_eq!(all, vec![Arc::from("a"), Arc::from("b")]);
        let on_a = keys.holds("a", |_| true);
        assert_eq!(on_a.len(), 2);
        assert!(on_a.iter().any(|h| Arc::ptr_eq(h, &a1)));
        assert!(on_a.iter().any(|h| Arc::ptr_eq(h, &a2)));
        // Not kept: no longer watched.
        let on_a = keys.holds("a", |h| Arc::ptr_eq(h, &a2));
        assert_eq!(on_a.len(), 1);
        assert!(Arc::ptr_eq(&on_a[0], &a2));
        assert_eq!(keys.holds("a", |_| true).len(), 1);
        keys.remove_hold("a", &a2);
        assert!(!keys.contains_key("a"));
        assert!(keys.contains_key("b"));
    }

    /// Holds end behind the watch's back (a guard dropped on another
    /// thread): their slots are dropped at the next look at the key, and
    /// before the table grows, and the live holds are still found after
    /// every growth, whatever ended in between.
    #[test]
    fn ended_holds_leave_no_slot_behind_and_hide_no_live_one() {
        let mut keys = Keys::default();
        let mut live = Vec::new();
        for round in 0..2_000 {
            let kept = hold(&format!("key{round}"));
            let ended = hold(&format!("key{round}"));
            keys.add(Arc::downgrade(&kept));
            keys.add(Arc::downgrade(&ended));
            drop(ended);
            live.push(kept);
            if round % 3 == 0 {
                // Some keys' holds all end.
                live.swap_remove(round % live.len());
            }
        }
        for kept in &live {
            let found = keys.holds(&kept.key, |_| true);
            assert_eq!(found.len(), 1, "{}", kept.key);
            assert!(Arc::ptr_eq(&found[0], kept));
        }
        assert_eq!(keys.keys().len(), live.len());
        assert_eq!(keys.table.len(), live.len(), "an ended hold's slot stayed");
        live.clear();
        assert!(keys.keys().is_empty());
        assert!(keys.shrink_if_sparse());
        assert!(keys.is_empty());
    }

    #[test]
    fn a_key_s_pace_is_its_holds_soonest() {
        let mut keys = Keys::default();
        let first = hold("k");
        keys.add(Arc::downgrade(&first));
        let now = Instant::now();
        keys.found_unchanged("k", now);
        // Invalidated at once after a read: a strike, a delay.
        let delay = keys.invalidated("k", now).expect("watched");
        assert!(delay > Duration::ZERO);
        // A second hold, never read: the key is read at once.
        let second = hold("k");
        keys.add(Arc::downgrade(&second));
        assert_eq!(keys.invalidated("k", now), Some(Duration::ZERO));
        assert_eq!(keys.invalidated("other", now), None);
        assert!(keys.read_failed("k").expect("watched") > Duration::ZERO);
    }
}
