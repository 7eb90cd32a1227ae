//! The expiry sweeper under a backlog: one pass ends it all, and the
//! sweeps of several instances share it rather than all starting from the
//! same oldest orders.

use std::time::Duration;

use seckill::db::Db;
use seckill::lifecycle::expiry;
use sqlx::{AnyPool, Executor, Row};

use crate::on_every_backend;
use crate::support::{Backend, TestDatabase};

on_every_backend!(a_backlog_of_unpaid_orders_expires_in_one_pass);
on_every_backend!(two_instances_sweeping_at_once_expire_each_order_once);
on_every_backend!(a_sweep_passes_over_orders_another_instance_has_claimed);

/// Longest wait for a sweep that should end (generous: a slow CI machine).
const DEADLINE: Duration = Duration::from_secs(60);
/// Longest wait for a sweep to reach the gate: generous, and shorter than
/// MariaDB's 50 s lock wait timeout, after which a sweep stuck behind
/// another's order would move on and get there too.
const GATE_WAIT: Duration = Duration::from_secs(30);

/// A database with voucher 1 (stock 0) and `backlog` pending orders
/// (ids and users 1..=backlog) placed an hour ago: all due under any
/// payment timeout below an hour.
async fn backlog(database: &TestDatabase, backlog: i64) -> (Db, AnyPool) {
    let db = Db::connect(&database.url).await.expect("database");
    db.prepare_schema(seckill::db::schema::SchemaKind::Normal)
        .await
        .expect("schema");
    let pool = AnyPool::connect(&database.url).await.expect("pool");
    pool.execute(
        "INSERT INTO voucher (id, title, stock, begin_at, end_at) VALUES (1, 't', 0, 0, 1)",
    )
    .await
    .expect("voucher");
    let placed = chrono::Utc::now().timestamp_millis() - 3_600_000;
    // Oldest first by id, so "the oldest orders" are the lowest ids.
    let rows: Vec<String> = (1..=backlog)
        .map(|id| format!("({id}, {id}, 1, {})", placed + id))
        .collect();
    for chunk in rows.chunks(1_000) {
        let insert = format!(
            "INSERT INTO voucher_order (id, user_id, voucher_id, created_at) VALUES {}",
            chunk.join(", ")
        );
        pool.execute(sqlx::AssertSqlSafe(insert))
            .await
            .expect("orders");
    }
    (db, pool)
}

/// One sweep with a 60 s payment timeout and no Redis stock, bounded by
/// [`DEADLINE`]; how many orders it expired.
async fn sweep(db: &Db) -> usize {
    tokio::time::timeout(
        DEADLINE,
        expiry::sweep(db, None, Duration::from_secs(60), &|_| {}),
    )
    .await
    .expect("the sweep ended within the deadline")
    .expect("a sweep")
}

/// `(pending, expired)` orders, and the voucher's stock.
async fn tally(pool: &AnyPool) -> (i64, i64, i64) {
    let count = |status: &'static str| async move {
        let sql = format!("SELECT COUNT(*) FROM voucher_order WHERE status = '{status}'");
        pool.fetch_one(sqlx::AssertSqlSafe(sql))
            .await
            .expect("count")
            .get::<i64, _>(0)
    };
    let stock = pool
        .fetch_one("SELECT stock FROM voucher WHERE id = 1")
        .await
        .expect("stock")
        .get::<i64, _>(0);
    (count("pending").await, count("expired").await, stock)
}

/// A sale's worth of unpaid orders all past their deadline at once: one
/// sweep ends them all, not 100 per sweep period.
async fn a_backlog_of_unpaid_orders_expires_in_one_pass(database: TestDatabase) {
    const BACKLOG: i64 = 1_000;
    let redis = testkit::RedisServer::start().expect("redis-server");
    let (db, pool) = backlog(&database, BACKLOG).await;
    let locks = redlatch::Client::connect(&redis.url())
        .await
        .expect("redis");
    let expired = expiry::sweep(
        &db,
        Some(&locks.redis_connection()),
        Duration::from_secs(60),
        &|_| {},
    )
    .await
    .expect("a sweep");
    assert_eq!(expired as i64, BACKLOG, "orders expired by one pass");
    assert_eq!(
        tally(&pool).await,
        (0, BACKLOG, BACKLOG),
        "each unit back once"
    );
    pool.close().await;
    db.close().await;
}

