//! `redlatch run` end to end: mutual exclusion, waits, fencing tokens, exit
//! statuses, crashes, renewal, lost locks and signal forwarding, each against
//! its own redis-server.

mod common;

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{Orphan, World, alive, code, q, wait_file};
use serde_json::Value;

/// Twenty processes doing a non-atomic read-sleep-write on one file lose no update.
#[test]
fn concurrent_runs_exclude_each_other() {
    let world = World::new();
    let counter = world.path("counter");
    fs::write(&counter, "0\n").unwrap();
    let script = format!(
        "n=$(cat {f}); sleep 0.05; echo $((n+1)) > {f}",
        f = q(&counter)
    );
    let mut runs: Vec<_> = (0..20)
        .map(|_| world.spawn(&["run", "counter", "--", "sh", "-c", &script]))
        .collect();
    for run in &mut runs {
        let status = run.wait(Duration::from_secs(30));
        assert_eq!(code(status), 0, "stderr: {}", run.stderr());
    }
    assert_eq!(fs::read_to_string(&counter).unwrap().trim(), "20");
}

/// `--wait 0` on a held lock: exit 75, one line on stderr, command not run.
#[test]
fn wait_zero_on_a_held_lock_exits_75_without_running() {
    let world = World::new();
    let _holder = world.spawn(&["run", "busy", "--", "sleep", "30"]);
    world.wait_held("busy", Duration::from_secs(5));
    let marker = world.path("marker");
    let marker_arg = marker.to_str().unwrap();
    let output = world.output(&["run", "busy", "--wait", "0", "--", "touch", marker_arg]);
    assert_eq!(code(output.status), 75);
    assert!(!marker.exists(), "the command ran");
    // One line naming the holder (who it is: see the test on holders).
    let message = String::from_utf8_lossy(&output.stderr);
    assert!(
        message.starts_with("redlatch: lock busy is held by ")
            && message.ends_with(" more; gave up after 0s\n")
            && message.lines().count() == 1,
        "{message}"
    );
}

/// The server's clock now (`TIME`), as `since` is given by it.
fn server_now(conn: &mut redis::Connection) -> SystemTime {
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(conn).unwrap();
    UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_micros(micros)
}

/// `--json` output of a command that must succeed.
fn json_out(world: &World, args: &[&str]) -> Value {
    let output = world.output(args);
    assert_eq!(code(output.status), 0, "{args:?}");
    serde_json::from_slice(&output.stdout).expect("JSON on stdout")
}

/// Who holds it: the holder of `run --purpose` is named, by host, the
/// holder process's pid, program, purpose and since when, in `status`
/// (people and JSON), `list` and `top`; a second run that gives up says
/// who holds the lock and for how much longer.
#[test]
fn the_holder_is_named_by_status_list_top_and_the_busy_message() {
    let world = World::new();
    let mut conn = world.redis();
    let before = server_now(&mut conn);
    let holder = world.spawn(&[
        "run",
        "report",
        "--purpose",
        "nightly report",
        "--",
        "sleep",
        "30",
    ]);
    // Published about 50 ms into the hold: wait for it, generously.
    let mut status = Value::Null;
    assert!(
        common::eventually(Duration::from_secs(20), || {
            status = json_out(&world, &["--json", "status", "report"]);
            status["holders"][0]["identity"].is_object()
        }),
        "no identity: {status}; holder: {}",
        holder.stderr()
    );
    let after = server_now(&mut conn);
    let host = fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let host = host.trim();
    let identity = &status["holders"][0]["identity"];
    assert_eq!(identity["host"], host, "{identity}");
    assert_eq!(identity["pid"], holder.pid(), "{identity}");
    assert_eq!(identity["program"], "redlatch", "{identity}");
    assert_eq!(identity["purpose"], "nightly report", "{identity}");
    let since = humantime::parse_rfc3339(identity["since"].as_str().expect("since as text"))
        .expect("since in RFC 3339");
    let slack = Duration::from_secs(1);
    assert!(
        since + slack >= before && since <= after + slack,
        "since {since:?} not between {before:?} and {after:?}"
    );

    let listed = json_out(&world, &["--json", "list"]);
    assert_eq!(listed[0]["holders"][0]["identity"], *identity, "{listed}");
    let top = json_out(&world, &["--json", "top", "--once"]);
    assert_eq!(
        top["locks"][0]["holders"][0]["identity"], *identity,
        "{top}"
    );

    let process = format!("{host} pid {} (redlatch)", holder.pid());
    let text = String::from_utf8(world.output(&["status", "report"]).stdout).unwrap();
    assert!(text.contains(&format!("\nholder   {process}\n")), "{text}");
    assert!(text.contains("\npurpose  nightly report\n"), "{text}");
    let since_line = text
        .lines()
        .find(|line| line.starts_with("since    "))
        .unwrap_or_else(|| panic!("no since line: {text}"));
    assert!(since_line.ends_with(" ago)"), "{since_line}");
    let text = String::from_utf8(world.output(&["list"]).stdout).unwrap();
    assert!(
        text.starts_with(&format!("report  held by {process} ")),
        "{text}"
    );
    let text = String::from_utf8(world.output(&["top", "--once"]).stdout).unwrap();
    assert!(text.contains(&process), "{text}");

    let busy = world.output(&["run", "report", "--wait", "1s", "--", "true"]);
    assert_eq!(code(busy.status), 75);
    let message = String::from_utf8(busy.stderr).unwrap();
    let prefix = format!("redlatch: lock report is held by {process} since ");
    assert!(message.starts_with(&prefix), "{message}");
    assert!(message.ends_with(" more; gave up after 1s\n"), "{message}");
    assert_eq!(message.lines().count(), 1, "{message}");
    let (_, rest) = message
        .split_once(": nightly report, for ")
        .expect("purpose, then TTL");
    let left = humantime::parse_duration(rest.trim_end_matches(" more; gave up after 1s\n"))
        .expect("the TTL left");
    assert!(
        left > Duration::ZERO && left <= Duration::from_secs(30),
        "{left:?}"
    );
}

