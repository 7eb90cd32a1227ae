//! The sale window check every strategy makes first (seed §1: "has the sale
//! started? has it ended?"), from a per-instance cache.
//!
//! Vouchers cannot be edited once created, so a voucher's window read once
//! stays true: caching it spares the database one read per click, which
//! matters most for the `reserve` strategy, whose point is not to touch the
//! database on the request path. Unknown ids are not cached (the voucher may
//! be created later, by another instance).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use parking_lot::RwLock;

use crate::db::{Db, DbError};

/// Cached windows beyond this many are dropped all at once (simple, and
/// refilled by one read each).
const MAX_CACHED: usize = 100_000;

/// Where a voucher's sale stands at some instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaleState {
    /// No voucher with that id.
    Unknown,
    /// Before `begin_at`.
    NotStarted,
    /// Between `begin_at` (inclusive) and `end_at` (exclusive).
    Open,
    /// At or after `end_at`.
    Ended,
}

#[derive(Clone, Copy, Debug)]
struct Window {
    begin_at: DateTime<Utc>,
    end_at: DateTime<Utc>,
}

/// The windows of the vouchers this instance has seen.
pub struct SaleWindows {
    db: Db,
    cache: RwLock<HashMap<i64, Window>>,
}

impl SaleWindows {
    /// An empty cache over `db`.
    pub fn new(db: Db) -> SaleWindows {
        SaleWindows {
            db,
            cache: RwLock::new(HashMap::new()),
        }
    }

    /// When voucher `voucher_id`'s sale ends (`None`: no such voucher).
    ///
    /// # Errors
    /// Database failures on a cache miss.
    pub async fn end_at(&self, voucher_id: i64) -> Result<Option<DateTime<Utc>>, DbError> {
        Ok(self.window(voucher_id).await?.map(|window| window.end_at))
    }

    /// The state of voucher `voucher_id`'s sale at `now`.
    ///
    /// # Errors
    /// Database failures on a cache miss.
    pub async fn state(&self, voucher_id: i64, now: DateTime<Utc>) -> Result<SaleState, DbError> {
        let Some(window) = self.window(voucher_id).await? else {
            return Ok(SaleState::Unknown);
        };
        Ok(if now < window.begin_at {
            SaleState::NotStarted
        } else if now >= window.end_at {
            SaleState::Ended
        } else {
            SaleState::Open
        })
    }

    /// The voucher's window, from the cache or read once.
    async fn window(&self, voucher_id: i64) -> Result<Option<Window>, DbError> {
        let cached = self.cache.read().get(&voucher_id).copied();
        let window = match cached {
            Some(window) => window,
            None => match self.db.find_voucher(voucher_id).await? {
                None => return Ok(None),
                Some(voucher) => {
                    let window = Window {
                        begin_at: voucher.begin_at,
                        end_at: voucher.end_at,
                    };
                    let mut cache = self.cache.write();
                    if cache.len() >= MAX_CACHED {
                        cache.clear();
                    }
                    cache.insert(voucher_id, window);
                    window
                }
            },
        };
        Ok(Some(window))
    }
}
