//! The watchdog's holds, kept two ways: by key (which hold an owner has on
//! a lock) and by when each next needs the watchdog (its renewal, or the end
//! of its lease). A wake-up of the watchdog visits the holds that are due
//! and no others, and planning the next wake-up reads the earliest: the
//! work per renewal period grows with the holds, not with their square
//! (docs/BENCHMARKS.md, measure 9: every wake-up used to walk every hold).
//!
//! The holds live in a slab (kept in pages: no doubling's slack on a
//! client holding many), each at an [`EntryId`], which the hold itself
//! keeps ([`Hold::entry`]); the order names that id, and a renewal carries
//! it to its reply, so the watchdog's own steps (a sweep, a reply) and a
//! guard's find a hold without hashing its key. Only holds of a named
//! owner are indexed by key: an anonymous owner is unique to one acquire,
//! so nothing ever looks its hold up by key (a client holding many locks
//! pays no map entry per hold; docs/BENCHMARKS.md, "Client memory per held
//! lock").
//!
//! The order is one slot per hold: an instant and a window. A hold to be
//! renewed sits at its next renewal (or its lease's end, if that comes
//! first), in the window of its lease: a renewal may go out that much
//! early, to share a batch with holds due just after it. Any other hold (a
//! fixed lease, a renewal in flight) sits at the end of its lease, in the
//! window of zero. One order per window, so that a sweep walks each only as
//! far as its own window reaches.
//!
//! A slot is never later than what it stands for: every change that brings
//! a hold's due time forward goes through [`Entries`], which moves the slot.
//! A slot may be earlier (a Redlock guard's extension lengthens its hold's
//! lease outside the watchdog's lock): the sweep then visits the hold a
//! little early, finds nothing to do and moves it where it belongs.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

use crate::engine::hold::Hold;
use crate::engine::paged::Paged;
use crate::engine::renewal::renewal_period;
use crate::lease_clock::LeaseInstant;

/// The key a renewal touches and the owner (hash field or permit id).
pub(crate) type HoldKey = (Arc<str>, Arc<str>);

/// Where a tracked hold lives in [`Entries`]. Once the hold is no longer
/// tracked the id may name another hold: check with [`Entries::current`].
pub(crate) type EntryId = usize;

/// How early a renewal may go out for a hold of `lease_ms`: a third of its
/// renewal period, so that holds due about together share a batch.
pub(crate) fn early_window(lease_ms: u64) -> Duration {
    renewal_period(lease_ms) / 3
}

/// One tracked hold. Kept small: a client may track many thousands.
pub(crate) struct Entry {
    pub(crate) hold: Arc<Hold>,
    pub(crate) next_renewal: LeaseInstant,
    /// Where it sits in the order; only [`Entries`] moves it.
    slot: Slot,
    /// Guards alive for this hold (re-entries included).
    pub(crate) guards: u32,
    /// A renewal of it is in flight.
    pub(crate) renewing: bool,
}

impl Entry {
    /// A hold with `guards` guards, next renewed at `next_renewal`.
    pub(crate) fn new(hold: Arc<Hold>, guards: u32, next_renewal: LeaseInstant) -> Entry {
        Entry {
            hold,
            guards,
            next_renewal,
            renewing: false,
            // Placed by `Entries::insert`.
            slot: Slot {
                window: Window::ZERO,
                at: next_renewal,
            },
        }
    }

    /// The key it is tracked under.
    fn key(&self) -> HoldKey {
        (self.hold.key.clone(), self.hold.owner.text())
    }

    /// When the watchdog must next look at this hold, and how early it may
    /// (the window of its slot).
    fn due(&self) -> Slot {
        let valid_until = self.hold.valid_until();
        if self.hold.renewed() && !self.renewing {
            Slot {
                window: Window::of(early_window(self.hold.lease_ms())),
                at: self.next_renewal.min(valid_until),
            }
        } else {
            Slot {
                window: Window::ZERO,
                at: valid_until,
            }
        }
    }
}

