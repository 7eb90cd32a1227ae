//! The builder methods every lock handle shares, written once: its name, a
//! named owner, a fixed lease (one lease style for every primitive), and
//! the timeout error. A handle has the fields `name: Arc<str>`,
//! `owner: Option<Arc<str>>` and `lease: Option<Duration>`.

/// Implements the shared builder methods for `$handle`, made by
/// `client.$factory(name)` and acquired (in the examples) with `.$acquire()`.
macro_rules! handle_options {
    ($handle:ident, $factory:literal, $acquire:literal) => {
        impl $handle {
            /// The lock's name, without the key prefix.
            pub fn name(&self) -> &str {
                &self.name
            }

            /// The same lock, acquired by the named owner: acquires by one
            /// owner on one client re-enter rather than wait for each other.
            ///
            /// The owner is checked when the lock is used: empty, longer than
            /// [`MAX_OWNER_LEN`](crate::Settings::MAX_OWNER_LEN) bytes, starting with `#`
            /// (reserved for anonymous owners) or ending in `:write` (reserved for
            /// read-write locks' write holds) gives [`Error::InvalidOwner`](crate::Error::InvalidOwner).
            ///
            /// ```
            /// # #[tokio::main(flavor = "current_thread")]
            /// # async fn main() -> redlatch::Result<()> {
            /// # let server = testkit::RedisServer::start().unwrap();
            /// # let client = redlatch::Client::connect(&server.url()).await?;
            #[doc = concat!("let lock = client.", $factory, "(\"cart:9\").with_owner(\"request-5f1c\");")]
            #[doc = concat!("let outer = lock.", $acquire, "().await?;")]
            #[doc = concat!("let inner = lock.", $acquire, "().await?; // re-enters: same owner")]
            /// assert_eq!(outer.token(), inner.token());
            /// assert_eq!(lock.status().await?.holders[0].count, 2);
            /// # Ok(())
            /// # }
            /// ```
            pub fn with_owner(mut self, owner: impl Into<String>) -> $handle {
                self.owner = Some(std::sync::Arc::from(owner.into()));
                self
            }

            /// The same lock, with holds on a fixed `lease` that the watchdog
            /// does not renew: Redis frees the lock after `lease` even if the
            /// guard is still alive, and the guard's `lost()` resolves then
            /// (Redisson's `leaseTime`). Every primitive takes its lease this
            /// way. Checked when the lock is used:
            /// [`Error::InvalidDuration`](crate::Error::InvalidDuration) unless 1 ms ≤ `lease` ≤ 30 days.
            ///
            /// ```
            /// # #[tokio::main(flavor = "current_thread")]
            /// # async fn main() -> redlatch::Result<()> {
            /// # let server = testkit::RedisServer::start().unwrap();
            /// # let client = redlatch::Client::connect(&server.url()).await?;
            /// use std::time::Duration;
            ///
            #[doc = concat!("let lock = client.", $factory, "(\"report\").with_lease(Duration::from_secs(10));")]
            #[doc = concat!("let guard = lock.", $acquire, "().await?;")]
            /// assert_eq!(guard.lease(), Duration::from_secs(10));
            /// # Ok(())
            /// # }
            /// ```
            pub fn with_lease(mut self, lease: std::time::Duration) -> $handle {
                self.lease = Some(lease);
                self
            }

            /// The error of a wait for this lock that ran out after `waited`.
            fn timeout(&self, waited: std::time::Duration) -> crate::error::Error {
                crate::error::Error::Timeout {
                    name: self.name.to_string(),
                    waited,
                }
            }
        }
    };
}

/// Implements `try_acquire` and `acquire_timeout` for `$handle`, whose
/// `acquire_waiting(wait)` runs one acquire; `$try_doc` and `$timeout_doc`
/// say what each does for this kind of lock.
macro_rules! waiting_methods {
    ($handle:ident, $try_doc:literal, $timeout_doc:literal) => {
        impl $handle {
            #[doc = $try_doc]
            ///
            /// # Errors
            #[doc = concat!("As [`", stringify!($handle), "::acquire`].")]
            ///
            /// # Cancel safety
            #[doc = concat!("As [`", stringify!($handle), "::acquire`].")]
            pub async fn try_acquire(&self) -> crate::error::Result<Option<Guard>> {
                self.acquire_waiting(Wait::Once).await
            }

            #[doc = $timeout_doc]
            ///
            /// Every call, retry and back-off fits in `wait` (one deadline for
            /// the call): a stalled, slow or unreachable server costs the wait,
            /// not a response timeout per attempt. A zero `wait` makes one
            /// attempt, bounded by the response timeout.
            ///
            /// # Errors
            #[doc = concat!(
                "[`Error::Timeout`](crate::Error::Timeout) when the lock stayed held for the wait; ",
                "[`Error::ResponseTimeout`](crate::Error::ResponseTimeout) naming the caller's wait ",
                "([`TimeLimit::Wait`](crate::TimeLimit::Wait)) when Redis had not answered when it ran out; else as [`",
                stringify!($handle),
                "::acquire`]."
            )]
            ///
            /// # Cancel safety
            #[doc = concat!("As [`", stringify!($handle), "::acquire`].")]
            pub async fn acquire_timeout(&self, wait: std::time::Duration) -> crate::error::Result<Guard> {
                self.acquire_waiting(Wait::For(wait))
                    .await?
                    .ok_or_else(|| self.timeout(wait))
            }
        }
    };
}

pub(crate) use handle_options;
pub(crate) use waiting_methods;
