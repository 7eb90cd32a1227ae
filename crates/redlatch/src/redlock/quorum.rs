//! Fan-out to every Redlock node at once, and the majority arithmetic.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;

use crate::client::Client;
use crate::error::{Error, NodeFailure, Result, TimeLimit};
use crate::redlock::node::Node;
use crate::sync::Spawner;
use crate::transport::bounded_by;

/// How many of `nodes` make a majority.
pub(crate) fn majority(nodes: usize) -> usize {
    nodes / 2 + 1
}

/// Runs `call` on every node at once, each bounded by `limit` (the node
/// timeout, which a node that does not answer is told it ran out); the replies
/// come back in node order. A node that never connected fails at once.
///
/// Dropping a reply's future at the limit cuts that node's call off; calls
/// that must finish (acquire attempts) run in tasks of their own inside `call`.
pub(crate) async fn fan_out<T, F, Fut>(
    nodes: &[Node],
    op: &'static str,
    limit: Duration,
    call: F,
) -> Vec<Result<T>>
where
    F: Fn(usize, &Client) -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let calls = nodes.iter().enumerate().map(|(i, node)| {
        let call = node.client.as_ref().map(|client| call(i, client));
        async move {
            match call {
                Some(call) => node_bounded(op, limit, call).await,
                None => Err(node.not_connected()),
            }
        }
    });
    futures_util::future::join_all(calls).await
}

/// One node's call, failing after `limit`, the node timeout, with an error
/// that names it: also when the call's own limit, set to the node timeout
/// too, fired first.
async fn node_bounded<T>(
    op: &'static str,
    limit: Duration,
    call: impl Future<Output = Result<T>>,
) -> Result<T> {
    let started = tokio::time::Instant::now();
    match bounded_by(op, limit, TimeLimit::Node(limit), call).await {
        Err(Error::ResponseTimeout { op, .. }) if started.elapsed() >= limit => {
            Err(Error::ResponseTimeout {
                op,
                limit: TimeLimit::Node(limit),
            })
        }
        reply => reply,
    }
}

/// Calls still running when [`fan_out_until`] returned, with their node index.
type Running<T> = FuturesUnordered<Pin<Box<dyn Future<Output = (usize, Result<T>)> + Send>>>;

/// The calls [`fan_out_until`] did not wait for.
pub(crate) struct Stragglers<T> {
    running: Running<T>,
}

impl<T: Send + 'static> Stragglers<T> {
    /// True when every node answered in time.
    pub(crate) fn is_empty(&self) -> bool {
        self.running.is_empty()
    }

    /// Lets the calls finish in a task of their own, started by
    /// `background` (the clients' runtime, not the caller's) and tracked by
    /// `tracker` so a process about to exit can wait for them; `each` sees
    /// every reply as it comes. (Dropped instead, the calls are cut off
    /// where they stand.)
    pub(crate) fn finish_in_background(
        self,
        background: &Spawner,
        tracker: &tokio_util::task::TaskTracker,
        mut each: impl FnMut(usize, Result<T>) + Send + 'static,
    ) {
        let mut running = self.running;
        if running.is_empty() {
            return;
        }
        background.spawn(tracker.track_future(async move {
            while let Some((node, reply)) = running.next().await {
                each(node, reply);
            }
        }));
    }
}

/// As [`fan_out`], but returns as soon as `settled` says the replies so far
/// decide the outcome (a majority, or no majority possible any more): the
/// replies in node order (`None` where the node has not answered yet), and
/// the calls still running. Waiting for the slowest node would cost every
/// call its latency, when a majority is all that counts.
pub(crate) async fn fan_out_until<T, F, Fut>(
    nodes: &[Node],
    op: &'static str,
    limit: Duration,
    call: F,
    settled: impl Fn(&[Option<Result<T>>]) -> bool,
) -> (Vec<Option<Result<T>>>, Stragglers<T>)
where
    T: Send + 'static,
    F: Fn(usize, &Client) -> Fut,
    Fut: Future<Output = Result<T>> + Send + 'static,
{
    let running: Running<T> = nodes
        .iter()
        .enumerate()
        .map(|(i, node)| {
            let call = node.client.as_ref().map(|client| call(i, client));
            let not_connected = node.not_connected();
            Box::pin(async move {
                let reply = match call {
                    Some(call) => node_bounded(op, limit, call).await,
                    None => Err(not_connected),
                };
                (i, reply)
            }) as Pin<Box<dyn Future<Output = (usize, Result<T>)> + Send>>
        })
        .collect();
    let mut running = running;
    let mut replies: Vec<Option<Result<T>>> = (0..nodes.len()).map(|_| None).collect();
    while let Some((i, reply)) = running.next().await {
        replies[i] = Some(reply);
        if settled(&replies) {
            break;
        }
    }
    (replies, Stragglers { running })
}

/// Splits replies into the answers (node order, `None` where it failed)
/// and the failures, each named after its node.
pub(crate) fn split<T>(
    nodes: &[Node],
    replies: Vec<Result<T>>,
) -> (Vec<Option<T>>, Vec<NodeFailure>) {
    split_partial(nodes, replies.into_iter().map(Some).collect())
}

/// As [`split`], for replies of [`fan_out_until`]: a node that has not
/// answered yet has no answer and no failure.
pub(crate) fn split_partial<T>(
    nodes: &[Node],
    replies: Vec<Option<Result<T>>>,
) -> (Vec<Option<T>>, Vec<NodeFailure>) {
    let mut answers = Vec::with_capacity(replies.len());
    let mut failures = Vec::new();
    for (node, reply) in nodes.iter().zip(replies) {
        match reply {
            Some(Ok(answer)) => answers.push(Some(answer)),
            Some(Err(error)) => {
                answers.push(None);
                failures.push(NodeFailure {
                    node: node.label.clone(),
                    error: Box::new(error),
                });
            }
            None => answers.push(None),
        }
    }
    (answers, failures)
}

/// The error for a call that `confirmed` nodes of `nodes` confirmed.
pub(crate) fn failed(
    op: &'static str,
    name: &str,
    nodes: usize,
    confirmed: usize,
    failures: Vec<NodeFailure>,
) -> Error {
    Error::QuorumFailed {
        op,
        name: name.to_owned(),
        needed: majority(nodes),
        nodes,
        confirmed,
        failures,
    }
}

/// A random duration in `[0, max)`: spreads retries of competing clients.
pub(crate) fn jitter(max: Duration) -> Duration {
    if max.is_zero() {
        return Duration::ZERO;
    }
    // A v4 UUID is 122 random bits: enough randomness without another dependency.
    let random = (uuid::Uuid::new_v4().as_u128() as u64) >> 11;
    max.mul_f64(random as f64 / (1u64 << 53) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn majority_is_more_than_half() {
        assert_eq!(majority(1), 1);
        assert_eq!(majority(2), 2);
        assert_eq!(majority(3), 2);
        assert_eq!(majority(5), 3);
        assert_eq!(majority(6), 4);
    }

    #[test]
    fn jitter_stays_below_its_bound() {
        let max = Duration::from_millis(20);
        for _ in 0..1000 {
            assert!(jitter(max) < max);
        }
        assert_eq!(jitter(Duration::ZERO), Duration::ZERO);
    }
}
