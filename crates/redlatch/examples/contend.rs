//! Several processes contend for one redlatch lock; the demo prints who held
//! it when, then checks that the lock really excluded them.
//!
//! ```text
//! cargo run --release -p redlatch --example contend
//! cargo run --release -p redlatch --example contend -- --workers 8 --rounds 10
//! cargo run --release -p redlatch --example contend -- --redis redis://127.0.0.1:6379
//! ```
//!
//! Options: `--workers N` (default 4), `--rounds R` (default 5), `--redis URL`
//! (use that server instead of starting a throwaway `redis-server` on a free
//! port; the demo resets the key `demo:counter` there), `--pause MS` (time
//! each worker spends outside the lock between rounds, default 0).
//! `scripts/demo` runs the first line after making sure `redis-server` is
//! installed.
//!
//! The parent starts N copies of this executable as worker processes, each
//! with a [`redlatch::Client`] of its own. Every worker takes the lock
//! `demo:report` R times. While holding it, it runs a deliberately unsafe
//! read-sleep-write increment of the key `demo:counter` (GET, sleep 50 to
//! 150 ms, GET again to see that nobody wrote meanwhile, SET) over a separate
//! Redis connection, so any overlap between two holders would lose updates.
//!
//! Each worker prints a line when it acquires and when it is about to
//! release: milliseconds since the parent spawned the workers (wall clock,
//! the one clock all processes share), worker id, pid, the lock's fencing
//! token. The parent shows these lines live, prefixed with the worker they
//! came from, and ends with a summary that checks:
//!
//! - every critical section ran (N x R) and saw no other writer;
//! - the counter ends at N x R: no lost updates;
//! - fencing tokens increase strictly in acquisition order;
//! - at most one holder at any time, from the acquired/released times;
//! - every worker exited successfully.
//!
//! The exit status is non-zero if any check fails.
//!
//! The "turns" line counts hand-offs to another worker. A worker that asks
//! again right after its own release (`--pause 0`) would usually get there
//! before the waiter its release woke; the library's hand-off courtesy
//! (`redlatch::Settings::HANDOFF_GRACE`) makes it step aside, so turns rotate.

use std::error::Error;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::AsyncCommands;

/// The lock every worker contends for.
const LOCK: &str = "demo:report";
/// The key the critical sections increment non-atomically.
const COUNTER: &str = "demo:counter";
const DEFAULT_WORKERS: usize = 4;
const DEFAULT_ROUNDS: usize = 5;

type AnyResult<T> = Result<T, Box<dyn Error + Send + Sync>>;

const USAGE: &str = "\
usage: contend [--workers N] [--rounds R] [--redis URL] [--pause MS]

  --workers N   worker processes contending for the lock (default 4)
  --rounds R    critical sections per worker (default 5)
  --redis URL   use this Redis server (its key demo:counter is reset)
                instead of starting a throwaway redis-server
  --pause MS    time each worker spends outside the lock between rounds
                (default 0)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let outcome = if args.first().is_some_and(|a| a == "worker") {
        worker_main(&args[1..])
    } else {
        parent_main(&args)
    };
    match outcome {
        Ok(code) => code,
        Err(error) => {
            eprintln!("contend: {error}");
            ExitCode::FAILURE
        }
    }
}

// ---------------------------------------------------------------------------
// Command line

/// Options of both roles; the worker-only ones are `None` in the parent.
#[derive(Default)]
struct Options {
    workers: Option<usize>,
    rounds: Option<usize>,
    redis: Option<String>,
    pause_ms: Option<u64>,
    id: Option<usize>,
    epoch_us: Option<u64>,
}

fn parse(args: &[String], worker: bool) -> AnyResult<Options> {
    let mut options = Options::default();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        if arg == "-h" || arg == "--help" {
            println!("{USAGE}");
            std::process::exit(0);
        }
        // Both `--flag value` and `--flag=value`.
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) => (flag, Some(value.to_owned())),
            None => (arg.as_str(), None),
        };
        let mut value = || -> AnyResult<String> {
            match inline.clone().or_else(|| args.next().cloned()) {
                Some(value) => Ok(value),
                None => Err(format!("{flag} needs a value\n{USAGE}").into()),
            }
        };
        match flag {
            "--workers" => options.workers = Some(positive(flag, &value()?)?),
            "--rounds" => options.rounds = Some(positive(flag, &value()?)?),
            "--redis" => options.redis = Some(value()?),
            "--pause" => {
                let text = value()?;
                let ms = text
                    .parse()
                    .map_err(|_| format!("--pause wants milliseconds, not {text:?}"))?;
                options.pause_ms = Some(ms);
            }
            "--id" if worker => options.id = Some(value()?.parse()?),
            "--epoch-us" if worker => options.epoch_us = Some(value()?.parse()?),
            _ => return Err(format!("unknown argument {arg:?}\n{USAGE}").into()),
        }
    }
    Ok(options)
}

