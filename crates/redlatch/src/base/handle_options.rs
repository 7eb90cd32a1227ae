//! The methods every lock handle shares, written once: its name, a named
//! owner, a fixed lease (one lease style for every primitive, Redlock and
//! permits included), the timeout error, and the acquire shape
//! (`try_acquire` and `acquire_within` here; each handle writes its own
//! `acquire`, which says how it waits). A handle has the fields
//! `name: Arc<str>`, `owner: Option<Arc<str>>` and `lease: Option<Duration>`.

/// Implements the shared builder methods for `$handle`, made by
/// `client.$factory(name)` and acquired (in the examples) with `.$acquire()`.
macro_rules! handle_options {
    ($handle:ident, $factory:literal, $acquire:literal) => {
        crate::base::handle_options::lease_option!(
            $handle,
            "# let server = testkit::RedisServer::start().unwrap();\n# let client = redlatch::Client::connect(&server.url()).await?;",
            concat!("client.", $factory, "(\"report\")"),
            $acquire
        );

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

/// Implements `with_lease` for `$handle` (a field `lease: Option<Duration>`):
/// its example starts with the hidden lines `$setup`, makes the handle with
/// `$made` and acquires with `.$acquire()`.
macro_rules! lease_option {
    ($handle:ident, $setup:expr, $made:expr, $acquire:literal) => {
        impl $handle {
            /// The same handle, with holds on a fixed `lease` that the
            /// watchdog does not renew: Redis frees the hold after `lease`
            /// even if the guard is still alive, and the guard's `lost()`
            /// resolves then (Redisson's `leaseTime`). Every primitive and
            /// Redlock take their lease this way, and every acquire of the
            /// handle (`acquire`, `try_acquire`, `acquire_within`) uses it.
            /// Checked when the handle is used:
            /// [`Error::InvalidDuration`](crate::Error::InvalidDuration) unless 1 ms ≤ `lease` ≤ 30 days.
            ///
            /// ```
            /// # #[tokio::main(flavor = "current_thread")]
            /// # async fn main() -> redlatch::Result<()> {
            #[doc = $setup]
            /// use std::time::Duration;
            ///
            #[doc = concat!("let handle = ", $made, ".with_lease(Duration::from_secs(10));")]
            #[doc = concat!("let guard = handle.", $acquire, "().await?;")]
            /// assert_eq!(guard.lease(), Duration::from_secs(10));
            /// # Ok(())
            /// # }
            /// ```
            pub fn with_lease(mut self, lease: std::time::Duration) -> $handle {
                self.lease = Some(lease);
                self
            }
        }
    };
}

/// Implements `try_acquire` and `acquire_within` for `$handle`, whose
/// `acquire_waiting(wait)` runs one acquire returning `$guard` and whose
/// `timeout(waited)` is the error of a wait that ran out (`$ran_out` names
/// it); `$try_doc` and `$within_doc` say what each does for this kind.
macro_rules! waiting_methods {
    ($handle:ident => $guard:ty, $ran_out:literal, $try_doc:literal, $within_doc:literal) => {
        impl $handle {
            #[doc = $try_doc]
            ///
            /// # Errors
            #[doc = concat!("As [`", stringify!($handle), "::acquire`].")]
            ///
            /// # Cancel safety
            #[doc = concat!("As [`", stringify!($handle), "::acquire`].")]
            pub async fn try_acquire(&self) -> crate::error::Result<Option<$guard>> {
                self.acquire_waiting(crate::engine::wait::Wait::Once).await
            }

            #[doc = $within_doc]
            ///
            /// `None` waits for ever; `Some(wait)` waits at most `wait`, and
            /// every call, retry and back-off fits in it (one deadline for the
            /// call): a stalled, slow or unreachable server costs the wait,
            /// not a response timeout per attempt. `Some(Duration::ZERO)`
            /// makes one attempt, bounded by the response timeout (as
            #[doc = concat!("[`try_acquire`](", stringify!($handle), "::try_acquire), with an error for \"not now\").")]
            ///
            /// # Errors
            #[doc = concat!(
                $ran_out,
                " when the wait ran out; ",
                "[`Error::ResponseTimeout`](crate::Error::ResponseTimeout) naming the caller's wait ",
                "([`TimeLimit::Wait`](crate::TimeLimit::Wait)) when Redis had not answered when it ran out; else as [`",
                stringify!($handle),
                "::acquire`]."
            )]
            ///
            /// # Cancel safety
            #[doc = concat!("As [`", stringify!($handle), "::acquire`].")]
            pub fn acquire_within(
                &self,
                wait: Option<std::time::Duration>,
            ) -> impl std::future::Future<Output = crate::error::Result<$guard>> + Send + '_ {
                // Not an `async fn`: it would keep its arguments twice in
                // every parked waiter.
                async move {
                    self.acquire_waiting(crate::engine::wait::Wait::within(wait))
                        .await?
                        .ok_or_else(|| self.timeout(wait.unwrap_or(std::time::Duration::MAX)))
                }
            }
        }
    };
}

pub(crate) use handle_options;
pub(crate) use lease_option;
pub(crate) use waiting_methods;
