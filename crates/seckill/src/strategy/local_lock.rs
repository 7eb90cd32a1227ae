//! Seed §3: a per-user lock in the process (Java's
//! `synchronized (userId.toString().intern())`), around check, conditional
//! decrement and insert; the transaction commits before the lock is released.
//!
//! Within one instance a user's clicks now queue one behind the other, and
//! the second finds the first one's order. Two instances have two maps of
//! mutexes: a user's clicks landing on both run side by side, and the lab
//! schema gets duplicate orders again (seed §3.1).
//!
//! The existing-order check is a plain read outside the write transaction,
//! as in the seed on MySQL: on SQLite a write transaction holds the file's
//! write lock and would serialize the instances, hiding the race.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex as SyncMutex;
use tokio::sync::{Mutex, OwnedMutexGuard};

use super::contract::{Click, OrderContext, OrderError, Placed, Strategy, race_window};

/// Which lock a request takes: one per user and voucher.
type LockKey = (i64, i64);

/// The per-user mutexes of this process. Entries go away when no request
/// holds or waits for them, so the map does not grow with the user count.
#[derive(Default)]
pub struct LocalLock {
    mutexes: Arc<SyncMutex<HashMap<LockKey, Arc<Mutex<()>>>>>,
}

/// A held per-user mutex; removes the map entry when it was the last user.
struct UserGuard {
    key: LockKey,
    mutexes: Arc<SyncMutex<HashMap<LockKey, Arc<Mutex<()>>>>>,
    guard: Option<OwnedMutexGuard<()>>,
}

impl LocalLock {
    async fn lock(&self, key: LockKey) -> UserGuard {
        let mutex = self.mutexes.lock().entry(key).or_default().clone();
        let guard = mutex.lock_owned().await;
        UserGuard {
            key,
            mutexes: self.mutexes.clone(),
            guard: Some(guard),
        }
    }

    /// Users with a mutex in the map now (held or waited for).
    pub fn tracked_users(&self) -> usize {
        self.mutexes.lock().len()
    }
}

impl Drop for UserGuard {
    fn drop(&mut self) {
        let mut mutexes = self.mutexes.lock();
        drop(self.guard.take());
        // Only the map's handle left: nobody holds or waits for it.
        if mutexes
            .get(&self.key)
            .is_some_and(|mutex| Arc::strong_count(mutex) == 1)
        {
            mutexes.remove(&self.key);
        }
    }
}

impl Strategy for LocalLock {
    fn order<'a>(&'a self, ctx: &'a OrderContext, click: Click) -> Placed<'a> {
        Box::pin(async move {
            ctx.check_stock_left(click.voucher_id).await?;
            let _user = self.lock((click.voucher_id, click.user_id)).await;
            if ctx.db.has_order(click.voucher_id, click.user_id).await? {
                return Err(OrderError::AlreadyOrdered);
            }
            race_window().await;
            ctx.sell_if_left(click.voucher_id, click.user_id).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn map_entries_go_away_after_use() {
        let locks = LocalLock::default();
        let first = locks.lock((1, 7)).await;
        let waiter = {
            let locks_map = locks.mutexes.clone();
            let locks = LocalLock { mutexes: locks_map };
            tokio::spawn(async move {
                let _second = locks.lock((1, 7)).await;
            })
        };
        tokio::task::yield_now().await;
        assert_eq!(locks.tracked_users(), 1);
        drop(first);
        waiter.await.unwrap();
        assert_eq!(locks.tracked_users(), 0);
    }
}
