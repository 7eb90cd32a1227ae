//! `redlatch status` and `list` on a read-write lock: the mode is shown,
//! and plain locks print exactly what they did before; who waits for whom
//! (the wait keys) and a wait-for cycle are shown.

mod common;

use common::{World, code};
use serde_json::{Value, json};

const READER: &str = "3f0e6c1a-8a52-4cf1-9e0b-4c1b9d7a2e11:reader";

fn stdout_json(output: &std::process::Output) -> Value {
    assert_eq!(
        code(output.status),
        0,
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON on stdout")
}

#[test]
fn status_and_list_show_the_mode_of_a_read_write_lock() {
    let world = World::new();
    let mut conn = world.redis();
    // A read-write lock read twice by one owner, in Redisson's layout, and a plain lock.
    let () = redis::pipe()
        .cmd("HSET")
        .arg("docs:a")
        .arg("mode")
        .arg("read")
        .arg(READER)
        .arg(2)
        .ignore()
        .cmd("PEXPIRE")
        .arg("docs:a")
        .arg(60_000)
        .ignore()
        .cmd("HSET")
        .arg("docs:b")
        .arg(READER)
        .arg(1)
        .ignore()
        .query(&mut conn)
        .unwrap();

    let status = stdout_json(&world.output(&["status", "docs:a", "--json"]));
    assert_eq!(status["mode"], "read");
    assert_eq!(status["held"], true);
    assert_eq!(status["holders"], json!([{"owner": READER, "count": 2}]));
    let plain = stdout_json(&world.output(&["status", "docs:b", "--json"]));
    assert!(plain.get("mode").is_none(), "{plain}");
    assert!(plain.get("line").is_none(), "{plain}");

    let listed = stdout_json(&world.output(&["list", "--json", "--prefix", "docs:"]));
    assert_eq!(listed[0]["name"], "docs:a");
    assert_eq!(listed[0]["mode"], "read");
    assert_eq!(listed[1]["name"], "docs:b");

    let text = world.output(&["status", "docs:a"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("mode     read"), "{text}");
    let list = world.output(&["list", "--prefix", "docs:"]);
    let list = String::from_utf8_lossy(&list.stdout);
    assert!(list.contains("docs:a  held (read) by"), "{list}");
}

/// Names and owners are shown on one line each: a held lock whose name and
/// owner carry a newline and a fake `held     no` line still prints one
/// `held` line, saying yes; a 120 KB name makes a short error line.
#[test]
fn hostile_names_are_escaped_and_long_ones_shortened() {
    let world = World::new();
    let mut conn = world.redis();
    let name = "evil\nheld     no";
    let owner = "3f0e6c1a-8a52-4cf1-9e0b-4c1b9d7a2e11:x\nheld     no";
    let () = redis::pipe()
        .cmd("HSET")
        .arg(name)
        .arg(owner)
        .arg(1)
        .ignore()
        .cmd("PEXPIRE")
        .arg(name)
        .arg(60_000)
        .ignore()
        .query(&mut conn)
        .unwrap();
    let output = world.output(&["status", name]);
    let text = String::from_utf8_lossy(&output.stdout);
    let held: Vec<&str> = text
        .lines()
        .filter(|line| line.starts_with("held"))
        .collect();
    assert_eq!(held.len(), 1, "{text}");
    assert!(held[0].starts_with("held     yes"), "{text}");
    assert!(text.contains("evil\\nheld"), "{text}");
    let listed = world.output(&["list"]);
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert_eq!(listed.lines().count(), 1, "{listed}");

    let long = "n".repeat(120_000);
    let output = world.output(&["status", &long]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_ne!(code(output.status), 0);
    assert!(
        stderr.len() < 2_000,
        "a 120 KB name made a {} byte error",
        stderr.len()
    );
}

#[test]
fn status_verbose_says_what_the_server_offered() {
    let world = World::new();
    let text = world.output(&["status", "docs:c", "--verbose"]);
    assert_eq!(code(text.status), 0);
    let text = String::from_utf8_lossy(&text.stdout);
    let server = text
        .lines()
        .find_map(|line| line.strip_prefix("server   "))
        .unwrap_or_else(|| panic!("no server line in {text}"));
    // e.g. "redis 7.0.15: functions available, WAITAOF absent, NO-EVICT available"
    assert!(server.contains("functions"), "{server}");
    assert!(server.contains("WAITAOF"), "{server}");
    assert!(server.contains("NO-EVICT"), "{server}");
    let json = stdout_json(&world.output(&["status", "docs:c", "--json", "-v"]));
    assert_eq!(json["held"], false);
    assert_eq!(json["server"], server);
    // Without --verbose nothing changes.
    let plain = stdout_json(&world.output(&["status", "docs:c", "--json"]));
    assert!(plain.get("server").is_none(), "{plain}");
}

#[test]
fn status_held_exits_0_for_a_held_lock_and_1_for_a_free_one() {
    let world = World::new();
    let mut conn = world.redis();
    let () = redis::cmd("HSET")
        .arg("docs:held")
        .arg(READER)
        .arg(1)
        .query(&mut conn)
        .unwrap();
    assert_eq!(
        code(world.output(&["status", "--held", "docs:held"]).status),
        0
    );
    assert_eq!(
        code(world.output(&["status", "--held", "docs:free"]).status),
        1
    );
    // Without --held, free is not a failure.
    assert_eq!(code(world.output(&["status", "docs:free"]).status), 0);
}

/// Who waits for whom: a job holding `l1` waits in a nested run for `l2`,
/// which another job holds; `status`, `list` and `top` show the wait from
/// the wait key the library wrote. Then `jobB`'s wait for `l1` is written
/// by hand (as a client without detection would leave it standing): the
/// snapshot has a cycle, and every command marks it.
#[test]
fn status_list_and_top_show_who_waits_for_whom_and_mark_a_cycle() {
    let world = World::new();
    let ready = world.path("ready");
    let inner = format!(
        "touch {ready}; exec {bin} --redis {url} run l2 -- true",
        ready = common::q(&ready),
        bin = common::q(std::path::Path::new(common::BIN)),
        url = world.server.url(),
    );
    let _b = world.spawn(&[
        "run", "--owner", "jobB", "--lease", "60s", "l2", "--", "sleep", "60",
    ]);
    world.wait_held("l2", std::time::Duration::from_secs(10));
    let _a = world.spawn(&["run", "--owner", "jobA", "l1", "--", "sh", "-c", &inner]);
    let mut conn = world.redis();
    assert!(
        common::eventually(std::time::Duration::from_secs(10), || world
            .exists(&mut conn, "redlatch_wait:n:jobA")),
        "jobA's nested run wrote no wait key"
    );

    let status = stdout_json(&world.output(&["status", "l2", "--json"]));
    assert_eq!(status["waited_by"], json!(["n:jobA"]), "{status}");
    assert!(status.get("cycle").is_none(), "{status}");
    let text = String::from_utf8(world.output(&["status", "l2"]).stdout).unwrap();
    assert!(text.contains("waiter   n:jobA waits for it"), "{text}");
    let text = String::from_utf8(world.output(&["status", "l1"]).stdout).unwrap();
    assert!(text.contains("holder   n:jobA waits for l2"), "{text}");
    assert!(!text.contains("deadlock"), "{text}");

    let () = redis::cmd("SET")
        .arg("redlatch_wait:n:jobB")
        .arg("l1")
        .arg("PX")
        .arg(60_000)
        .query(&mut conn)
        .unwrap();
    let cycle = json!([{"party": "n:jobA", "lock": "l2"}, {"party": "n:jobB", "lock": "l1"}]);
    let status = stdout_json(&world.output(&["status", "l1", "--json"]));
    assert_eq!(status["cycle"], cycle, "{status}");
    let text = String::from_utf8(world.output(&["status", "l1"]).stdout).unwrap();
    assert!(
        text.contains(
            "deadlock n:jobA waits for l2 held by n:jobB, n:jobB waits for l1 held by n:jobA"
        ),
        "{text}"
    );
    let listed = stdout_json(&world.output(&["list", "--json"]));
    assert_eq!(listed[0]["cycle"], cycle, "{listed}");
    assert_eq!(listed[1]["cycle"], cycle, "{listed}");
    let text = String::from_utf8(world.output(&["list"]).stdout).unwrap();
    assert_eq!(text.matches("DEADLOCK: ").count(), 2, "{text}");
    let top = stdout_json(&world.output(&["top", "--once", "--json"]));
    assert_eq!(top["locks"][0]["cycle"], cycle, "{top}");
    assert_eq!(top["locks"][1]["waited_by"], json!(["n:jobA"]), "{top}");
    let text = String::from_utf8(world.output(&["top", "--once"]).stdout).unwrap();
    assert!(text.contains("DEADLOCK"), "{text}");
}

/// Under a key prefix the wait keys are the prefix's too
/// (`app:redlatch_wait:PARTY`, naming `app:l2`): found and shown by the
/// lock's name.
#[test]
fn waits_are_read_under_the_key_prefix() {
    let world = World::new();
    let config = world.path("app.toml");
    std::fs::write(&config, "[lock]\nkey_prefix = \"app:\"\n").unwrap();
    let config = config.to_str().unwrap();
    let inner = format!(
        "exec {bin} --redis {url} --config {config} run l2 -- true",
        bin = common::q(std::path::Path::new(common::BIN)),
        url = world.server.url(),
        config = common::q(std::path::Path::new(config)),
    );
    let _b = world.spawn(&[
        "--config", config, "run", "--owner", "jobB", "l2", "--", "sleep", "60",
    ]);
    world.wait_held("app:l2", std::time::Duration::from_secs(10));
    let _a = world.spawn(&[
        "--config", config, "run", "--owner", "jobA", "l1", "--", "sh", "-c", &inner,
    ]);
    let mut conn = world.redis();
    assert!(
        common::eventually(std::time::Duration::from_secs(10), || world
            .exists(&mut conn, "app:redlatch_wait:n:jobA")),
        "no wait key under the prefix"
    );
    let listed = stdout_json(&world.output(&["--config", config, "list", "--json"]));
    let l2 = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|lock| lock["name"] == "l2")
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(l2["waited_by"], json!(["n:jobA"]), "{listed}");
}
