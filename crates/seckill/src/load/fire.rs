//! Sending the clicks: every user's K duplicates at the same moment, spread
//! round-robin over the targets, at most C requests in flight; then the
//! user's follow-up on each accepted order (see [`follow_up`](super::follow_up)),
//! still inside the user's share of the C.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use indicatif::ProgressBar;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::follow_up::{FollowUp, TRANSPORT_ERROR, follow_up};
use super::identity::Identity;
use super::mix::{Action, Mix};
use crate::BoxError;

/// Longest wait for one answer: a stuck instance must not hang the load.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Connections opened per target before the clock starts.
const WARM_CONNECTIONS_PER_TARGET: u32 = 64;

/// The instances' base URLs, without a trailing slash.
#[derive(Debug, Clone)]
pub(crate) struct Targets(Vec<String>);

impl Targets {
    /// Checks that there is at least one target and each is an http(s) URL.
    pub(crate) fn parse(raw: &[String]) -> Result<Self, BoxError> {
        if raw.is_empty() {
            return Err("at least one --target URL is needed".into());
        }
        let mut targets = Vec::with_capacity(raw.len());
        for text in raw {
            let url = reqwest::Url::parse(text.trim())
                .map_err(|error| format!("--target {text:?} is not a URL: {error}"))?;
            if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
                return Err(format!("--target {text:?} must be an http:// URL with a host").into());
            }
            targets.push(url.as_str().trim_end_matches('/').to_owned());
        }
        Ok(Self(targets))
    }

    /// The first target: the one verification asks over HTTP.
    pub(crate) fn first(&self) -> &str {
        &self.0[0]
    }

    /// All targets, in the order given.
    pub(crate) fn all(&self) -> &[String] {
        &self.0
    }

    /// The target of request number `n` (0-based, over all users' clicks):
    /// consecutive requests go to consecutive targets, so a user's K clicks
    /// are spread over min(K, T) instances.
    fn for_request(&self, n: u64) -> &str {
        // The remainder is below len(), which fits usize.
        let index = (n % self.0.len() as u64) as usize;
        &self.0[index]
    }
}

/// The load's shape.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    pub voucher: u64,
    pub users: u64,
    pub clicks: u32,
    /// Requests in flight at most; at least `clicks`.
    pub concurrency: u32,
    /// What buyers do with their accepted orders.
    pub mix: Mix,
    /// Longest wait for a `202` order to show before paying or cancelling it.
    pub visible_within: Duration,
}

/// An order the service said it accepted (`201` written, `202` accepted
/// for writing), and what its buyer did with it then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Accepted {
    pub user: u64,
    /// The `order_id` of the answer, as decimal text.
    pub order_id: String,
    pub follow_up: FollowUp,
}

/// What the clicks got back.
#[derive(Debug)]
pub(crate) struct Fired {
    pub requests: u64,
    pub elapsed: Duration,
    /// Per-request latency in microseconds.
    pub latency: Histogram<u64>,
    /// Count per HTTP status code ("201", "409", ...) and [`TRANSPORT_ERROR`].
    pub statuses: BTreeMap<String, u64>,
    /// Count per `error` code of the refusals' JSON bodies ("sold_out", ...).
    pub errors: BTreeMap<String, u64>,
    pub accepted: Vec<Accepted>,
    /// `201` answers whose body had no readable `order_id` (a service bug).
    pub accepted_without_id: u64,
    /// Latency of `POST /orders/{id}/pay` and `/cancel`, in microseconds.
    pub pay_latency: Histogram<u64>,
    pub cancel_latency: Histogram<u64>,
}

/// One click's outcome.
struct Click {
    user: u64,
    /// The request's number (picks its target).
    n: u64,
    status: Option<u16>,
    latency: Duration,
    order_id: Option<String>,
    /// The `error` code of a refusal's body.
    error: Option<String>,
    /// The follow-up on the accepted order, once done.
    follow_up: Option<FollowUp>,
}

/// An HTTP client with room for `concurrency` pooled connections per target.
pub(crate) fn http_client(concurrency: u32) -> Result<reqwest::Client, BoxError> {
    let client = reqwest::Client::builder()
        // The targets are the shop's own instances, never through a proxy.
        .no_proxy()
        .pool_max_idle_per_host(concurrency as usize)
        .tcp_nodelay(true)
        .timeout(REQUEST_TIMEOUT)
        .build()?;
    Ok(client)
}

