//! `redlatch status` and `list` on a read-write lock: the mode is shown,
//! and plain locks print exactly what they did before.

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
