//! Failures before the command runs: each one line on stderr and its own exit status.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{BIN, World, code};

fn stderr_of(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `redlatch FLAGS run x -- touch MARKER`: its output, the marker (which
/// exists only if the command ran), and the directory that holds it.
fn run_touching_a_marker(
    flags: &[&str],
) -> (std::process::Output, std::path::PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("marker");
    let output = Command::new(BIN)
        .args(flags)
        .args(["run", "x", "--", "touch"])
        .arg(&marker)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    (output, marker, dir)
}

/// Nothing listens on the URL: exit 69, one line naming it (password hidden).
#[test]
fn unreachable_redis_exits_69() {
    let (output, marker, _dir) =
        run_touching_a_marker(&["--redis", "redis://app:s3cret@127.0.0.1:1"]);
    assert_eq!(code(output.status), 69);
    let stderr = stderr_of(&output);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("redlatch: cannot reach Redis at redis://app:***@127.0.0.1:1: "),
        "{stderr}"
    );
    assert!(!stderr.contains("s3cret"));
    assert!(!marker.exists());
}

/// Usage errors (bad duration, missing `--`, unknown option) exit 64.
#[test]
fn usage_errors_exit_64() {
    for args in [
        &["run", "x", "--lease", "banana", "--", "true"][..],
        &["run", "x", "--lease", "5ms", "--", "true"],
        &["run", "x", "--wait", "5 parsecs", "--", "true"],
        &["run", "x", "true"],
        &["status"],
        &["frobnicate"],
    ] {
        let output = Command::new(BIN).args(args).output().unwrap();
        assert_eq!(code(output.status), 64, "{args:?}: {}", stderr_of(&output));
        assert!(stderr_of(&output).starts_with("error: "), "{args:?}");
    }
}

/// `run NAME COMMAND` without `--`: the usage error says where the command goes.
#[test]
fn run_without_dashes_gets_a_tip() {
    let output = Command::new(BIN)
        .args(["run", "x", "echo", "hi"])
        .output()
        .unwrap();
    assert_eq!(code(output.status), 64);
    let stderr = stderr_of(&output);
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(
        stderr.contains("tip: the command goes after `--`"),
        "{stderr}"
    );
    // An unknown option keeps clap's own advice.
    let option = Command::new(BIN)
        .args(["run", "x", "--bogus", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(code(option.status), 64);
    assert!(
        !stderr_of(&option).contains("goes after"),
        "{}",
        stderr_of(&option)
    );
}

/// `--json` on `run` is refused rather than ignored: run prints no data.
#[test]
fn json_on_run_is_refused() {
    let (output, marker, _dir) =
        run_touching_a_marker(&["--redis", "redis://127.0.0.1:1", "--json"]);
    assert_eq!(code(output.status), 64);
    let stderr = stderr_of(&output);
    assert!(
        stderr.starts_with("redlatch: run has no JSON output"),
        "{stderr}"
    );
    assert!(!marker.exists());
}

/// `--help` documents the exit statuses and exits 0.
#[test]
fn help_lists_exit_statuses() {
    let output = Command::new(BIN).arg("--help").output().unwrap();
    assert_eq!(code(output.status), 0);
    let help = String::from_utf8_lossy(&output.stdout);
    for line in ["Exit status:", "75 ", "79 ", "128+N"] {
        assert!(help.contains(line), "no {line:?} in --help");
    }
}

/// A command that does not exist: exit 127, and the lock is not left held.
#[test]
fn missing_command_exits_127_and_releases() {
    let world = World::new();
    let output = world.output(&["run", "ghost", "--", "/nonexistent/command"]);
    assert_eq!(code(output.status), 127);
    assert!(stderr_of(&output).starts_with("redlatch: cannot run /nonexistent/command: "));
    assert!(!world.exists(&mut world.redis(), "ghost"));
}

/// stdin, stdout and the exit status pass through.
#[test]
fn stdio_and_status_pass_through() {
    let world = World::new();
    let mut command = world.command(&["run", "pipe", "--", "sh", "-c", "tr a-z A-Z; exit 42"]);
    command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    let mut child = command.spawn().unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"hello\n").unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(code(output.status), 42);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "HELLO\n");
}

/// Runs `redlatch ARGS...` (no `--redis` added) and collects its exit
/// status and stderr; fails the test if it is still running after `limit`.
fn finishes_within(limit: Duration, args: &[&str]) -> (i32, String) {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let stderr_path = dir.path().join("stderr");
    let mut child = Command::new(BIN)
        .args(args)
        .env_remove("REDIS_URL")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .process_group(0)
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > limit {
            // SAFETY: kill(2) on the process group we created at spawn.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            panic!(
                "redlatch {args:?} still running after {limit:?}; stderr: {}",
                std::fs::read_to_string(&stderr_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    eprintln!(
        "redlatch {args:?} -> {status:?} after {:?}: {stderr}",
        started.elapsed()
    );
    (code(status), stderr)
}

/// Writes `text` to `name` in `dir`; the path as a string.
fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

/// A server that accepts connections and never answers (SIGSTOP): every
/// command gives up within `--wait` (run) or the connect timeout, exit 69,
/// naming the limit that ran out.
#[test]
fn a_frozen_server_fails_within_the_limit_it_names() {
    let world = World::new();
    world.server.pause().unwrap();
    let url = world.server.url();
    let (status, stderr) = finishes_within(
        Duration::from_secs(5),
        &["--redis", &url, "run", "x", "--wait", "1s", "--", "true"],
    );
    assert_eq!(status, 69, "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "redlatch: could not connect to {url} within 1s (--wait)"
        )),
        "{stderr}"
    );

    // Without --wait: the connect timeout, from the settings file.
    let config = write(
        world.dir.path(),
        "fast.toml",
        "[connection]\nconnect_timeout = \"1s\"\n",
    );
    for command in [
        &["status", "x"][..],
        &["list"],
        &["unlock", "x", "--force"],
        &["run", "x", "--", "true"],
    ] {
        let mut args = vec!["--redis", &url, "--config", &config];
        args.extend(command);
        let (status, stderr) = finishes_within(Duration::from_secs(5), &args);
        assert_eq!(status, 69, "{command:?}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "could not connect to {url} within 1s (connect timeout 1s)"
            )),
            "{command:?}: {stderr}"
        );
    }
    world.server.resume().unwrap();
}

