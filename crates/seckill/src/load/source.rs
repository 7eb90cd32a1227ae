//! Where the verification reads the truth: the database itself, or the
//! service's HTTP API when no database URL is given.
//!
//! Orders may expire while a [`Snapshot`] is read (a `--payment-timeout`
//! shorter than the run leaves the sweepers busy after the last answer), so
//! stock and statuses must be of one moment. The database gives both in one
//! statement. Over HTTP the order list carries no status, so each order's
//! status is read on its own (`GET /orders/{id}`), and a snapshot is kept
//! only when the stock and the order count read before and after the
//! statuses agree (an expiry or a new order moves one of them); it tries
//! again until the sweepers leave a still moment, for up to a minute.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures_util::{StreamExt as _, TryStreamExt as _};
use serde::Deserialize;

use super::fire::id_text;
use crate::BoxError;
use crate::db::OrderStatus;

/// How often the order count is read while orders drain.
const POLL_EVERY: Duration = Duration::from_millis(100);

/// How long an unchanged order count below the expected one is taken as
/// final: asynchronous writers (the reserve strategy's stream consumer)
/// insert in a steady trickle, so a count that stops moving has stopped.
const SETTLED_AFTER: Duration = Duration::from_secs(3);

/// Status reads in flight at once.
const STATUS_READS: usize = 16;

/// How long to try for an HTTP snapshot whose stock and order count stay
/// still while the statuses are read (expiries come in bursts, one per
/// sweep, so a still moment comes; a sale still going on never gives one).
const STILL_WITHIN: Duration = Duration::from_secs(60);

/// The voucher's stock and its orders at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Snapshot {
    pub stock: i64,
    pub orders: Vec<OrderRow>,
}

/// One order, ids as decimal text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OrderRow {
    pub order_id: String,
    pub user: String,
    /// `None` in the quick snapshots taken while orders drain.
    pub status: Option<OrderStatus>,
}

impl Snapshot {
    /// Orders holding a unit of stock: pending or paid (an order of unknown
    /// status counts as holding one, as every order did before it could end).
    pub(crate) fn holding(&self) -> i64 {
        let held = self
            .orders
            .iter()
            .filter(|order| !order.status.is_some_and(OrderStatus::returns_stock))
            .count();
        i64::try_from(held).unwrap_or(i64::MAX)
    }

    /// How many orders are in each status (every status listed, 0 if none).
    pub(crate) fn count_by_status(&self) -> Vec<(OrderStatus, u64)> {
        OrderStatus::ALL
            .into_iter()
            .map(|status| {
                let n = self
                    .orders
                    .iter()
                    .filter(|order| order.status == Some(status))
                    .count();
                (status, n as u64)
            })
            .collect()
    }
}

/// The place the snapshots come from.
pub(crate) enum Source {
    Database(crate::db::Db),
    Http {
        client: reqwest::Client,
        base: String,
    },
}

impl Source {
    /// The database at `database`, or else the HTTP API at `base`.
    pub(crate) async fn open(
        database: Option<&str>,
        client: &reqwest::Client,
        base: &str,
    ) -> Result<Self, BoxError> {
        match database {
            Some(url) => {
                let db = crate::db::Db::connect(url)
                    .await
                    .map_err(|error| format!("cannot open --database {url}: {error}"))?;
                Ok(Self::Database(db))
            }
            None => Ok(Self::Http {
                client: client.clone(),
                base: base.to_owned(),
            }),
        }
    }

