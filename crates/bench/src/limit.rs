//! The limit: `redis-benchmark` (C, one event loop, no client library)
//! sending redlatch's own acquire and release scripts by EVALSHA.

use redis::aio::MultiplexedConnection;
use tokio::process::Command;

use crate::redis_info;

/// Lease the scripts are given, as redlatch's default.
const LEASE_MS: &str = "30000";
/// Keys drawn from this range, so nearly every acquire finds its key free.
const KEYSPACE: &str = "1000000000";

/// The SHA1s of the loaded scripts.
pub struct Scripts {
    acquire: String,
    release: String,
}

impl Scripts {
    /// SCRIPT LOAD both scripts into the server behind `conn`.
    pub async fn load(conn: &mut MultiplexedConnection) -> Result<Scripts, String> {
        let mut load = async |source: &str| -> Result<String, String> {
            redis::cmd("SCRIPT")
                .arg("LOAD")
                .arg(source)
                .query_async(conn)
                .await
                .map_err(|error| format!("SCRIPT LOAD: {error}"))
        };
        // redlatch's scripts, exactly as the library loads them.
        let (acquire, release) = redlatch::Lock::script_sources();
        Ok(Scripts {
            acquire: load(acquire).await?,
            release: load(release).await?,
        })
    }
}

/// Requests of the short run that measures the rate before the real one.
const CALIBRATION_REQUESTS: u64 = 2_000;

/// Acquire+release cycles/s the server can serve redlatch's scripts at
/// `clients` connections, `pipeline` requests in flight on each.
///
/// redis-benchmark runs one command, so the acquire script and the release
/// script run separately over `__rand_int__` keys, and a cycle costs the
/// server the sum of both: cycles/s = 1 / (1/acquire_rps + 1/release_rps).
/// The release run draws other random keys than the acquire run, so it
/// takes the script's "not held" path (HGET, EXISTS, PUBLISH) rather than
/// the last-hold path (HGET, DEL, PUBLISH): the same number of calls.
pub async fn cycles_per_sec(
    port: u16,
    conn: &mut MultiplexedConnection,
    scripts: &Scripts,
    clients: u32,
    pipeline: u32,
    seconds: f64,
) -> Result<LimitPoint, String> {
    // A short acquire run gives the rate, so that each of the two real runs
    // lasts about half the window however fast the machine is today.
    let calibration = rps(
        port,
        clients,
        pipeline,
        CALIBRATION_REQUESTS,
        &acquire_args(scripts),
    )
    .await?;
    let n = ((calibration * seconds / 2.0) as u64).max(CALIBRATION_REQUESTS);
    let cpu_before = redis_info::used_cpu(conn).await?;
    let acquire = rps(port, clients, pipeline, n, &acquire_args(scripts)).await?;
    let release = rps(
        port,
        clients,
        pipeline,
        n,
        &[
            &scripts.release,
            "1",
            "bench:limit:__rand_int__",
            "redisson_lock__channel:{bench:limit}",
            LEASE_MS,
            "bench-owner",
        ],
    )
    .await?;
    let cpu = redis_info::used_cpu(conn).await? - cpu_before;
    // The acquire run left n locks behind; drop them before the next point.
    let _: () = redis::cmd("FLUSHALL")
        .arg("SYNC")
        .query_async(conn)
        .await
        .map_err(|error| format!("FLUSHALL: {error}"))?;
    Ok(LimitPoint {
        per_sec: 1.0 / (1.0 / acquire + 1.0 / release),
        server_cpu_us: cpu * 1e6 / n as f64,
    })
}

/// What one limit point measured.
pub struct LimitPoint {
    /// Acquire+release cycles/s.
    pub per_sec: f64,
    /// redis-server CPU time per cycle (one acquire and one release), µs.
    pub server_cpu_us: f64,
}

/// EVALSHA arguments of the acquire script: a random lock key, one fencing
/// counter (INCR costs the same on any key), redlatch's default lease.
fn acquire_args(scripts: &Scripts) -> [&str; 10] {
    [
        &scripts.acquire,
        "3",
        "bench:limit:__rand_int__",
        "redlatch_lock_token",
        "redlatch_lock_precedence:{bench:limit}",
        LEASE_MS,
        "bench-owner",
        "0",
        "1000",
        "200",
    ]
}

/// Requests/s of one redis-benchmark run of `EVALSHA args...`.
async fn rps(port: u16, clients: u32, pipeline: u32, n: u64, args: &[&str]) -> Result<f64, String> {
    let output = Command::new("redis-benchmark")
        .args(["-p", &port.to_string(), "-c", &clients.to_string()])
        .args(["-n", &n.to_string(), "-P", &pipeline.to_string()])
        .args(["-r", KEYSPACE, "--csv", "EVALSHA"])
        .args(args)
        .output()
        .await
        .map_err(|error| {
            format!("redis-benchmark: {error} (install Debian's redis-tools: scripts/ensure-redis)")
        })?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "redis-benchmark failed: {}{}",
            stdout,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    // CSV: a header line, then "test","rps",...
    stdout
        .lines()
        .nth(1)
        .and_then(|line| line.split("\",\"").nth(1))
        .and_then(|rps| rps.trim_matches('"').parse().ok())
        .ok_or_else(|| format!("cannot read redis-benchmark's output: {stdout}"))
}
