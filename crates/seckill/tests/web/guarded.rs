//! One instance started with `--admin-token` (the page's voucher form) or
//! `--auth jwt` (the page's sign-in token): `tests/load/shop.rs` starts
//! instances with neither.

use std::net::{Ipv4Addr, SocketAddr};

use seckill::serve::{Service, ServiceConfig, Tuning};
use seckill::strategy::StrategyKind;

use super::shop::TestResult;

/// A redis-lock instance on SQLite whose `POST /vouchers` needs
/// `Authorization: Bearer {token}`; [`GuardedShop::stop`] shuts it down.
pub struct GuardedShop {
    service: Service,
    _redis: testkit::RedisServer,
    _dir: tempfile::TempDir,
}

impl GuardedShop {
    pub async fn start(token: &str) -> TestResult<GuardedShop> {
        GuardedShop::start_tuned(Tuning {
            admin_token: Some(token.to_owned()),
            ..Tuning::default()
        })
        .await
    }

    /// An instance with `tuning` (its auth, its admin token).
    pub async fn start_tuned(tuning: Tuning) -> TestResult<GuardedShop> {
        let redis = tokio::task::spawn_blocking(testkit::RedisServer::start).await??;
        let dir = tempfile::tempdir()?;
        let config = ServiceConfig {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            redis: redlatch::Deployment::new(redlatch::Servers::Single(redis.url())),
            database_url: format!("sqlite://{}?mode=rwc", dir.path().join("shop.db").display()),
            strategy: StrategyKind::RedisLock,
            instance: 1,
            lab_schema: false,
        };
        let service = seckill::serve::start_tuned(config, tuning).await?;
        Ok(GuardedShop {
            service,
            _redis: redis,
            _dir: dir,
        })
    }

    /// The instance's base URL.
    pub fn base(&self) -> String {
        format!("http://{}", self.service.addr())
    }

    /// The page's address.
    pub fn page(&self) -> String {
        format!("http://{}/", self.service.addr())
    }

    pub async fn stop(self) {
        self.service.shutdown().await;
    }
}
