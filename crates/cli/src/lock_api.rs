//! The library's two kinds of lock, its single-server `Lock` and its
//! `RedlockLock`, behind one local set of traits, so that `run` and the
//! lab's library recipes are written once for both. A stand-in until the
//! library has shared traits of its own; it changes nothing in it.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use redlatch::{
    Client, Guard, Lock, LockStatus, LostReason, Redlock, RedlockGuard, RedlockLock, RedlockStatus,
    Result,
};

/// A future a boxed guard returns (a trait object cannot return `impl Future`).
pub type Boxed<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Where locks come from: a client of one server, or a Redlock.
pub trait LockSource {
    /// The lock it hands out.
    type Lock: AnyLock;

    /// The lock `name`, with an owner of its own.
    fn lock(&self, name: &str) -> Self::Lock;
}

/// A lock: its acquires and its status.
pub trait AnyLock {
    /// What a hold is.
    type Guard: AnyGuard;
    /// What the servers say of it.
    type Status;

    /// Waits for the lock, as long as it takes.
    fn acquire(&self) -> impl Future<Output = Result<Self::Guard>>;

    /// One attempt: `None` when another owner holds it.
    fn try_acquire(&self) -> impl Future<Output = Result<Option<Self::Guard>>>;

    /// Waits up to `wait`: [`redlatch::Error::Timeout`] when it runs out.
    fn acquire_timeout(&self, wait: Duration) -> impl Future<Output = Result<Self::Guard>>;

    /// The lock as the servers hold it now.
    fn status(&self) -> impl Future<Output = Result<Self::Status>>;
}

/// A hold, kept by the caller; object-safe, as `run` learns the kind only
/// from its flags.
pub trait AnyGuard: Send + 'static {
    /// The fencing token of this hold.
    fn token(&self) -> u64;

    /// Whether the hold is still good, as far as the watchdog knows.
    fn is_held(&self) -> bool;

    /// Resolves when the lock is known to be lost.
    fn lost(&self) -> Boxed<()>;

    /// Why the lock is no longer held, once it is not.
    fn lost_reason(&self) -> Option<LostReason>;

    /// Gives the hold back.
    fn release(self: Box<Self>) -> Boxed<Result<()>>;

    /// Gives the hold back before the process exits: for Redlock, waits
    /// for the slower masters too, so no minority of holds waits out its
    /// lease.
    fn release_before_exit(self: Box<Self>) -> Boxed<Result<()>> {
        self.release()
    }
}

impl LockSource for Client {
    type Lock = Lock;

    fn lock(&self, name: &str) -> Lock {
        Client::lock(self, name)
    }
}

impl LockSource for Redlock {
    type Lock = RedlockLock;

    fn lock(&self, name: &str) -> RedlockLock {
        Redlock::lock(self, name)
    }
}

impl AnyLock for Lock {
    type Guard = Guard;
    type Status = LockStatus;

    async fn acquire(&self) -> Result<Guard> {
        Lock::acquire(self).await
    }

    async fn try_acquire(&self) -> Result<Option<Guard>> {
        Lock::try_acquire(self).await
    }

    async fn acquire_timeout(&self, wait: Duration) -> Result<Guard> {
        Lock::acquire_timeout(self, wait).await
    }

    async fn status(&self) -> Result<LockStatus> {
        Lock::status(self).await
    }
}

impl AnyLock for RedlockLock {
    type Guard = RedlockGuard;
    type Status = RedlockStatus;

    async fn acquire(&self) -> Result<RedlockGuard> {
        RedlockLock::acquire(self).await
    }

    async fn try_acquire(&self) -> Result<Option<RedlockGuard>> {
        RedlockLock::try_acquire(self).await
    }

    async fn acquire_timeout(&self, wait: Duration) -> Result<RedlockGuard> {
        RedlockLock::acquire_timeout(self, wait).await
    }

    async fn status(&self) -> Result<RedlockStatus> {
        RedlockLock::status(self).await
    }
}

impl AnyGuard for Guard {
    fn token(&self) -> u64 {
        Guard::token(self)
    }

    fn is_held(&self) -> bool {
        Guard::is_held(self)
    }

    fn lost(&self) -> Boxed<()> {
        Box::pin(Guard::lost(self))
    }

    fn lost_reason(&self) -> Option<LostReason> {
        Guard::lost_reason(self)
    }

    fn release(self: Box<Self>) -> Boxed<Result<()>> {
        Box::pin(Guard::release(*self))
    }
}

impl AnyGuard for RedlockGuard {
    fn token(&self) -> u64 {
        RedlockGuard::token(self)
    }

    fn is_held(&self) -> bool {
        RedlockGuard::is_held(self)
    }

    fn lost(&self) -> Boxed<()> {
        Box::pin(RedlockGuard::lost(self))
    }

    fn lost_reason(&self) -> Option<LostReason> {
        RedlockGuard::lost_reason(self)
    }

    fn release(self: Box<Self>) -> Boxed<Result<()>> {
        Box::pin(RedlockGuard::release(*self))
    }

    fn release_before_exit(self: Box<Self>) -> Boxed<Result<()>> {
        Box::pin(RedlockGuard::release_everywhere(*self))
    }
}