/// A place in the order: the window's order, then the instant there (the
/// hold's id tells apart holds due at the same instant).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slot {
    window: Window,
    at: LeaseInstant,
}

/// A hold's place in its window's order: when it is due, then its id
/// (which tells apart holds due at the same instant). Twelve bytes, packed:
/// the order keeps one per hold in B-tree nodes, 144 bytes a leaf of 11
/// where a `(LeaseInstant, usize)` took 192 (docs/BENCHMARKS.md, "Client
/// memory per held lock"). Ids are slab places, below 2³² (as
/// `Hold::entry` keeps them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(C, packed(4))]
struct Place {
    at: LeaseInstant,
    id: u32,
}

impl Place {
    fn new(at: LeaseInstant, id: EntryId) -> Place {
        Place {
            at,
            id: u32::try_from(id).unwrap_or(u32::MAX),
        }
    }

    fn at(self) -> LeaseInstant {
        self.at
    }

    fn id(self) -> EntryId {
        self.id as EntryId
    }
}

/// How early a slot's hold may be visited, in nanoseconds: a `Duration`
/// takes twice the room, in every entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Window(u64);

impl Window {
    const ZERO: Window = Window(0);

    fn of(window: Duration) -> Window {
        Window(u64::try_from(window.as_nanos()).unwrap_or(u64::MAX))
    }

    fn duration(self) -> Duration {
        Duration::from_nanos(self.0)
    }
}

/// The tracked holds, by key and by when each is due, and how many of them
/// are single-server lock holds.
#[derive(Default)]
pub(crate) struct Entries {
    /// The holds of named owners, by key and owner.
    named: HashMap<HoldKey, EntryId>,
    /// In pages, not a doubling vector: one entry per hold, and a client
    /// may hold 100,000.
    slab: Paged<Option<Entry>>,
    /// Ids free for the next hold.
    free: Vec<EntryId>,
    /// Per window, the holds in the order they are due.
    order: BTreeMap<Window, BTreeSet<Place>>,
    locks: usize,
}

/// How far a sweep split over several lockings of the mutex got: the last
/// hold it visited (windows in increasing order, each in time order).
pub(crate) struct Sweep {
    now: LeaseInstant,
    after: Option<(Window, Place)>,
}

impl Sweep {
    /// A sweep of what is due at `now` (each window reaching that much further).
    pub(crate) fn new(now: LeaseInstant) -> Sweep {
        Sweep { now, after: None }
    }
}

impl Entries {
    /// The hold of a named owner tracked under `key` (an anonymous
    /// owner's hold is not indexed by key: find it by [`Entries::id_of`]).
    pub(crate) fn get(&self, key: &HoldKey) -> Option<&Entry> {
        self.named
            .get(key)
            .and_then(|id| self.slab.get(*id).and_then(Option::as_ref))
    }

    /// True while a hold of `owner` on `key` is tracked, an anonymous
    /// owner's too: a walk over every hold, for the rare caller that asks
    /// (a deadlock check that found its own party holding its lock).
    pub(crate) fn tracks(&self, key: &str, owner: &str) -> bool {
        self.slab.iter().flatten().any(|entry| {
            *entry.hold.key == *key
                && entry.hold.owner.is(owner.as_bytes())
                && !entry.hold.is_marked_lost()
        })
    }

    /// Where `hold` is tracked, if it is (not released, lost or replaced).
    pub(crate) fn id_of(&self, hold: &Arc<Hold>) -> Option<EntryId> {
        let id = hold.entry();
        self.current(id, hold).then_some(id)
    }

    /// True while `id` names `hold` (not released, lost or replaced since).
    pub(crate) fn current(&self, id: EntryId, hold: &Arc<Hold>) -> bool {
        self.slab
            .get(id)
            .and_then(Option::as_ref)
            .is_some_and(|entry| Arc::ptr_eq(&entry.hold, hold))
    }

    /// Lock holds tracked (a permit or a Redlock hold is not one).
    pub(crate) fn locks(&self) -> usize {
        self.locks
    }

