//! A buyer's follow-up on an accepted order: pay it, cancel it, or leave it
//! to expire (see [`Mix`](super::mix::Mix)).
//!
//! A `202` order (the `reserve` strategy) is written by a stream consumer
//! after the answer, so `GET /orders/{id}` is polled until it shows the
//! order before paying or cancelling: a `404` from pay would only say the
//! consumer was slower than the buyer.

use std::time::{Duration, Instant};

use super::identity::Identity;
use super::mix::Action;

/// How often `GET /orders/{id}` is asked while a `202` order is not yet written.
const VISIBLE_POLL: Duration = Duration::from_millis(20);

/// The status key under which transport failures (refused, reset, timed out)
/// are counted beside the HTTP status codes.
pub(crate) const TRANSPORT_ERROR: &str = "error";

/// What came of a pay or cancel request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    /// The HTTP status of `POST /orders/{id}/pay` or `/cancel`.
    Status(u16),
    /// No HTTP answer (refused, reset, timed out).
    TransportError,
    /// The `202` order never showed in `GET /orders/{id}` within the bound:
    /// nothing was sent.
    Unseen,
}

impl Answer {
    /// The key under which the report counts it: "200", "409", "error", "unseen".
    pub(crate) fn key(self) -> String {
        match self {
            Answer::Status(status) => status.to_string(),
            Answer::TransportError => TRANSPORT_ERROR.to_owned(),
            Answer::Unseen => "unseen".to_owned(),
        }
    }
}

/// The follow-up done on one order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FollowUp {
    pub action: Action,
    /// `None` for [`Action::Leave`] (no request).
    pub answer: Option<Answer>,
    /// How long the pay or cancel request took (not the wait to see the order).
    pub latency: Option<Duration>,
}

impl FollowUp {
    /// An order left alone.
    pub(crate) fn left() -> FollowUp {
        FollowUp {
            action: Action::Leave,
            answer: None,
            latency: None,
        }
    }
}

/// Does `action` on order `order_id` of `user` at `base`. `wait_visible`
/// is set for a `202` answer, whose order is first waited for that long.
pub(crate) async fn follow_up(
    client: &reqwest::Client,
    identity: &Identity,
    base: &str,
    order_id: &str,
    user: u64,
    action: Action,
    wait_visible: Option<Duration>,
) -> FollowUp {
    let verb = match action {
        Action::Pay => "pay",
        Action::Cancel => "cancel",
        Action::Leave => return FollowUp::left(),
    };
    let seen = match wait_visible {
        Some(within) => visible(client, base, order_id, within).await,
        None => true,
    };
    if !seen {
        return FollowUp {
            action,
            answer: Some(Answer::Unseen),
            latency: None,
        };
    }
    let started = Instant::now();
    let answer = identity
        .sign(
            client.post(format!("{base}/orders/{order_id}/{verb}")),
            user,
        )
        .send()
        .await;
    let latency = started.elapsed();
    let answer = match answer {
        Ok(response) => {
            let status = response.status().as_u16();
            // Read the body so the connection goes back to the pool.
            let _ = response.bytes().await;
            Answer::Status(status)
        }
        Err(_) => Answer::TransportError,
    };
    FollowUp {
        action,
        answer: Some(answer),
        latency: Some(latency),
    }
}

/// Polls `GET /orders/{id}` until it answers 200 or `within` has passed.
async fn visible(client: &reqwest::Client, base: &str, order_id: &str, within: Duration) -> bool {
    let url = format!("{base}/orders/{order_id}");
    let started = Instant::now();
    loop {
        if let Ok(response) = client.get(&url).send().await {
            let found = response.status().is_success();
            let _ = response.bytes().await;
            if found {
                return true;
            }
        }
        if started.elapsed() >= within {
            return false;
        }
        tokio::time::sleep(VISIBLE_POLL).await;
    }
}
