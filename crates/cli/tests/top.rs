//! `redlatch top` in a real terminal (tmux, at 80 and at 200 columns) and
//! as JSON, against a real redis-server holding 31 locks: whole headers and
//! numbers, the count of rows off screen, scrolling by keys, natural order,
//! sorting and filtering, and Redis stopping and coming back.

mod common;

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{BIN, World, code, eventually};
use serde_json::Value;

/// How long to wait for what the screen should show: generous, as the
/// machine may be busy; the tests wait for the event, not for the time.
const SHOWN_WITHIN: Duration = Duration::from_secs(20);

/// The locks `many:1` .. `many:30`, numbered so that name and TTL orders
/// differ, plus one with a name too long for 80 columns.
const MANY: u64 = 30;
const LONG_NAME: &str = "reports:quarterly-consolidated-ledger-reconciliation-for-the-emea-region";
/// `many:7`'s token: a long number that must be shown whole.
const BIG_TOKEN: u64 = 1_234_567_890_123;

/// A lock's owner field: `<uuid>:worker-N`.
fn owner(n: u64) -> String {
    format!("0b7c5d3e-4f7a-4c1e-9a55-{n:012}:worker-{n}")
}

/// Writes the locks as redlatch (and Redisson) do: a hash of owner → hold
/// count and the hold's fencing token with a lease.
fn hold_locks(world: &World) {
    let mut conn = world.redis();
    let mut put = |name: &str, n: u64, ttl_s: u64, token: u64| {
        redis::pipe()
            .cmd("HSET")
            .arg(name)
            .arg(owner(n))
            .arg(1)
            .arg("redlatch_token")
            .arg(format!("t{token}"))
            .cmd("PEXPIRE")
            .arg(name)
            .arg(ttl_s * 1000)
            .exec(&mut conn)
            .expect("write a lock");
    };
    for n in 1..=MANY {
        // many:1 has the longest lease (40 min), many:30 the shortest (11
        // min: none expires during a test, however slow the machine).
        let token = if n == 7 { BIG_TOKEN } else { n };
        put(&format!("many:{n}"), n, 600 + (MANY + 1 - n) * 60, token);
    }
    put(LONG_NAME, 99, 3600, 5);
}

/// A tmux server of its own running `redlatch top`; killed when dropped.
struct Tmux {
    socket: String,
}

static SESSIONS: AtomicUsize = AtomicUsize::new(0);

impl Tmux {
    /// `redlatch --redis URL top ARGS...` in a detached `width`×`height` session.
    fn start(world: &World, width: u16, height: u16, args: &[&str]) -> Tmux {
        let socket = format!(
            "redlatch-top-{}-{}",
            std::process::id(),
            SESSIONS.fetch_add(1, Ordering::Relaxed)
        );
        let mut command = format!(
            "env -u REDIS_URL -u RUST_LOG {BIN} --redis {} top",
            world.server.url()
        );
        for arg in args {
            command.push(' ');
            command.push_str(arg);
        }
        let tmux = Tmux { socket };
        tmux.run(&[
            "new-session",
            "-d",
            "-x",
            &width.to_string(),
            "-y",
            &height.to_string(),
            &command,
        ]);
        // Keep the pane if top exits, so that a failure shows its last words.
        tmux.run(&["set-option", "remain-on-exit", "on"]);
        tmux
    }