    /// Tracks `entry` (replacing the hold a named owner had under the same
    /// key); returns when it is first due.
    pub(crate) fn insert(&mut self, mut entry: Entry) -> LeaseInstant {
        let named = entry.hold.named_owner.then(|| entry.key());
        if let Some(key) = &named {
            self.remove(key);
        }
        let id = self.free.pop().unwrap_or(self.slab.len());
        entry.hold.set_entry(id);
        entry.slot = entry.due();
        self.place(id, entry.slot);
        if entry.hold.kind.is_lock() {
            self.locks += 1;
            crate::engine::metrics::held_locks(self.locks);
        }
        let due = entry.slot.at;
        if id == self.slab.len() {
            self.slab.push(Some(entry));
        } else {
            self.slab[id] = Some(entry);
        }
        if let Some(key) = named {
            self.named.insert(key, id);
        }
        due
    }

    /// Stops tracking the hold of a named owner under `key`.
    pub(crate) fn remove(&mut self, key: &HoldKey) {
        if let Some(id) = self.named.get(key) {
            self.remove_at(*id);
        }
    }

    /// Stops tracking the hold at `id`.
    pub(crate) fn remove_at(&mut self, id: EntryId) {
        let Some(old) = self.slab.get_mut(id).and_then(Option::take) else {
            return;
        };
        if old.hold.named_owner {
            self.named.remove(&old.key());
        }
        self.unplace(id, old.slot);
        self.free.push(id);
        if old.hold.kind.is_lock() {
            self.locks -= 1;
            crate::engine::metrics::held_locks(self.locks);
        }
    }

    /// Changes the hold at `id` and moves it to where it is now due.
    pub(crate) fn update_at<R>(
        &mut self,
        id: EntryId,
        change: impl FnOnce(&mut Entry) -> R,
    ) -> Option<R> {
        let entry = self.slab.get_mut(id)?.as_mut()?;
        let result = change(entry);
        let (was, due) = (entry.slot, entry.due());
        if was != due {
            entry.slot = due;
            self.unplace(id, was);
            self.place(id, due);
        }
        Some(result)
    }

    /// Changes every hold and moves each to where it is now due.
    pub(crate) fn update_all(&mut self, mut change: impl FnMut(&mut Entry)) {
        for id in 0..self.slab.len() {
            self.update_at(id, &mut change);
        }
    }