/// Without `--purpose`, `run` says which program it runs, and nothing of
/// its arguments (nor its directory): they may carry secrets.
#[test]
fn the_default_purpose_names_the_program_alone() {
    let world = World::new();
    let _holder = world.spawn(&[
        "run",
        "secretive",
        "--",
        "/bin/sh",
        "-c",
        "sleep 30",
        "password=hunter2",
    ]);
    let mut status = Value::Null;
    assert!(
        common::eventually(Duration::from_secs(20), || {
            status = json_out(&world, &["--json", "status", "secretive"]);
            status["holders"][0]["identity"].is_object()
        }),
        "no identity: {status}"
    );
    assert_eq!(status["holders"][0]["identity"]["purpose"], "run: sh");
    let text = String::from_utf8(world.output(&["status", "secretive"]).stdout).unwrap();
    assert!(text.contains("\npurpose  run: sh\n"), "{text}");
    let busy = world.output(&["run", "secretive", "--wait", "0", "--", "true"]);
    let message = String::from_utf8(busy.stderr).unwrap();
    assert!(message.contains(": run: sh, for "), "{message}");
    for shown in [status.to_string(), text, message] {
        assert!(
            !shown.contains("hunter2") && !shown.contains("sleep 30"),
            "{shown}"
        );
    }
}

/// `REDLATCH_TOKEN` strictly increases across sequential runs.
/// Renewals are logged at debug level, one line per round with how many
/// holds it renewed (quiet by default).
#[test]
fn renewal_rounds_are_logged_at_debug_level() {
    let world = World::new();
    let output = world
        .command(&["run", "renewed", "--lease", "300ms", "--", "sleep", "1"])
        .env("RUST_LOG", "redlatch::renewal=debug")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(code(output.status), 0, "{stderr}");
    assert!(
        stderr.contains("renewal round: 1 of 1 hold(s) renewed"),
        "{stderr}"
    );
    let quiet = world.output(&["run", "renewed", "--lease", "300ms", "--", "sleep", "1"]);
    assert_eq!(code(quiet.status), 0);
    assert!(
        !String::from_utf8_lossy(&quiet.stderr).contains("renewal round"),
        "renewals logged by default"
    );
}

#[test]
fn fencing_tokens_increase_across_runs() {
    let world = World::new();
    let tokens = world.path("tokens");
    let script = format!("echo \"$REDLATCH_LOCK $REDLATCH_TOKEN\" >> {}", q(&tokens));
    for _ in 0..5 {
        let output = world.output(&["run", "fenced", "--", "sh", "-c", &script]);
        assert_eq!(code(output.status), 0);
    }
    let lines = fs::read_to_string(&tokens).unwrap();
    let tokens: Vec<u64> = lines
        .lines()
        .map(|line| {
            let (lock, token) = line.split_once(' ').expect("lock and token");
            assert_eq!(lock, "fenced");
            token.parse().expect("a number")
        })
        .collect();
    assert_eq!(tokens.len(), 5);
    assert!(
        tokens.windows(2).all(|pair| pair[0] < pair[1]),
        "tokens not strictly increasing: {tokens:?}"
    );
}

