//! What every strategy is: the [`Strategy`] trait, the context it places an
//! order in, and what it answers. Below the strategies' files and the
//! registry in `mod.rs`, which both import it.

use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;

use crate::db::{Db, DbError, Order};
use crate::id_worker::{IdError, IdWorker};
use crate::sale_window::{SaleState, SaleWindows};

/// An order id (see [`id_worker`](crate::id_worker)).
pub type OrderId = i64;

/// Why an order was not placed.
#[derive(Debug, thiserror::Error)]
pub enum OrderError {
    /// No voucher with that id.
    #[error("no such voucher")]
    NotFound,
    /// The sale has not started.
    #[error("the sale has not started")]
    NotStarted,
    /// The sale is over.
    #[error("the sale has ended")]
    Ended,
    /// No stock left.
    #[error("sold out")]
    SoldOut,
    /// The user already has an order of this voucher.
    #[error("already ordered")]
    AlreadyOrdered,
    /// Another request of the same user holds the user's lock now, and this
    /// one does not wait (`redis-lock` with no `--lock-wait`).
    #[error("another request of this user is in progress")]
    InProgress,
    /// The per-user lock was not had within `--lock-wait`.
    #[error("busy: {0}")]
    Busy(String),
    /// The per-user lock was lost before the commit: its lease ran out, or
    /// the database saw a newer holder's fencing token. Nothing was written.
    #[error("lock lost: {0}")]
    LockLost(String),
    /// An optimistic lock's write found the voucher changed since it was
    /// read, and stock is still left: trying again may succeed.
    #[error("conflict: {0}")]
    Conflict(String),
    /// Redis failed.
    #[error("redis: {0}")]
    Redis(String),
    /// The database failed.
    #[error(transparent)]
    Database(DbError),
}

impl From<DbError> for OrderError {
    /// Constraint violations are answers, not failures: the normal schema's
    /// UNIQUE means "already ordered", its CHECK means "sold out".
    fn from(error: DbError) -> OrderError {
        match error {
            DbError::Unique(_) => OrderError::AlreadyOrdered,
            DbError::Check(_) => OrderError::SoldOut,
            other => OrderError::Database(other),
        }
    }
}

impl From<IdError> for OrderError {
    fn from(error: IdError) -> OrderError {
        OrderError::Redis(error.to_string())
    }
}

impl From<redis::RedisError> for OrderError {
    fn from(error: redis::RedisError) -> OrderError {
        OrderError::Redis(error.to_string())
    }
}

/// What the strategies share: the database, Redis, the lock client, ids.
pub struct OrderContext {
    /// The shop's database.
    pub db: Db,
    /// The sale windows, cached.
    pub windows: SaleWindows,
    /// The order id worker.
    pub ids: IdWorker,
    /// A multiplexed Redis connection for scripts.
    pub redis: redlatch::RedisConnection,
    /// The redlatch client for per-user locks.
    pub locks: redlatch::Client,
    /// How long `redis-lock` waits for a user's lock before answering busy;
    /// zero: not at all, a held lock answers "in progress".
    pub lock_wait: Duration,
    /// Whether writes under a lock carry its fencing token to the database
    /// (on by default; off only to show, in the lab, what it prevents).
    pub fencing: bool,
    /// Lab only: `redis-lock` stops this long between its check and its
    /// write, after printing `seckill: stalled before write` on stderr, so
    /// a test can pause the process there (SIGSTOP) past the lock's lease.
    pub stall_before_write: Option<Duration>,
    /// How long after a sale's end its per-user fencing state (the
    /// `seckill_fence` rows, the lock's token counters) is kept; writes
    /// under a user's lock are refused from half of it on, so none can
    /// still need the state when it goes (see `strategy/redis_lock.rs`).
    pub fence_keep: Duration,
}

