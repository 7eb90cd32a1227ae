//! Where the verification reads the truth: the database itself, or the
//! service's HTTP API when no database URL is given.

use std::time::{Duration, Instant};

use serde::Deserialize;

use super::fire::id_text;
use crate::BoxError;

/// How often the order count is read while orders drain.
const POLL_EVERY: Duration = Duration::from_millis(100);

/// How long an unchanged order count below the expected one is taken as
/// final: asynchronous writers (the reserve strategy's stream consumer)
/// insert in a steady trickle, so a count that stops moving has stopped.
const SETTLED_AFTER: Duration = Duration::from_secs(3);

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

    /// The voucher's stock and orders now. Errors when the voucher does not exist.
    pub(crate) async fn snapshot(&self, voucher: u64) -> Result<Snapshot, BoxError> {
        match self {
            Self::Database(db) => database_snapshot(db, voucher).await,
            Self::Http { client, base } => http_snapshot(client, base, voucher).await,
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
        let mut last = self.snapshot(voucher).await?;
        let mut unchanged_since = Instant::now();
        while last.orders.len() < expected
            && started.elapsed() < timeout
            && unchanged_since.elapsed() < SETTLED_AFTER
        {
            tokio::time::sleep(POLL_EVERY).await;
            let next = self.snapshot(voucher).await?;
            if next.orders.len() != last.orders.len() || next.stock != last.stock {
                unchanged_since = Instant::now();
            }
            last = next;
        }
        Ok((last, started.elapsed()))
    }
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
            })
            .collect(),
    })
}

/// `GET /vouchers/{id}` as far as the check needs it.
#[derive(Deserialize)]
struct VoucherBody {
    stock: i64,
}

/// `GET /vouchers/{id}/orders`.
#[derive(Deserialize)]
struct OrdersBody {
    orders: Vec<OrderBody>,
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
    let orders: OrdersBody = get_json(client, &format!("{voucher_url}/orders")).await?;
    let mut rows = Vec::with_capacity(orders.orders.len());
    for order in orders.orders {
        let (Some(order_id), Some(user)) = (id_text(&order.order_id), id_text(&order.user_id))
        else {
            return Err(format!(
                "GET {voucher_url}/orders listed an order without order_id or user_id"
            )
            .into());
        };
        rows.push(OrderRow { order_id, user });
    }
    Ok(Snapshot {
        stock: found.stock,
        orders: rows,
    })
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
