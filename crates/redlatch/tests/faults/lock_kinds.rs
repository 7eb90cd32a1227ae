//! The lock kinds the fault checks run for: the default (reentrant) lock
//! and the token lock, which promises the same behaviour under faults with
//! another key type and, where the server allows, no script.

use std::future::Future;

use redis::aio::MultiplexedConnection;
use redlatch::{AcquireLock, Client, Guard, HeldLock, Lock, Result, TokenGuard, TokenLock};

use crate::common;

/// One kind of lock, as a fault check needs it.
pub trait LockKind {
    /// What the fault output names the kind.
    const NAME: &'static str;
    /// The handle's guard.
    type Guard: HeldLock + Send + Sync + 'static;
    /// The handle.
    type Lock: AcquireLock<Guard = Self::Guard> + Clone + Send + Sync + 'static;

    /// `client`'s lock `name` of this kind.
    fn lock(client: &Client, name: &str) -> Self::Lock;

    /// Deletes the lock whoever holds it.
    fn force_unlock(lock: &Self::Lock) -> impl Future<Output = Result<bool>> + Send;

    /// The hold's fencing token, where the kind gives one unasked.
    fn fence(guard: &Self::Guard) -> Option<u64>;

    /// True once the server holds what tells a waiter on `name` of a
    /// release (for another client's release).
    fn waiters_listening(
        admin: &mut MultiplexedConnection,
        name: &str,
    ) -> impl Future<Output = bool> + Send;

    /// Closes the connections that carry those wake-ups; returns how many.
    fn kill_wakeups(admin: &mut MultiplexedConnection) -> impl Future<Output = usize> + Send;
}

/// [`Client::lock`]: a hash under `PREFIX+NAME`, scripts for every step.
pub struct DefaultLock;

impl LockKind for DefaultLock {
    const NAME: &'static str = "lock";
    type Guard = Guard;
    type Lock = Lock;

    fn lock(client: &Client, name: &str) -> Lock {
        client.lock(name)
    }

    fn force_unlock(lock: &Lock) -> impl Future<Output = Result<bool>> + Send {
        lock.force_unlock()
    }

    fn fence(guard: &Guard) -> Option<u64> {
        Some(guard.token())
    }

    /// A subscription to the lock's channel, where releases publish.
    async fn waiters_listening(admin: &mut MultiplexedConnection, name: &str) -> bool {
        let channel = format!("redisson_lock__channel:{{{name}}}");
        common::subscribers(admin, &channel).await >= 1
    }

    async fn kill_wakeups(admin: &mut MultiplexedConnection) -> usize {
        usize::try_from(common::kill_subscriptions(admin).await).unwrap()
    }
}

/// [`Client::token_lock`]: a plain string under `PREFIX+NAME`, script-free
/// where the server has `DELIFEQ`/`DELEX` and `SET … IFEQ`.
pub struct TokenKind;

impl LockKind for TokenKind {
    const NAME: &'static str = "token-lock";
    type Guard = TokenGuard;
    type Lock = TokenLock;

    fn lock(client: &Client, name: &str) -> TokenLock {
        client.token_lock(name)
    }

    fn force_unlock(lock: &TokenLock) -> impl Future<Output = Result<bool>> + Send {
        lock.force_unlock()
    }

    fn fence(guard: &TokenGuard) -> Option<u64> {
        guard.fencing_token()
    }

    /// A release publishes nothing: a loss watch's connection tracks the
    /// key, and the server pushes its change.
    async fn waiters_listening(admin: &mut MultiplexedConnection, _name: &str) -> bool {
        !common::tracking_connection_ids(admin).await.is_empty()
    }

    async fn kill_wakeups(admin: &mut MultiplexedConnection) -> usize {
        let ids = common::tracking_connection_ids(admin).await;
        for id in &ids {
            let _: i64 = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("ID")
                .arg(id)
                .query_async(admin)
                .await
                .unwrap();
        }
        ids.len()
    }
}
