//! Fencing end to end: an instance that stalls between its check and its
//! write, past its lock's lease, is refused by the database once another
//! instance has taken the lock and written; without fencing, its late write
//! goes through and the user gets a second order.
//!
//! Instance A is a `seckill serve` process with a 1 s lease and
//! `--lab-stall-before-write`: it announces the stall on stderr and the
//! test stops it there with SIGSTOP, so its watchdog cannot renew either,
//! as in a long GC pause or a frozen VM. Instance B runs in the test.

use std::time::Duration;

use seckill::serve::{Tuning, start_tuned};
use seckill::strategy::StrategyKind;
use seckill::strategy::redis_lock::STALL_MARK;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::on_every_backend;
use crate::support::{Click, TestDatabase, click, client, config, create_voucher, open_window};

on_every_backend!(a_writer_paused_past_its_lease_is_refused_by_the_fence);
on_every_backend!(without_fencing_the_paused_writer_makes_a_second_order);

const USER: i64 = 7;

async fn a_writer_paused_past_its_lease_is_refused_by_the_fence(database: TestDatabase) {
    let (late, orders) = pause_a_writer_past_its_lease(&database, true).await;
    assert_eq!(late.status, Some(503), "{late:?}");
    assert_eq!(late.body["error"], "lock_lost", "{late:?}");
    assert_eq!(orders, 1, "only the newer holder's order is written");
}

async fn without_fencing_the_paused_writer_makes_a_second_order(database: TestDatabase) {
    let (late, orders) = pause_a_writer_past_its_lease(&database, false).await;
    assert_eq!(late.status, Some(201), "{late:?}");
    assert_eq!(orders, 2, "the late write is accepted: a second order");
}

/// Runs the scenario; returns the paused instance's answer and how many
/// orders the user has in the end.
async fn pause_a_writer_past_its_lease(database: &TestDatabase, fencing: bool) -> (Click, usize) {
    let redis = testkit::RedisServer::start().expect("redis-server");
    let dir = tempfile::tempdir().expect("temp dir");
    let settings = dir.path().join("lock.toml");
    std::fs::write(&settings, "[lock]\ndefault_lease = \"1s\"\n").expect("settings file");
    let tuning = Tuning {
        fencing,
        ..Tuning::default()
    };
    // The lab schema: no UNIQUE constraint backs the lock up.
    let b = start_tuned(
        config(
            &redis.url(),
            &database.url,
            StrategyKind::RedisLock,
            2,
            true,
        ),
        tuning,
    )
    .await
    .expect("instance B");
    let http = client();
    let voucher = create_voucher(&http, &b.url(), 5, open_window()).await;

    let mut a = tokio::process::Command::new(env!("CARGO_BIN_EXE_seckill"));
    a.args([
        "serve",
        "--strategy",
        "redis-lock",
        "--lab",
        "--instance",
        "1",
    ])
    .args(["--listen", "127.0.0.1:0", "--database", &database.url])
    .args(["--redis", &redis.url()])
    .arg("--lock-config")
    .arg(&settings)
    .args(["--lab-stall-before-write", "500ms"])
    .env_remove("REDIS_URL")
    .stderr(std::process::Stdio::piped())
    .kill_on_drop(true);
    if !fencing {
        a.arg("--no-fencing");
    }
    let mut a = a.spawn().expect("seckill serve");
    let pid = a.id().expect("pid") as libc::pid_t;
    let mut lines = BufReader::new(a.stderr.take().expect("stderr")).lines();
    let a_base = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.expect("stderr") {
            if let Some(rest) = line.split(" serving on ").nth(1) {
                return rest.split(' ').next().map(str::to_owned);
            }
        }
        None
    })
    .await
    .expect("A started in time")
    .expect("A says where it serves");

    let late = tokio::spawn({
        let http = http.clone();
        async move { click(&http, &a_base, voucher, USER).await }
    });
    // Stop A where it stalls: it holds the lock and has checked.
    tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.expect("stderr") {
            if line.contains(STALL_MARK) {
                return;
            }
        }
        panic!("A exited before stalling");
    })
    .await
    .expect("A stalled in time");
    // SAFETY: kill(2) on our own child's pid, which is alive (kill_on_drop).
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0, "SIGSTOP");
    let stderr_drain =
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });

    // A's lease runs out; B then takes the user's lock and writes.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let answer = click(&http, &b.url(), voucher, USER).await;
        match answer.status {
            Some(201) => break,
            Some(409) if answer.body["error"] == "in_progress" => {}
            _ => panic!("B: unexpected answer {answer:?}"),
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "A's lock never lapsed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0, "SIGCONT");
    let late = tokio::time::timeout(Duration::from_secs(30), late)
        .await
        .expect("A answered after it resumed")
        .expect("click task");
    let db = seckill::db::Db::connect(&database.url).await.expect("db");
    let orders = db
        .orders(voucher)
        .await
        .expect("orders")
        .iter()
        .filter(|order| order.user_id == USER)
        .count();
    db.close().await;
    a.kill().await.expect("stop A");
    stderr_drain.abort();
    b.shutdown().await;
    (late, orders)
}

