//! The lock kinds the fault checks run for: the default (reentrant) lock
//! and the token lock, which promises the same behaviour under faults with
//! another key type and, where the server allows, no script.

use std::future::Future;

use redlatch::{AcquireLock, Client, Guard, HeldLock, Lock, Result, TokenGuard, TokenLock};

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
}