/// `rediss://` to a port without TLS: the handshake is never answered;
/// the wait runs out with a hint about TLS.
#[test]
fn rediss_to_a_plain_port_fails_within_the_wait() {
    let world = World::new();
    let url = format!("rediss://127.0.0.1:{}", world.server.port());
    let (status, stderr) = finishes_within(
        Duration::from_secs(5),
        &["--redis", &url, "run", "x", "--wait", "1s", "--", "true"],
    );
    assert_eq!(status, 69, "{stderr}");
    assert!(
        stderr.contains(&format!("{url} within 1s (--wait)")),
        "{stderr}"
    );
    assert!(stderr.contains("does that port speak TLS?"), "{stderr}");
}

/// Mistakes in the settings file's `[redis]` and `[tls]` are the file's:
/// exit 78, one line naming what to fix. The same DB index in a flag is a
/// usage error (64).
#[test]
fn config_file_mistakes_exit_78() {
    let world = World::new();
    let certs = testkit::TlsCertificates::generate().unwrap();
    let tls_server = testkit::RedisServer::builder()
        .tls(&certs, true)
        .start()
        .unwrap();
    let tls_url = tls_server.tls_url().unwrap();
    let dir = world.dir.path();
    let url = world.server.url();
    let cases = [
        (
            "missing CA",
            format!("[redis]\nurls = [{tls_url:?}]\n[tls]\nca = \"/nonexistent/ca.crt\"\n"),
            "tls.ca = /nonexistent/ca.crt",
        ),
        (
            "a key that is not the certificate's",
            format!(
                "[redis]\nurls = [{tls_url:?}]\n[tls]\nca = {:?}\ncert = {:?}\nkey = {:?}\n",
                certs.ca(),
                certs.client_cert(),
                certs.server_key()
            ),
            "does not belong to the certificate",
        ),
        (
            "DB index out of range",
            format!("[redis]\nurls = [\"{url}/99\"]\n"),
            "no database 99",
        ),
    ];
    for (what, text, expected) in cases {
        let config = write(dir, "deployment.toml", &text);
        for command in [&["status", "x"][..], &["run", "x", "--", "true"]] {
            let mut args = vec!["--config", &config];
            args.extend(command);
            let (status, stderr) = finishes_within(Duration::from_secs(20), &args);
            assert_eq!(status, 78, "{what}, {command:?}: {stderr}");
            assert_eq!(stderr.lines().count(), 1, "{what}: {stderr}");
            assert!(stderr.contains(expected), "{what}: {stderr}");
        }
    }
    let db_flag = format!("{url}/99");
    let (status, stderr) = finishes_within(
        Duration::from_secs(20),
        &["--redis", &db_flag, "status", "x"],
    );
    assert_eq!(status, 64, "{stderr}");
    assert!(stderr.contains("no database 99"), "{stderr}");
}