    /// "database" or "http", for the report.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Self::Database(_) => "database",
            Self::Http { .. } => "http",
        }
    }

    /// Closes the database connections (a no-op over HTTP), so a SQLite
    /// file is not held open after the check.
    pub(crate) async fn close(&self) {
        if let Self::Database(db) = self {
            db.close().await;
        }
    }

    /// The voucher's stock and orders now, without statuses. Errors when the
    /// voucher does not exist.
    async fn quick_snapshot(&self, voucher: u64) -> Result<Snapshot, BoxError> {
        match self {
            Self::Database(db) => database_snapshot(db, voucher).await,
            Self::Http { client, base } => http_snapshot(client, base, voucher).await,
        }
    }

    /// The voucher's stock and orders with their statuses, of one moment
    /// (see the module doc). Errors when the voucher does not exist, an
    /// order cannot be read, or (over HTTP) the stock never stays still
    /// long enough.
    pub(crate) async fn snapshot(&self, voucher: u64) -> Result<Snapshot, BoxError> {
        if let Self::Database(db) = self {
            return database_full_snapshot(db, voucher).await;
        }
        let started = Instant::now();
        loop {
            let mut snapshot = self.quick_snapshot(voucher).await?;
            let ids: Vec<String> = snapshot
                .orders
                .iter()
                .map(|order| order.order_id.clone())
                .collect();
            let statuses = self.statuses(&ids).await?;
            let after = self.quick_snapshot(voucher).await?;
            if after.stock == snapshot.stock && after.orders.len() == snapshot.orders.len() {
                for order in &mut snapshot.orders {
                    order.status = statuses.get(&order.order_id).copied().flatten();
                }
                return Ok(snapshot);
            }
            if started.elapsed() >= STILL_WITHIN {
                return Err(format!(
                    "the stock of voucher {voucher} kept changing while its orders were read \
                     for {}s; is something else selling it?",
                    STILL_WITHIN.as_secs()
                )
                .into());
            }
            tokio::time::sleep(POLL_EVERY).await;
        }
    }

    /// The status of each order in `ids` (`None`: no such order, yet).
    pub(crate) async fn statuses(
        &self,
        ids: &[String],
    ) -> Result<HashMap<String, Option<OrderStatus>>, BoxError> {
        futures_util::stream::iter(ids)
            .map(|id| async move { Ok::<_, BoxError>((id.clone(), self.status(id).await?)) })
            .buffer_unordered(STATUS_READS)
            .try_collect()
            .await
    }

    async fn status(&self, order_id: &str) -> Result<Option<OrderStatus>, BoxError> {
        match self {
            Self::Database(db) => {
                let id: i64 = order_id
                    .parse()
                    .map_err(|_| format!("order id {order_id:?} is not a database id"))?;
                let found = db
                    .order(id)
                    .await
                    .map_err(|error| format!("reading order {order_id}: {error}"))?;
                Ok(found.map(|order| order.status))
            }
            Self::Http { client, base } => http_status(client, base, order_id).await,
        }
    }

    /// Polls the statuses of `ids` until none is pending (or absent), or
    /// `timeout` has passed; returns how long the wait took.
    pub(crate) async fn wait_until_ended(
        &self,
        ids: &[String],
        timeout: Duration,
    ) -> Result<Duration, BoxError> {
        let started = Instant::now();
        let mut open: Vec<String> = ids.to_vec();
        loop {
            let statuses = self.statuses(&open).await?;
            open.retain(|id| {
                !statuses
                    .get(id)
                    .copied()
                    .flatten()
                    .is_some_and(|status| status != OrderStatus::Pending)
            });
            if open.is_empty() || started.elapsed() >= timeout {
                return Ok(started.elapsed());
            }
            tokio::time::sleep(POLL_EVERY).await;
        }
    }

    /// Polls until at least `expected` orders are there, or the count has
    /// not moved for [`SETTLED_AFTER`], or `timeout` has passed; returns the
    /// last snapshot and how long the wait took.
    pub(crate) async fn drain(
        &self,
        voucher: u64,
        expected: usize,
        timeout: Duration,
    ) -> Result<(Snapshot, Duration), BoxError> {
        let started = Instant::now();
        let mut last = self.quick_snapshot(voucher).await?;
        let mut unchanged_since = Instant::now();
        while last.orders.len() < expected
            && started.elapsed() < timeout
            && unchanged_since.elapsed() < SETTLED_AFTER
        {
            tokio::time::sleep(POLL_EVERY).await;
            let next = self.quick_snapshot(voucher).await?;
            if next.orders.len() != last.orders.len() || next.stock != last.stock {
                unchanged_since = Instant::now();
            }
            last = next;
        }
        Ok((last, started.elapsed()))
    }
}

