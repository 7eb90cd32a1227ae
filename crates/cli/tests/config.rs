//! `--config`: lock settings from a TOML file, followed live by `run`.

mod common;

use std::fs;
use std::time::{Duration, Instant};

use common::{World, code, eventually};

fn pttl(conn: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query(conn).expect("PTTL")
}

/// Rewriting the file changes the lease of the running lock: a longer one
/// at once, a shorter one once the old remaining time has run down to it
/// (no script shortens a lease already set); a broken file is refused and
/// the lock stays renewed with the settings in force.
#[test]
fn run_follows_the_config_file() {
    let world = World::new();
    let config = world.path("redlatch.toml");
    fs::write(&config, "[lock]\ndefault_lease = \"1s\"\n").unwrap();
    let config_arg = config.to_str().unwrap();
    let mut run = world.spawn(&["run", "--config", config_arg, "tuned", "--", "sleep", "30"]);
    world.wait_held("tuned", Duration::from_secs(5));
    let mut conn = world.redis();
    let first = pttl(&mut conn, "tuned");
    assert!(first <= 1000, "PTTL {first} with a 1 s lease");

    fs::write(&config, "[lock]\ndefault_lease = \"5s\"\n").unwrap();
    let changed = Instant::now();
    assert!(
        eventually(Duration::from_secs(3), || pttl(&mut conn, "tuned") > 1000),
        "PTTL still {} 3 s after the lease went to 5 s",
        pttl(&mut conn, "tuned")
    );
    eprintln!(
        "longer lease in force {:?} after the write",
        changed.elapsed()
    );

    fs::write(&config, "[lock]\ndefault_lease = \"2s\"\n").unwrap();
    let changed = Instant::now();
    assert!(
        eventually(Duration::from_secs(8), || {
            let ttl = pttl(&mut conn, "tuned");
            ttl > 0 && ttl <= 2000
        }),
        "PTTL still {} 8 s after the lease went from 5 s to 2 s",
        pttl(&mut conn, "tuned")
    );
    eprintln!(
        "shorter lease in force {:?} after the write",
        changed.elapsed()
    );

    fs::write(&config, "[lock]\ndefault_lease = \"banana\"\n").unwrap();
    let broken = Instant::now();
    while broken.elapsed() < Duration::from_secs(3) {
        let ttl = pttl(&mut conn, "tuned");
        assert!(ttl > 0 && ttl <= 2000, "PTTL {ttl} after the broken file");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        run.try_wait_for(Duration::ZERO).is_none(),
        "redlatch quit: {}",
        run.stderr()
    );
    // The refusal is reported (a warning), the command goes on to the end.
    assert!(run.stderr().contains("banana"), "stderr: {}", run.stderr());
    run.signal(libc::SIGTERM);
    assert_eq!(code(run.wait(Duration::from_secs(5))), 128 + libc::SIGTERM);
}

/// `--lease` beats the file's default_lease, also after the file changes.
#[test]
fn lease_flag_overrides_the_file() {
    let world = World::new();
    let config = world.path("redlatch.toml");
    fs::write(&config, "[lock]\ndefault_lease = \"20s\"\n").unwrap();
    let config_arg = config.to_str().unwrap();
    let mut run = world.spawn(&[
        "run", "--config", config_arg, "--lease", "2s", "pinned", "--", "sleep", "10",
    ]);
    world.wait_held("pinned", Duration::from_secs(5));
    let mut conn = world.redis();
    let ttl = pttl(&mut conn, "pinned");
    assert!(ttl > 0 && ttl <= 2000, "PTTL {ttl} with --lease 2s");
    fs::write(&config, "[lock]\ndefault_lease = \"25s\"\n").unwrap();
    let changed = Instant::now();
    while changed.elapsed() < Duration::from_secs(2) {
        let ttl = pttl(&mut conn, "pinned");
        // A reload may renew once with the file's lease before --lease is
        // put back; it must not stick.
        if changed.elapsed() > Duration::from_secs(1) {
            assert!(ttl > 0 && ttl <= 2000, "PTTL {ttl}: the file's lease stuck");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    run.signal(libc::SIGTERM);
    run.wait(Duration::from_secs(5));
}

/// `wait_timeout` in the file is the default for `--wait`.
#[test]
fn wait_timeout_from_the_file() {
    let world = World::new();
    let config = world.path("redlatch.toml");
    fs::write(&config, "[lock]\nwait_timeout = \"200ms\"\n").unwrap();
    let _holder = world.spawn(&["run", "busy", "--", "sleep", "30"]);
    world.wait_held("busy", Duration::from_secs(5));
    let output = world.output(&[
        "--config",
        config.to_str().unwrap(),
        "run",
        "busy",
        "--",
        "true",
    ]);
    assert_eq!(code(output.status), 75);
    let message = String::from_utf8_lossy(&output.stderr);
    assert!(
        message.starts_with("redlatch: lock busy is held by ")
            && message.ends_with(" more; gave up after 200ms\n"),
        "{message}"
    );
}

/// A bad or missing config file: exit 78 with one line, for every command.
#[test]
fn bad_config_file_exits_78() {
    let world = World::new();
    let config = world.path("bad.toml");
    fs::write(&config, "[lock]\ndefault_lease = \"banana\"\n").unwrap();
    let config_arg = config.to_str().unwrap();
    let marker = world.path("marker");
    for args in [
        vec!["run", "x", "--", "touch", marker.to_str().unwrap()],
        vec!["status", "x"],
        vec!["list"],
    ] {
        let mut full = vec!["--config", config_arg];
        full.extend(args);
        let output = world.output(&full);
        assert_eq!(code(output.status), 78);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with("redlatch: config ") && stderr.contains("banana"),
            "{stderr}"
        );
    }
    assert!(!marker.exists());
    let missing = world.output(&["--config", "/nonexistent/redlatch.toml", "status", "x"]);
    assert_eq!(code(missing.status), 78);
}
