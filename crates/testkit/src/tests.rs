//! Tests against real `redis-server` processes.

use std::net::TcpStream;
use std::time::Duration;

use crate::server::RedisServer;
use crate::servers::Servers;

fn ping(conn: &mut redis::Connection) -> redis::RedisResult<String> {
    redis::cmd("PING").query(conn)
}

/// PING through a client that presents no credentials.
fn unauthenticated_ping(server: &RedisServer) -> redis::RedisResult<String> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{}", server.port()))?;
    let mut conn = client.get_connection_with_timeout(Duration::from_secs(2))?;
    ping(&mut conn)
}

fn assert_noauth(result: redis::RedisResult<String>) {
    let err = result.expect_err("an unauthenticated client must be rejected");
    assert!(
        err.to_string().contains("NOAUTH"),
        "expected a NOAUTH error, got {err}"
    );
}

/// Whether a process with this pid exists (zombies included).
fn process_exists(pid: u32) -> bool {
    // SAFETY: signal 0 only checks for existence and permission.
    unsafe { libc::kill(pid as libc::pid_t, 0) == 0 }
}

#[test]
fn start_answers_ping_and_two_servers_get_distinct_ports() {
    let a = RedisServer::start().unwrap();
    let b = RedisServer::start().unwrap();
    assert_eq!(ping(&mut a.conn()).unwrap(), "PONG");
    assert_eq!(ping(&mut b.conn()).unwrap(), "PONG");
    assert_ne!(a.port(), b.port());
    assert_eq!(a.url(), format!("redis://127.0.0.1:{}", a.port()));
    assert_eq!(a.addr().port(), a.port());
    assert!(a.addr().ip().is_loopback());
    assert!(a.dir().is_dir());
    assert!(!a.is_paused());
}

#[test]
fn server_runs_with_the_documented_settings() {
    let server = RedisServer::start().unwrap();
    let mut conn = server.conn();
    let get = |conn: &mut redis::Connection, name: &str| -> String {
        let pair: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg(name)
            .query(conn)
            .unwrap();
        pair[1].clone()
    };
    assert_eq!(get(&mut conn, "save"), "");
    assert_eq!(get(&mut conn, "appendonly"), "no");
    assert_eq!(get(&mut conn, "bind"), "127.0.0.1");
    assert_eq!(get(&mut conn, "protected-mode"), "no");
    let dir = std::fs::canonicalize(server.dir()).unwrap();
    assert_eq!(get(&mut conn, "dir"), dir.to_str().unwrap());
    assert!(server.dir().join("redis.log").is_file());
    let pid: u32 = get_info_field(&mut conn, "process_id").parse().unwrap();
    assert_eq!(Some(pid), server.pid());
}

fn get_info_field(conn: &mut redis::Connection, field: &str) -> String {
    let info: String = redis::cmd("INFO").arg("server").query(conn).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap()
        .to_owned()
}

#[test]
fn password_server_rejects_unauthenticated_and_accepts_url() {
    let server = RedisServer::builder().password("s3cret").start().unwrap();
    assert_eq!(
        server.url(),
        format!("redis://default:s3cret@127.0.0.1:{}", server.port())
    );
    assert_noauth(unauthenticated_ping(&server));
    assert_eq!(ping(&mut server.conn()).unwrap(), "PONG");

    let wrong =
        redis::Client::open(format!("redis://default:wrong@127.0.0.1:{}", server.port())).unwrap();
    assert!(
        wrong
            .get_connection_with_timeout(Duration::from_secs(2))
            .and_then(|mut c| ping(&mut c))
            .is_err(),
        "a wrong password must be rejected"
    );
}

#[test]
fn acl_user_server_rejects_unauthenticated_and_accepts_url() {
    let server = RedisServer::builder()
        .acl_user("alice", "wonderland")
        .start()
        .unwrap();
    assert_eq!(
        server.url(),
        format!("redis://alice:wonderland@127.0.0.1:{}", server.port())
    );
    assert_noauth(unauthenticated_ping(&server));
    let mut conn = server.conn();
    assert_eq!(ping(&mut conn).unwrap(), "PONG");
    let whoami: String = redis::cmd("ACL").arg("WHOAMI").query(&mut conn).unwrap();
    assert_eq!(whoami, "alice");
    // Full access: keys, scripts and admin commands.
    redis::cmd("SET").arg("k").arg("v").exec(&mut conn).unwrap();
    let v: String = redis::cmd("EVAL")
        .arg("return redis.call('GET', KEYS[1])")
        .arg(1)
        .arg("k")
        .query(&mut conn)
        .unwrap();
    assert_eq!(v, "v");
    redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory")
        .exec(&mut conn)
        .unwrap();
}

