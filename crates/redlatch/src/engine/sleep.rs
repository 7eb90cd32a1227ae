//! Sleeping until an optional instant: the background tasks' loops wait in
//! `select!` for their next due item, or forever when nothing is due.

/// Sleeps until `at`; forever when there is nothing to wait for.
pub(crate) async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
