//! The multi-lock: several locks taken all-or-nothing, in one canonical order.

use std::future::Future;
use std::time::Duration;

use crate::lease_clock::LeaseInstant;

use futures_util::future::join_all;

use crate::base::guard::Guard;
use crate::error::{Error, Result, TimeLimit};
use crate::lock::Lock;

/// Several [`Lock`]s acquired together, all or nothing, and released together:
/// Redisson's `RedissonMultiLock`, made deadlock-free by ordering.
///
/// The locks are taken one after another in a canonical order, sorted by
/// Redis key (prefix included), whatever order they were given in. Two
/// processes asking for the same names in opposite orders therefore take
/// them in the same order, and cannot each hold what the other waits for.
/// The locks may come from different clients (different Redis servers);
/// each is renewed by its own client's watchdog as usual.
///
/// If any lock cannot be had (a timeout, an error, a dropped future), the
/// locks already taken are released before the call returns.
///
/// Locks with the same key on the same client are refused
/// ([`Error::InvalidName`]): two anonymous acquires of one lock would wait
/// for each other for ever. Locks with the same key on *different* clients
/// keep the order they were given in, so give them in the same order
/// everywhere.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> redlatch::Result<()> {
/// # let server = testkit::RedisServer::start().unwrap();
/// # let client = redlatch::Client::connect(&server.url()).await?;
/// // Move stock between two warehouses: both rows, or neither.
/// let both = redlatch::MultiLock::new([
///     client.lock("stock:warehouse-b"),
///     client.lock("stock:warehouse-a"),
/// ]);
/// let guard = both.acquire_within(Some(std::time::Duration::from_secs(1))).await?;
/// assert_eq!(guard.guards().len(), 2);
/// guard.release().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct MultiLock {
    locks: Vec<Lock>,
}

impl MultiLock {
    /// A multi-lock over `locks` (no round trip; the locks are checked when
    /// it is used).
    pub fn new(locks: impl IntoIterator<Item = Lock>) -> MultiLock {
        MultiLock {
            locks: locks.into_iter().collect(),
        }
    }

    /// The locks, in the order they were given.
    pub fn locks(&self) -> &[Lock] {
        &self.locks
    }

    /// Waits until every lock is held, or for at most the
    /// [`wait_timeout`](crate::Settings::wait_timeout) of the first lock's
    /// client when it is set (none by default); each lock's lease is its
    /// handle's (watchdog leases unless [`Lock::with_lease`]).
    ///
    /// One acquire per lock, in key order: with every lock free, one round
    /// trip per lock; each lock that is held waits as [`Lock::acquire`] does,
    /// while the ones before it stay held.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for an empty multi-lock,
    /// [`Error::InvalidName`] for a bad or repeated name; else as
    /// [`Lock::acquire`]. The locks taken are released first.
    ///
    /// # Cancel safety
    /// Dropping the future releases the locks already taken (in the
    /// background) and stops the acquire in flight, which leaves nothing
    /// behind.
    pub async fn acquire(&self) -> Result<MultiGuard> {
        let wait = self
            .locks
            .first()
            .and_then(|lock| lock.core().current_settings().wait_timeout);
        self.acquire_within(wait).await
    }

    /// One attempt per lock, in key order, stopping at the first that is
    /// held: every guard, or `None` (with nothing held).
    ///
    /// # Errors
    /// As [`MultiLock::acquire`].
    ///
    /// # Cancel safety
    /// As [`MultiLock::acquire`].
    pub async fn try_acquire(&self) -> Result<Option<MultiGuard>> {
        self.acquire_each(None, |lock, _| async move { lock.try_acquire().await })
            .await
    }

    /// Waits for all the locks as long as `wait` says: `None` for ever (each
    /// lock waits as [`Lock::acquire_within`]`(None)`); `Some(wait)` at most
    /// `wait`, which covers the whole
    /// acquisition, not each lock, and every call in it (a stalled server
    /// costs the wait, not a response timeout per lock). A lock reached
    /// after the wait ran out still gets one attempt (bounded by the
    /// engine's 25 ms floor), as a single lock's bounded wait does. The locks taken are
    /// given back before it returns when Redis answers within the wait, else
    /// in the background.
    ///
    /// # Errors
    /// [`Error::Timeout`] naming the lock that was still held when `wait`
    /// ran out (the locks taken are released); [`Error::ResponseTimeout`]
    /// naming the caller's wait when Redis had not answered by then; else as
    /// [`MultiLock::acquire`].
    ///
    /// # Cancel safety
    /// As [`MultiLock::acquire`].
    pub async fn acquire_within(&self, wait: Option<Duration>) -> Result<MultiGuard> {
        let Some(wait) = wait else {
            return self
                .acquire_each(None, |lock, _| async move {
                    lock.acquire_within(None).await.map(Some)
                })
                .await?
                .ok_or_else(|| Error::Protocol {
                    op: "multi-lock acquire",
                    detail: "a lock acquired without waiting came back empty".to_owned(),
                });
        };
        let deadline = LeaseInstant::now().checked_add(wait);
        let outcome = self
            .acquire_each(deadline, move |lock, now| async move {
                let left = deadline.map_or(Duration::MAX, |at| at.saturating_duration_since(now));
                // The locks before it took the whole wait: this one still
                // gets one attempt (cut off at the engine's attempt floor),
                // as a single lock whose wait ended before its attempt
                // does; a free lock is taken, never reported held.
                let left = if wait.is_zero() {
                    left
                } else {
                    left.max(Duration::from_nanos(1))
                };
                match lock.acquire_within(Some(left)).await {
                    Ok(guard) => Ok(Some(guard)),
                    Err(Error::Timeout { name, .. }) => Err(Error::Timeout { name, waited: wait }),
                    // The whole multi-lock's wait ran out, not this lock's share.
                    Err(Error::ResponseTimeout {
                        op,
                        limit: TimeLimit::Wait(_),
                    }) => Err(Error::ResponseTimeout {
                        op,
                        limit: TimeLimit::Wait(wait),
                    }),
                    Err(other) => Err(other),
                }
            })
            .await?;
        outcome.ok_or_else(|| Error::Protocol {
            op: "multi-lock acquire",
            detail: "a lock acquired with a timeout came back empty".to_owned(),
        })
    }

