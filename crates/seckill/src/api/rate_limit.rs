//! `--rate-limit N/s`: at most N requests a second per user on the routes
//! that act for a user (placing, paying and cancelling an order), with bursts of up to N; beyond
//! that 429 `rate_limited` with `Retry-After` (whole seconds, at least 1).
//!
//! The limit is kept by each instance on its own (a GCRA limiter keyed by
//! user id, in memory): behind a balancer over k instances a user may get up
//! to k × N a second. Requests that name no user pass through (the handler
//! refuses them). Off unless `--rate-limit` is given.

use std::fmt;
use std::num::NonZeroU32;
use std::str::FromStr;
use std::sync::{Arc, Weak};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use super::auth::{Auth, known_user};
use super::error::ApiError;
use super::error_code::ErrorCode;
use crate::metrics;

/// How often users not seen for a while are forgotten.
const FORGET_EVERY: Duration = Duration::from_secs(60);

/// `--rate-limit N/s`: requests a second per user.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimit {
    /// N.
    pub per_second: NonZeroU32,
}

impl FromStr for RateLimit {
    type Err = String;

    fn from_str(text: &str) -> Result<RateLimit, String> {
        let count = text
            .trim()
            .strip_suffix("/s")
            .ok_or_else(|| format!("{text:?}: a rate limit is written N/s, such as 5/s"))?;
        count
            .parse::<NonZeroU32>()
            .map(|per_second| RateLimit { per_second })
            .map_err(|_| format!("{text:?}: N in N/s is a whole number from 1 to 4294967295"))
    }
}

impl fmt::Display for RateLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/s", self.per_second)
    }
}

/// The per-user limiter of one instance (in `AppState`); `None` inside
/// when there is no limit.
pub struct RateLimits {
    limiter: Option<DefaultKeyedRateLimiter<i64>>,
}

impl RateLimits {
    /// A limiter for `limit`, or none.
    pub fn new(limit: Option<RateLimit>) -> RateLimits {
        RateLimits {
            limiter: limit.map(|limit| RateLimiter::dashmap(Quota::per_second(limit.per_second))),
        }
    }

    /// `Err(wait)` when `user` is over the limit and may try again after `wait`.
    pub fn check(&self, user: i64) -> Result<(), Duration> {
        let Some(limiter) = &self.limiter else {
            return Ok(());
        };
        limiter
            .check_key(&user)
            .map_err(|not_until| not_until.wait_time_from(DefaultClock::default().now()))
    }

    /// Forgets users whose budget is full again (they are as if never seen).
    fn forget_idle(&self) {
        if let Some(limiter) = &self.limiter {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
    }
}

/// What the middleware and the upkeep read of an instance's state: declared
/// here and implemented by `AppState`, so that this file does not import the
/// state that holds its limiter.
pub trait Limited: AsRef<Auth> + Send + Sync + 'static {
    /// The instance's limiter.
    fn rate_limits(&self) -> &RateLimits;
    /// The instance's id, for the metrics.
    fn instance(&self) -> u16;
}

/// Keeps the limiter's memory to the users seen lately, while `state` lives.
pub fn spawn_upkeep<S: Limited>(state: &Arc<S>) {
    if state.rate_limits().limiter.is_none() {
        return;
    }
    let state: Weak<S> = Arc::downgrade(state);
    tokio::spawn(async move {
        let mut every = tokio::time::interval(FORGET_EVERY);
        every.tick().await;
        loop {
            every.tick().await;
            let Some(state) = state.upgrade() else { return };
            state.rate_limits().forget_idle();
        }
    });
}

/// The middleware (`axum::middleware::from_fn_with_state`), on the routes
/// that act for a user.
pub async fn limit<S: Limited>(
    State(state): State<Arc<S>>,
    mut request: Request,
    next: Next,
) -> Response {
    let limits = state.rate_limits();
    if limits.limiter.is_none() {
        return next.run(request).await;
    }
    let Some(user) = known_user((*state).as_ref(), &mut request) else {
        return next.run(request).await;
    };
    match limits.check(user) {
        Ok(()) => next.run(request).await,
        Err(wait) => {
            metrics::rate_limited(state.instance());
            too_many(wait)
        }
    }
}

/// 429 `rate_limited` with `Retry-After`: `wait` rounded up to whole seconds, at least 1.
fn too_many(wait: Duration) -> Response {
    let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    let seconds = seconds.max(1);
    let mut response = ApiError::with_message(
        ErrorCode::RateLimited,
        format!("too many requests; try again in {seconds} s"),
    )
    .into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_n_per_second() {
        assert_eq!("5/s".parse::<RateLimit>().unwrap().per_second.get(), 5);
        assert_eq!("5/s".parse::<RateLimit>().unwrap().to_string(), "5/s");
        for bad in ["", "5", "0/s", "-1/s", "1.5/s", "5/m", "x/s"] {
            assert!(bad.parse::<RateLimit>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn limits_each_user_on_its_own() {
        let limits = RateLimits::new(Some("2/s".parse().unwrap()));
        assert!(limits.check(1).is_ok());
        assert!(limits.check(1).is_ok());
        let wait = limits.check(1).unwrap_err();
        assert!(wait <= Duration::from_secs(1), "{wait:?}");
        assert!(
            limits.check(2).is_ok(),
            "another user has a budget of their own"
        );
        assert!(RateLimits::new(None).check(1).is_ok());
    }

    #[test]
    fn retry_after_is_whole_seconds_at_least_one() {
        let after = |wait| {
            too_many(wait).headers()[header::RETRY_AFTER]
                .to_str()
                .unwrap()
                .to_owned()
        };
        assert_eq!(after(Duration::ZERO), "1");
        assert_eq!(after(Duration::from_millis(300)), "1");
        assert_eq!(after(Duration::from_millis(1001)), "2");
        assert_eq!(after(Duration::from_secs(3)), "3");
    }
}