/// A command killed by SIGKILL: redlatch exits 137 and the lock is free.
#[test]
fn command_killed_by_a_signal_gives_128_plus_n_and_releases() {
    let world = World::new();
    let output = world.output(&["run", "doomed", "--", "sh", "-c", "kill -9 $$"]);
    assert_eq!(code(output.status), 137);
    let mut conn = world.redis();
    assert!(!world.exists(&mut conn, "doomed"), "lock still held");
    let status = world.output(&["status", "doomed", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(json["held"], false);
}

/// redlatch killed -9 mid-command: the lock frees itself within its lease.
#[test]
fn crashed_redlatch_frees_the_lock_within_the_lease() {
    let world = World::new();
    let pid_file = world.path("child.pid");
    let _orphan = Orphan(pid_file.clone());
    let script = format!("echo $$ > {}; exec sleep 30", q(&pid_file));
    let mut run = world.spawn(&["run", "crash", "--lease", "1s", "--", "sh", "-c", &script]);
    world.wait_held("crash", Duration::from_secs(5));
    wait_file(&pid_file, Duration::from_secs(5));
    run.signal(libc::SIGKILL);
    run.wait(Duration::from_secs(5));
    let killed = Instant::now();
    let mut conn = world.redis();
    assert!(
        common::eventually(Duration::from_millis(2500), || !world
            .exists(&mut conn, "crash")),
        "lock still held 2.5 s after redlatch died"
    );
    eprintln!("lock freed {:?} after the kill", killed.elapsed());
}

/// A command running over three leases keeps the lock the whole time.
#[test]
fn long_command_keeps_the_lock_throughout() {
    let world = World::new();
    let done = world.path("done");
    let script = format!("sleep 3.5; touch {}", q(&done));
    let mut run = world.spawn(&["run", "long", "--lease", "1s", "--", "sh", "-c", &script]);
    world.wait_held("long", Duration::from_secs(5));
    let mut conn = world.redis();
    let mut polls = 0;
    while !done.exists() {
        // Read the key first: if it is missing and the command had not
        // finished by then, the lock was gone while it ran.
        let held = world.exists(&mut conn, "long");
        assert!(
            held || done.exists(),
            "lock gone while the command ran (poll {polls})"
        );
        polls += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(polls >= 30, "only {polls} polls");
    assert_eq!(
        code(run.wait(Duration::from_secs(5))),
        0,
        "{}",
        run.stderr()
    );
}

/// `redlatch run ARGS -- sh -c 'sleep 30'` (ARGS: the lock name first),
/// once the lock is held and the command started: the run, the command's
/// pid, and the guard that kills the command if the test ends first.
fn sleeper_under(world: &World, args: &[&str]) -> (common::Running, i32, Orphan) {
    let pid_file = world.path("child.pid");
    let orphan = Orphan(pid_file.clone());
    let script = format!("echo $$ > {}; exec sleep 30", q(&pid_file));
    let run = held_run(world, args, &script);
    // The file appears before `echo` writes the pid into it: wait for the line.
    let child = pid_in(&pid_file);
    (run, child, orphan)
}

/// `redlatch run ARGS -- sh -c SCRIPT` (ARGS: the lock name first), once
/// the lock is held.
fn held_run(world: &World, args: &[&str], script: &str) -> common::Running {
    let mut command = vec!["run"];
    command.extend_from_slice(args);
    command.extend(["--", "sh", "-c", script]);
    let run = world.spawn(&command);
    world.wait_held(args[0], Duration::from_secs(5));
    run
}

/// [`held_run`] of a command that leaves a grandchild (`sleep 300`)
/// running: the run, the command's and the grandchild's pids, and the
/// guards that kill both if the test ends first.
fn job_with_grandchild(
    world: &World,
    args: &[&str],
) -> (common::Running, i32, i32, (Orphan, Orphan)) {
    let child_file = world.path("child.pid");
    let grandchild_file = world.path("grandchild.pid");
    let orphans = (Orphan(child_file.clone()), Orphan(grandchild_file.clone()));
    let script = format!(
        "sleep 300 & echo $! > {g}; echo $$ > {c}; wait",
        g = q(&grandchild_file),
        c = q(&child_file)
    );
    let run = held_run(world, args, &script);
    (run, pid_in(&child_file), pid_in(&grandchild_file), orphans)
}

/// The key deleted under a running command: command stopped, exit 79.
#[test]
fn lock_deleted_under_the_command_stops_it_with_79() {
    let world = World::new();
    let (mut run, child, _orphan) = sleeper_under(&world, &["doomed", "--lease", "1s"]);
    let _: i64 = redis::cmd("DEL")
        .arg("doomed")
        .query(&mut world.redis())
        .unwrap();
    let deleted = Instant::now();
    let status = run.wait(Duration::from_secs(5));
    eprintln!("redlatch exited {:?} after the DEL", deleted.elapsed());
    assert_eq!(code(status), 79);
    assert!(!alive(child), "the command is still running");
    let stderr = run.stderr();
    assert_eq!(stderr.lines().count(), 1, "stderr: {stderr}");
    assert!(
        stderr.contains("lock doomed was lost while the command ran"),
        "{stderr}"
    );
}

/// `redlatch unlock --force` from another shell, with the default 30 s
/// lease: the running command is stopped at once (the watch sees the key
/// go), not at the next renewal 10 s later while a second holder may
/// already run beside it.
#[test]
fn a_force_unlock_stops_the_command_at_once_not_at_the_next_renewal() {
    let world = World::new();
    let (mut run, child, _orphan) = sleeper_under(&world, &["broken"]);
    let unlocked = world.output(&["unlock", "broken", "--force"]);
    assert_eq!(code(unlocked.status), 0);
    let forced = Instant::now();
    let status = run.wait(Duration::from_secs(5));
    let took = forced.elapsed();
    eprintln!("redlatch exited {took:?} after unlock --force");
    assert_eq!(code(status), 79);
    assert!(!alive(child), "the command is still running");
    assert!(took < Duration::from_secs(3), "took {took:?}");
}

/// SIGTERM to redlatch reaches the command; its status is redlatch's; the lock is freed.
#[test]
fn sigterm_is_forwarded_to_the_command() {
    let world = World::new();
    let marker = world.path("marker");
    let ready = world.path("ready");
    let script = format!(
        "trap 'kill $! 2>/dev/null; echo got-term > {m}; exit 3' TERM; sleep 30 & touch {r}; wait",
        m = q(&marker),
        r = q(&ready)
    );
    let mut run = world.spawn(&["run", "graceful", "--", "sh", "-c", &script]);
    wait_file(&ready, Duration::from_secs(5));
    run.signal(libc::SIGTERM);
    let status = run.wait(Duration::from_secs(5));
    assert_eq!(code(status), 3, "stderr: {}", run.stderr());
    assert_eq!(fs::read_to_string(&marker).unwrap(), "got-term\n");
    assert!(
        !world.exists(&mut world.redis(), "graceful"),
        "lock still held"
    );
}

/// A command that ignores SIGTERM after the lock is lost gets SIGKILL after `--kill-after`.
#[test]
fn kill_after_escalates_to_sigkill() {
    let world = World::new();
    let pid_file = world.path("child.pid");
    let _orphan = Orphan(pid_file.clone());
    // `trap '' TERM` makes the exec'd sleep ignore SIGTERM too.
    let script = format!("trap '' TERM; echo $$ > {}; exec sleep 30", q(&pid_file));
    let mut run = world.spawn(&[
        "run",
        "stubborn",
        "--lease",
        "1s",
        "--kill-after",
        "500ms",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    world.wait_held("stubborn", Duration::from_secs(5));
    wait_file(&pid_file, Duration::from_secs(5));
    let _: i64 = redis::cmd("DEL")
        .arg("stubborn")
        .query(&mut world.redis())
        .unwrap();
    let deleted = Instant::now();
    assert_eq!(code(run.wait(Duration::from_secs(5))), 79);
    let took = deleted.elapsed();
    assert!(
        took >= Duration::from_millis(500),
        "killed after {took:?}, before --kill-after"
    );
}

/// A signal while waiting for the lock: 128+N, the command never runs, nothing left waiting.
#[test]
fn signal_while_waiting_gives_up_without_running() {
    let world = World::new();
    let _holder = world.spawn(&["run", "busy", "--", "sleep", "30"]);
    world.wait_held("busy", Duration::from_secs(5));
    let marker = world.path("marker");
    let mut waiter = world.spawn(&["run", "busy", "--", "touch", marker.to_str().unwrap()]);
    assert!(
        common::eventually(Duration::from_secs(5), || {
            let status = world.output(&["status", "busy", "--json"]);
            let json: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
            json["waiting"] == 1
        }),
        "the waiter never subscribed"
    );
    waiter.signal(libc::SIGINT);
    assert_eq!(code(waiter.wait(Duration::from_secs(5))), 130);
    assert!(!marker.exists(), "the command ran");
    assert_eq!(
        waiter.stderr(),
        "redlatch: SIGINT while waiting for lock busy; the command did not run\n"
    );
}

/// Ctrl-C on a terminal reaches the command once. The command runs in a
/// process group of its own, so the terminal's SIGINT reaches it only
/// through redlatch; a regression either way shows here: not forwarded (the
/// trap never runs) or delivered twice. Runs redlatch on a pseudo-terminal
/// made by util-linux `script`; skipped without it. (A duplicate that
/// arrived while the first was still pending would coalesce with it.)
#[test]
fn terminal_ctrl_c_reaches_the_command_once() {
    use std::io::Write;

    if !has_script() {
        return;
    }
    let world = World::new();
    let count = world.path("interrupts");
    let ready = world.path("ready");
    // `wait` returns at the first SIGINT; a second one, arriving during the
    // foreground `sleep 0.3`, runs the trap again when that sleep ends.
    let (mut terminal, mut keys) = run_on_terminal(
        &world,
        &format!(
            "trap 'echo int >> {c}' INT\nsleep 3 & p=$!\ntouch {r}\nwait\nsleep 0.3\nkill $p 2>/dev/null\nexit 5\n",
            c = q(&count),
            r = q(&ready)
        ),
    );
    wait_file(&ready, Duration::from_secs(5));
    keys.write_all(b"\x03").unwrap(); // Ctrl-C, typed on the terminal
    keys.flush().unwrap();
    let status = terminal.wait().unwrap();
    drop(keys);
    assert_eq!(code(status), 5, "script's status is the command's");
    assert_eq!(fs::read_to_string(&count).unwrap(), "int\n", "SIGINT count");
}

/// Reads the two pids (`$PPID $$`: redlatch's and the command's) a job
/// wrote to `path` (waiting for the file, which the job moves in whole).
fn pid_pair_in(path: &std::path::Path) -> (i32, i32) {
    wait_file(path, Duration::from_secs(10));
    let text = fs::read_to_string(path).unwrap();
    let (redlatch, child) = text.trim().split_once(' ').unwrap();
    (redlatch.parse().unwrap(), child.parse().unwrap())
}

/// Reads the pid a job wrote to `path` (waiting for the file).
fn pid_in(path: &std::path::Path) -> i32 {
    wait_file(path, Duration::from_secs(5));
    assert!(
        common::eventually(Duration::from_secs(5), || fs::read_to_string(path)
            .is_ok_and(|text| text.ends_with('\n'))),
        "{} never got a whole line",
        path.display()
    );
    fs::read_to_string(path).unwrap().trim().parse().unwrap()
}

/// A lost lock stops the whole job: the script and its long-running
/// grandchild are both gone when redlatch exits 79.
#[test]
fn lost_lock_stops_the_commands_grandchildren_too() {
    let world = World::new();
    let (mut run, child, grandchild, _orphans) =
        job_with_grandchild(&world, &["job", "--lease", "1s"]);
    assert!(alive(grandchild), "the grandchild did not start");
    let _: i64 = redis::cmd("DEL")
        .arg("job")
        .query(&mut world.redis())
        .unwrap();
    assert_eq!(
        code(run.wait(Duration::from_secs(10))),
        79,
        "{}",
        run.stderr()
    );
    assert!(!alive(child), "the command outlived redlatch");
    assert!(
        !alive(grandchild),
        "the command's grandchild (sleep 300) outlived redlatch"
    );
}

/// redlatch killed -9: the command it ran and the command's own children
/// die with it, promptly.
#[test]
fn killed_redlatch_takes_its_whole_job_with_it() {
    let world = World::new();
    let (mut run, child, grandchild, _orphans) = job_with_grandchild(&world, &["crash"]);
    run.signal(libc::SIGKILL);
    run.wait(Duration::from_secs(5));
    assert!(
        common::eventually(Duration::from_secs(5), || !alive(child)),
        "the command still runs 5 s after redlatch was killed"
    );
    assert!(
        common::eventually(Duration::from_secs(5), || !alive(grandchild)),
        "the command's grandchild (sleep 300) still runs 5 s after redlatch was killed"
    );
}

/// A command that reads the terminal gets what is typed: though it runs in
/// a process group of its own, redlatch makes it the terminal's foreground
/// (a background group that reads the terminal is stopped by SIGTTIN).
/// Runs on a pseudo-terminal made by util-linux `script`; skipped without it.
#[test]
fn command_reads_the_terminal_in_the_foreground() {
    use std::io::Write;

    if !has_script() {
        return;
    }
    let world = World::new();
    let answer = world.path("answer");
    let ready = world.path("ready");
    let (mut terminal, mut keys) = run_on_terminal(
        &world,
        &format!(
            "touch {r}\nread line\necho \"got $line\" > {a}\n",
            r = q(&ready),
            a = q(&answer)
        ),
    );
    wait_file(&ready, Duration::from_secs(5));
    keys.write_all(b"yes\r").unwrap();
    keys.flush().unwrap();
    let read = common::eventually(Duration::from_secs(10), || {
        fs::read_to_string(&answer).is_ok_and(|text| text == "got yes\n")
    });
    if !read {
        let _ = terminal.kill();
    }
    let status = terminal.wait().unwrap();
    drop(keys);
    assert!(
        read,
        "the command never read the line typed on the terminal"
    );
    assert_eq!(code(status), 0, "script's status is the command's");
}

/// The state letter of process `pid` (`T` stopped), from /proc.
fn state(pid: i32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Ctrl-Z in an interactive shell stops the command and redlatch together
/// (the shell sees a stopped job), and `fg` continues both with the terminal:
/// the command, which was reading it, then gets the line typed. The command
/// runs in a process group of its own, so redlatch relays the stop.
/// Runs on a pseudo-terminal made by util-linux `script`; skipped without it.
#[test]
fn ctrl_z_stops_redlatch_with_the_command_and_fg_resumes_both() {
    use std::io::Write;

    if !has_script() {
        return;
    }
    let world = World::new();
    let answer = world.path("answer");
    let pids = world.path("pids");
    let child_script = world.path("child.sh");
    fs::write(
        &child_script,
        format!(
            "echo \"$PPID $$\" > {p}.tmp; mv {p}.tmp {p}\nread line\necho \"got $line\" > {a}\n",
            p = q(&pids),
            a = q(&answer)
        ),
    )
    .unwrap();
    let mut terminal = on_terminal("bash --norc --noprofile -i");
    let mut keys = terminal.stdin.take().unwrap();
    let mut type_keys = |text: String| {
        keys.write_all(text.as_bytes()).unwrap();
        keys.flush().unwrap();
    };
    type_keys(format!("{}\r", run_line(&world, "tty", &child_script)));
    let (redlatch, child) = pid_pair_in(&pids);
    type_keys("\x1a".to_owned()); // Ctrl-Z
    let stopped = common::eventually(Duration::from_secs(10), || {
        state(redlatch) == Some('T') && state(child) == Some('T')
    });
    let states = (state(redlatch), state(child));
    type_keys("fg\r".to_owned());
    let resumed = common::eventually(Duration::from_secs(10), || {
        state(redlatch).is_some_and(|s| s != 'T') && state(child).is_some_and(|s| s != 'T')
    });
    type_keys("yes\r".to_owned());
    let read = common::eventually(Duration::from_secs(10), || {
        fs::read_to_string(&answer).is_ok_and(|text| text == "got yes\n")
    });
    type_keys("exit\r".to_owned());
    if !(stopped && resumed && read) {
        // SAFETY: kill(2) on processes this test started.
        unsafe {
            libc::kill(child, libc::SIGKILL);
            libc::kill(redlatch, libc::SIGKILL);
        }
        let _ = terminal.kill();
    }
    let _ = terminal.wait();
    assert!(
        stopped,
        "Ctrl-Z: (redlatch, command) states {states:?}, want both T"
    );
    assert!(resumed, "fg did not continue both");
    assert!(read, "the command never read the line typed after fg");
}

/// A job that wants the terminal while redlatch is detached from the shell
/// (`(redlatch run ... &)`: nobody can continue redlatch, so it cannot stop
/// with the job) gets what an orphaned stopped group gets from the kernel,
/// SIGHUP: it ends, and so does redlatch, instead of stopping and being
/// continued over and over. Runs on a pseudo-terminal made by util-linux
/// `script`; skipped without it.
#[test]
fn detached_job_reading_the_terminal_is_hung_up_not_spun() {
    use std::io::Write;

    if !has_script() {
        return;
    }
    let world = World::new();
    let pids = world.path("pids");
    let child_script = world.path("child.sh");
    fs::write(
        &child_script,
        format!(
            "echo \"$PPID $$\" > {p}.tmp; mv {p}.tmp {p}\nread line < /dev/tty\n",
            p = q(&pids)
        ),
    )
    .unwrap();
    let mut terminal = on_terminal("bash --norc --noprofile -i");
    let mut keys = terminal.stdin.take().unwrap();
    keys.write_all(format!("({} &)\r", run_line(&world, "orphan", &child_script)).as_bytes())
        .unwrap();
    keys.flush().unwrap();
    let (redlatch, child) = pid_pair_in(&pids);
    let ended = common::eventually(Duration::from_secs(10), || {
        !alive(child) && !alive(redlatch)
    });
    let states = (state(redlatch), state(child));
    // SAFETY: kill(2) on processes this test started; at worst already gone.
    unsafe {
        libc::kill(child, libc::SIGKILL);
        libc::kill(redlatch, libc::SIGKILL);
    }
    let _ = keys.write_all(b"exit\r");
    drop(keys);
    let _ = terminal.wait();
    assert!(
        ended,
        "still there 10 s on: (redlatch, command) states {states:?}"
    );
}

/// Whether util-linux `script` (a pseudo-terminal for the terminal tests) is
/// installed; says the test is skipped when not.
fn has_script() -> bool {
    let found = std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_ok();
    if !found {
        eprintln!("skipped: util-linux `script` is not installed");
    }
    found
}

/// The shell line `redlatch --redis URL run LOCK -- sh SCRIPT`.
fn run_line(world: &World, lock: &str, script: &std::path::Path) -> String {
    format!(
        "{} --redis {} run {lock} -- sh {}",
        q(std::path::Path::new(common::BIN)),
        world.server.url(),
        q(script)
    )
}

/// `redlatch run tty -- sh` a file holding `script`, on a pseudo-terminal
/// ([`on_terminal`]): the terminal, and its keyboard.
fn run_on_terminal(world: &World, script: &str) -> (std::process::Child, std::process::ChildStdin) {
    let child_script = world.path("child.sh");
    fs::write(&child_script, script).unwrap();
    let mut terminal = on_terminal(&format!("exec {}", run_line(world, "tty", &child_script)));
    let keys = terminal.stdin.take().unwrap();
    (terminal, keys)
}

/// Runs `command` with `sh` on a pseudo-terminal made by `script`; the
/// returned child's stdin is what is typed.
fn on_terminal(command: &str) -> std::process::Child {
    use std::process::{Command, Stdio};
    let mut script = Command::new("script");
    script
        .args(["-qec", command, "/dev/null"])
        .env("SHELL", "/bin/sh")
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::null());
    common::default_signals(&mut script);
    script.spawn().expect("spawn script")
}

/// Holder records (`redlatch_holder:{id}`) left on the world's server.
fn holder_records(world: &World) -> Vec<String> {
    redis::cmd("KEYS")
        .arg("*redlatch_holder*")
        .query(&mut world.redis())
        .unwrap()
}

/// A `run` that held its lock a second, ending normally or by SIGTERM,
/// takes its holder record with it: none is left 2 s after it exits (the
/// process used to leave with `process::exit`, before the client's tasks
/// could take the record out: it stayed for its TTL, a minute).
#[test]
fn a_run_leaves_no_holder_record_behind() {
    let world = World::new();
    let ready = world.path("ready");
    let script = format!("touch {r}; sleep 1", r = q(&ready));
    let mut ended = world.spawn(&["run", "named-then-done", "--", "sh", "-c", &script]);
    wait_file(&ready, Duration::from_secs(5));
    let named = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        !holder_records(&world).is_empty()
    });
    assert!(named, "the run's hold was never named");
    assert_eq!(code(ended.wait(Duration::from_secs(10))), 0);
    let exited = Instant::now();
    let mut left = holder_records(&world);
    while !left.is_empty() && exited.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(20));
        left = holder_records(&world);
    }
    assert!(left.is_empty(), "2 s after a run ended: {left:?}");

    let mut stopped = world.spawn(&["run", "named-then-stopped", "--", "sleep", "30"]);
    world.wait_held("named-then-stopped", Duration::from_secs(5));
    std::thread::sleep(Duration::from_millis(1_000));
    assert!(
        !holder_records(&world).is_empty(),
        "the second run was never named"
    );
    stopped.signal(libc::SIGTERM);
    stopped.wait(Duration::from_secs(10));
    let exited = Instant::now();
    let mut left = holder_records(&world);
    while !left.is_empty() && exited.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(20));
        left = holder_records(&world);
    }
    assert!(left.is_empty(), "2 s after a stopped run ended: {left:?}");
}