    /// The locks in acquisition order: sorted by key, refusing repeats on one client.
    fn ordered(&self) -> Result<Vec<(String, &Lock)>> {
        if self.locks.is_empty() {
            return Err(Error::InvalidConfig(
                "a multi-lock needs at least one lock".to_owned(),
            ));
        }
        let mut ordered = self
            .locks
            .iter()
            .map(|lock| Ok((lock.redis_key()?, lock)))
            .collect::<Result<Vec<_>>>()?;
        // Stable: equal keys on different clients keep the caller's order.
        ordered.sort_by(|a, b| a.0.cmp(&b.0));
        for pair in ordered.windows(2) {
            let ((key, first), (next_key, second)) = (&pair[0], &pair[1]);
            if key == next_key && first.core().id == second.core().id {
                return Err(Error::InvalidName {
                    name: crate::error::excerpt(second.name()),
                    reason: "appears twice in the multi-lock (on the same client)",
                });
            }
        }
        Ok(ordered)
    }

    /// Takes the locks in order with `take`; on `None` or an error, the
    /// guards taken so far are released, waited for until `deadline` (a
    /// bounded wait's end) at most, then in the background.
    async fn acquire_each<'a, F, Fut>(
        &'a self,
        deadline: Option<LeaseInstant>,
        take: F,
    ) -> Result<Option<MultiGuard>>
    where
        F: Fn(&'a Lock, LeaseInstant) -> Fut,
        Fut: Future<Output = Result<Option<Guard>>> + 'a,
    {
        let ordered = self.ordered()?;
        let mut guards = Vec::with_capacity(ordered.len());
        for (_, lock) in ordered {
            match take(lock, LeaseInstant::now()).await {
                Ok(Some(guard)) => guards.push(guard),
                Ok(None) => {
                    release_all(guards, deadline).await;
                    return Ok(None);
                }
                Err(error) => {
                    release_all(guards, deadline).await;
                    return Err(error);
                }
            }
        }
        Ok(Some(MultiGuard { guards }))
    }
}

/// Releases guards concurrently, ignoring outcomes (a partial acquisition
/// being undone: the caller gets the error that stopped it), waiting until
/// `deadline` at most: releases run to their end in the background.
async fn release_all(guards: Vec<Guard>, deadline: Option<LeaseInstant>) {
    let releases = join_all(guards.into_iter().rev().map(Guard::release));
    match deadline {
        Some(at) => {
            let left = at.saturating_duration_since(LeaseInstant::now());
            let _ = tokio::time::timeout(left, releases).await;
        }
        None => {
            let _ = releases.await;
        }
    }
}

/// Every lock of a [`MultiLock`], held together. Dropping it releases them
/// all (in the background); [`release`](MultiGuard::release) reports errors.
#[must_use = "dropping a multi-guard releases every lock at once"]
#[derive(Debug)]
pub struct MultiGuard {
    guards: Vec<Guard>,
}

impl MultiGuard {
    /// The guards, in acquisition (key) order: for their fencing tokens.
    pub fn guards(&self) -> &[Guard] {
        &self.guards
    }

    /// True while every lock is known to be held.
    pub fn is_held(&self) -> bool {
        self.guards.iter().all(Guard::is_held)
    }

    /// Resolves as soon as any of the locks is known to be lost.
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        let each: Vec<_> = self
            .guards
            .iter()
            .map(|guard| Box::pin(guard.lost()))
            .collect();
        async move {
            futures_util::future::select_all(each).await;
        }
    }

    /// Releases every lock, concurrently (one round trip each, in parallel on
    /// each client's connection).
    ///
    /// # Errors
    /// The first error among the releases ([`Error::NotHeld`] when a lock had
    /// been lost); every release is attempted regardless.
    ///
    /// # Cancel safety
    /// Dropping the future does not stop the releases: they run to their end in the background.
    pub async fn release(self) -> Result<()> {
        let outcomes = join_all(self.guards.into_iter().rev().map(Guard::release)).await;
        outcomes
            .into_iter()
            .collect::<Result<Vec<()>>>()
            .map(|_| ())
    }
}
