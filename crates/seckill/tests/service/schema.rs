//! Schema kinds: never both in one database; the normal schema's
//! constraints keep even the naive strategy's data correct.

use std::collections::HashSet;

use seckill::db::Db;
use seckill::serve::{Tuning, start};
use seckill::strategy::StrategyKind;

use crate::on_every_backend;
use crate::support::{
    TestDatabase, click_storm, client, config, create_voucher, open_window, redis_and_instances,
    stock_of, tally,
};

on_every_backend!(a_database_holds_one_schema_kind_only);
on_every_backend!(constraints_keep_the_naive_strategy_from_corrupting_data);

async fn a_database_holds_one_schema_kind_only(database: TestDatabase) {
    let redis = testkit::RedisServer::start().expect("redis-server");
    let url = redis.url();
    // Two lab instances starting together share the lab schema...
    let (first, second) = tokio::join!(
        start(config(&url, &database.url, StrategyKind::Naive, 1, true)),
        start(config(&url, &database.url, StrategyKind::Naive, 2, true)),
    );
    let (first, second) = (
        first.expect("lab instance 1"),
        second.expect("lab instance 2"),
    );
    // ...and a normal one is refused, saying why.
    let refused = start(config(
        &url,
        &database.url,
        StrategyKind::RedisLock,
        3,
        false,
    ))
    .await
    .expect_err("normal schema on a lab database");
    let message = refused.to_string();
    assert!(
        message.contains("lab schema") && message.contains("normal schema"),
        "{message}"
    );
    first.shutdown().await;
    second.shutdown().await;
}

async fn constraints_keep_the_naive_strategy_from_corrupting_data(database: TestDatabase) {
    const STOCK: i64 = 10;
    let (_redis, services) =
        redis_and_instances(&database, StrategyKind::Naive, 2, Tuning::default()).await;
    let bases: Vec<String> = services.iter().map(|service| service.url()).collect();
    let http = client();
    let voucher = create_voucher(&http, &bases[0], STOCK, open_window()).await;
    let clicks = click_storm(&http, &bases, voucher, 100, 3, 64).await;
    let statuses = tally(&clicks);
    assert!(
        statuses
            .keys()
            .all(|status| [201, 409, 410].contains(status)),
        "constraint violations must be answers, not failures: {statuses:?}"
    );
    let db = Db::connect(&database.url).await.expect("database");
    let orders = db.orders(voucher).await.expect("orders");
    let stock = stock_of(&db, voucher).await;
    db.close().await;
    let users: HashSet<i64> = orders.iter().map(|order| order.user_id).collect();
    assert_eq!(users.len(), orders.len(), "one order per user");
    assert!(stock >= 0, "stock {stock}");
    assert_eq!(
        stock + orders.len() as i64,
        STOCK,
        "every unit sold is an order"
    );
    assert_eq!(statuses.get(&201).copied().unwrap_or(0), orders.len());
    for service in services {
        service.shutdown().await;
    }
}

on_every_backend!(a_fencing_table_without_expiry_gains_it_and_keeps_its_rows);

/// A database made before fencing rows could expire: starting on it adds
/// the column, and its rows stay (their sale is unknown, so they never go).
async fn a_fencing_table_without_expiry_gains_it_and_keeps_its_rows(database: TestDatabase) {
    use sqlx::{Executor, Row};

    use crate::support::Backend;

    let db = Db::connect(&database.url).await.expect("database");
    db.prepare_schema(seckill::db::schema::SchemaKind::Normal)
        .await
        .expect("schema");
    let pool = sqlx::AnyPool::connect(&database.url).await.expect("pool");
    let drop_index = match database.backend {
        Backend::MySql => "DROP INDEX seckill_fence_by_expiry ON seckill_fence",
        Backend::Sqlite | Backend::Postgres => "DROP INDEX seckill_fence_by_expiry",
    };
    pool.execute(drop_index).await.expect("drop the index");
    pool.execute("ALTER TABLE seckill_fence DROP COLUMN expires_at")
        .await
        .expect("the table as it was");
    pool.execute("INSERT INTO seckill_fence (resource, token) VALUES ('seckill:order:1:1', 4)")
        .await
        .expect("an old row");
    db.prepare_schema(seckill::db::schema::SchemaKind::Normal)
        .await
        .expect("the schema again");
    let row = pool
        .fetch_one("SELECT token, expires_at FROM seckill_fence")
        .await
        .expect("the old row, with an expiry");
    assert_eq!(
        (row.get::<i64, _>(0), row.get::<i64, _>(1)),
        (4, i64::MAX),
        "(token, expires_at)"
    );
    pool.close().await;
    db.close().await;
}
