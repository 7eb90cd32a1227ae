//! `noop` (hidden): no lock at all. Every acquire succeeds at once, yet it
//! claims every guarantee, so a working checker must report it broken.

use super::info::{Info, Promise};
use super::recipe::Recipe;
use crate::check::points::Points;

/// Claims everything, keeps nothing.
pub const INFO: Info = Info {
    promises: |_| Promise::EVERYTHING,
    ..Info::PLAIN
};

/// Nothing to connect.
pub struct Noop;

impl Recipe for Noop {
    async fn try_acquire(&mut self, _points: &Points) -> Result<Option<Option<u64>>, String> {
        Ok(Some(None))
    }

    async fn release(&mut self, _points: &Points) -> Result<bool, String> {
        Ok(true)
    }
}