#[test]
fn password_and_acl_user_together_both_work() {
    let server = RedisServer::builder()
        .password("pw0")
        .acl_user("bob", "pw1")
        .start()
        .unwrap();
    assert!(server.url().starts_with("redis://bob:pw1@"));
    assert_noauth(unauthenticated_ping(&server));
    let default =
        redis::Client::open(format!("redis://default:pw0@127.0.0.1:{}", server.port())).unwrap();
    assert_eq!(
        ping(&mut default.get_connection().unwrap()).unwrap(),
        "PONG"
    );
    assert_eq!(ping(&mut server.conn()).unwrap(), "PONG");
}

#[test]
fn passwords_with_special_characters_survive_config_and_url() {
    let pw = r#"p@ss w:rd/"\%é#?"#;
    let server = RedisServer::builder().password(pw).start().unwrap();
    assert_eq!(ping(&mut server.conn()).unwrap(), "PONG");
    let server = RedisServer::builder()
        .acl_user("us@er:x", pw)
        .start()
        .unwrap();
    let mut conn = server.conn();
    let whoami: String = redis::cmd("ACL").arg("WHOAMI").query(&mut conn).unwrap();
    assert_eq!(whoami, "us@er:x");
}

#[test]
fn extra_args_are_applied() {
    let server = RedisServer::builder()
        .arg("maxmemory", "10mb")
        .arg("maxmemory-policy", "allkeys-lru")
        .start()
        .unwrap();
    let mut conn = server.conn();
    let maxmemory: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory")
        .query(&mut conn)
        .unwrap();
    assert_eq!(maxmemory, ["maxmemory", "10485760"]);
    let policy: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory-policy")
        .query(&mut conn)
        .unwrap();
    assert_eq!(policy, ["maxmemory-policy", "allkeys-lru"]);
}

#[test]
fn bad_config_fails_fast_with_the_redis_error_in_the_message() {
    let started = std::time::Instant::now();
    let err = RedisServer::builder()
        .arg("no-such-directive", "1")
        .start()
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("no-such-directive"), "message: {msg}");
    assert!(msg.contains("Bad directive"), "message: {msg}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn pause_makes_commands_time_out_and_resume_makes_them_answer() {
    let server = RedisServer::start().unwrap();
    let mut conn = server.conn();
    conn.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    assert_eq!(ping(&mut conn).unwrap(), "PONG");

    server.pause().unwrap();
    assert!(server.is_paused());
    let err = ping(&mut conn).expect_err("a paused server must not answer");
    assert!(err.is_timeout(), "expected a timeout, got {err}");

    server.resume().unwrap();
    assert!(!server.is_paused());
    let mut fresh = server.conn();
    fresh
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    assert_eq!(ping(&mut fresh).unwrap(), "PONG");
}

#[test]
fn kill_makes_connect_fail_and_is_idempotent() {
    let mut server = RedisServer::start().unwrap();
    let pid = server.pid().unwrap();
    server.kill().unwrap();
    assert_eq!(server.pid(), None);
    assert!(!process_exists(pid), "pid {pid} still exists after kill");
    assert!(TcpStream::connect_timeout(&server.addr(), Duration::from_secs(1)).is_err());
    assert!(
        server
            .client()
            .get_connection_with_timeout(Duration::from_secs(1))
            .is_err()
    );
    server.kill().unwrap();
    assert!(server.pause().is_err(), "pausing a killed server must fail");
}

#[test]
fn kill_works_on_a_paused_server() {
    let mut server = RedisServer::start().unwrap();
    let pid = server.pid().unwrap();
    server.pause().unwrap();
    server.kill().unwrap();
    assert!(!server.is_paused());
    assert!(!process_exists(pid));
}

#[test]
fn restart_comes_back_on_the_same_port_with_an_empty_dataset() {
    let mut server = RedisServer::builder().password("pw").start().unwrap();
    let port = server.port();
    let old_pid = server.pid().unwrap();
    let mut conn = server.conn();
    redis::cmd("SET")
        .arg("key")
        .arg("value")
        .exec(&mut conn)
        .unwrap();
    let before: Option<String> = redis::cmd("GET").arg("key").query(&mut conn).unwrap();
    assert_eq!(before.as_deref(), Some("value"));

    server.restart().unwrap();
    assert_eq!(server.port(), port);
    assert_ne!(server.pid(), Some(old_pid));
    assert!(!process_exists(old_pid));
    let mut conn = server.conn();
    let after: Option<String> = redis::cmd("GET").arg("key").query(&mut conn).unwrap();
    assert_eq!(after, None);
    let size: i64 = redis::cmd("DBSIZE").query(&mut conn).unwrap();
    assert_eq!(size, 0);
    // Same settings: still password protected.
    assert_noauth(unauthenticated_ping(&server));
}