/// Opens connections to every target before the clock starts (so the first
/// users' clicks are not slowed by TCP handshakes, and stay simultaneous),
/// and fails early when a target does not answer `GET /health`.
pub(crate) async fn warm_up(
    client: &reqwest::Client,
    targets: &Targets,
    concurrency: u32,
) -> Result<(), BoxError> {
    let per_target = concurrency.min(WARM_CONNECTIONS_PER_TARGET);
    let mut probes = JoinSet::new();
    for target in targets.all() {
        for _ in 0..per_target {
            let client = client.clone();
            let url = format!("{target}/health");
            probes.spawn(async move {
                let answer = client.get(&url).send().await;
                (url, answer.map(|response| response.status()))
            });
        }
    }
    while let Some(joined) = probes.join_next().await {
        let (url, answer) = joined?;
        match answer {
            Ok(status) if status.is_success() => {}
            Ok(status) => return Err(format!("GET {url} answered {status}").into()),
            Err(error) => return Err(format!("GET {url} failed: {error}").into()),
        }
    }
    Ok(())
}

/// Sends every user's clicks and collects the answers.
pub(crate) async fn fire(
    client: &reqwest::Client,
    targets: &Targets,
    shape: &Shape,
    identity: &Identity,
    progress: &ProgressBar,
) -> Result<Fired, BoxError> {
    let semaphore = Arc::new(Semaphore::new(shape.concurrency as usize));
    // Numbers the accepted orders as they come, for `Mix::action`.
    let accepted_so_far = Arc::new(AtomicU64::new(0));
    let shared_targets = Arc::new(targets.clone());
    let mut users = JoinSet::new();
    let mut fired = Fired {
        requests: 0,
        elapsed: Duration::ZERO,
        latency: histogram()?,
        statuses: BTreeMap::new(),
        errors: BTreeMap::new(),
        accepted: Vec::new(),
        accepted_without_id: 0,
        pay_latency: histogram()?,
        cancel_latency: histogram()?,
    };
    let started = Instant::now();
    for user in 1..=shape.users {
        // All K permits at once: a user's clicks start together or not at all.
        let permits = semaphore.clone().acquire_many_owned(shape.clicks).await?;
        let clicks: Vec<_> = (0..shape.clicks)
            .map(|i| {
                // Wrapping: only the remainder matters (see `for_request`).
                let n = (user - 1)
                    .wrapping_mul(u64::from(shape.clicks))
                    .wrapping_add(u64::from(i));
                let url = format!(
                    "{}/vouchers/{}/orders",
                    targets.for_request(n),
                    shape.voucher
                );
                click(client.clone(), url, user, n, identity.clone())
            })
            .collect();
        let (client, targets, shape) = (client.clone(), shared_targets.clone(), *shape);
        let identity = identity.clone();
        let accepted_so_far = accepted_so_far.clone();
        users.spawn(async move {
            let mut outcomes = futures_util::future::join_all(clicks).await;
            for click in &mut outcomes {
                let (Some(status @ (201 | 202)), Some(order_id)) = (click.status, &click.order_id)
                else {
                    continue;
                };
                let action = shape
                    .mix
                    .action(accepted_so_far.fetch_add(1, Ordering::Relaxed));
                // The next target: with several, the order is paid or
                // cancelled on another instance than the one that took it.
                let base = targets.for_request(click.n.wrapping_add(1));
                click.follow_up = Some(
                    follow_up(
                        &client,
                        &identity,
                        base,
                        order_id,
                        click.user,
                        action,
                        (status == 202).then_some(shape.visible_within),
                    )
                    .await,
                );
            }
            drop(permits);
            outcomes
        });
        while let Some(done) = users.try_join_next() {
            tally(&mut fired, done?, progress);
        }
    }
    while let Some(done) = users.join_next().await {
        tally(&mut fired, done?, progress);
    }
    fired.elapsed = started.elapsed();
    Ok(fired)
}

fn histogram() -> Result<Histogram<u64>, BoxError> {
    Ok(Histogram::new_with_bounds(1, 3_600_000_000, 3)?)
}

fn micros(latency: Duration) -> u64 {
    u64::try_from(latency.as_micros())
        .unwrap_or(u64::MAX)
        .max(1)
}

