//! The engine's recording functions when the `metrics` feature is off:
//! the same calls as `engine/metrics.rs`, doing nothing, so the callers
//! need no `cfg` of their own.

use std::time::Duration;

pub(crate) fn acquire_finished(_outcome: &'static str, _took: Duration) {}

pub(crate) fn acquired(_reentered: bool) {}

pub(crate) fn contended_wait() {}

pub(crate) fn woken(_reason: &'static str) {}

pub(crate) fn renewed(_locks: u64) {}

pub(crate) fn renewal_failed(_locks: u64) {}

pub(crate) fn lock_lost(_reason: &'static str) {}

pub(crate) fn release_not_held() {}

pub(crate) fn held_locks(_count: usize) {}

pub(crate) fn deadlock() {}