impl OrderContext {
    /// Seed §1's first check: is the sale open now? Returns when it ends.
    pub async fn check_sale_open(&self, voucher_id: i64) -> Result<DateTime<Utc>, OrderError> {
        match self.windows.state(voucher_id, Utc::now()).await? {
            SaleState::Open => self
                .windows
                .end_at(voucher_id)
                .await?
                .ok_or(OrderError::NotFound),
            SaleState::Unknown => Err(OrderError::NotFound),
            SaleState::NotStarted => Err(OrderError::NotStarted),
            SaleState::Ended => Err(OrderError::Ended),
        }
    }

    /// Seed §1's stock check, on a plain read: fails fast once sold out (the
    /// stock never grows, so a 0 seen now stays true).
    pub async fn check_stock_left(&self, voucher_id: i64) -> Result<i64, OrderError> {
        match self.db.stock(voucher_id).await? {
            None => Err(OrderError::NotFound),
            Some(stock) if stock < 1 => Err(OrderError::SoldOut),
            Some(stock) => Ok(stock),
        }
    }

    /// Seed §2.1's write: in one transaction, `stock = stock - 1 WHERE stock > 0`
    /// (sold out when no row changes) and the order's insert.
    pub async fn sell_if_left(&self, voucher_id: i64, user_id: i64) -> Result<OrderId, OrderError> {
        let order = self.new_order(voucher_id, user_id).await?;
        let mut tx = self.db.begin_write().await?;
        if !tx.decrement_if_left(voucher_id).await? {
            return Err(OrderError::SoldOut);
        }
        tx.insert_order(&order).await?;
        tx.commit().await?;
        Ok(order.id)
    }

    /// A new order of `voucher_id` for `user_id`, with a fresh id.
    pub async fn new_order(&self, voucher_id: i64, user_id: i64) -> Result<Order, OrderError> {
        Ok(Order {
            id: self.ids.next_id().await?,
            user_id,
            voucher_id,
            created_at: Utc::now(),
        })
    }
}

/// One click on a voucher whose sale was found open: what a strategy
/// places an order for.
#[derive(Clone, Copy, Debug)]
pub struct Click {
    pub voucher_id: i64,
    pub user_id: i64,
    /// When the sale ends.
    pub sale_ends_at: DateTime<Utc>,
}

/// What placing an order answers, as a future a `dyn Strategy` can return.
pub type Placed<'a> = BoxFuture<'a, Result<OrderId, OrderError>>;

/// One way of placing an order.
pub trait Strategy: Send + Sync {
    /// Places one order for `click`, in `ctx`, and returns its id.
    fn order<'a>(&'a self, ctx: &'a OrderContext, click: Click) -> Placed<'a>;

    /// Whether a placed order is only accepted for writing (answered 202)
    /// rather than written (201).
    fn accepts_for_writing(&self) -> bool {
        false
    }

    /// Called after a voucher was created through this instance.
    fn voucher_created<'a>(
        &'a self,
        _ctx: &'a OrderContext,
        _voucher_id: i64,
        _stock: i64,
    ) -> BoxFuture<'a, Result<(), OrderError>> {
        Box::pin(async { Ok(()) })
    }
}

impl dyn Strategy {
    /// Places one order of `voucher_id` for `user_id`. Every strategy
    /// checks the sale window first (seed §1's first check): here, once.
    pub async fn place(
        &self,
        ctx: &OrderContext,
        voucher_id: i64,
        user_id: i64,
    ) -> Result<OrderId, OrderError> {
        let sale_ends_at = ctx.check_sale_open(voucher_id).await?;
        let click = Click {
            voucher_id,
            user_id,
            sale_ends_at,
        };
        self.order(ctx, click).await
    }
}

/// The teaching strategies' race window between a check and the write that
/// relies on it. In production it is a network hop, a GC pause, a busy
/// thread; here it is a 2 ms sleep, so the race shows on every run instead of
/// once in a while.
pub(crate) async fn race_window() {
    tokio::time::sleep(Duration::from_millis(2)).await;
}
