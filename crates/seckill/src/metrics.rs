//! The service's metrics, exported at `GET /metrics` in Prometheus text.
//!
//! One Prometheus recorder per process (the `metrics` facade has one global
//! recorder), installed by the first service started; in-process instances
//! share it and tell their series apart by the `instance` label. redlatch's
//! own `redlatch_*` series appear next to these.
//!
//! | name | kind | labels | meaning |
//! |---|---|---|---|
//! | `seckill_orders_created_total` | counter | `instance`, `strategy` | orders accepted (201) |
//! | `seckill_order_rejections_total` | counter | `instance`, `strategy`, `reason` | orders refused: `sold_out`, `already_ordered`, `in_progress`, `conflict`, `not_started`, `ended`, `not_found`, `busy`, `lock_lost`, `redis_unavailable`, `database_busy`, `database_error`, `bad_user_id`, `unauthorized` |
//! | `seckill_order_seconds` | summary | `instance`, `strategy` | time to answer an order request |
//! | `seckill_reserve_entries_total` | counter | `consumer`, `outcome` = `written` / `already_there` / `dead_lettered` / `failed` | stream entries the reserve consumer handled (`failed`: a try the database refused; the entry stays pending and is retried) |
//! | `seckill_reserve_claimed_total` | counter | `consumer` | pending entries taken over from another consumer |
//! | `seckill_orders_ended_total` | counter | `status` = `paid` / `cancelled` / `expired` | pending orders that ended (lifecycle) |
//! | `seckill_reserve_dead_letters_total` | counter | `reason` = `malformed` / `voucher_gone` / `no_stock` / `duplicate_user` / `max_tries` / `id_collision` | order entries moved to the dead-letter stream `{seckill}:orders:dead` |
//! | `seckill_reserve_trimmed_total` | counter | `consumer` | acknowledged entries trimmed from the order stream |
//! | `seckill_reserve_group_created_total` | counter | `consumer` | the order stream's consumer group created again after Redis lost it (`NOGROUP`) |
//! | `seckill_sold_out_flag_answers_total` | counter | `instance` | clicks answered 410 `sold_out` from the local sold-out flag, without Redis or the database (also counted in `seckill_order_rejections_total`) |
//! | `seckill_rate_limited_total` | counter | `instance` | requests answered 429 `rate_limited` |

use std::sync::OnceLock;
use std::time::Duration;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// Orders accepted.
pub const ORDERS_CREATED: &str = "seckill_orders_created_total";
/// Orders refused, by reason.
pub const ORDER_REJECTIONS: &str = "seckill_order_rejections_total";
/// Time to answer an order request.
pub const ORDER_SECONDS: &str = "seckill_order_seconds";
/// Stream entries handled by the reserve consumer, by outcome.
pub const RESERVE_ENTRIES: &str = "seckill_reserve_entries_total";
/// Pending entries taken over from other consumers.
pub const RESERVE_CLAIMED: &str = "seckill_reserve_claimed_total";
/// Order entries moved to the dead-letter stream, by reason.
pub const RESERVE_DEAD_LETTERS: &str = "seckill_reserve_dead_letters_total";
/// Acknowledged entries trimmed from the order stream.
pub const RESERVE_TRIMMED: &str = "seckill_reserve_trimmed_total";
/// The consumer group created again after Redis lost it.
pub const RESERVE_GROUP_CREATED: &str = "seckill_reserve_group_created_total";

/// Pending orders that ended, by the status they ended in.
pub const ORDERS_ENDED: &str = "seckill_orders_ended_total";
/// Clicks answered from the local sold-out flag.
pub const SOLD_OUT_FLAG_ANSWERS: &str = "seckill_sold_out_flag_answers_total";
/// Requests refused by the rate limit.
pub const RATE_LIMITED: &str = "seckill_rate_limited_total";

/// Every series name above.
pub const ALL: [&str; 11] = [
    ORDERS_CREATED,
    ORDER_REJECTIONS,
    ORDER_SECONDS,
    RESERVE_ENTRIES,
    RESERVE_CLAIMED,
    ORDERS_ENDED,
    RESERVE_DEAD_LETTERS,
    RESERVE_TRIMMED,
    RESERVE_GROUP_CREATED,
    SOLD_OUT_FLAG_ANSWERS,
    RATE_LIMITED,
];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// The process's Prometheus recorder, installed on first use. When another
/// recorder was installed first (by an embedding program), the handle
/// renders an empty page and a warning is logged.
pub fn handle() -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new().build_recorder();
            let handle = recorder.handle();
            match metrics::set_global_recorder(recorder) {
                Ok(()) => {
                    describe();
                    redlatch::metrics::describe();
                }
                Err(error) => {
                    tracing::warn!(%error, "seckill: another metrics recorder is installed; /metrics will be empty");
                }
            }
            handle
        })
        .clone()
}