#[test]
fn restart_works_after_kill_and_while_paused() {
    let mut server = RedisServer::start().unwrap();
    let port = server.port();
    server.kill().unwrap();
    server.restart().unwrap();
    assert_eq!(server.port(), port);
    assert_eq!(ping(&mut server.conn()).unwrap(), "PONG");

    server.pause().unwrap();
    server.restart().unwrap();
    assert!(!server.is_paused());
    assert_eq!(server.port(), port);
    assert_eq!(ping(&mut server.conn()).unwrap(), "PONG");
}

#[test]
fn restart_empties_a_dataset_even_with_persistence_enabled() {
    let mut server = RedisServer::builder()
        .arg("appendonly", "yes")
        .arg("appendfsync", "always")
        .start()
        .unwrap();
    let mut conn = server.conn();
    redis::cmd("SET")
        .arg("key")
        .arg("value")
        .exec(&mut conn)
        .unwrap();
    redis::cmd("SAVE").exec(&mut conn).unwrap();
    server.restart().unwrap();
    let size: i64 = redis::cmd("DBSIZE").query(&mut server.conn()).unwrap();
    assert_eq!(size, 0);
}

#[test]
fn servers_start_five_on_distinct_working_ports() {
    let servers = Servers::start(5).unwrap();
    assert_eq!(servers.len(), 5);
    assert!(!servers.is_empty());
    let mut ports: Vec<u16> = servers.iter().map(RedisServer::port).collect();
    ports.sort_unstable();
    ports.dedup();
    assert_eq!(ports.len(), 5, "ports must be distinct: {ports:?}");
    for server in &servers {
        assert_eq!(ping(&mut server.conn()).unwrap(), "PONG");
    }
    let urls = servers.urls();
    assert_eq!(urls.len(), 5);
    assert_eq!(urls[2], servers[2].url());
}

#[test]
fn servers_can_be_killed_by_index() {
    let mut servers = Servers::start(2).unwrap();
    servers[0].kill().unwrap();
    assert_eq!(servers[0].pid(), None);
    assert_eq!(ping(&mut servers[1].conn()).unwrap(), "PONG");
    assert!(Servers::start(0).unwrap().is_empty());
}

#[test]
fn dropping_a_server_kills_the_process_and_removes_its_dir() {
    let server = RedisServer::start().unwrap();
    let pid = server.pid().unwrap();
    let dir = server.dir().to_path_buf();
    assert!(process_exists(pid));
    drop(server);
    assert!(!process_exists(pid), "pid {pid} still exists after drop");
    assert!(!dir.exists(), "{} still exists after drop", dir.display());
}

#[test]
fn dropping_a_paused_server_kills_it() {
    let server = RedisServer::start().unwrap();
    let pid = server.pid().unwrap();
    server.pause().unwrap();
    drop(server);
    assert!(!process_exists(pid));
}

#[test]
fn server_outlives_the_thread_that_started_it() {
    // PR_SET_PDEATHSIG fires when the forking *thread* exits; the testkit
    // forks from a long-lived thread so this must not kill the server.
    let server = std::thread::spawn(|| RedisServer::start().unwrap())
        .join()
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(ping(&mut server.conn()).unwrap(), "PONG");
}

#[cfg(target_os = "linux")]
#[test]
fn env_reaches_the_server_process_and_survives_a_restart() {
    // Redis rewrites its own environ area (process title), so look at an
    // effect instead: the dynamic loader complains about a missing preload
    // on the server's stderr, which the testkit keeps in a file.
    let stdio = |server: &RedisServer| {
        std::fs::read_to_string(server.dir().join(crate::server_settings::STDIO_FILE))
            .unwrap_or_default()
    };
    let mut server = RedisServer::builder()
        .env("LD_PRELOAD", "/nonexistent/testkit-probe.so")
        .start()
        .unwrap();
    assert_eq!(stdio(&server).matches("testkit-probe.so").count(), 1);
    server.restart().unwrap();
    assert_eq!(stdio(&server).matches("testkit-probe.so").count(), 2);
}
