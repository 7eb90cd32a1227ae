//! A shop for the tests: a throwaway redis-server, a temporary SQLite
//! database and N in-process instances of the service on free ports.

use std::net::{Ipv4Addr, SocketAddr};

use seckill::serve::{Service, ServiceConfig, Tuning};
use seckill::strategy::StrategyKind;

pub type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Redis, SQLite and the instances; [`Shop::stop`] shuts them down.
pub struct Shop {
    pub services: Vec<Service>,
    pub database_url: String,
    _redis: testkit::RedisServer,
    /// The SQLite file's directory, when the shop made one.
    _dir: Option<tempfile::TempDir>,
}

impl Shop {
    /// `instances` instances of `strategy` sharing one Redis and one SQLite
    /// file; `lab_schema` drops the UNIQUE/CHECK constraints.
    pub async fn start(
        strategy: StrategyKind,
        instances: u16,
        lab_schema: bool,
    ) -> TestResult<Shop> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("shop.db");
        let database_url = format!("sqlite://{}?mode=rwc", path.display());
        let mut shop = Self::start_with(
            strategy,
            instances,
            lab_schema,
            database_url,
            Tuning::default(),
        )
        .await?;
        shop._dir = Some(dir);
        Ok(shop)
    }

    /// `instances` instances of `strategy` with `tuning` on the database at
    /// `database_url` (which the caller keeps and cleans up).
    pub async fn start_with(
        strategy: StrategyKind,
        instances: u16,
        lab_schema: bool,
        database_url: String,
        tuning: Tuning,
    ) -> TestResult<Shop> {
        // DEBUG allowed: `seckill load --outage pause=D` stalls it with DEBUG SLEEP.
        let redis = tokio::task::spawn_blocking(|| {
            testkit::RedisServer::builder()
                .arg("enable-debug-command", "yes")
                .start()
        })
        .await??;
        let mut services = Vec::new();
        for instance in 1..=instances {
            let config = ServiceConfig {
                listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
                redis: redlatch::Deployment::new(redlatch::Servers::Single(redis.url())),
                database_url: database_url.clone(),
                strategy,
                instance,
                lab_schema,
            };
            services.push(seckill::serve::start_tuned(config, tuning.clone()).await?);
        }
        Ok(Shop {
            services,
            database_url,
            _redis: redis,
            _dir: None,
        })
    }

    /// The URL of the shop's Redis.
    pub fn redis_url(&self) -> String {
        self._redis.url()
    }

    /// The instances' base URLs.
    pub fn targets(&self) -> Vec<String> {
        self.services
            .iter()
            .map(|service| format!("http://{}", service.addr()))
            .collect()
    }

    /// `POST /vouchers` on the first instance: `stock` units, open now for an hour.
    pub async fn create_voucher(&self, title: &str, stock: u64) -> TestResult<u64> {
        create_voucher_at(&self.targets()[0], title, stock).await
    }

    pub async fn stop(self) {
        for service in self.services {
            service.shutdown().await;
        }
    }
}

/// `POST /vouchers` at `base`: `stock` units, open now for an hour.
pub async fn create_voucher_at(base: &str, title: &str, stock: u64) -> TestResult<u64> {
    let now = chrono::Utc::now();
    let response = reqwest::Client::builder()
        .no_proxy()
        .build()?
        .post(format!("{base}/vouchers"))
        .json(&serde_json::json!({
            "title": title,
            "stock": stock,
            "begin_at": (now - chrono::Duration::minutes(1)).to_rfc3339(),
            "end_at": (now + chrono::Duration::hours(1)).to_rfc3339(),
        }))
        .send()
        .await?;
    let status = response.status();
    let body: serde_json::Value = response.json().await?;
    if status.as_u16() != 201 {
        return Err(format!("POST /vouchers answered {status}: {body}").into());
    }
    body["id"]
        .as_u64()
        .ok_or_else(|| format!("no voucher id in {body}").into())
}
