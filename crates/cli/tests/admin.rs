//! `redlatch status`, `list` and `unlock` end to end, checked against what
//! Redis itself holds.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::{World, code};
use serde_json::{Value, json};

/// What Redis holds for lock `name`: owner → count, PTTL, last token.
fn redis_view(world: &World, name: &str) -> (HashMap<String, u64>, i64, Option<u64>) {
    let mut conn = world.redis();
    let mut fields: HashMap<String, String> =
        redis::cmd("HGETALL").arg(name).query(&mut conn).unwrap();
    let pttl: i64 = redis::cmd("PTTL").arg(name).query(&mut conn).unwrap();
    // The hold keeps its token beside the owner's count, as `t<token>`.
    let token = fields.remove("redlatch_token").map(|kept| {
        kept.strip_prefix('t')
            .and_then(|digits| digits.parse().ok())
            .unwrap_or_else(|| panic!("kept token {kept:?}"))
    });
    // A waiter's mark (`w`: the release then publishes) is no hold.
    fields.remove("redlatch_waiters");
    let counts = fields
        .into_iter()
        .map(|(field, count)| (field, count.parse().expect("a hold count")))
        .collect();
    (counts, pttl, token)
}

fn stdout_json(output: &std::process::Output) -> Value {
    assert_eq!(
        code(output.status),
        0,
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON on stdout")
}

/// `status --json` and `list --json` report the owner, count and token Redis holds.
#[test]
fn status_and_list_match_redis() {
    let world = World::new();
    let _holder = world.spawn(&[
        "run",
        "jobs:nightly",
        "--owner",
        "cron-7",
        "--",
        "sleep",
        "30",
    ]);
    let _other = world.spawn(&["run", "other", "--", "sleep", "30"]);
    world.wait_held("jobs:nightly", Duration::from_secs(5));
    world.wait_held("other", Duration::from_secs(5));
    // A hash that is not a lock is not listed.
    let _: i64 = redis::cmd("HSET")
        .arg("jobs:not-a-lock")
        .arg("colour")
        .arg("blue")
        .query(&mut world.redis())
        .unwrap();
    // A second client waiting on the lock shows up as waiting.
    let _waiter = world.spawn(&["run", "jobs:nightly", "--wait", "20s", "--", "true"]);
    // ... and the holder is named once its hold is 50 ms old: waited for,
    // so that `status` and `list` below read the same settled state.
    assert!(
        common::eventually(Duration::from_secs(5), || {
            let status = stdout_json(&world.output(&["status", "jobs:nightly", "--json"]));
            status["waiting"] == 1
                && status["holders"][0].get("identity").is_some()
                && status["waited_by"]
                    .as_array()
                    .is_some_and(|by| by.len() == 1)
        }),
        "the waiter was never counted (or its wait-for edge never written), or the holder never named"
    );

    let mut status = stdout_json(&world.output(&["status", "jobs:nightly", "--json"]));
    // Who the holder is comes from its own record, not the lock: checked
    // with `run`'s tests; here, only what Redis holds in the lock.
    let identity = status["holders"][0]
        .as_object_mut()
        .and_then(|holder| holder.remove("identity"));
    // The waiter is a `redlatch run`, which detects deadlocks: its
    // wait-for edge names its job's party (checked with `run`'s tests).
    let waited_by = status
        .as_object_mut()
        .and_then(|status| status.remove("waited_by"));
    assert!(
        waited_by
            .as_ref()
            .and_then(|by| by[0].as_str())
            .is_some_and(|party| party.starts_with("n:job:")),
        "{waited_by:?}"
    );
    let (fields, pttl, token) = redis_view(&world, "jobs:nightly");
    assert_eq!(fields.len(), 1, "{fields:?}");
    let (owner, count) = fields.iter().next().unwrap();
    assert!(owner.ends_with(":cron-7"), "{owner}");
    let ttl = status["ttl_ms"].as_i64().expect("ttl_ms");
    assert!(
        ttl > 0 && ttl <= 30_000 && (ttl - pttl).abs() < 5_000,
        "ttl {ttl}, PTTL {pttl}"
    );
    let expected = json!({
        "name": "jobs:nightly",
        "held": true,
        "holders": [{"owner": owner, "count": count}],
        "ttl_ms": ttl,
        "token": token.expect("a token"),
        "waiting": 1,
    });
    assert_eq!(status, expected);

    let mut listed = stdout_json(&world.output(&["list", "--json", "--prefix", "jobs:"]));
    let listed = listed.as_array_mut().expect("an array");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["name"], "jobs:nightly");
    if let Some(identity) = &identity {
        assert_eq!(identity["program"], "redlatch", "{identity}");
        assert_eq!(listed[0]["holders"][0]["identity"], *identity);
        listed[0]["holders"][0]
            .as_object_mut()
            .map(|holder| holder.remove("identity"));
    }
    assert_eq!(listed[0]["holders"], expected["holders"]);
    assert_eq!(listed[0]["token"], expected["token"]);

    let all = stdout_json(&world.output(&["list", "--json"]));
    let names: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|lock| lock["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["jobs:nightly", "other"]);

    let text = world.output(&["list"]);
    let text = String::from_utf8(text.stdout).unwrap();
    let first = text.lines().next().unwrap();
    assert!(
        first.starts_with("jobs:nightly  held by ")
            && first.contains(&format!(" {owner} x1  ttl ")),
        "{first}"
    );
}

/// `status` of a lock never taken: free, no TTL, no token.
#[test]
fn status_of_a_free_lock() {
    let world = World::new();
    let status = stdout_json(&world.output(&["status", "nobody", "--json"]));
    assert_eq!(
        status,
        json!({"name": "nobody", "held": false, "holders": [], "ttl_ms": null, "token": null, "waiting": 0})
    );
    let text = world.output(&["status", "nobody"]);
    assert!(String::from_utf8_lossy(&text.stdout).contains("held     no"));
}

/// `unlock` refuses without --force (64, lock kept); with --force the lock is gone.
#[test]
fn unlock_needs_force() {
    let world = World::new();
    let _holder = world.spawn(&["run", "stuck", "--", "sleep", "30"]);
    world.wait_held("stuck", Duration::from_secs(5));
    let mut conn = world.redis();

    let refused = world.output(&["unlock", "stuck"]);
    assert_eq!(code(refused.status), 64);
    assert_eq!(
        String::from_utf8_lossy(&refused.stderr),
        "redlatch: refusing to unlock stuck: force-unlocking breaks the current holder's mutual exclusion; pass --force if you are sure\n"
    );
    assert!(
        world.exists(&mut conn, "stuck"),
        "unlock without --force deleted the lock"
    );

    let forced = world.output(&["unlock", "stuck", "--force"]);
    assert_eq!(code(forced.status), 0);
    assert_eq!(
        String::from_utf8_lossy(&forced.stdout),
        "lock stuck deleted\n"
    );
    assert!(!world.exists(&mut conn, "stuck"), "lock still there");

    let again = stdout_json(&world.output(&["unlock", "stuck", "--force", "--json"]));
    assert_eq!(again, json!({"name": "stuck", "deleted": false}));
}

/// A string lock (a token lock's key, or the `SET key token NX PX lease`
/// of another library) is shown by `status` and `list` as held by its
/// token (`top` too), and deleted by `unlock --force`; a string that is only a number
/// (a counter, a latch's count) is not listed.
#[test]
fn a_string_lock_is_shown_listed_and_unlocked() {
    let world = World::new();
    let mut conn = world.redis();
    let token = "0b7c5d3e-4f7a-4c1e-9a55-2f0d6b3f2a11:#4";
    let _: () = redis::cmd("SET")
        .arg("jobs:token")
        .arg(token)
        .arg("PX")
        .arg(30_000)
        .query(&mut conn)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("jobs:seeded")
        .arg("f3a9c2d1e0b4")
        .arg("PX")
        .arg(30_000)
        .query(&mut conn)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("jobs:count")
        .arg("7")
        .query(&mut conn)
        .unwrap();

    let status = stdout_json(&world.output(&["status", "jobs:token", "--json"]));
    assert_eq!(status["held"], true, "{status}");
    assert_eq!(
        status["holders"],
        json!([{"owner": token, "count": 1}]),
        "{status}"
    );
    let ttl = status["ttl_ms"].as_i64().expect("ttl_ms");
    assert!(ttl > 0 && ttl <= 30_000, "{status}");

    let listed = stdout_json(&world.output(&["list", "--json", "--prefix", "jobs:"]));
    let names: Vec<&str> = listed
        .as_array()
        .expect("an array")
        .iter()
        .map(|lock| lock["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["jobs:seeded", "jobs:token"], "{listed}");
    let top = stdout_json(&world.output(&["--json", "top", "--once"]));
    let shown: Vec<&str> = top["locks"]
        .as_array()
        .expect("locks")
        .iter()
        .map(|lock| lock["name"].as_str().unwrap())
        .collect();
    assert_eq!(shown, ["jobs:seeded", "jobs:token"], "{top}");

    let forced = world.output(&["unlock", "jobs:token", "--force"]);
    assert_eq!(
        code(forced.status),
        0,
        "{}",
        String::from_utf8_lossy(&forced.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&forced.stdout),
        "lock jobs:token deleted\n"
    );
    assert!(!world.exists(&mut conn, "jobs:token"), "lock still there");
    let again = stdout_json(&world.output(&["unlock", "jobs:token", "--force", "--json"]));
    assert_eq!(again, json!({"name": "jobs:token", "deleted": false}));
}

/// Without `--redis`, `REDIS_URL` names the server.
#[test]
fn redis_url_comes_from_the_environment() {
    let world = World::new();
    let output = std::process::Command::new(common::BIN)
        .args(["status", "env-lock", "--json"])
        .env("REDIS_URL", world.server.url())
        .output()
        .unwrap();
    assert_eq!(stdout_json(&output)["name"], "env-lock");
}

/// String keys holding odd values (empty, binary, a terminal escape, no
/// lease, a megabyte) under lock names: `status` shows each (escapes
/// made harmless), `list` lists the leased ones that are no number, and
/// `unlock --force` deletes each.
#[test]
fn odd_string_values_are_shown_listed_and_unlocked() {
    let world = World::new();
    let mut conn = world.redis();
    let big = "y".repeat(1 << 20);
    let values: [(&str, &[u8], bool); 5] = [
        ("odd:empty", b"", true),
        ("odd:binary", b"\xff\x00\xfe:\x80", true),
        ("odd:escape", b"\x1b[2J\x1b]0;pwned\x07", true),
        ("odd:forever", b"f3a9c2d1", false),
        ("odd:big", big.as_bytes(), true),
    ];
    for (name, value, leased) in values {
        let mut set = redis::cmd("SET");
        set.arg(name).arg(value);
        if leased {
            set.arg("PX").arg(60_000);
        }
        let () = set.query(&mut conn).unwrap();
    }
    for (name, _, leased) in values {
        let text = world.output(&["status", name]);
        assert_eq!(
            code(text.status),
            0,
            "{name}: {}",
            String::from_utf8_lossy(&text.stderr)
        );
        let shown = String::from_utf8_lossy(&text.stdout);
        assert!(shown.contains("held     yes"), "{name}: {shown}");
        assert!(
            !shown.contains('\u{1b}') && !shown.contains('\u{7}'),
            "{name}: a raw escape reached the terminal: {shown:?}"
        );
        let status = stdout_json(&world.output(&["status", name, "--json"]));
        assert_eq!(status["held"], true, "{name}");
        assert_eq!(status["ttl_ms"].is_null(), !leased, "{name}: {status}");
    }
    let listed = stdout_json(&world.output(&["list", "--json", "--prefix", "odd:"]));
    let mut names: Vec<&str> = listed
        .as_array()
        .expect("an array")
        .iter()
        .map(|lock| lock["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["odd:big", "odd:binary", "odd:empty", "odd:escape"]);
    let text = world.output(&["list", "--prefix", "odd:"]);
    assert_eq!(code(text.status), 0);
    assert!(!String::from_utf8_lossy(&text.stdout).contains('\u{1b}'));
    for (name, _, _) in values {
        let forced = world.output(&["unlock", name, "--force"]);
        assert_eq!(
            code(forced.status),
            0,
            "{name}: {}",
            String::from_utf8_lossy(&forced.stderr)
        );
        assert!(!world.exists(&mut conn, name), "{name} still there");
    }
}

/// Sets the wait-for edge `key` → `value` (raw bytes), leased a minute.
fn set_edge(world: &World, key: &[u8], value: &[u8]) {
    let () = redis::cmd("SET")
        .arg(key)
        .arg(value)
        .arg("PX")
        .arg(60_000)
        .query(&mut world.redis())
        .unwrap();
}

/// A wait-for edge whose key is not UTF-8 (anyone can write one) must not
/// hide the other waits from `status` and `list`.
#[test]
fn a_wait_key_that_is_not_utf8_hides_no_other_wait() {
    let world = World::new();
    let _holder = world.spawn(&["run", "jobs:x", "--owner", "h", "--", "sleep", "30"]);
    world.wait_held("jobs:x", Duration::from_secs(5));
    set_edge(&world, b"redlatch_wait:n:ghost", b"jobs:x");
    set_edge(&world, b"redlatch_wait:n:\xff\xfe", b"jobs:x");
    let status = stdout_json(&world.output(&["status", "jobs:x", "--json"]));
    assert_eq!(status["waited_by"], json!(["n:ghost"]), "{status}");
    let listed = stdout_json(&world.output(&["list", "--json", "--prefix", "jobs:"]));
    assert_eq!(listed[0]["waited_by"], json!(["n:ghost"]), "{listed}");
}

/// Odd wait-for edges (a value that is empty, names a free lock, names an
/// edge; a party holding a terminal escape): `status` and `list` still
/// show the real waiter, and no raw escape reaches the terminal.
#[test]
fn odd_wait_for_edges_leave_status_and_list_working() {
    let world = World::new();
    let _holder = world.spawn(&["run", "jobs:y", "--owner", "h", "--", "sleep", "30"]);
    world.wait_held("jobs:y", Duration::from_secs(5));
    set_edge(&world, b"redlatch_wait:n:ghost", b"jobs:y");
    set_edge(&world, b"redlatch_wait:n:empty", b"");
    set_edge(&world, b"redlatch_wait:n:free", b"nobody");
    set_edge(&world, b"redlatch_wait:n:edge", b"redlatch_wait:n:ghost");
    set_edge(&world, b"redlatch_wait:n:\x1b]0;pwned\x07", b"jobs:y");
    let status = stdout_json(&world.output(&["status", "jobs:y", "--json"]));
    let by = status["waited_by"].as_array().cloned().unwrap_or_default();
    assert!(by.contains(&json!("n:ghost")), "{status}");
    for args in [&["status", "jobs:y"][..], &["list"][..]] {
        let text = world.output(args);
        assert_eq!(
            code(text.status),
            0,
            "{args:?}: {}",
            String::from_utf8_lossy(&text.stderr)
        );
        let shown = String::from_utf8_lossy(&text.stdout);
        assert!(shown.contains("n:ghost"), "{args:?}: {shown}");
        assert!(
            !shown.contains('\u{1b}') && !shown.contains('\u{7}'),
            "{args:?}: a raw escape reached the terminal: {shown:?}"
        );
    }
}

/// Waits in layers: 16 layers of 4 parties, each party of a layer waiting
/// for one lock held by the 4 parties of the next (a crowd of readers
/// behind a crowd of readers, no cycle). `status` and `list` must answer
/// in a few seconds: the library's own walk is bounded (2,000 steps); the
/// CLI's search for cycles must not try each of the 4^15 paths.
#[test]
fn status_and_list_answer_on_many_layers_of_waiting_crowds() {
    const ID: &str = "3f0e6c1a-8a52-4cf1-9e0b-4c1b9d7a2e11";
    let (layers, width) = (16, 4);
    let world = World::new();
    let mut conn = world.redis();
    for layer in 0..layers - 1 {
        let lock = format!("crowd:{layer}");
        for j in 0..width {
            let () = redis::cmd("HSET")
                .arg(&lock)
                .arg(format!("{ID}:p{}_{j}", layer + 1))
                .arg(1)
                .query(&mut conn)
                .unwrap();
            set_edge(
                &world,
                format!("redlatch_wait:n:p{layer}_{j}").as_bytes(),
                lock.as_bytes(),
            );
        }
        let () = redis::cmd("PEXPIRE")
            .arg(&lock)
            .arg(60_000)
            .query(&mut conn)
            .unwrap();
    }
    for args in [&["status", "crowd:0"][..], &["list", "--json"][..]] {
        let mut running = world.spawn(args);
        let exited = running.try_wait_for(Duration::from_secs(15));
        assert!(
            exited.is_some_and(|status| status.success()),
            "{args:?}: {exited:?} after 15 s; stderr: {}",
            running.stderr()
        );
    }
}