fn describe() {
    metrics::describe_counter!(ORDERS_CREATED, "Orders accepted");
    metrics::describe_counter!(ORDER_REJECTIONS, "Orders refused, by reason");
    metrics::describe_histogram!(
        ORDER_SECONDS,
        metrics::Unit::Seconds,
        "Time to answer an order request"
    );
    metrics::describe_counter!(
        RESERVE_ENTRIES,
        "Stream entries the reserve consumer handled, by outcome"
    );
    metrics::describe_counter!(
        RESERVE_CLAIMED,
        "Pending stream entries taken over from another consumer"
    );
    metrics::describe_counter!(
        ORDERS_ENDED,
        "Pending orders that ended, by the status they ended in"
    );
    metrics::describe_counter!(
        RESERVE_DEAD_LETTERS,
        "Order entries moved to the dead-letter stream, by reason"
    );
    metrics::describe_counter!(
        RESERVE_TRIMMED,
        "Acknowledged entries trimmed from the order stream"
    );
    metrics::describe_counter!(
        RESERVE_GROUP_CREATED,
        "The order stream's consumer group created again after Redis lost it"
    );
    metrics::describe_counter!(
        SOLD_OUT_FLAG_ANSWERS,
        "Clicks answered sold_out from the local sold-out flag"
    );
    metrics::describe_counter!(RATE_LIMITED, "Requests refused by the rate limit");
}

/// Records one order request's outcome: `None` when accepted, else the
/// rejection reason.
pub fn order_answered(
    instance: u16,
    strategy: &'static str,
    rejection: Option<&'static str>,
    took: Duration,
) {
    let instance = instance.to_string();
    match rejection {
        None => metrics::counter!(ORDERS_CREATED, "instance" => instance.clone(), "strategy" => strategy)
            .increment(1),
        Some(reason) => metrics::counter!(
            ORDER_REJECTIONS,
            "instance" => instance.clone(),
            "strategy" => strategy,
            "reason" => reason
        )
        .increment(1),
    }
    metrics::histogram!(ORDER_SECONDS, "instance" => instance, "strategy" => strategy)
        .record(took.as_secs_f64());
}

/// Records one stream entry handled by the reserve consumer `consumer`.
pub fn reserve_entry(consumer: &str, outcome: &'static str) {
    metrics::counter!(RESERVE_ENTRIES, "consumer" => consumer.to_owned(), "outcome" => outcome)
        .increment(1);
}

/// Records entries taken over by `consumer` with XAUTOCLAIM.
pub fn reserve_claimed(consumer: &str, count: usize) {
    metrics::counter!(RESERVE_CLAIMED, "consumer" => consumer.to_owned()).increment(count as u64);
}

/// Records a pending order ending as `status` (paid, cancelled, expired).
pub fn order_ended(status: &'static str) {
    metrics::counter!(ORDERS_ENDED, "status" => status).increment(1);
}

/// Records one order entry moved to the dead-letter stream.
pub fn reserve_dead_letter(reason: &'static str) {
    metrics::counter!(RESERVE_DEAD_LETTERS, "reason" => reason).increment(1);
}

/// Records entries trimmed from the order stream by `consumer`.
pub fn reserve_trimmed(consumer: &str, count: u64) {
    metrics::counter!(RESERVE_TRIMMED, "consumer" => consumer.to_owned()).increment(count);
}

/// Records the consumer group created again by `consumer`.
pub fn reserve_group_created(consumer: &str) {
    metrics::counter!(RESERVE_GROUP_CREATED, "consumer" => consumer.to_owned()).increment(1);
}

/// Records a click answered from instance `instance`'s sold-out flag.
pub fn sold_out_flag_answer(instance: u16) {
    metrics::counter!(SOLD_OUT_FLAG_ANSWERS, "instance" => instance.to_string()).increment(1);
}

/// Records a request refused by instance `instance`'s rate limit.
pub fn rate_limited(instance: u16) {
    metrics::counter!(RATE_LIMITED, "instance" => instance.to_string()).increment(1);
}
