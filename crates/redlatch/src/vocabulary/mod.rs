//! One vocabulary for every lock: traits that the handles and guards of
//! each kind implement with their own methods, so code written once over
//! them works with a [`Lock`](crate::Lock), a [`FairLock`](crate::FairLock),
//! a [`RedlockLock`](crate::RedlockLock) or a permit.
//!
//! | trait | what | implemented by |
//! |---|---|---|
//! | [`AcquireLock`] | a lease on the handle; acquire, try, within a wait | `Lock`, `FairLock`, `SpinLock`, `TokenLock`, `RedlockLock`, `PermitSemaphore`, `ReadSide`, `WriteSide` |
//! | [`HeldLock`] | name, held, lost, release | `Guard`, `ReadGuard`, `WriteGuard`, `RedlockGuard`, `ExpirablePermit` |
//! | [`Fenced`] | the fencing token | the lock guards: not `ExpirablePermit` |
//! | [`Reenter`] | one more hold, same owner | the lock guards: not `ExpirablePermit` |
//! | [`ExtendLease`] | set the lease again | `RedlockGuard` |
//!
//! The traits sit above the primitives and Redlock and call only their
//! public methods; the blocking facade and the binaries build on them.

mod acquire;
mod extend;
mod fenced;
mod held_lock;
mod reenter;

pub use acquire::AcquireLock;
pub use extend::ExtendLease;
pub use fenced::Fenced;
pub use held_lock::HeldLock;
pub use reenter::Reenter;
