//! What `seckill load` runs: its flags, and the configuration they make.

use std::io::IsTerminal as _;
use std::time::Duration;

use super::identity::Identity;
use super::mix::Mix;
use super::outage::Outage;

/// Arguments of `seckill load`.
#[derive(clap::Args, Debug, Clone)]
pub struct LoadArgs {
    /// Base URL of an instance, e.g. http://127.0.0.1:8081 (repeat the option
    /// for several; a user's duplicate clicks go to different ones).
    #[arg(long = "target", value_name = "URL", required = true)]
    pub targets: Vec<String>,
    /// The voucher to order.
    #[arg(long, value_name = "ID")]
    pub voucher: u64,
    /// Number of users (ids 1..=N).
    #[arg(long, value_name = "N", default_value_t = 500,
          value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub users: u64,
    /// Simultaneous clicks per user (duplicates fired at the same moment).
    #[arg(long, value_name = "K", default_value_t = 3,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub clicks: u32,
    /// Verify against this database directly (the service's URL, e.g.
    /// sqlite:///tmp/shop.db); without it, verify through the HTTP endpoints.
    #[arg(long, value_name = "URL")]
    pub database: Option<String>,
    /// Print the report as JSON (and no progress bar).
    #[arg(long)]
    pub json: bool,
    /// Requests in flight at most (raised to K so a user's clicks go together).
    #[arg(long, value_name = "C", default_value_t = 256,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub concurrency: u32,
    /// How long to wait for orders written asynchronously (the reserve
    /// strategy's stream consumer) to reach the database; also the longest
    /// wait for a `202` order to show before paying or cancelling it.
    #[arg(long, value_name = "DURATION", default_value = "15s",
          value_parser = humantime::parse_duration)]
    pub drain_timeout: Duration,
    /// What each buyer does with an accepted order, in percent summing to
    /// 100: pay it, cancel it, or leave it to expire (missing keys are 0).
    /// Without it: buy only.
    #[arg(long, value_name = "pay=P,cancel=C,expire=E")]
    pub mix: Option<Mix>,
    /// Wait up to D after the last answer for every order of the load to
    /// leave `pending` (the service's --payment-timeout plus a tenth, plus
    /// slack), and count an order left unpaid that did not expire as a
    /// violation. Without it, orders left unpaid may be pending or expired.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub expect_expiry_within: Option<Duration>,
    /// For services started with `--auth jwt`: sign each user's requests
    /// with a JWT (HS256, `sub` = the user id) made with this secret, the
    /// service's `--jwt-secret`. Without it, users send `X-User-Id`.
    #[arg(
        long,
        value_name = "S",
        env = "SECKILL_JWT_SECRET",
        hide_env_values = true,
        value_parser = clap::builder::NonEmptyStringValueParser::new()
    )]
    pub jwt_secret: Option<String>,
    /// A Redis fault during the run: `pause=D` (stalled for D, `DEBUG
    /// SLEEP`), `restart` (emptied and its connections dropped), `after=A`
    /// (when, after the first click); needs --outage-redis.
    #[arg(
        long,
        value_name = "pause=D,restart,after=A",
        requires = "outage_redis"
    )]
    pub outage: Option<Outage>,
    /// The shop's Redis, for --outage.
    #[arg(long, value_name = "URL", requires = "outage")]
    pub outage_redis: Option<String>,
}

/// What [`run_load`](crate::load::run_load) does: the targets, the voucher, the shape of the load.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    /// Base URLs of the instances (at least one).
    pub targets: Vec<String>,
    /// The voucher to order.
    pub voucher: u64,
    /// Users 1..=`users` each click.
    pub users: u64,
    /// Simultaneous clicks per user.
    pub clicks: u32,
    /// Verify against this database URL; `None`: through the first target's HTTP API.
    pub database: Option<String>,
    /// Requests in flight at most (raised to `clicks`).
    pub concurrency: u32,
    /// Draw a progress bar on stderr.
    pub progress: bool,
    /// Longest wait for asynchronously written orders (and for a `202`
    /// order to show before its follow-up).
    pub drain_timeout: Duration,
    /// Follow-ups on accepted orders; `None`: buy only.
    pub mix: Option<Mix>,
    /// Wait this long after the load for the orders to leave `pending`, and
    /// judge the ones left unpaid as expired; `None`: no wait.
    pub expect_expiry_within: Option<Duration>,
    /// How the users name themselves (`X-User-Id` unless a JWT secret is given).
    pub identity: Identity,
    /// A Redis fault during the run, and the shop's Redis URL; `None`: none.
    pub outage: Option<(Outage, String)>,
}

impl LoadConfig {
    /// The defaults of `seckill load`: 500 users × 3 clicks, 256 in flight,
    /// HTTP verification, no progress bar, 15 s drain timeout, buying only.
    pub fn new(targets: Vec<String>, voucher: u64) -> Self {
        Self {
            targets,
            voucher,
            users: 500,
            clicks: 3,
            database: None,
            concurrency: 256,
            progress: false,
            drain_timeout: Duration::from_secs(15),
            mix: None,
            expect_expiry_within: None,
            identity: Identity::Header,
            outage: None,
        }
    }
}

impl From<&LoadArgs> for LoadConfig {
    fn from(args: &LoadArgs) -> Self {
        Self {
            targets: args.targets.clone(),
            voucher: args.voucher,
            users: args.users,
            clicks: args.clicks,
            database: args.database.clone(),
            concurrency: args.concurrency,
            // A bar would garble JSON consumers' terminals and pipes alike.
            progress: !args.json && std::io::stderr().is_terminal(),
            drain_timeout: args.drain_timeout,
            mix: args.mix,
            expect_expiry_within: args.expect_expiry_within,
            identity: args
                .jwt_secret
                .as_deref()
                .map_or(Identity::Header, Identity::jwt),
            outage: args.outage.zip(args.outage_redis.clone()),
        }
    }
}
