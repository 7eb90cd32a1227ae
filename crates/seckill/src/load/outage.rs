//! `--outage`: a Redis fault injected while the load runs, to see what the
//! shop answers through it (answers by status, the longest wait).
//!
//! `--outage pause=D[,restart][,after=A]` with `--outage-redis URL` (the
//! shop's Redis), A after the first click (default 0):
//!
//! - `pause=D`: `DEBUG SLEEP D`: Redis answers nobody for D, as a stalled
//!   server (the server needs `enable-debug-command yes`, or `local` when
//!   the load runs on its host);
//! - `restart`: then `FLUSHALL` and `CLIENT KILL TYPE normal`: every key and
//!   connection gone, as after a restart without persistence (orders
//!   accepted but not yet written by a `reserve` consumer are lost with it
//!   and counted missing: that loss is what the run shows).

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, Instant};

use crate::BoxError;

/// What to do to Redis, and when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outage {
    /// How long after the first click the fault starts.
    pub after: Duration,
    /// Stall Redis this long (`DEBUG SLEEP`).
    pub pause: Option<Duration>,
    /// Then empty it and drop its connections.
    pub restart: bool,
}

/// A `--outage` spec that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("--outage {0}: expected pause=DURATION, restart and after=DURATION, comma-separated")]
pub struct OutageError(String);

impl FromStr for Outage {
    type Err = OutageError;

    fn from_str(text: &str) -> Result<Outage, OutageError> {
        let bad = || OutageError(text.to_owned());
        let mut outage = Outage {
            after: Duration::ZERO,
            pause: None,
            restart: false,
        };
        for part in text.split(',').map(str::trim) {
            let duration = |value: &str| humantime::parse_duration(value).map_err(|_| bad());
            match part.split_once('=') {
                Some(("pause", value)) if outage.pause.is_none() => {
                    outage.pause = Some(duration(value)?).filter(|d| !d.is_zero());
                    if outage.pause.is_none() {
                        return Err(bad());
                    }
                }
                Some(("after", value)) => outage.after = duration(value)?,
                None if part == "restart" && !outage.restart => outage.restart = true,
                _ => return Err(bad()),
            }
        }
        if outage.pause.is_none() && !outage.restart {
            return Err(bad());
        }
        Ok(outage)
    }
}

impl fmt::Display for Outage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(pause) = self.pause {
            parts.push(format!("pause={}", humantime::format_duration(pause)));
        }
        if self.restart {
            parts.push("restart".to_owned());
        }
        parts.push(format!("after={}", humantime::format_duration(self.after)));
        f.write_str(&parts.join(","))
    }
}

/// Connects to the shop's Redis now, so a bad URL stops the run before it
/// starts.
///
/// # Errors
/// The URL is bad or Redis does not answer.
pub async fn connect(url: &str) -> Result<redis::aio::MultiplexedConnection, BoxError> {
    let client = redis::Client::open(url).map_err(|error| format!("--outage-redis: {error}"))?;
    // No response timeout: DEBUG SLEEP answers after the whole pause.
    let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
    let mut conn = client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .map_err(|error| format!("--outage-redis {url}: {error}"))?;
    let _: String = redis::cmd("PING")
        .query_async(&mut conn)
        .await
        .map_err(|error| format!("--outage-redis {url}: {error}"))?;
    Ok(conn)
}

/// Waits `outage.after` from `start`, then injects the fault; returns
/// what was done, in words.
///
/// # Errors
/// Redis refused a command (`DEBUG` disabled, most likely).
pub async fn inject(
    mut conn: redis::aio::MultiplexedConnection,
    outage: Outage,
    start: Instant,
) -> Result<String, BoxError> {
    tokio::time::sleep_until((start + outage.after).into()).await;
    let began = start.elapsed();
    if let Some(pause) = outage.pause {
        let _: () = redis::cmd("DEBUG")
            .arg("SLEEP")
            .arg(pause.as_secs_f64())
            .query_async(&mut conn)
            .await
            .map_err(|error| {
                format!("--outage pause: DEBUG SLEEP refused ({error}); start redis-server with enable-debug-command yes")
            })?;
    }
    if outage.restart {
        let _: () = redis::cmd("FLUSHALL").query_async(&mut conn).await?;
        // Our own connection goes too (TYPE normal): the answer may be lost.
        let _ = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("normal")
            .query_async::<i64>(&mut conn)
            .await;
    }
    Ok(format!(
        "{outage}: from {:.1} s to {:.1} s after the first click",
        began.as_secs_f64(),
        start.elapsed().as_secs_f64()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_bad_ones_are_refused() {
        let outage: Outage = "pause=5s,restart,after=1s".parse().expect("a spec");
        assert_eq!(
            outage,
            Outage {
                after: Duration::from_secs(1),
                pause: Some(Duration::from_secs(5)),
                restart: true,
            }
        );
        assert_eq!(outage.to_string(), "pause=5s,restart,after=1s");
        assert!("restart".parse::<Outage>().is_ok());
        for bad in [
            "",
            "pause",
            "pause=0s",
            "pause=x",
            "after=1s",
            "restart,restart",
            "kill",
        ] {
            assert!(bad.parse::<Outage>().is_err(), "{bad:?}");
        }
    }
}