/// One click: `POST /vouchers/{id}/orders` as `user`.
async fn click(
    client: reqwest::Client,
    url: String,
    user: u64,
    n: u64,
    identity: Identity,
) -> Click {
    let started = Instant::now();
    let answer = identity.sign(client.post(&url), user).send().await;
    let (status, order_id, error) = match answer {
        Ok(response) => {
            let status = response.status().as_u16();
            let body = response.bytes().await.unwrap_or_default();
            if matches!(status, 201 | 202) {
                (Some(status), order_id_of(&body), None)
            } else {
                (Some(status), None, error_code_of(&body))
            }
        }
        Err(_) => (None, None, None),
    };
    Click {
        user,
        n,
        status,
        latency: started.elapsed(),
        order_id,
        error,
        follow_up: None,
    }
}

/// The `error` code of a refusal's JSON body (`{"error": "sold_out"}`).
pub(crate) fn error_code_of(body: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    Some(value.get("error")?.as_str()?.to_owned())
}

/// The `order_id` of a `201` body, as decimal text: a JSON number or a string
/// (services often send 64-bit ids as strings for JavaScript's sake).
pub(crate) fn order_id_of(body: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    id_text(value.get("order_id")?)
}

/// A JSON id (number or string) as text, so ids compare the same either way.
pub(crate) fn id_text(value: &serde_json::Value) -> Option<String> {
    match value {
        serde_json::Value::Number(number) => Some(number.to_string()),
        serde_json::Value::String(text) if !text.is_empty() => Some(text.clone()),
        _ => None,
    }
}

fn tally(fired: &mut Fired, clicks: Vec<Click>, progress: &ProgressBar) {
    for click in clicks {
        fired.requests += 1;
        fired.latency.saturating_record(micros(click.latency));
        let key = click
            .status
            .map_or_else(|| TRANSPORT_ERROR.to_owned(), |status| status.to_string());
        *fired.statuses.entry(key).or_default() += 1;
        if let Some(code) = click.error {
            *fired.errors.entry(code).or_default() += 1;
        }
        if matches!(click.status, Some(201 | 202)) {
            match click.order_id {
                Some(order_id) => {
                    let follow_up = click.follow_up.unwrap_or_else(FollowUp::left);
                    let histogram = match follow_up.action {
                        Action::Pay => Some(&mut fired.pay_latency),
                        Action::Cancel => Some(&mut fired.cancel_latency),
                        Action::Leave => None,
                    };
                    if let (Some(histogram), Some(latency)) = (histogram, follow_up.latency) {
                        histogram.saturating_record(micros(latency));
                    }
                    fired.accepted.push(Accepted {
                        user: click.user,
                        order_id,
                        follow_up,
                    });
                }
                None => fired.accepted_without_id += 1,
            }
        }
        progress.inc(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn targets(n: usize) -> Targets {
        let raw: Vec<String> = (0..n)
            .map(|i| format!("http://127.0.0.1:{}/", 8081 + i))
            .collect();
        Targets::parse(&raw).expect("valid targets")
    }

    #[test]
    fn duplicate_clicks_of_one_user_go_to_different_targets() {
        let targets = targets(2);
        let clicks = 3u64;
        for user in 1..=10u64 {
            let first = (user - 1) * clicks;
            let hit: Vec<&str> = (first..first + clicks)
                .map(|n| targets.for_request(n))
                .collect();
            assert_ne!(hit[0], hit[1], "user {user}: {hit:?}");
            assert_ne!(hit[1], hit[2], "user {user}: {hit:?}");
        }
    }

    #[test]
    fn targets_lose_their_trailing_slash_and_bad_ones_are_refused() {
        assert_eq!(targets(1).first(), "http://127.0.0.1:8081");
        assert!(Targets::parse(&[]).is_err());
        assert!(Targets::parse(&["not a url".into()]).is_err());
        assert!(Targets::parse(&["ftp://host/".into()]).is_err());
    }

    #[test]
    fn order_ids_read_as_numbers_or_strings() {
        assert_eq!(
            order_id_of(br#"{"order_id":123456789012345678}"#).as_deref(),
            Some("123456789012345678")
        );
        assert_eq!(order_id_of(br#"{"order_id":"42"}"#).as_deref(), Some("42"));
        assert_eq!(order_id_of(br#"{"error":"sold_out"}"#), None);
        assert_eq!(order_id_of(b"not json"), None);
    }

    #[test]
    fn error_codes_read_from_refusals() {
        assert_eq!(
            error_code_of(br#"{"error":"conflict","message":"m"}"#).as_deref(),
            Some("conflict")
        );
        assert_eq!(error_code_of(br#"{"error":7}"#), None);
        assert_eq!(error_code_of(b"<html>"), None);
    }
}
