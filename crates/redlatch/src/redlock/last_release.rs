//! What the guard's releases found on each node, for the calls of its
//! acquisition still running when the guard was handed out (stragglers):
//! a node whose release deleted this owner's hold has nothing left of the
//! acquisition, so a grant that arrives there late needs no give-back.

use std::time::Duration;

use tokio::sync::watch;

/// Per node: `None` until a release of the guard answered there, then
/// whether it deleted the hold (the last hold there: `Released::Unlocked`).
pub(crate) struct LastRelease {
    nodes: Vec<watch::Sender<Option<bool>>>,
}

impl LastRelease {
    /// Nothing known yet of `nodes` nodes.
    pub(crate) fn new(nodes: usize) -> LastRelease {
        LastRelease {
            nodes: (0..nodes).map(|_| watch::Sender::new(None)).collect(),
        }
    }

    /// A release on `node` answered; `deleted`: it deleted this owner's
    /// hold there. A later answer replaces an earlier one.
    pub(crate) fn record(&self, node: usize, deleted: bool) {
        if let Some(sender) = self.nodes.get(node) {
            sender.send_replace(Some(deleted));
        }
    }

    /// Waits at most `limit` for a release on `node` to answer; true when
    /// it deleted the hold. A grant answered there by then ran before that
    /// release (one grant per node and acquisition, and the owner is this
    /// acquisition's alone), so nothing of it is left. False when no
    /// release answered in time, or it found no hold to delete (the grant
    /// may have run after it: re-sent after NOSCRIPT).
    pub(crate) async fn deleted(&self, node: usize, limit: Duration) -> bool {
        let Some(sender) = self.nodes.get(node) else {
            return false;
        };
        let mut answered = sender.subscribe();
        matches!(
            tokio::time::timeout(limit, answered.wait_for(Option::is_some)).await,
            Ok(Ok(seen)) if *seen == Some(true)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_a_release_that_deleted_the_hold_spares_the_give_back() {
        let record = std::sync::Arc::new(LastRelease::new(3));
        let limit = Duration::from_secs(5);
        record.record(0, true);
        record.record(1, false);
        assert!(record.deleted(0, limit).await);
        assert!(!record.deleted(1, limit).await);
        // Nothing answered on node 2: waits, then a release that deleted it.
        let waiting = {
            let record = record.clone();
            tokio::spawn(async move { record.deleted(2, limit).await })
        };
        tokio::task::yield_now().await;
        record.record(2, true);
        assert!(waiting.await.unwrap());
        // A node out of range, or silence past the limit: give back.
        assert!(!record.deleted(7, limit).await);
        let silent = LastRelease::new(1);
        assert!(!silent.deleted(0, Duration::from_millis(10)).await);
    }
}