/// `sh -c` script for a job that holds its lock, says so (`mine`), waits
/// for the other job to hold its own (`theirs`), then runs
/// `redlatch run OTHER -- true` inside (REDLATCH_JOB makes it the same
/// party), writing how long that inner run took, in ms, to `mine.ms`.
fn nested(world: &World, mine: &Path, theirs: &Path, other: &str) -> String {
    format!(
        "touch {mine}; while [ ! -e {theirs} ]; do sleep 0.01; done; \
         start=$(date +%s%N); {bin} --redis {url} run {other} -- true; code=$?; \
         echo $(( ($(date +%s%N) - start) / 1000000 )) > {mine}.ms; exit $code",
        mine = q(mine),
        theirs = q(theirs),
        bin = q(Path::new(common::BIN)),
        url = world.server.url(),
    )
}

/// Two jobs nest runs in opposite orders (A holds l1 and runs `run l2`, B
/// holds l2 and runs `run l1`): a deadlock the library names. Exactly one
/// job exits 76 (its inner run refused at once, its exit status passed up
/// by its outer run), the other completes once the refused job let go.
#[test]
fn nested_runs_in_opposite_orders_deadlock_and_exactly_one_exits_76() {
    let world = World::new();
    let (a_in, b_in) = (world.path("a-in"), world.path("b-in"));
    let mut a = world.spawn(&[
        "run",
        "l1",
        "--",
        "sh",
        "-c",
        &nested(&world, &a_in, &b_in, "l2"),
    ]);
    let mut b = world.spawn(&[
        "run",
        "l2",
        "--",
        "sh",
        "-c",
        &nested(&world, &b_in, &a_in, "l1"),
    ]);
    let started = Instant::now();
    let codes = [
        code(a.wait(Duration::from_secs(30))),
        code(b.wait(Duration::from_secs(30))),
    ];
    let took = started.elapsed();
    let mut sorted = codes;
    sorted.sort_unstable();
    assert_eq!(sorted, [0, 76], "A: {}\nB: {}", a.stderr(), b.stderr());
    let (refused, marker) = if codes[0] == 76 {
        (&a, &a_in)
    } else {
        (&b, &b_in)
    };
    let message = refused.stderr();
    assert!(
        message.contains("deadlock") && message.contains("l1") && message.contains("l2"),
        "{message}"
    );
    // The refused inner run, from its start (process, connection, one busy
    // attempt, the check) to its exit: found, not timed out, far below any
    // lease or wait (the bound generous for CI).
    let ms = fs::read_to_string(marker.with_extension("ms")).unwrap();
    let ms: u64 = ms.trim().parse().unwrap();
    eprintln!("the refused inner run took {ms} ms; both jobs {took:?}");
    assert!(ms < 5_000, "the refused inner run took {ms} ms");
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

/// A run outside any job takes its lock as a new job (`job:<client-id>`)
/// and passes that owner on in REDLATCH_JOB; a run inside it takes its
/// lock as the same owner; `--owner` wins over both.
#[test]
fn a_run_passes_its_job_on_and_a_nested_run_takes_it() {
    let world = World::new();
    let out = world.path("job");
    let script = format!(
        "echo \"$REDLATCH_JOB\" > {out}; \
         {bin} --redis {url} run inner -- sh -c 'echo \"$REDLATCH_JOB\" >> {out}'",
        out = q(&out),
        bin = q(Path::new(common::BIN)),
        url = world.server.url(),
    );
    let output = world.output(&["run", "outer", "--", "sh", "-c", &script]);
    assert_eq!(code(output.status), 0);
    let jobs = fs::read_to_string(&out).unwrap();
    let jobs: Vec<&str> = jobs.lines().collect();
    assert_eq!(jobs.len(), 2, "{jobs:?}");
    assert!(jobs[0].starts_with("job:"), "{jobs:?}");
    assert_eq!(jobs[0], jobs[1], "the nested run is the same job");

    let output = world.output(&[
        "run",
        "--owner",
        "nightly",
        "outer",
        "--",
        "sh",
        "-c",
        &format!("echo \"$REDLATCH_JOB\" > {}", q(&out)),
    ]);
    assert_eq!(code(output.status), 0);
    assert_eq!(fs::read_to_string(&out).unwrap().trim(), "nightly");
}

/// A job that runs `redlatch run` on the lock it holds waited for itself
/// for ever; it is one party now, and the inner run exits 76 at once.
#[test]
fn a_nested_run_of_the_jobs_own_lock_exits_76_at_once() {
    let world = World::new();
    let inner = format!(
        "{bin} --redis {url} run own -- true",
        bin = q(Path::new(common::BIN)),
        url = world.server.url(),
    );
    let started = Instant::now();
    let output = world.output(&["run", "own", "--", "sh", "-c", &inner]);
    assert_eq!(code(output.status), 76);
    let message = String::from_utf8_lossy(&output.stderr);
    assert!(message.contains("deadlock"), "{message}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

/// A nested run stopped by a signal while it waits leaves no wait key
/// behind: its job, still holding its own lock, must not look like it
/// waits (another job's wait for that lock would be refused as a deadlock).
#[test]
fn a_run_stopped_while_waiting_leaves_no_wait_key() {
    let world = World::new();
    let _holder = world.spawn(&["run", "--owner", "jobB", "second", "--", "sleep", "60"]);
    world.wait_held("second", Duration::from_secs(10));
    let pid_file = world.path("inner.pid");
    let script = format!(
        "{bin} --redis {url} run second -- true & echo $! > {pid}; wait; sleep 60",
        bin = q(Path::new(common::BIN)),
        url = world.server.url(),
        pid = q(&pid_file),
    );
    let _job = world.spawn(&["run", "--owner", "jobA", "first", "--", "sh", "-c", &script]);
    let mut conn = world.redis();
    assert!(
        common::eventually(Duration::from_secs(10), || world
            .exists(&mut conn, "redlatch_wait:n:jobA")),
        "the nested run wrote no wait key"
    );
    wait_file(&pid_file, Duration::from_secs(5));
    let pid: i32 = fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    unsafe { libc::kill(pid, libc::SIGTERM) };
    assert!(
        common::eventually(Duration::from_secs(5), || !alive(pid)),
        "the nested run did not stop"
    );
    assert!(
        !world.exists(&mut conn, "redlatch_wait:n:jobA"),
        "the stopped run's wait key stayed"
    );
}
