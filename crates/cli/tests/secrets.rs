//! Redis passwords stay secret: never printed, never in the command's
//! environment, and given without the command line (`ps`) through a file or
//! a variable. Each against its own redis-server.

mod common;

use std::fs;
use std::process::{Command, Output, Stdio};

use common::{BIN, code, q};
use testkit::RedisServer;

const PASSWORD: &str = "Zq7-secret/pw";

/// `redlatch ARGS...` with only the variables given (no `REDIS_URL` from outside).
fn redlatch(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(BIN);
    command
        .args(args)
        .env_remove("REDIS_URL")
        .env_remove("REDLATCH_REDIS_PASSWORD")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null());
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().expect("run redlatch");
    eprintln!(
        "redlatch {args:?} -> {:?}\n  stderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr).trim_end()
    );
    output
}

/// Variables for one run of redlatch.
type Env<'a> = Vec<(&'a str, &'a str)>;

/// A server that wants `PASSWORD`, and its URL without it.
fn protected() -> (RedisServer, String) {
    let server = RedisServer::builder()
        .password(PASSWORD)
        .start()
        .expect("start redis-server");
    let url = format!("redis://127.0.0.1:{}", server.port());
    (server, url)
}

/// Whether `text` shows the password, as written or percent-encoded.
fn shows_password(text: &str) -> bool {
    text.contains(PASSWORD) || text.contains("Zq7-secret%2Fpw") || text.contains("Zq7-secret")
}

/// URLs that do not parse, from a flag, `REDIS_URL` or the config file: the
/// refusal names the URL with its password masked.
#[test]
fn unparsable_urls_never_print_their_password() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("redis.toml");
    fs::write(
        &config,
        format!("[redis]\nurls = [\"redis://app:{PASSWORD}@h:abc\"]\n"),
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let bad_port = format!("redis://app:{PASSWORD}@h:abc");
    let bad_db = format!("redis://app:{PASSWORD}@h:6379/abc");
    let no_colon = format!("redis//app:{PASSWORD}@h");
    let space = format!("redis://app:{PASSWORD}@h st");
    let cases: Vec<(Vec<&str>, Env)> = vec![
        (vec!["--redis", &bad_port, "status", "x"], vec![]),
        (vec!["--redis", &bad_db, "status", "x"], vec![]),
        (vec!["--redis", &no_colon, "status", "x"], vec![]),
        (vec!["--redis", &space, "run", "x", "--", "true"], vec![]),
        (
            vec![
                "--redis",
                "redis://127.0.0.1:1",
                "--redis",
                &bad_port,
                "status",
                "x",
            ],
            vec![],
        ),
        (vec!["status", "x"], vec![("REDIS_URL", bad_port.as_str())]),
        (vec!["--config", config, "status", "x"], vec![]),
    ];
    for (args, env) in cases {
        let output = redlatch(&args, &env);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_ne!(code(output.status), 0, "{args:?}");
        assert!(
            !shows_password(&stderr),
            "{args:?} printed the password: {stderr}"
        );
        assert!(
            stderr.contains("app:***@h"),
            "{args:?} no masked URL: {stderr}"
        );
    }
}

/// `--redis-password-file`: the server is reached, and redlatch's command
/// line (what `ps` shows) holds the file's name, not the password.
#[test]
fn password_file_reaches_the_server_and_stays_out_of_ps() {
    let (_server, url) = protected();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("password");
    fs::write(&file, format!("{PASSWORD}\n")).unwrap();
    let argv = dir.path().join("argv");
    // The command is redlatch's child: its parent's cmdline is what ps shows.
    let script = format!("tr '\\0' ' ' < /proc/$PPID/cmdline > {}", q(&argv));
    let output = redlatch(
        &[
            "--redis",
            &url,
            "--redis-password-file",
            file.to_str().unwrap(),
            "run",
            "x",
            "--",
            "sh",
            "-c",
            &script,
        ],
        &[],
    );
    assert_eq!(code(output.status), 0);
    let argv = fs::read_to_string(&argv).unwrap();
    assert!(argv.contains("--redis-password-file"), "{argv}");
    assert!(!shows_password(&argv), "ps shows the password: {argv}");
}

/// `REDLATCH_REDIS_PASSWORD` reaches the server; a wrong one is refused
/// (exit 69) without being printed.
#[test]
fn password_variable_reaches_the_server_and_a_wrong_one_is_not_printed() {
    let (_server, url) = protected();
    let output = redlatch(
        &["--redis", &url, "status", "x"],
        &[("REDLATCH_REDIS_PASSWORD", PASSWORD)],
    );
    assert_eq!(code(output.status), 0);
    let wrong = "Wr0ng-secret";
    let output = redlatch(
        &["--redis", &url, "status", "x"],
        &[("REDLATCH_REDIS_PASSWORD", wrong)],
    );
    assert_eq!(code(output.status), 69);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains(wrong),
        "printed the wrong password: {stderr}"
    );
}

/// The command gets the lock and token, not `REDIS_URL` nor the password
/// variable that got redlatch in.
#[test]
fn the_command_gets_no_redis_credentials_in_its_environment() {
    let (_server, url) = protected();
    let dir = tempfile::tempdir().unwrap();
    let env_file = dir.path().join("env");
    let script = format!("env > {}", q(&env_file));
    let with_password = url.replace("redis://", "redis://:Zq7-secret%2Fpw@");
    for env in [
        vec![("REDIS_URL", with_password.as_str())],
        vec![
            ("REDIS_URL", url.as_str()),
            ("REDLATCH_REDIS_PASSWORD", PASSWORD),
        ],
    ] {
        let output = redlatch(&["run", "x", "--", "sh", "-c", &script], &env);
        assert_eq!(code(output.status), 0, "{env:?}");
        let seen = fs::read_to_string(&env_file).unwrap();
        assert!(seen.contains("REDLATCH_TOKEN="), "{seen}");
        assert!(!seen.contains("REDIS_URL="), "{env:?}: REDIS_URL passed on");
        assert!(
            !seen.contains("REDLATCH_REDIS_PASSWORD="),
            "{env:?}: the password variable passed on"
        );
        assert!(!shows_password(&seen), "{env:?}: the password passed on");
    }
}

/// A Sentinel group whose master wants a password: `REDLATCH_REDIS_PASSWORD`
/// is the master's (the Sentinels need none), and a lock runs there.
#[test]
fn password_variable_reaches_a_sentinel_groups_master() {
    let group = testkit::SentinelGroup::start_with(1, &RedisServer::builder().password(PASSWORD))
        .expect("sentinel group");
    let mut args: Vec<String> = Vec::new();
    for url in group.sentinel_urls() {
        args.extend(["--sentinel".to_owned(), url]);
    }
    args.extend(
        [
            "--sentinel-master",
            testkit::MASTER_NAME,
            "run",
            "x",
            "--",
            "true",
        ]
        .map(str::to_owned),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = redlatch(&args, &[("REDLATCH_REDIS_PASSWORD", PASSWORD)]);
    assert_eq!(code(output.status), 0);
    let without = redlatch(&args, &[]);
    assert_eq!(
        code(without.status),
        69,
        "the master let us in without a password"
    );
}
