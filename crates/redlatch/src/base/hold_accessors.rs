//! What every guard of a watchdog hold says of it, written once: whether it
//! is held, a future for its loss, and why it was lost. The guard has a
//! field `hold: Arc<Hold>`.

/// Implements `is_held`, `lost` and `lost_reason` for `$guard`, a hold on a `$what`.
macro_rules! hold_accessors {
    ($guard:ident, $what:literal) => {
        impl $guard {
            #[doc = concat!("True while the ", $what, " is known to be held: not found gone by a renewal,")]
            /// and its lease (minus a 1% + 2 ms drift margin) has not run out on the
            /// lease clock (which counts time the machine was suspended) since the
            /// last confirmed acquire or renewal.
            pub fn is_held(&self) -> bool {
                self.hold.is_held()
            }

            #[doc = concat!("Resolves when the ", $what, " is known to be lost: a renewal found it gone")]
            /// (expired, deleted, force-unlocked, taken over), or Redis could not be
            /// reached before the lease ran out, or a fixed lease ran out. Never
            /// resolves while it is held. The future owns what it needs: it can
            /// be moved into a task or a `select!`.
            ///
            /// ```no_run
            /// # async fn demo(client: redlatch::Client) -> redlatch::Result<()> {
            /// # async fn long_job() {}
            /// let guard = client.lock("nightly-export").acquire().await?;
            /// tokio::select! {
            ///     _ = long_job() => guard.release().await?,
            ///     _ = guard.lost() => eprintln!("lock lost: stopping the export"),
            /// }
            /// # Ok(()) }
            /// ```
            pub fn lost(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
                self.hold.clone().until_marked_lost()
            }

            #[doc = concat!("Why the ", $what, " is no longer held, once it is not; `None` while held.")]
            pub fn lost_reason(&self) -> Option<crate::engine::hold::LostReason> {
                self.hold.lost_reason()
            }
        }
    };
}

pub(crate) use hold_accessors;