/// `openssl ARGS...` in `dir`, which must succeed.
fn openssl(dir: &Path, args: &[&str]) {
    let output = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run openssl (is it installed?)");
    assert!(
        output.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// An openssl CA (`v1ca.crt`, `v1ca.key`) in `dir`, and an X.509 v1
/// certificate `NAME.crt` (`x509 -req` without `-extfile`) it signed for
/// 127.0.0.1, with its key `NAME.key`.
fn v1_certificate(dir: &Path, name: &str) {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    if !dir.join("v1ca.crt").exists() {
        let mut args = vec!["req", "-x509"];
        args.extend(ec);
        args.extend([
            "-keyout",
            "v1ca.key",
            "-out",
            "v1ca.crt",
            "-days",
            "2",
            "-subj",
            "/CN=test CA",
        ]);
        openssl(dir, &args);
    }
    let (key, csr, crt) = (
        format!("{name}.key"),
        format!("{name}.csr"),
        format!("{name}.crt"),
    );
    let mut args = vec!["req"];
    args.extend(ec);
    args.extend(["-keyout", &key, "-out", &csr, "-subj", "/CN=127.0.0.1"]);
    openssl(dir, &args);
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "v1ca.crt",
            "-CAkey",
            "v1ca.key",
            "-CAcreateserial",
            "-out",
            &crt,
            "-days",
            "2",
        ],
    );
}

/// Certificates the TLS stack refuses are named with whose they are and
/// the fix; a CA file that holds no certificate is refused when loaded.
#[test]
fn tls_certificate_errors_are_named() {
    let certs = testkit::TlsCertificates::generate().unwrap();
    let dir = certs.dir();
    // Our client certificate, X.509 v1: refused when loaded, exit 78.
    v1_certificate(dir, "v1client");
    let server = testkit::RedisServer::builder()
        .tls(&certs, false)
        .start()
        .unwrap();
    let url = server.tls_url().unwrap();
    let ca = certs.ca().to_string_lossy().into_owned();
    let v1_cert = dir.join("v1client.crt").to_string_lossy().into_owned();
    let v1_key = dir.join("v1client.key").to_string_lossy().into_owned();
    let (status, stderr) = finishes_within(
        Duration::from_secs(20),
        &[
            "--redis",
            &url,
            "--tls-ca",
            &ca,
            "--tls-cert",
            &v1_cert,
            "--tls-key",
            &v1_key,
            "status",
            "x",
        ],
    );
    assert_eq!(status, 78, "{stderr}");
    assert!(
        stderr.contains(&format!("tls.cert = {v1_cert}")),
        "{stderr}"
    );
    assert!(stderr.contains("X.509 v1"), "{stderr}");
    assert!(stderr.contains("re-issue it as X.509 v3"), "{stderr}");

    // A CA file that is not PEM: refused when loaded, naming it.
    let garbage = write(dir, "garbage.crt", "this is not a certificate\n");
    let (status, stderr) = finishes_within(
        Duration::from_secs(20),
        &["--redis", &url, "--tls-ca", &garbage, "status", "x"],
    );
    assert_eq!(status, 78, "{stderr}");
    assert!(stderr.contains(&format!("tls.ca = {garbage}")), "{stderr}");
    assert!(stderr.contains("no PEM certificate"), "{stderr}");

    // The server's certificate, X.509 v1 (which OpenSSL's redis-cli
    // accepts): named as the server's, with the fix; exit 69.
    let v1_certs = testkit::TlsCertificates::generate().unwrap();
    let v1_dir = v1_certs.dir();
    v1_certificate(v1_dir, "server");
    std::fs::copy(v1_dir.join("v1ca.crt"), v1_certs.ca()).unwrap();
    let v1_server = testkit::RedisServer::builder()
        .tls(&v1_certs, false)
        .start()
        .unwrap();
    let v1_url = v1_server.tls_url().unwrap();
    let v1_ca = v1_certs.ca().to_string_lossy().into_owned();
    let (status, stderr) = finishes_within(
        Duration::from_secs(20),
        &["--redis", &v1_url, "--tls-ca", &v1_ca, "status", "x"],
    );
    assert_eq!(status, 69, "{stderr}");
    assert!(
        stderr.contains("the server's certificate was refused"),
        "{stderr}"
    );
    assert!(stderr.contains("X.509 v1"), "{stderr}");
    assert!(stderr.contains("re-issue it as X.509 v3"), "{stderr}");
}