/// Stock and statuses from one statement.
async fn database_full_snapshot(db: &crate::db::Db, voucher: u64) -> Result<Snapshot, BoxError> {
    let id = voucher
        .try_into()
        .map_err(|_| format!("voucher id {voucher} is out of the database's range"))?;
    let found = db
        .stock_and_orders(id)
        .await
        .map_err(|error| format!("reading voucher {voucher} and its orders: {error}"))?;
    let Some((stock, orders)) = found else {
        return Err(format!("voucher {voucher} does not exist in the database").into());
    };
    Ok(Snapshot {
        stock,
        orders: orders
            .into_iter()
            .map(|stored| OrderRow {
                order_id: stored.order.id.to_string(),
                user: stored.order.user_id.to_string(),
                status: Some(stored.status),
            })
            .collect(),
    })
}

async fn database_snapshot(db: &crate::db::Db, voucher: u64) -> Result<Snapshot, BoxError> {
    let id = voucher
        .try_into()
        .map_err(|_| format!("voucher id {voucher} is out of the database's range"))?;
    let found = db
        .voucher(id)
        .await
        .map_err(|error| format!("reading voucher {voucher}: {error}"))?;
    let Some(found) = found else {
        return Err(format!("voucher {voucher} does not exist in the database").into());
    };
    let orders = db
        .orders(id)
        .await
        .map_err(|error| format!("reading the orders of voucher {voucher}: {error}"))?;
    Ok(Snapshot {
        stock: found.stock,
        orders: orders
            .into_iter()
            .map(|order| OrderRow {
                order_id: order.id.to_string(),
                user: order.user_id.to_string(),
                status: None,
            })
            .collect(),
    })
}

/// `GET /vouchers/{id}` as far as the check needs it.
#[derive(Deserialize)]
struct VoucherBody {
    stock: i64,
}

/// One page of `GET /vouchers/{id}/orders`.
#[derive(Deserialize)]
struct OrdersBody {
    orders: Vec<OrderBody>,
    #[serde(default)]
    next: Option<i64>,
}

#[derive(Deserialize)]
struct OrderBody {
    order_id: serde_json::Value,
    user_id: serde_json::Value,
}

async fn http_snapshot(
    client: &reqwest::Client,
    base: &str,
    voucher: u64,
) -> Result<Snapshot, BoxError> {
    let voucher_url = format!("{base}/vouchers/{voucher}");
    let found: VoucherBody = get_json(client, &voucher_url).await?;
    // The list comes a page at a time.
    let mut listed = Vec::new();
    let mut after: Option<i64> = None;
    loop {
        let url = match after {
            Some(after) => format!("{voucher_url}/orders?limit=1000&after={after}"),
            None => format!("{voucher_url}/orders?limit=1000"),
        };
        let page: OrdersBody = get_json(client, &url).await?;
        listed.extend(page.orders);
        match page.next {
            Some(next) if Some(next) != after => after = Some(next),
            _ => break,
        }
    }
    let mut rows = Vec::with_capacity(listed.len());
    for order in listed {
        let (Some(order_id), Some(user)) = (id_text(&order.order_id), id_text(&order.user_id))
        else {
            return Err(format!(
                "GET {voucher_url}/orders listed an order without order_id or user_id"
            )
            .into());
        };
        rows.push(OrderRow {
            order_id,
            user,
            status: None,
        });
    }
    Ok(Snapshot {
        stock: found.stock,
        orders: rows,
    })
}

/// `GET /orders/{id}` as far as the check needs it.
#[derive(Deserialize)]
struct StatusBody {
    status: String,
}

async fn http_status(
    client: &reqwest::Client,
    base: &str,
    order_id: &str,
) -> Result<Option<OrderStatus>, BoxError> {
    let url = format!("{base}/orders/{order_id}");
    let response = client
        .get(&url)
        .send()
        .await
        .map_err(|error| format!("GET {url} failed: {error}"))?;
    if response.status() == reqwest::StatusCode::NOT_FOUND {
        return Ok(None);
    }
    let status = response.status();
    if !status.is_success() {
        let body = response.text().await.unwrap_or_default();
        return Err(format!("GET {url} answered {status}: {}", body.trim()).into());
    }
    let body = response
        .bytes()
        .await
        .map_err(|error| format!("GET {url}: {error}"))?;
    let body: StatusBody = serde_json::from_slice(&body)
        .map_err(|error| format!("GET {url}: unexpected body: {error}"))?;
    let status = body
        .status
        .parse()
        .map_err(|error| format!("GET {url}: {error}"))?;
    Ok(Some(status))
}