fn positive(flag: &str, value: &str) -> AnyResult<usize> {
    match value.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{flag} wants a positive integer, not {value:?}").into()),
    }
}

/// Microseconds since the UNIX epoch: the clock every process shares.
fn unix_micros() -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("system clock before 1970");
    u64::try_from(now.as_micros()).expect("system clock past year 500000")
}

// ---------------------------------------------------------------------------
// Worker process

fn worker_main(args: &[String]) -> AnyResult<ExitCode> {
    let options = parse(args, true)?;
    let (Some(id), Some(url), Some(rounds), Some(epoch_us)) =
        (options.id, options.redis, options.rounds, options.epoch_us)
    else {
        return Err("worker needs --id, --redis, --rounds and --epoch-us".into());
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let pause = Duration::from_millis(options.pause_ms.unwrap_or(0));
    let conflicts = runtime.block_on(worker(id, &url, rounds, pause, epoch_us))?;
    Ok(if conflicts == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Runs `rounds` critical sections; returns how many saw another writer.
async fn worker(
    id: usize,
    url: &str,
    rounds: usize,
    pause: Duration,
    epoch_us: u64,
) -> AnyResult<usize> {
    let pid = std::process::id();
    let client = redlatch::Client::connect(url).await?;
    let lock = client.lock(LOCK);
    // The counter goes through a connection of its own, as a separate
    // resource would: the lock is the only thing keeping the writes apart.
    let mut data = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    let mut conflicts = 0;
    for round in 0..rounds {
        let guard = lock.acquire().await?;
        let token = guard.token();
        let acquired_at = unix_micros();
        println!(
            "{}",
            Line::acquired(since(epoch_us, acquired_at), id, pid, token)
        );

        // The critical section: a read-sleep-write that loses updates
        // unless the lock keeps other writers out.
        let before: i64 = data.get::<_, Option<i64>>(COUNTER).await?.unwrap_or(0);
        tokio::time::sleep(section_length(pid, round)).await;
        let seen: i64 = data.get::<_, Option<i64>>(COUNTER).await?.unwrap_or(0);
        let () = data.set(COUNTER, before + 1).await?;
        if seen != before {
            conflicts += 1;
        }

        let released_at = unix_micros();
        let line = Line::released(
            since(epoch_us, released_at),
            id,
            pid,
            token,
            Released {
                before,
                seen,
                held_us: released_at.saturating_sub(acquired_at),
            },
        );
        println!("{line}");
        guard.release().await?;
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
    }
    Ok(conflicts)
}

fn since(epoch_us: u64, at: u64) -> i64 {
    i64::try_from(at).unwrap_or(i64::MAX) - i64::try_from(epoch_us).unwrap_or(i64::MAX)
}

/// 50 to 150 ms, different for each process and round (a splitmix64 hash
/// of pid and round: varied enough without a random number crate).
fn section_length(pid: u32, round: usize) -> Duration {
    let mut x = (u64::from(pid) << 32) ^ round as u64;
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    Duration::from_millis(50 + x % 101)
}

// ---------------------------------------------------------------------------
// The line a worker prints for each event, and its parser in the parent

/// One acquired/released event: printed by a worker, parsed back by the parent.
#[derive(Clone, Debug, PartialEq)]
struct Line {
    /// Microseconds since the parent's epoch.
    t_us: i64,
    worker: usize,
    pid: u32,
    token: u64,
    released: Option<Released>,
}

#[derive(Clone, Debug, PartialEq)]
struct Released {
    /// The counter when the section started.
    before: i64,
    /// The counter just before the write: equal to `before` unless someone
    /// else wrote during the section.
    seen: i64,
    held_us: u64,
}

impl Line {
    fn acquired(t_us: i64, worker: usize, pid: u32, token: u64) -> Line {
        Line {
            t_us,
            worker,
            pid,
            token,
            released: None,
        }
    }

    fn released(t_us: i64, worker: usize, pid: u32, token: u64, released: Released) -> Line {
        Line {
            t_us,
            worker,
            pid,
            token,
            released: Some(released),
        }
    }

    /// Parses what [`Display`](std::fmt::Display) wrote; `None` for other lines.
    fn parse(text: &str) -> Option<Line> {
        let words: Vec<&str> = text.split_whitespace().collect();
        let [
            t,
            "ms",
            "worker",
            worker,
            "pid",
            pid,
            "token",
            token,
            event,
            rest @ ..,
        ] = words.as_slice()
        else {
            return None;
        };
        let t_us = (t.parse::<f64>().ok()? * 1000.0).round() as i64;
        let mut line = Line::acquired(
            t_us,
            worker.parse().ok()?,
            pid.parse().ok()?,
            token.parse().ok()?,
        );
        match (*event, rest) {
            ("acquired", []) => {}
            (
                "released",
                [
                    "held",
                    held,
                    "ms",
                    "counter",
                    before,
                    "->",
                    _after,
                    tail @ ..,
                ],
            ) => {
                let before: i64 = before.parse().ok()?;
                let seen = match tail {
                    [] => before,
                    ["CONFLICT:", "another", "writer", "set", seen, ..] => seen.parse().ok()?,
                    _ => return None,
                };
                line.released = Some(Released {
                    before,
                    seen,
                    held_us: (held.parse::<f64>().ok()? * 1000.0).round() as u64,
                });
            }
            _ => return None,
        }
        Some(line)
    }
}

impl std::fmt::Display for Line {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let event = if self.released.is_some() {
            "released"
        } else {
            "acquired"
        };
        write!(
            f,
            "{:>10.3} ms  worker {:<2} pid {:<7} token {:<5} {event}",
            self.t_us as f64 / 1000.0,
            self.worker,
            self.pid,
            self.token,
        )?;
        if let Some(r) = &self.released {
            write!(
                f,
                "  held {:>7.3} ms  counter {} -> {}",
                r.held_us as f64 / 1000.0,
                r.before,
                r.before + 1
            )?;
            if r.seen != r.before {
                write!(f, "  CONFLICT: another writer set {} meanwhile", r.seen)?;
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Parent process

/// What the reader threads send to the parent's main thread.
enum Message {
    Line {
        worker: usize,
        stderr: bool,
        text: String,
    },
    Closed,
}

fn parent_main(args: &[String]) -> AnyResult<ExitCode> {
    let options = parse(args, false)?;
    let workers = options.workers.unwrap_or(DEFAULT_WORKERS);
    let rounds = options.rounds.unwrap_or(DEFAULT_ROUNDS);
    let pause_ms = options.pause_ms.unwrap_or(0);

    // Kept alive until the end of this function: dropping it kills the server.
    let server;
    let url = match options.redis {
        Some(url) => {
            println!("redis       {url} (given with --redis)");
            url
        }
        None => {
            server = testkit::RedisServer::start()
                .map_err(|e| format!("cannot start a throwaway redis-server: {e}"))?;
            println!(
                "redis       {} (throwaway redis-server, pid {})",
                server.url(),
                server.pid().unwrap_or(0)
            );
            server.url()
        }
    };
    let mut admin = redis::Client::open(url.as_str())?
        .get_connection_with_timeout(Duration::from_secs(5))
        .map_err(|e| format!("cannot connect to {url}: {e}"))?;
    redis::cmd("SET").arg(COUNTER).arg(0).exec(&mut admin)?;
    let pausing = match pause_ms {
        0 => String::new(),
        ms => format!(", pausing {ms} ms between rounds"),
    };
    println!(
        "lock        {LOCK:?}, taken {rounds} times by each of {workers} worker processes{pausing}"
    );
    println!(
        "counter     {COUNTER:?}, set to 0; each critical section does GET, sleep 50-150 ms, SET +1"
    );
    println!("time        ms since the workers were spawned (wall clock, shared by all processes)");
    println!();

    let exe = std::env::current_exe()?;
    let epoch_us = unix_micros();
    let started = Instant::now();
    let (tx, rx) = mpsc::channel();
    let mut children: Vec<Child> = Vec::with_capacity(workers);
    for id in 0..workers {
        let spawned = Command::new(&exe)
            .args(["worker", "--id", &id.to_string(), "--redis", &url])
            .args(["--rounds", &rounds.to_string()])
            .args(["--epoch-us", &epoch_us.to_string()])
            .args(["--pause", &pause_ms.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) => {
                for mut child in children {
                    let _ = child.kill();
                    let _ = child.wait();
                }
                return Err(format!("cannot spawn worker {id} ({}): {e}", exe.display()).into());
            }
        };
        forward(id, false, child.stdout.take().expect("piped"), tx.clone());
        forward(id, true, child.stderr.take().expect("piped"), tx.clone());
        children.push(child);
    }
    drop(tx);

    // Print lines as they arrive; stop when every pipe is closed, or kill
    // the workers if they take far longer than the sections need.
    let limit = Duration::from_secs(30) + Duration::from_millis(500) * (workers * rounds) as u32;
    let mut lines = Vec::new();
    let mut unparsed = 0;
    let mut open = workers * 2;
    let mut timed_out = false;
    while open > 0 {
        let left = limit.saturating_sub(started.elapsed());
        match rx.recv_timeout(left) {
            Ok(Message::Line {
                worker,
                stderr,
                text,
            }) => {
                let mark = if stderr { '!' } else { '|' };
                println!("w{worker:<2} {mark} {text}");
                match Line::parse(&text) {
                    Some(line) if !stderr => lines.push(line),
                    _ => unparsed += 1,
                }
            }
            Ok(Message::Closed) => open -= 1,
            Err(mpsc::RecvTimeoutError::Timeout) if !timed_out => {
                timed_out = true;
                println!("!!! workers still running after {limit:?}: killing them");
                for child in &mut children {
                    let _ = child.kill();
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let mut failed_workers = Vec::new();
    for (id, mut child) in children.into_iter().enumerate() {
        let status = child.wait()?;
        if !status.success() {
            failed_workers.push(format!("w{id}: {status}"));
        }
    }
    let elapsed = started.elapsed();
    let counter: Option<i64> = redis::cmd("GET").arg(COUNTER).query(&mut admin)?;

    let summary = Summary::new(&lines, workers, rounds, counter.unwrap_or(0));
    println!();
    let ok = summary.print(elapsed, &failed_workers, unparsed, timed_out);
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Sends each line of `pipe` to the main thread from a thread of its own.
fn forward(
    worker: usize,
    stderr: bool,
    pipe: impl Read + Send + 'static,
    tx: mpsc::Sender<Message>,
) {
    thread::spawn(move || {
        for text in BufReader::new(pipe).lines() {
            let Ok(text) = text else { break };
            let message = Message::Line {
                worker,
                stderr,
                text,
            };
            if tx.send(message).is_err() {
                return;
            }
        }
        let _ = tx.send(Message::Closed);
    });
}

// ---------------------------------------------------------------------------
// Summary

struct Summary {
    expected: usize,
    acquired: usize,
    released: usize,
    conflicts: usize,
    counter: i64,
    /// Acquisitions whose token was not above the previous acquisition's.
    token_regressions: Vec<(u64, u64)>,
    first_token: Option<u64>,
    last_token: Option<u64>,
    max_holders: usize,
    /// Acquisitions by another worker than the previous one.
    switches: usize,
    /// Time from one "released" line to the next "acquired" line: how long
    /// the lock sat free (plus a release and an acquire round trip).
    handoffs_us: Vec<i64>,
    held_us: Vec<u64>,
}

impl Summary {
    fn new(lines: &[Line], workers: usize, rounds: usize, counter: i64) -> Summary {
        let mut acquisitions: Vec<&Line> = lines.iter().filter(|l| l.released.is_none()).collect();
        acquisitions.sort_by_key(|l| l.t_us);
        let switches = acquisitions
            .windows(2)
            .filter(|pair| pair[1].worker != pair[0].worker)
            .count();
        let token_regressions = acquisitions
            .windows(2)
            .filter(|pair| pair[1].token <= pair[0].token)
            .map(|pair| (pair[0].token, pair[1].token))
            .collect();

        // Sweep the events in time order. A worker prints "released" before
        // it releases and "acquired" after it acquires, so on a tie the
        // release really came first.
        let mut events: Vec<(i64, bool)> = lines
            .iter()
            .map(|l| (l.t_us, l.released.is_none()))
            .collect();
        events.sort();
        let (mut holders, mut max_holders) = (0usize, 0usize);
        let mut last_release = None;
        let mut handoffs_us = Vec::new();
        for (t_us, is_acquire) in events {
            if is_acquire {
                holders += 1;
                max_holders = max_holders.max(holders);
                if let Some(released) = last_release.take() {
                    handoffs_us.push(t_us - released);
                }
            } else {
                holders = holders.saturating_sub(1);
                last_release = Some(t_us);
            }
        }

        let releases: Vec<&Released> = lines.iter().filter_map(|l| l.released.as_ref()).collect();
        Summary {
            expected: workers * rounds,
            acquired: acquisitions.len(),
            released: releases.len(),
            conflicts: releases.iter().filter(|r| r.seen != r.before).count(),
            counter,
            token_regressions,
            first_token: acquisitions.first().map(|l| l.token),
            last_token: acquisitions.last().map(|l| l.token),
            max_holders,
            switches,
            handoffs_us,
            held_us: releases.iter().map(|r| r.held_us).collect(),
        }
    }

    /// Prints the checks; returns whether all passed.
    fn print(
        &self,
        elapsed: Duration,
        failed_workers: &[String],
        unparsed: usize,
        timed_out: bool,
    ) -> bool {
        let mut all_ok = true;
        let mut check = |ok: bool, what: &str, detail: String| {
            all_ok &= ok;
            let status = if ok { "ok" } else { "FAIL" };
            println!("  {status:<5} {what:<20} {detail}");
        };
        let expected = self.expected;
        println!("summary");
        check(
            self.acquired == expected && self.released == expected,
            "critical sections",
            format!(
                "{} of {expected} completed ({} acquired, {} released)",
                self.released.min(self.acquired),
                self.acquired,
                self.released
            ),
        );
        check(
            self.conflicts == 0,
            "counter checks",
            if self.conflicts == 0 {
                "no section saw another writer between its GET and SET".to_owned()
            } else {
                format!(
                    "{} section(s) saw another writer: the lock let two in",
                    self.conflicts
                )
            },
        );
        check(
            self.counter == expected as i64,
            "final counter",
            if self.counter == expected as i64 {
                format!("{} == {expected}: no lost updates", self.counter)
            } else {
                format!(
                    "{} != {expected}: {} of the {} completed sections' updates lost",
                    self.counter,
                    self.released as i64 - self.counter,
                    self.released
                )
            },
        );
        check(
            self.token_regressions.is_empty() && self.acquired > 0,
            "fencing tokens",
            match (
                self.first_token,
                self.last_token,
                self.token_regressions.first(),
            ) {
                (_, _, Some((previous, next))) => format!(
                    "{} out of order (first: {next} acquired after {previous})",
                    self.token_regressions.len()
                ),
                (Some(first), Some(last), None) => {
                    format!("{first}..{last}, strictly increasing in acquisition order")
                }
                _ => "none seen".to_owned(),
            },
        );
        check(
            self.max_holders == 1,
            "holders at once",
            format!(
                "at most {} (from the acquired/released times)",
                self.max_holders
            ),
        );
        check(
            failed_workers.is_empty() && !timed_out && unparsed == 0,
            "worker processes",
            if timed_out {
                "timed out and were killed".to_owned()
            } else if !failed_workers.is_empty() {
                format!("failed: {}", failed_workers.join(", "))
            } else if unparsed > 0 {
                format!("all exited 0, but printed {unparsed} unexpected lines")
            } else {
                "all exited 0".to_owned()
            },
        );
        let handoffs = self.acquired.saturating_sub(1);
        println!(
            "  {:<5} {:<20} {} of {handoffs} hand-offs went to another worker",
            "", "turns", self.switches,
        );
        println!(
            "  {:<5} {:<20} {:.2} s in all; held {} ms on average; free between sections {} ms median, {} ms max",
            "",
            "timing",
            elapsed.as_secs_f64(),
            fmt_ms(mean(&self.held_us)),
            fmt_ms(median(&self.handoffs_us)),
            fmt_ms(self.handoffs_us.iter().max().map(|&v| v as f64)),
        );
        println!();
        if all_ok {
            println!("all checks passed: the lock kept the {expected} critical sections apart");
        } else {
            println!("SOME CHECKS FAILED");
        }
        all_ok
    }
}

fn mean(values: &[u64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<u64>() as f64 / values.len() as f64)
}

fn median(values: &[i64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    sorted.get(sorted.len() / 2).map(|&v| v as f64)
}

fn fmt_ms(micros: Option<f64>) -> String {
    micros.map_or_else(|| "-".to_owned(), |us| format!("{:.3}", us / 1000.0))
}