on_every_backend!(fencing_state_goes_with_the_sale);

/// Three buyers of a sale that ends in a few seconds and one of a sale
/// that goes on: once the short sale is over and its `fence_keep` (2 s
/// here) has passed, its `seckill_fence` rows are gone; the sale still on
/// keeps its row. Redis keeps no token counter per user at any time (the
/// locks share one counter): before, one stayed per user until the sale's
/// end (and, before that, for good).
async fn fencing_state_goes_with_the_sale(database: TestDatabase) {
    let redis = testkit::RedisServer::start().expect("redis-server");
    let tuning = Tuning {
        fence_keep: Duration::from_secs(2),
        // A sweep every 100 ms.
        payment_timeout: Duration::from_secs(1),
        ..Tuning::default()
    };
    let instance = start_tuned(
        config(
            &redis.url(),
            &database.url,
            StrategyKind::RedisLock,
            1,
            false,
        ),
        tuning,
    )
    .await
    .expect("instance");
    let http = client();
    let now = chrono::Utc::now();
    let short = create_voucher(
        &http,
        &instance.url(),
        10,
        (
            now - chrono::Duration::minutes(1),
            now + chrono::Duration::seconds(3),
        ),
    )
    .await;
    let long = create_voucher(&http, &instance.url(), 10, open_window()).await;
    for (voucher, user) in [(short, 1), (short, 2), (short, 3), (long, 1)] {
        let placed = click(&http, &instance.url(), voucher, user).await;
        assert_eq!(placed.status, Some(201), "{placed:?}");
    }
    let pool = sqlx::AnyPool::connect(&database.url).await.expect("pool");
    let mut redis_conn = redis::Client::open(redis.url())
        .expect("redis url")
        .get_multiplexed_async_connection()
        .await
        .expect("redis");
    let counter =
        |voucher: i64, user: i64| format!("redisson_lock_token:{{seckill:order:{voucher}:{user}}}");
    let state = async |pool: &sqlx::AnyPool,
                       conn: &mut redis::aio::MultiplexedConnection,
                       voucher: i64,
                       users: &[i64]| {
        let rows: i64 = sqlx::Row::get(
            &sqlx::Executor::fetch_one(
                pool,
                sqlx::AssertSqlSafe(format!(
                    "SELECT COUNT(*) FROM seckill_fence WHERE resource LIKE 'seckill:order:{voucher}:%'"
                )),
            )
            .await
            .expect("fence rows"),
            0,
        );
        let mut counters = 0;
        for &user in users {
            let exists: bool = redis::cmd("EXISTS")
                .arg(counter(voucher, user))
                .query_async(conn)
                .await
                .expect("EXISTS");
            counters += i64::from(exists);
        }
        (rows, counters)
    };
    assert_eq!(
        state(&pool, &mut redis_conn, short, &[1, 2, 3]).await,
        (3, 0),
        "(fence rows, token counters) of the short sale while it is on"
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let left = state(&pool, &mut redis_conn, short, &[1, 2, 3]).await;
        if left == (0, 0) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the short sale's fencing state stayed: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        state(&pool, &mut redis_conn, long, &[1]).await,
        (1, 0),
        "the sale still on keeps its state"
    );
    pool.close().await;
    instance.shutdown().await;
}

on_every_backend!(a_write_stalled_past_half_the_keep_after_the_sale_is_refused);

/// A click that passed the sale-window check just before the end stalls
/// between its check and its write until after half of `fence_keep` (2 s
/// here) past the end: its write is refused `ended` and nothing is written,
/// so the fencing state, gone at the full `fence_keep`, is never needed.
async fn a_write_stalled_past_half_the_keep_after_the_sale_is_refused(database: TestDatabase) {
    let redis = testkit::RedisServer::start().expect("redis-server");
    let tuning = Tuning {
        fence_keep: Duration::from_secs(2),
        // Past the end (3 s away at most) plus half the keep (1 s).
        stall_before_write: Some(Duration::from_secs(5)),
        ..Tuning::default()
    };
    let instance = start_tuned(
        config(
            &redis.url(),
            &database.url,
            StrategyKind::RedisLock,
            1,
            false,
        ),
        tuning,
    )
    .await
    .expect("instance");
    let http = client();
    let now = chrono::Utc::now();
    let voucher = create_voucher(
        &http,
        &instance.url(),
        10,
        (
            now - chrono::Duration::minutes(1),
            now + chrono::Duration::seconds(3),
        ),
    )
    .await;
    let late = click(&http, &instance.url(), voucher, USER).await;
    assert_eq!(late.status, Some(403), "{late:?}");
    assert_eq!(late.body["error"], "ended", "{late:?}");
    let db = seckill::db::Db::connect(&database.url).await.expect("db");
    assert!(db.orders(voucher).await.expect("orders").is_empty());
    db.close().await;
    instance.shutdown().await;
}