async fn get_json<T: serde::de::DeserializeOwned>(
    client: &reqwest::Client,
    url: &str,
) -> Result<T, BoxError> {
    let response = client
        .get(url)
        .send()
        .await
        .map_err(|error| format!("GET {url} failed: {error}"))?;
    let status = response.status();
    if !status.is_success() {
        let body = response.text().await.unwrap_or_default();
        return Err(format!("GET {url} answered {status}: {}", body.trim()).into());
    }
    let body = response
        .bytes()
        .await
        .map_err(|error| format!("GET {url}: {error}"))?;
    serde_json::from_slice(&body)
        .map_err(|error| format!("GET {url}: unexpected body: {error}").into())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

    use chrono::Utc;

    use super::*;
    use crate::db::{Db, NewVoucher, Order};
    use crate::lifecycle::{End, end_order};

    /// While the check reads, sweepers expire orders and buyers take the
    /// units again, without pause (a `--payment-timeout` shorter than the
    /// run): the snapshot is still of one moment, stock plus units held
    /// equal to what there was. Before, the check wanted the stock to stay
    /// still while it read, and gave up with an error after 20 tries: the
    /// load exited 1 without a report.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_snapshot_while_orders_expire_and_sell_again_is_of_one_moment() {
        const UNITS: i64 = 300;
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("shop.db").display());
        let db = Db::connect(&url).await.expect("database");
        db.prepare_schema(crate::db::schema::SchemaKind::Normal)
            .await
            .expect("schema");
        let now = Utc::now();
        let voucher = db
            .insert_voucher(&NewVoucher {
                title: "t".to_owned(),
                stock: UNITS,
                begin_at: now - chrono::Duration::hours(1),
                end_at: now + chrono::Duration::hours(1),
            })
            .await
            .expect("voucher");
        let next_user = Arc::new(AtomicI64::new(1));
        for _ in 0..UNITS {
            place(&db, voucher, &next_user).await;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let churn = tokio::spawn({
            let (db, stop, next_user) = (db.clone(), stop.clone(), next_user.clone());
            async move {
                let mut oldest = 0;
                let mut changes = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let pending = db
                        .list_orders_after(voucher, oldest, 1)
                        .await
                        .expect("list");
                    let Some(order) = pending.first() else { break };
                    oldest = order.id;
                    end_order(&db, None, order.id, End::Expire, None, Duration::ZERO)
                        .await
                        .expect("expired");
                    place(&db, voucher, &next_user).await;
                    changes += 1;
                }
                changes
            }
        });
        let source = Source::Database(db.clone());
        let snapshot = source.snapshot(voucher as u64).await;
        stop.store(true, Ordering::Relaxed);
        let changes = churn.await.expect("churn");
        let snapshot = snapshot.expect("a snapshot while the orders change");
        assert!(changes > 0, "the orders changed meanwhile");
        assert_eq!(
            snapshot.stock + snapshot.holding(),
            UNITS,
            "stock {} + held {} of one moment",
            snapshot.stock,
            snapshot.holding()
        );
        assert!(snapshot.orders.iter().all(|order| order.status.is_some()));
        db.close().await;
    }

    /// One order of `voucher` for the next user, its unit taken.
    async fn place(db: &Db, voucher: i64, next_user: &AtomicI64) {
        let user = next_user.fetch_add(1, Ordering::Relaxed);
        let mut tx = db.begin_write().await.expect("transaction");
        assert!(tx.decrement_if_left(voucher).await.expect("decrement"));
        tx.insert_order(&Order {
            id: user,
            user_id: user,
            voucher_id: voucher,
            created_at: Utc::now(),
        })
        .await
        .expect("order");
        tx.commit().await.expect("commit");
    }
}