    fn run(&self, args: &[&str]) -> String {
        let output = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux (is it installed?)");
        assert!(
            output.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// The screen as text, one line per row.
    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p"])
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys"];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    /// Waits until `check` holds for a settled screen; the screen it held
    /// for. A capture can catch a frame half drawn (the terminal is being
    /// written to), so a screen counts only when two captures in a row
    /// agree.
    fn wait_for(&self, what: &str, check: impl Fn(&Screen) -> bool) -> Screen {
        let mut last = String::new();
        let found = eventually(SHOWN_WITHIN, || {
            let first = self.screen();
            last = self.screen();
            first == last && check(&Screen::new(&last))
        });
        assert!(
            found,
            "the screen never showed {what}; last screen:\n{last}"
        );
        Screen::new(&last)
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

/// What `top`'s screen shows, inside its border.
struct Screen {
    lines: Vec<String>,
}

impl Screen {
    fn new(text: &str) -> Screen {
        // Inside the border: drop the box lines and the `│` on each side.
        let lines = text
            .lines()
            .filter(|line| line.starts_with('│'))
            .map(|line| {
                line.trim_start_matches('│')
                    .trim_end()
                    .trim_end_matches('│')
                    .trim_end()
                    .to_owned()
            })
            .collect();
        Screen { lines }
    }

    fn status(&self) -> &str {
        self.lines.first().map_or("", String::as_str)
    }

    fn header(&self) -> Vec<&str> {
        self.lines
            .get(1)
            .map_or_else(Vec::new, |line| line.split_whitespace().collect())
    }

    /// The table's rows (a lock's name first).
    fn rows(&self) -> Vec<&str> {
        self.lines
            .iter()
            .skip(2)
            .map(String::as_str)
            .filter(|line| line.starts_with("many:") || line.starts_with("reports:"))
            .collect()
    }

    /// Every row shown with all its columns (a CI run once checked a row
    /// of 6 cells: a frame caught while being drawn). Tests that check the
    /// rows wait for this.
    fn rows_complete(&self, with_bar: bool) -> bool {
        let columns = if with_bar { 9 } else { 8 };
        let rows = self.rows();
        !rows.is_empty()
            && rows
                .iter()
                .all(|row| row.split_whitespace().count() >= columns)
    }

    fn names(&self) -> Vec<&str> {
        self.rows()
            .iter()
            .filter_map(|row| row.split_whitespace().next())
            .collect()
    }

    fn footer(&self) -> &str {
        self.lines.last().map_or("", String::as_str)
    }
}

/// `many:1`, `many:2`... from `first`, `count` of them.
fn many(first: u64, count: usize) -> Vec<String> {
    (first..).take(count).map(|n| format!("many:{n}")).collect()
}

/// A duration as `top` writes it: `850ms`, `18.5s`, `2m03s`, `1h02m`, `3d04h`.
fn is_human_duration(text: &str) -> bool {
    let digits = |text: &str| !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    if let Some(ms) = text.strip_suffix("ms") {
        return digits(ms);
    }
    if let Some(seconds) = text.strip_suffix('s') {
        if let Some((minutes, seconds)) = seconds.split_once('m') {
            return digits(minutes) && digits(seconds) && seconds.len() == 2;
        }
        return match seconds.split_once('.') {
            Some((whole, tenth)) => digits(whole) && digits(tenth) && tenth.len() == 1,
            None => false,
        };
    }
    for (big, small) in [('h', 'm'), ('d', 'h')] {
        if let Some(rest) = text.strip_suffix(small)
            && let Some((high, low)) = rest.split_once(big)
        {
            return digits(high) && digits(low) && low.len() == 2;
        }
    }
    false
}

/// Every row's numbers are whole: waiters and token digits, TTL a human
/// duration, the owner (`worker-N`) before its client id.
fn assert_rows_whole(screen: &Screen, with_bar: bool) {
    let rows = screen.rows();
    assert!(!rows.is_empty(), "no rows:\n{}", screen.lines.join("\n"));
    for row in rows {
        let cells: Vec<&str> = row.split_whitespace().collect();
        let number = |text: &str| text.bytes().all(|b| b.is_ascii_digit()) && !text.is_empty();
        let name = cells[0];
        assert_eq!(cells[1], "lock", "{row}");
        assert!(number(cells[2]), "waiters cut: {row}");
        assert!(is_human_duration(cells[3]), "ttl cut: {row}");
        let at = if with_bar { 5 } else { 4 };
        assert!(number(cells[at]), "token cut: {row}");
        if name == "many:7" {
            assert_eq!(cells[at], BIG_TOKEN.to_string(), "{row}");
        }
        let rate = cells[at + 1];
        assert!(
            rate == "-" || rate.parse::<f64>().is_ok(),
            "acq/s cut: {row}"
        );
        assert_eq!(cells[at + 2], "-", "nobody waits: {row}");
        if let Some(n) = name.strip_prefix("many:") {
            assert_eq!(cells[at + 3], format!("worker-{n}"), "owner first: {row}");
        }
    }
}

const HEADERS: [&str; 8] = [
    "name", "kind", "waiters", "ttl", "token", "acq/s", "wait", "holders",
];

/// At 80 columns: whole headers and numbers, a long name shortened with
/// `…`, "N more below", natural order, scrolling by keys, sorting by TTL,
/// filtering by prefix; Redis stopped shows "disconnected", and the rows
/// come back with it.
#[test]
fn top_at_80_columns_scrolls_sorts_filters_and_survives_a_restart() {
    let mut world = World::new();
    hold_locks(&world);
    let top = Tmux::start(&world, 80, 24, &["--interval", "200ms"]);
    let total = MANY as usize + 1;

    let screen = top.wait_for("the locks", |screen| {
        screen.rows().len() > 5 && screen.rows_complete(false)
    });
    assert!(
        screen.status().starts_with(&format!("{total} locks held")),
        "{}",
        screen.status()
    );
    assert_eq!(screen.header(), HEADERS, "headers whole at 80 columns");
    assert_rows_whole(&screen, false);
    let shown = screen.rows().len();
    assert!(shown < total, "all rows fit in 24 lines?");
    assert_eq!(screen.names(), many(1, shown), "natural order");
    assert!(
        screen
            .footer()
            .starts_with(&format!("{} more below", total - shown)),
        "{}",
        screen.footer()
    );
    for line in &screen.lines {
        assert!(line.chars().count() <= 78, "wider than the screen: {line}");
    }

    top.keys(&["j"]);
    top.wait_for("one row down", |screen| {
        screen.names().first() == Some(&"many:2") && screen.footer().starts_with("1 more above")
    });
    top.keys(&["k"]);
    top.wait_for("back up", |screen| {
        screen.names().first() == Some(&"many:1")
    });
    top.keys(&["PageDown"]);
    // A page down, or as far as the last page goes.
    let first = shown.min(total - shown) + 1;
    top.wait_for("a page down", |screen| {
        screen.names().first() == Some(&format!("many:{first}").as_str())
    });
    top.keys(&["End"]);
    let end = top.wait_for("the last rows", |screen| {
        screen
            .names()
            .last()
            .is_some_and(|name| name.starts_with("reports:"))
            && screen.rows_complete(false)
    });
    let last = end.rows().last().copied().unwrap_or_default();
    assert!(
        last.starts_with("reports:") && last.split_whitespace().next().unwrap().ends_with('…'),
        "a long name is shortened with an ellipsis: {last}"
    );
    assert!(
        end.footer()
            .starts_with(&format!("{} more above", total - shown)),
        "{}",
        end.footer()
    );
    assert_rows_whole(&end, false);
    top.keys(&["Home"]);
    top.wait_for("the first rows", |screen| {
        screen.names().first() == Some(&"many:1")
    });

    top.keys(&["s"]);
    let by_ttl = top.wait_for("the shortest lease first", |screen| {
        screen.status().contains("sorted by ttl") && screen.names().first() == Some(&"many:30")
    });
    assert_eq!(by_ttl.names()[..3], ["many:30", "many:29", "many:28"]);
    top.keys(&["s", "s", "s"]);
    top.wait_for("sorted by name again", |screen| {
        screen.status().contains("sorted by name") && screen.names().first() == Some(&"many:1")
    });

    top.keys(&["/", "m", "a", "n", "y", ":", "2", "Enter"]);
    let filtered = top.wait_for("the filtered locks", |screen| {
        screen
            .status()
            .starts_with("11 locks held starting with many:2")
    });
    let mut expected = vec!["many:2".to_owned()];
    expected.extend(many(20, 10));
    assert_eq!(filtered.names(), expected);
    top.keys(&["/", "Escape"]);
    top.wait_for("every lock again", |screen| {
        screen.status().starts_with(&format!("{total} locks held"))
    });

    world.server.kill().expect("stop redis");
    let gone = top.wait_for("disconnected", |screen| {
        screen.status().starts_with("disconnected, retrying")
    });
    assert!(!gone.rows().is_empty(), "the last rows stay on screen");
    world.server.restart().expect("restart redis");
    hold_locks(&world);
    let back = top.wait_for("the locks again", |screen| {
        screen.status().starts_with(&format!("{total} locks held")) && screen.rows_complete(false)
    });
    assert_rows_whole(&back, false);
}

/// At 200 columns: the TTL bar appears, holders are whole (owner, then
/// the client id), headers and numbers are whole, and the rows off screen
/// are counted.
#[test]
fn top_at_200_columns_shows_everything_whole() {
    let world = World::new();
    hold_locks(&world);
    let top = Tmux::start(&world, 200, 24, &["--interval", "200ms"]);
    let total = MANY as usize + 1;
    let screen = top.wait_for("the locks", |screen| {
        screen.rows().len() > 5 && screen.rows_complete(true)
    });
    let mut headers = screen.header();
    assert_eq!(headers, HEADERS, "headers whole at 200 columns");
    headers.clear();
    assert_rows_whole(&screen, true);
    let shown = screen.rows().len();
    assert_eq!(screen.names(), many(1, shown));
    assert!(
        screen
            .footer()
            .starts_with(&format!("{} more below", total - shown)),
        "{}",
        screen.footer()
    );
    let first = screen.rows()[0];
    assert!(first.contains('█'), "a TTL bar: {first}");
    assert!(
        first.ends_with(&format!("worker-1 {} x1", &owner(1)[..36])),
        "holder whole: {first}"
    );
    top.keys(&["End"]);
    let end = top.wait_for("the last rows", |screen| {
        screen.names().last() == Some(&LONG_NAME) && screen.rows_complete(true)
    });
    assert_rows_whole(&end, true);
}

/// `top --json`: each lock is `status --json`'s object (TTL in ms) plus
/// what top adds, in the order of `--sort`; while Redis is down it prints
/// "disconnected" objects and goes on, and the locks come back with Redis;
/// `--once` against a stopped Redis exits 69.
#[test]
fn top_json_is_status_json_and_survives_a_restart() {
    let mut world = World::new();
    hold_locks(&world);
    let once = world.output(&["--json", "top", "--once", "--sort", "ttl"]);
    assert_eq!(code(once.status), 0);
    let snapshot: Value = serde_json::from_slice(&once.stdout).expect("JSON");
    let locks = snapshot["locks"].as_array().expect("locks");
    assert_eq!(locks.len(), MANY as usize + 1);
    assert_eq!(locks[0]["name"], "many:30", "shortest lease first");
    let status = world.output(&["--json", "status", "many:30"]);
    let status: Value = serde_json::from_slice(&status.stdout).expect("status JSON");
    for (key, value) in status.as_object().unwrap() {
        if key == "ttl_ms" {
            let (a, b) = (value.as_i64().unwrap(), locks[0][key].as_i64().unwrap());
            assert!((a - b).abs() < 10_000, "ttl_ms {a} and {b}");
        } else {
            assert_eq!(&locks[0][key], value, "{key}");
        }
    }

    let mut live = world.spawn(&["--json", "top", "--interval", "200ms"]);
    let lines = |live: &common::Running| -> Vec<Value> {
        live.stdout()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    };
    assert!(
        eventually(SHOWN_WITHIN, || !lines(&live).is_empty()),
        "no refresh: {}",
        live.stderr()
    );
    world.server.kill().expect("stop redis");
    assert!(
        eventually(SHOWN_WITHIN, || lines(&live).iter().any(
            |line| line["disconnected"] == true && line["error"].is_string()
        )),
        "no disconnected refresh: {}",
        live.stdout()
    );
    let dead = world.output(&["--json", "top", "--once"]);
    assert_eq!(code(dead.status), 69);

    world.server.restart().expect("restart redis");
    hold_locks(&world);
    assert!(
        eventually(SHOWN_WITHIN, || lines(&live).last().is_some_and(|line| {
            line["disconnected"] == false && line["locks"].as_array().is_some_and(|l| !l.is_empty())
        })),
        "no refresh after the restart: {}",
        live.stdout()
    );
    assert!(live.try_wait_for(Duration::ZERO).is_none(), "top exited");
}