    /// Keeps only the holds `keep` says to keep (a walk over every hold).
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&HoldKey, &Entry) -> bool) {
        for id in 0..self.slab.len() {
            if let Some(entry) = &self.slab[id]
                && !keep(&entry.key(), entry)
            {
                self.remove_at(id);
            }
        }
    }

    /// The earliest instant a hold is due: when the watchdog must wake.
    pub(crate) fn earliest(&self) -> Option<LeaseInstant> {
        self.order
            .values()
            .filter_map(BTreeSet::first)
            .map(|place| place.at())
            .min()
    }

    /// Visits up to `limit` more of the holds due at the sweep's instant
    /// (each window's holds up to that instant plus the window), in order.
    /// `visit` says whether to keep the hold; a kept one moves to where it
    /// is now due (one moved further but still within reach is visited
    /// again by a later step, once: its slot is then exact). Returns false
    /// once the sweep has visited everything due.
    pub(crate) fn sweep_step(
        &mut self,
        sweep: &mut Sweep,
        limit: usize,
        mut visit: impl FnMut(EntryId, &mut Entry) -> bool,
    ) -> bool {
        let mut picked: Vec<(Window, Place)> = Vec::new();
        let first_window = sweep.after.map_or(Window::ZERO, |(window, _)| window);
        'windows: for (window, holds) in self.order.range(first_window..) {
            let lower = match sweep.after {
                Some((after_window, position)) if after_window == *window => {
                    Bound::Excluded(position)
                }
                _ => Bound::Unbounded,
            };
            let upper = Bound::Included(Place::new(sweep.now + window.duration(), EntryId::MAX));
            for position in holds.range((lower, upper)) {
                if picked.len() == limit {
                    break 'windows;
                }
                picked.push((*window, *position));
            }
        }
        let Some(last) = picked.last() else {
            return false;
        };
        sweep.after = Some(*last);
        let more = picked.len() == limit;
        for id in picked.into_iter().map(|(_, place)| place.id()) {
            let keep = match self.slab.get_mut(id).and_then(Option::as_mut) {
                Some(entry) => visit(id, entry),
                None => continue,
            };
            if keep {
                self.update_at(id, |_| ());
            } else {
                self.remove_at(id);
            }
        }
        more
    }

    fn place(&mut self, id: EntryId, slot: Slot) {
        self.order
            .entry(slot.window)
            .or_default()
            .insert(Place::new(slot.at, id));
    }

    fn unplace(&mut self, id: EntryId, slot: Slot) {
        if let Some(holds) = self.order.get_mut(&slot.window) {
            holds.remove(&Place::new(slot.at, id));
            if holds.is_empty() {
                self.order.remove(&slot.window);
            }
        }
    }

    /// Every tracked hold, in no order.
    #[cfg(all(test, feature = "__permutation-checks"))]
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.slab.iter().flatten()
    }

    /// Checks the order and the keys against the holds: each hold once,
    /// under its key, at its slot, never later than it is due. Panics
    /// otherwise.
    #[cfg(test)]
    pub(crate) fn check(&self) {
        let live = self.slab.iter().flatten().count();
        let named = self
            .slab
            .iter()
            .flatten()
            .filter(|e| e.hold.named_owner)
            .count();
        let placed: usize = self.order.values().map(BTreeSet::len).sum();
        assert_eq!(placed, live, "slots and holds differ in number");
        assert_eq!(
            self.named.len(),
            named,
            "keys and named holds differ in number"
        );
        assert_eq!(live + self.free.len(), self.slab.len(), "an id leaked");
        for (id, entry) in self.slab.iter().enumerate() {
            let Some(entry) = entry else { continue };
            assert_eq!(entry.hold.entry(), id, "a hold names another id");
            if entry.hold.named_owner {
                assert_eq!(
                    self.named.get(&entry.key()),
                    Some(&id),
                    "a hold's key names another id"
                );
            }
            let slot = entry.slot;
            assert!(
                self.order
                    .get(&slot.window)
                    .is_some_and(|holds| holds.contains(&Place::new(slot.at, id))),
                "a hold is missing from the order"
            );
            assert!(
                slot.at <= entry.due().at,
                "a hold sits later than it is due"
            );
        }
        let locks = self
            .slab
            .iter()
            .flatten()
            .filter(|e| e.hold.kind.is_lock())
            .count();
        assert_eq!(locks, self.locks, "lock holds miscounted");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client may track 100,000 holds (measure 9): an entry is paid that
    /// many times, in a slab (in pages since: `engine/paged.rs`). It was 56 bytes, plus
    /// a map entry of 40 keyed by the hold's strings (docs/BENCHMARKS.md,
    /// "Client memory per held lock").
    /// The order keeps a place per hold: 16 bytes as a `(LeaseInstant,
    /// usize)`, 12 packed.
    #[test]
    fn a_place_in_the_order_takes_twelve_bytes() {
        assert_eq!(std::mem::size_of::<Place>(), 12);
        let (early, late) = (
            LeaseInstant::now(),
            LeaseInstant::now() + Duration::from_millis(1),
        );
        assert!(Place::new(early, 9) < Place::new(late, 0));
        assert!(Place::new(early, 0) < Place::new(early, 1));
        assert_eq!(Place::new(late, 7).id(), 7);
        assert_eq!(Place::new(late, 7).at(), late);
    }

    #[test]
    fn a_tracked_hold_takes_little_room() {
        assert!(
            std::mem::size_of::<Option<Entry>>() <= 40,
            "{}",
            std::mem::size_of::<Option<Entry>>()
        );
    }
}
