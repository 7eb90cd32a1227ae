//! The proxy's faults, against a real redis-server.

use std::time::{Duration, Instant};

use super::{Direction, LinkFaults, Proxy, RETRANSMISSION_TIMEOUT};
use crate::server::RedisServer;

fn connect(proxy: &Proxy) -> redis::Connection {
    let client = redis::Client::open(proxy.url()).expect("url");
    let conn = client
        .get_connection_with_timeout(Duration::from_secs(5))
        .expect("connect through the proxy");
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("read timeout");
    conn
}

fn ping_time(conn: &mut redis::Connection) -> Duration {
    let sent = Instant::now();
    redis::cmd("PING").exec(conn).expect("PING");
    sent.elapsed()
}

#[test]
fn latency_delays_each_way_and_jitter_stays_within_its_bounds() {
    let server = RedisServer::start().expect("server");
    let proxy = Proxy::start(server.addr()).expect("proxy");
    let mut conn = connect(&proxy);
    proxy.set_both(LinkFaults {
        latency: Duration::from_millis(40),
        jitter: Duration::from_millis(10),
        ..LinkFaults::default()
    });
    for _ in 0..5 {
        let round_trip = ping_time(&mut conn);
        // 2 × (40 ± 10) ms, and a generous bound above for a busy machine.
        assert!(round_trip >= Duration::from_millis(60), "{round_trip:?}");
        assert!(round_trip < Duration::from_secs(2), "{round_trip:?}");
    }
    proxy.set_both(LinkFaults::default());
    assert!(ping_time(&mut conn) < Duration::from_millis(500));
}

#[test]
fn a_lost_chunk_arrives_one_retransmission_timeout_late() {
    let server = RedisServer::start().expect("server");
    let proxy = Proxy::start(server.addr()).expect("proxy");
    let mut conn = connect(&proxy);
    proxy.set(
        Direction::ToServer,
        LinkFaults {
            loss: 1.0,
            ..LinkFaults::default()
        },
    );
    assert!(ping_time(&mut conn) >= RETRANSMISSION_TIMEOUT);
}

#[test]
fn a_request_sent_into_a_one_way_cut_runs_and_its_reply_waits_for_the_heal() {
    let server = RedisServer::start().expect("server");
    let proxy = Proxy::start(server.addr()).expect("proxy");
    let mut conn = connect(&proxy);
    proxy.cut(Direction::ToClient);
    conn.set_read_timeout(Some(Duration::from_millis(300)))
        .expect("read timeout");
    let reply = redis::cmd("SET").arg("k").arg("v").exec(&mut conn);
    assert!(reply.is_err(), "no reply may cross the cut");
    // The request went through: the server has the key.
    let value: Option<String> = redis::cmd("GET")
        .arg("k")
        .query(&mut server.conn())
        .expect("GET");
    assert_eq!(value.as_deref(), Some("v"));
}

#[test]
fn a_partition_holds_requests_and_delivers_them_when_it_heals() {
    let server = RedisServer::start().expect("server");
    let proxy = Proxy::start(server.addr()).expect("proxy");
    let mut conn = connect(&proxy);
    proxy.partition();
    assert!(proxy.faults(Direction::ToServer).cut);
    let cut_at = Instant::now();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(300));
            // Nothing arrived while cut.
            let value: Option<String> = redis::cmd("GET")
                .arg("held")
                .query(&mut server.conn())
                .expect("GET");
            assert_eq!(value, None);
            proxy.heal();
        });
        redis::cmd("SET")
            .arg("held")
            .arg("1")
            .exec(&mut conn)
            .expect("the SET is delivered once healed");
    });
    assert!(cut_at.elapsed() >= Duration::from_millis(300));
}