/// `--redis` naming one node of a Redis Cluster: a name served by another
/// node fails with advice to use --redis-cluster (exit 64), not a raw
/// MOVED; so does `list`, which would list only that node's locks.
#[test]
fn a_cluster_node_behind_redis_gets_advice() {
    let cluster = testkit::Cluster::start(3, 0).unwrap();
    let node = &cluster.nodes()[0];
    let name = (0..100)
        .map(|i| format!("elsewhere-{i}"))
        .find(|name| cluster.master_of(name).unwrap() != node.port())
        .unwrap();
    let url = node.url();
    for command in [
        &["status", name.as_str()][..],
        &["run", name.as_str(), "--wait", "5s", "--", "true"],
        &["unlock", name.as_str(), "--force"],
        &["list"],
    ] {
        let mut args = vec!["--redis", &url];
        args.extend(command);
        let (status, stderr) = finishes_within(Duration::from_secs(20), &args);
        assert_eq!(status, 64, "{command:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains("is a Redis Cluster node"),
            "{command:?}: {stderr}"
        );
        assert!(
            stderr.contains("use --redis-cluster URL"),
            "{command:?}: {stderr}"
        );
    }
    // Named by the config file: the file's mistake (78), and its fix.
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        dir.path(),
        "node.toml",
        &format!("[redis]\nurls = [{url:?}]\n"),
    );
    let (status, stderr) = finishes_within(
        Duration::from_secs(20),
        &["--config", &config, "status", name.as_str()],
    );
    assert_eq!(status, 78, "{stderr}");
    assert!(stderr.contains("set mode = \"cluster\""), "{stderr}");
}

/// The CLI's rows of the deadline test: `run --wait` is one deadline for
/// connecting and acquiring, whatever the server does. Each row exits
/// within the wait plus a margin (the margin holds the "held by" line's
/// status read, 500 ms at most): a frozen or dead server with 69 naming
/// `--wait`, a slow one (every byte delayed, the lock held elsewhere) with
/// 75. (Before: connecting and acquiring each had the whole wait; the slow
/// row took the time to connect plus the wait.)
#[test]
fn run_wait_is_one_deadline_for_connecting_and_acquiring_under_every_fault() {
    #[derive(Debug, Clone, Copy)]
    enum Fault {
        Frozen,
        Dead,
        /// A proxy adds this latency each way; the lock is held elsewhere.
        SlowAndHeld(Duration),
    }
    const WAIT: Duration = Duration::from_secs(3);
    const MARGIN: Duration = Duration::from_millis(1_500);
    let rows = [
        (Fault::Frozen, 69),
        (Fault::Dead, 69),
        (Fault::SlowAndHeld(Duration::from_millis(150)), 75),
    ];
    let runs: Vec<_> = rows
        .into_iter()
        .map(|(fault, expected)| {
            std::thread::spawn(move || {
                let mut world = World::new();
                let proxy = testkit::Proxy::start(world.server.addr()).unwrap();
                let mut url = world.server.url();
                let _held = match fault {
                    Fault::Frozen => {
                        world.server.pause().unwrap();
                        None
                    }
                    Fault::Dead => {
                        world.server.kill().unwrap();
                        None
                    }
                    Fault::SlowAndHeld(latency) => {
                        // Held by another owner for the whole wait (the lock's hash).
                        let mut conn = world.redis();
                        let () = redis::cmd("HSET")
                            .arg("deadline")
                            .arg("elsewhere:owner")
                            .arg(1)
                            .query(&mut conn)
                            .unwrap();
                        let _: bool = redis::cmd("PEXPIRE")
                            .arg("deadline")
                            .arg(60_000)
                            .query(&mut conn)
                            .unwrap();
                        proxy.set_both(testkit::LinkFaults {
                            latency,
                            ..testkit::LinkFaults::default()
                        });
                        url = proxy.url();
                        Some(())
                    }
                };
                let started = Instant::now();
                let (status, stderr) = finishes_within(
                    WAIT * 4,
                    &[
                        "--redis", &url, "run", "deadline", "--wait", "3s", "--", "true",
                    ],
                );
                let took = started.elapsed();
                if matches!(fault, Fault::Frozen) {
                    world.server.resume().unwrap();
                }
                (fault, expected, status, stderr, took)
            })
        })
        .collect();
    let mut wrong = Vec::new();
    for run in runs {
        let (fault, expected, status, stderr, took) = run.join().unwrap();
        eprintln!("{fault:?}: exit {status} after {took:?}: {stderr}");
        // A slow server may answer "held" and then not answer a later
        // attempt within the wait: that names the wait.
        let named_wait =
            status == 69 && (stderr.contains("(--wait)") || stderr.contains("caller's wait (3s)"));
        let refused = matches!(fault, Fault::Dead) && stderr.contains("Connection refused");
        let fine = match expected {
            75 => status == 75 || named_wait,
            _ => status == expected && (named_wait || refused),
        };
        if !fine || took > WAIT + MARGIN {
            wrong.push(format!("{fault:?}: exit {status} after {took:?}: {stderr}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