/// Two instances (two pools, as two processes have) sweep one backlog at
/// the same moment: every order ends once, as expired, and its unit is
/// back once; the two counts add up to the backlog. Where rows can be
/// claimed (PostgreSQL, MariaDB), each sweep is made to wait with its first
/// batch claimed until the other has claimed one too: both do part of the
/// work, and neither waits on the other's orders (before, both started
/// from the same oldest orders, and the second waited on the first one's
/// until it gave up). On SQLite the sweeps take turns at the one write
/// lock; which does how much is up to the lock.
async fn two_instances_sweeping_at_once_expire_each_order_once(database: TestDatabase) {
    const BACKLOG: i64 = 3_000;
    let (a, pool) = backlog(&database, BACKLOG).await;
    let b = Db::connect(&database.url).await.expect("second instance");
    let gate = VoucherGate::hold(&database, &pool).await;
    let first = tokio::spawn({
        let a = a.clone();
        async move { sweep(&a).await }
    });
    if let Some(gate) = &gate {
        // A has claimed its first batch and waits to give the units back.
        gate.wait_for_waiters(1).await;
    }
    let second = tokio::spawn({
        let b = b.clone();
        async move { sweep(&b).await }
    });
    if let Some(gate) = gate {
        // B has passed over A's batch, claimed the next one, and waits too.
        gate.wait_for_waiters(2).await;
        gate.release().await;
    }
    let (by_a, by_b) = (
        first.await.expect("sweep A"),
        second.await.expect("sweep B"),
    );
    assert_eq!((by_a + by_b) as i64, BACKLOG, "A {by_a} + B {by_b}");
    if database.backend != Backend::Sqlite {
        assert!(by_a > 0 && by_b > 0, "both did part: A {by_a}, B {by_b}");
    }
    assert_eq!(
        tally(&pool).await,
        (0, BACKLOG, BACKLOG),
        "(pending, expired, stock): each order ended once, each unit back once"
    );
    pool.close().await;
    a.close().await;
    b.close().await;
}

/// Another instance's sweep holds the oldest orders (a transaction that
/// has them locked, as a claimed batch is): a sweep ends every other due
/// order without waiting for them, and the next sweep, once they are
/// released, ends those. Before, every sweep started from the same oldest
/// orders and waited on the first one held. SQLite has no row locks (a
/// sweep holds the whole file): not applicable there.
async fn a_sweep_passes_over_orders_another_instance_has_claimed(database: TestDatabase) {
    const BACKLOG: i64 = 500;
    const HELD: i64 = 100;
    if database.backend == Backend::Sqlite {
        return;
    }
    let (db, pool) = backlog(&database, BACKLOG).await;
    // MySQL at READ COMMITTED, as a sweep's claim: at REPEATABLE READ the
    // range would lock the next row (101) too.
    let mut holder = match database.backend {
        Backend::MySql => {
            pool.begin_with("SET TRANSACTION ISOLATION LEVEL READ COMMITTED; START TRANSACTION")
                .await
        }
        _ => pool.begin().await,
    }
    .expect("holder's transaction");
    let held = format!("SELECT id FROM voucher_order WHERE id <= {HELD} FOR UPDATE");
    let locked = holder
        .fetch_all(sqlx::AssertSqlSafe(held))
        .await
        .expect("the oldest orders locked");
    assert_eq!(locked.len() as i64, HELD);
    let expired = sweep(&db).await;
    assert_eq!(expired as i64, BACKLOG - HELD, "every order not held");
    holder.rollback().await.expect("released");
    assert_eq!(
        tally(&pool).await,
        (HELD, BACKLOG - HELD, BACKLOG - HELD),
        "(pending, expired, stock)"
    );
    assert_eq!(
        sweep(&db).await as i64,
        HELD,
        "the held ones, once released"
    );
    assert_eq!(tally(&pool).await, (0, BACKLOG, BACKLOG));
    pool.close().await;
    db.close().await;
}

/// A transaction holding voucher 1's row, so that sweeps stop at giving
/// their units back, and a way to see how many wait on it (PostgreSQL and
/// MariaDB; `None` on SQLite, whose write lock would stop them earlier).
struct VoucherGate {
    holder: sqlx::Transaction<'static, sqlx::Any>,
    backend: Backend,
    pool: AnyPool,
}

impl VoucherGate {
    async fn hold(database: &TestDatabase, pool: &AnyPool) -> Option<VoucherGate> {
        if database.backend == Backend::Sqlite {
            return None;
        }
        let mut holder = pool.begin().await.expect("gate transaction");
        holder
            .execute("SELECT id FROM voucher WHERE id = 1 FOR UPDATE")
            .await
            .expect("voucher row locked");
        Some(VoucherGate {
            holder,
            backend: database.backend,
            pool: pool.clone(),
        })
    }

    /// Waits until `n` sweeps wait at the voucher's update, which cannot
    /// finish while the gate holds the row (PostgreSQL: waiting on a lock
    /// with that statement; MariaDB, whose innodb_trx did not always list
    /// the waiter: the process list shows the statement). Up to
    /// [`GATE_WAIT`]: a sweep gets there in milliseconds unless it waits on
    /// orders the other one holds.
    async fn wait_for_waiters(&self, n: i64) {
        let sql = match self.backend {
            Backend::Postgres => {
                "SELECT COUNT(*) FROM pg_stat_activity \
                 WHERE datname = current_database() AND wait_event_type = 'Lock' \
                 AND query LIKE 'UPDATE voucher SET stock%'"
            }
            Backend::MySql => {
                "SELECT COUNT(*) FROM information_schema.processlist \
                 WHERE db = DATABASE() AND info LIKE 'UPDATE voucher SET stock%'"
            }
            Backend::Sqlite => unreachable!("no gate on SQLite"),
        };
        let deadline = tokio::time::Instant::now() + GATE_WAIT;
        loop {
            let waiting: i64 = self.pool.fetch_one(sql).await.expect("lock waiters").get(0);
            if waiting >= n {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{waiting} of {n} sweeps came to wait on the voucher row"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn release(self) {
        self.holder.rollback().await.expect("gate released");
    }
}
