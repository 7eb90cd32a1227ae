//! The engine's trust suite: one test per defect found by trying the
//! engine's optimisations as an adversarial user would (coalesced batches,
//! holds shared across lease modes, script caches that were flushed,
//! futures kept but not polled, one bad key in a batch). Each test failed on
//! the engine before its fix; each runs where the defect lives (a
//! multi-thread runtime, a real redis-server, latency through the testkit's
//! proxy) and repeats enough to catch a race. The invariants they hold are
//! stated in docs/SAFETY.md ("The engine's invariants").

mod common;

#[path = "trust/support.rs"]
mod support;

#[path = "trust/engine.rs"]
mod engine;

#[path = "trust/scripts.rs"]
mod scripts;

#[path = "trust/liveness.rs"]
mod liveness;

#[path = "trust/loss_watch.rs"]
mod loss_watch;

#[path = "trust/chaos_watch.rs"]
mod chaos_watch;

#[path = "trust/deadline.rs"]
mod deadline;

#[path = "trust/memory.rs"]
mod memory;

/// Counts each thread's live heap bytes (`trust/memory.rs`).
#[global_allocator]
static ALLOCATOR: memory::PerThread = memory::PerThread;

#[path = "trust/parked_waiter.rs"]
mod parked_waiter;

#[path = "trust/deadlock_support.rs"]
mod deadlock_support;

#[path = "trust/deadlock.rs"]
mod deadlock;

#[path = "trust/deadlock_red.rs"]
mod deadlock_red;
