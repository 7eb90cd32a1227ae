//! The lock scripts against data they cannot use and servers that refuse
//! them: one lock's fault is its own (the other locks of a coalesced call
//! get their own outcomes, nothing is written for the failing lock, and
//! nothing is left held that no guard owns); and a lease already set is
//! never shortened, whatever order requests run in.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redlatch::{Client, Error};
use tokio::task::JoinSet;

use crate::common;
use crate::support;

const ROUNDS: usize = 50;
/// Acquires of sound locks fired around the one with a fault, so that
/// the faulty one lands inside a coalesced batch, between others.
const NEIGHBOURS: usize = 12;

async fn cmd<T: redis::FromRedisValue>(admin: &mut MultiplexedConnection, args: &[&str]) -> T {
    let mut command = redis::cmd(args[0]);
    for arg in &args[1..] {
        command.arg(*arg);
    }
    command.query_async(admin).await.unwrap()
}

/// Holds left in the locks named `prefix*` once every background release landed.
async fn leaked(admin: &MultiplexedConnection, prefix: &str) -> i64 {
    common::settled(Duration::from_secs(5), || {
        let mut admin = admin.clone();
        async move { common::holds_left(&mut admin, prefix).await }
    })
    .await
}

/// Fires `NEIGHBOURS` anonymous acquires of `ok:{round}:*` with `odd` in
/// the middle; returns how many sound acquires failed and `odd`'s outcome.
async fn acquire_around<F>(client: &Client, round: usize, odd: F) -> (usize, Result<(), Error>)
where
    F: std::future::Future<Output = Result<redlatch::Guard, Error>> + Send + 'static,
{
    let mut sound = JoinSet::new();
    for i in 0..NEIGHBOURS / 2 {
        let lock = client.lock(format!("ok:{round}:{i}"));
        sound.spawn(async move { lock.acquire().await });
    }
    let odd = tokio::spawn(odd);
    for i in NEIGHBOURS / 2..NEIGHBOURS {
        let lock = client.lock(format!("ok:{round}:{i}"));
        sound.spawn(async move { lock.acquire().await });
    }
    let mut failed = 0;
    let mut guards = Vec::new();
    while let Some(outcome) = sound.join_next().await {
        match outcome.unwrap() {
            Ok(guard) => guards.push(guard),
            Err(error) => {
                eprintln!("a sound acquire failed: {error}");
                failed += 1;
            }
        }
    }
    let odd = odd.await.unwrap().map(drop);
    for guard in guards {
        guard.release().await.unwrap();
    }
    (failed, odd)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_hold_count_fails_only_its_own_acquire_in_a_batch_and_leaks_nothing() {
    let server = common::server();
    let client = common::client_at(&server.url(), Duration::from_secs(30)).await;
    let mut admin = common::admin(&server).await;
    let field = format!("{}:me", client.id());
    let (mut failed, mut wrong_type, mut other) = (0, 0, Vec::new());
    for round in 0..ROUNDS {
        let bad = format!("bad:{round}");
        let _: () = cmd(&mut admin, &["HSET", &bad, &field, "banana"]).await;
        let _: () = cmd(&mut admin, &["PEXPIRE", &bad, "60000"]).await;
        let lock = client.lock(bad.as_str()).with_owner("me");
        let (sound_failed, odd) =
            acquire_around(&client, round, async move { lock.acquire().await }).await;
        failed += sound_failed;
        match odd {
            Err(Error::WrongType { .. }) => wrong_type += 1,
            outcome => other.push(format!("{outcome:?}")),
        }
        // Nothing written for the failing lock.
        let count: String = cmd(&mut admin, &["HGET", &bad, &field]).await;
        assert_eq!(count, "banana", "round {round}");
    }
    let leaked = leaked(&admin, "ok:").await;
    assert_eq!(failed, 0, "sound acquires failed with the corrupt one");
    assert_eq!(leaked, 0, "holds left with no guard");
    assert_eq!(wrong_type, ROUNDS, "the corrupt lock's outcomes: {other:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_hold_count_fails_only_its_own_release_and_removes_the_hold() {
    let server = common::server();
    let client = common::client_at(&server.url(), Duration::from_secs(30)).await;
    let mut admin = common::admin(&server).await;
    let (mut failed, mut wrong_type, mut other) = (0, 0, Vec::new());
    for round in 0..ROUNDS {
        let mut guards = Vec::new();
        for i in 0..NEIGHBOURS {
            guards.push(
                client
                    .lock(format!("rel:{round}:{i}"))
                    .acquire()
                    .await
                    .unwrap(),
            );
        }
        let bad = &guards[NEIGHBOURS / 2];
        let (bad_key, bad_field) = (bad.key().to_owned(), bad.owner().to_owned());
        let _: () = cmd(&mut admin, &["HSET", &bad_key, &bad_field, "banana"]).await;
        let mut releases = JoinSet::new();
        for guard in guards {
            let key = guard.key().to_owned();
            releases.spawn(async move { (key, guard.release().await) });
        }
        while let Some(outcome) = releases.join_next().await {
            let (key, outcome) = outcome.unwrap();
            match (key == bad_key, outcome) {
                (true, Err(Error::WrongType { .. })) => wrong_type += 1,
                (true, outcome) => other.push(format!("{outcome:?}")),
                (false, Ok(())) => {}
                (false, Err(error)) => {
                    eprintln!("a sound release failed: {error}");
                    failed += 1;
                }
            }
        }
        // The hold that could not be counted is gone, and the lock with it.
        let exists: i64 = cmd(&mut admin, &["EXISTS", &bad_key]).await;
        assert_eq!(exists, 0, "round {round}: the corrupt hold was kept");
    }
    let leaked = leaked(&admin, "rel:").await;
    assert_eq!(failed, 0, "sound releases failed with the corrupt one");
    assert_eq!(leaked, 0, "holds left with no guard");
    assert_eq!(wrong_type, ROUNDS, "the corrupt lock's outcomes: {other:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_name_fails_only_its_own_acquire_in_a_batch() {
    let server = common::server();
    let mut admin = common::admin(&server).await;
    // May touch the locks named ok* (and their counters), nothing else.
    let _: () = cmd(
        &mut admin,
        &[
            "ACL",
            "SETUSER",
            "limited",
            "on",
            ">secret",
            "~ok*",
            "~redlatch_lock_token",
            "~redlatch_lock_precedence:{ok*",
            "allchannels",
            "+@all",
        ],
    )
    .await;
    let url = server
        .url()
        .replacen("redis://", "redis://limited:secret@", 1);
    let client = common::client_at(&url, Duration::from_secs(30)).await;
    let noperm = |outcome: &Result<(), Error>| matches!(outcome, Err(Error::Redis { source, .. }) if source.code() == Some("NOPERM"));
    // Alone, the forbidden name gets the server's NOPERM.
    let alone = client.lock("no:alone").acquire().await.map(drop);
    assert!(noperm(&alone), "alone: {alone:?}");
    let (mut failed, mut refused, mut other) = (0, 0, Vec::new());
    for round in 0..ROUNDS {
        let lock = client.lock(format!("no:{round}"));
        let (sound_failed, odd) =
            acquire_around(&client, round, async move { lock.acquire().await }).await;
        failed += sound_failed;
        if noperm(&odd) {
            refused += 1;
        } else {
            other.push(format!("{odd:?}"));
        }
    }
    let leaked = leaked(&admin, "ok:").await;
    let forbidden: Vec<String> = cmd(&mut admin, &["KEYS", "*no:*"]).await;
    assert_eq!(
        failed, 0,
        "permitted acquires failed with the forbidden one"
    );
    assert_eq!(leaked, 0, "holds left with no guard");
    assert!(forbidden.is_empty(), "written: {forbidden:?}");
    assert_eq!(refused, ROUNDS, "the forbidden name's outcomes: {other:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_negative_fencing_counter_is_refused_like_a_corrupt_one() {
    let server = common::server();
    let client = common::client_at(&server.url(), Duration::from_secs(30)).await;
    let mut admin = common::admin(&server).await;

    // Fresh acquisitions: plain, fair, read and write.
    let counter = "redlatch_lock_token".to_owned();
    for name in ["plain", "fair", "read", "write"] {
        let _: () = cmd(&mut admin, &["SET", &counter, "-5"]).await;
        let outcome = match name {
            "plain" => client.lock(name).acquire().await.map(|guard| guard.token()),
            "fair" => client
                .fair_lock(name)
                .acquire()
                .await
                .map(|guard| guard.token()),
            "read" => client
                .read_write_lock(name)
                .read()
                .await
                .map(|guard| guard.token()),
            _ => client
                .read_write_lock(name)
                .write()
                .await
                .map(|guard| guard.token()),
        };
        assert!(
            matches!(outcome, Err(Error::WrongType { .. })),
            "{name}: {outcome:?}"
        );
        let value: String = cmd(&mut admin, &["GET", &counter]).await;
        assert_eq!(value, "-5", "{name}: the counter was written");
        let written: Vec<String> = cmd(&mut admin, &["KEYS", &format!("*{name}*")]).await;
        assert!(written.is_empty(), "{name}: {written:?} was written");
    }
    let _: () = cmd(&mut admin, &["DEL", &counter]).await;

    // A re-entry reads its hold's token: a negative one is refused too.
    let lock = client.lock("again").with_owner("me");
    let guard = lock.acquire().await.unwrap();
    let _: () = cmd(&mut admin, &["HSET", "again", "redlatch_token", "-5"]).await;
    let outcome = lock.acquire().await.map(|guard| guard.token());
    assert!(
        matches!(outcome, Err(Error::WrongType { .. })),
        "{outcome:?}"
    );
    let count: String = cmd(&mut admin, &["HGET", "again", guard.owner()]).await;
    assert_eq!(count, "1", "the re-entry was written");
    guard.release().await.unwrap();
}

/// PTTL of `key` once set longer (60 s) than any lease the test's
/// requests carry, as if a request sent later with a longer lease had run
/// first.
async fn lengthened(admin: &mut MultiplexedConnection, key: &str) {
    let _: () = cmd(admin, &["PEXPIRE", key, "60000"]).await;
}

async fn kept(server: &testkit::RedisServer, key: &str, what: &str) {
    let left = support::pttl(server, key).await;
    assert!(left > 45_000, "{what} shortened the lease to {left} ms");
}

/// The lease rule has two forms (functions use `PEXPIRE GT`, EVALSHA
/// reads the TTL first): both lengthen, neither shortens, and both give a
/// key with no expiry the lease (where `GT` alone would leave it forever).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_forms_of_the_lease_rule_lengthen_never_shorten_and_bound_a_key_without_expiry() {
    let server = common::server();
    let functions = common::client_at(&server.url(), Duration::from_secs(3)).await;
    let evalsha = common::evalsha_client_at(&server.url(), Duration::from_secs(3)).await;
    let mut admin = common::admin(&server).await;
    for (route, client) in [("functions", &functions), ("EVALSHA", &evalsha)] {
        let key = format!("lease-{route}");
        let lock = client.lock(key.as_str()).with_owner("me");
        let outer = lock
            .clone()
            .with_lease(Duration::from_secs(1))
            .acquire()
            .await
            .unwrap();
        // Lengthened by a re-entry with a longer lease.
        let longer = lock
            .clone()
            .with_lease(Duration::from_secs(20))
            .acquire()
            .await
            .unwrap();
        let left = support::pttl(&server, &key).await;
        assert!(
            (15_000..=20_000).contains(&left),
            "{route}: lengthened to {left} ms"
        );
        // Never shortened by one with a shorter lease.
        let shorter = lock
            .clone()
            .with_lease(Duration::from_secs(1))
            .acquire()
            .await
            .unwrap();
        let left = support::pttl(&server, &key).await;
        assert!(left > 15_000, "{route}: shortened to {left} ms");
        // A key with no expiry (PERSIST by hand) gets the lease back.
        let _: i64 = cmd(&mut admin, &["PERSIST", &key]).await;
        let bounded = lock
            .clone()
            .with_lease(Duration::from_secs(2))
            .acquire()
            .await
            .unwrap();
        let left = support::pttl(&server, &key).await;
        assert!(
            (1..=2_000).contains(&left),
            "{route}: a key without expiry kept {left} ms"
        );
        for guard in [bounded, shorter, longer, outer] {
            guard.release().await.unwrap();
        }
    }
    assert!(functions.capabilities().functions.is_available() || !server_has_functions(&functions));
}

fn server_has_functions(client: &Client) -> bool {
    client
        .capabilities()
        .server
        .as_ref()
        .is_some_and(|server| server.version.0 >= 7)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shorter_lease_never_shortens_the_plain_lock() {
    let server = common::server();
    let client = common::client_at(&server.url(), Duration::from_secs(3)).await;
    let mut admin = common::admin(&server).await;
    let lock = client.lock("plain").with_owner("me");

    // Re-entry and release of the re-entry, both with a 1 s lease.
    let outer = lock
        .clone()
        .with_lease(Duration::from_secs(1))
        .acquire()
        .await
        .unwrap();
    lengthened(&mut admin, "plain").await;
    let inner = lock
        .clone()
        .with_lease(Duration::from_secs(1))
        .acquire()
        .await
        .unwrap();
    kept(&server, "plain", "a re-entry").await;
    let inner_reentered = outer.reenter().await.unwrap();
    kept(&server, "plain", "a guard's re-entry").await;
    inner_reentered.release().await.unwrap();
    kept(&server, "plain", "a release that leaves holds").await;
    inner.release().await.unwrap();
    kept(&server, "plain", "a release that leaves holds").await;
    outer.release().await.unwrap();

    // Renewal: the watchdog's 3 s lease.
    let guard = client.lock("renewed").acquire().await.unwrap();
    lengthened(&mut admin, "renewed").await;
    let before = client.renewal_round_trips();
    let renewed = common::eventually(Duration::from_secs(5), || {
        let renewed = client.renewal_round_trips() > before + 1;
        async move { renewed }
    })
    .await;
    assert!(renewed, "no renewal in 5 s");
    kept(&server, "renewed", "a renewal").await;
    assert!(guard.is_held());
    guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shorter_lease_never_shortens_the_fair_lock() {
    let server = common::server();
    let client = common::client_at(&server.url(), Duration::from_secs(3)).await;
    let mut admin = common::admin(&server).await;
    let lock = client
        .fair_lock("fair")
        .with_owner("me")
        .with_lease(Duration::from_secs(1));
    let outer = lock.acquire().await.unwrap();
    lengthened(&mut admin, "fair").await;
    let inner = lock.acquire().await.unwrap();
    kept(&server, "fair", "a re-entry").await;
    let again = outer.reenter().await.unwrap();
    kept(&server, "fair", "a guard's re-entry").await;
    again.release().await.unwrap();
    kept(&server, "fair", "a release that leaves holds").await;
    inner.release().await.unwrap();
    kept(&server, "fair", "a release that leaves holds").await;
    outer.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shorter_lease_never_shortens_the_read_write_lock() {
    let server = common::server();
    let client = common::client_at(&server.url(), Duration::from_secs(3)).await;
    let mut admin = common::admin(&server).await;
    let lock = client
        .read_write_lock("rw")
        .with_owner("me")
        .with_lease(Duration::from_secs(1));

    let writer = lock.write().await.unwrap();
    lengthened(&mut admin, "rw").await;
    let again = writer.reenter().await.unwrap();
    kept(&server, "rw", "a write re-entry").await;
    again.release().await.unwrap();
    kept(&server, "rw", "a write release that leaves holds").await;
    writer.release().await.unwrap();

    let reader = lock.read().await.unwrap();
    lengthened(&mut admin, "rw").await;
    let again = reader.reenter().await.unwrap();
    kept(&server, "rw", "a read re-entry").await;
    again.release().await.unwrap();
    kept(&server, "rw", "a read release that leaves holds").await;
    reader.release().await.unwrap();

    // Renewal of a read hold: the hash and the hold's timeout key.
    let reader = client.read_write_lock("renewed").read().await.unwrap();
    let timeouts: Vec<String> = cmd(&mut admin, &["KEYS", "{renewed}:*rwlock_timeout*"]).await;
    assert_eq!(timeouts.len(), 1, "{timeouts:?}");
    lengthened(&mut admin, "renewed").await;
    lengthened(&mut admin, &timeouts[0]).await;
    let before = client.renewal_round_trips();
    let renewed = common::eventually(Duration::from_secs(5), || {
        let renewed = client.renewal_round_trips() > before + 1;
        async move { renewed }
    })
    .await;
    assert!(renewed, "no renewal in 5 s");
    kept(&server, "renewed", "a read renewal").await;
    kept(&server, &timeouts[0], "a read renewal").await;
    assert!(reader.is_held());
    reader.release().await.unwrap();
}

/// What a lock's keys hold before a batch: sound, or one of the faults a
/// script meets in the wild (another owner, a corrupt hold count, keys of
/// another type, counters `INCR` refuses or must not raise).
const SETUPS: &[&[&[&str]]] = &[
    &[],
    &[&["HSET", "L", "other", "1"], &["PEXPIRE", "L", "60000"]],
    &[
        &["HSET", "L", "me", "1"],
        &["PEXPIRE", "L", "60000"],
        &["SET", "C", "5"],
    ],
    &[
        &["HSET", "L", "me", "3"],
        &["PEXPIRE", "L", "60000"],
        &["SET", "C", "5"],
    ],
    &[&["HSET", "L", "me", "banana"], &["PEXPIRE", "L", "60000"]],
    &[&["SET", "L", "x"]],
    &[&["SET", "C", "x"]],
    &[&["SET", "C", "-3"]],
    &[&["SET", "C", "9223372036854775807"]],
    &[&["HSET", "C", "a", "1"]],
    &[
        &["HSET", "L", "me", "1"],
        &["PEXPIRE", "L", "60000"],
        &["HSET", "C", "a", "1"],
    ],
    // A longer waiter's claim to the next turn: a free lock refuses "me".
    &[&["SET", "P", "1:other", "PX", "60000"]],
    // "me"'s own claim: taken out when "me" takes the lock.
    &[&["SET", "P", "1:me", "PX", "60000"]],
    // A claim does not stop its holder's re-entry.
    &[
        &["HSET", "L", "me", "1"],
        &["PEXPIRE", "L", "60000"],
        &["SET", "P", "1:other", "PX", "60000"],
    ],
    // A claim key of another type is no claim, and no fault of the lock.
    &[&["HSET", "P", "a", "1"]],
    &[&["SET", "P", "banana"]],
];

/// Writes setup `setup` into lock key `lock` and counter key `counter`.
async fn set_up(admin: &mut MultiplexedConnection, setup: usize, lock: &str, counter: &str) {
    let precedence = precedence_of(lock);
    // A counter the setup leaves absent exists: an absent one starts at the
    // server's time, which differs between the batch and the lone calls.
    if !SETUPS[setup].iter().any(|command| command.contains(&"C")) {
        let _: redis::Value = cmd(admin, &["SET", counter, "1"]).await;
    }
    for command in SETUPS[setup] {
        let args: Vec<&str> = command
            .iter()
            .map(|arg| match *arg {
                "L" => lock,
                "C" => counter,
                "P" => precedence.as_str(),
                other => other,
            })
            .collect();
        let _: redis::Value = cmd(admin, &args).await;
    }
}

/// The precedence claim's key of lock key `lock`.
fn precedence_of(lock: &str) -> String {
    format!("redlatch_lock_precedence:{{{lock}}}")
}

/// What a key holds, comparable across names: its type, its value, and
/// whether it expires.
async fn contents(admin: &mut MultiplexedConnection, key: &str) -> (String, Vec<String>, bool) {
    let kind: String = redis::cmd("TYPE")
        .arg(key)
        .query_async(admin)
        .await
        .unwrap();
    let mut value: Vec<String> = match kind.as_str() {
        "hash" => cmd(admin, &["HGETALL", key]).await,
        "string" => vec![cmd(admin, &["GET", key]).await],
        _ => Vec::new(),
    };
    value.sort();
    let pttl: i64 = cmd(admin, &["PTTL", key]).await;
    (kind, value, pttl > 0)
}

/// A lock's outcome, comparable across names: the code, and the value
/// where it does not depend on timing (not a busy lock's PTTL).
fn comparable(outcome: &[redis::Value]) -> (i64, Option<redis::Value>) {
    let code = match &outcome[0] {
        redis::Value::Int(code) => *code,
        other => panic!("a lock's code is {other:?}"),
    };
    (code, (code != 0).then(|| outcome[1].clone()))
}

/// Runs `script` over the locks `locks` (each `(lock key, counter key)`)
/// in one call; `args` gives each lock's keys and arguments.
async fn run_script(
    admin: &mut MultiplexedConnection,
    script: &redis::Script,
    locks: &[(String, String)],
    args: impl Fn(&(String, String)) -> (Vec<String>, Vec<String>),
    tail: &[&str],
) -> Vec<(i64, Option<redis::Value>)> {
    let mut invocation = script.prepare_invoke();
    for lock in locks {
        let (keys, argv) = args(lock);
        for key in keys {
            invocation.key(key);
        }
        for arg in argv {
            invocation.arg(arg);
        }
    }
    for arg in tail {
        invocation.arg(*arg);
    }
    let out: Vec<redis::Value> = invocation.invoke_async(admin).await.unwrap();
    out.chunks(2).map(comparable).collect()
}

/// One pcall covers a run of a batch's locks (`each_lock` in
/// scripts/lib/checks.lua), so a batch must answer and write, lock by lock,
/// exactly what each lock sent alone would: random batches of locks with
/// random faults (errors raised mid-batch included), acquired and then
/// released, against the same locks one call each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_answers_and_writes_for_each_lock_what_the_lock_alone_would() {
    let server = common::server();
    let mut admin = common::admin(&server).await;
    let (acquire, release) = redlatch::Lock::script_sources();
    let (acquire, release) = (redis::Script::new(acquire), redis::Script::new(release));
    let mut rng = common::Rng::from_env();
    let acquire_args = |(lock, counter): &(String, String)| {
        (
            vec![lock.clone(), counter.clone(), precedence_of(lock)],
            vec!["30000".to_owned(), "me".to_owned(), "0".to_owned()],
        )
    };
    let release_args = |(lock, _): &(String, String)| {
        (
            vec![lock.clone()],
            vec![format!("ch:{lock}"), "30000".to_owned(), "me".to_owned()],
        )
    };
    for case in 0..ROUNDS {
        let size = 1 + rng.below(10) as usize;
        let setups: Vec<usize> = (0..size)
            .map(|_| rng.below(SETUPS.len() as u64) as usize)
            .collect();
        let names = |side: &str| -> Vec<(String, String)> {
            (0..size)
                .map(|i| {
                    let lock = format!("batch:{case}:{side}:{i}");
                    let counter = format!("redisson_lock_token:{{{lock}}}");
                    (lock, counter)
                })
                .collect()
        };
        let (batch, alone) = (names("batch"), names("alone"));
        for ((setup, b), a) in setups.iter().zip(&batch).zip(&alone) {
            set_up(&mut admin, *setup, &b.0, &b.1).await;
            set_up(&mut admin, *setup, &a.0, &a.1).await;
        }
        for (what, script, args, tail) in [
            (
                "acquire",
                &acquire,
                &acquire_args as &dyn Fn(&_) -> _,
                // A refused claim is cut to a come-now window: 30 s, not
                // the library's 200 ms, so that a loaded machine's delay
                // between the batch and the lone calls never lets one
                // side's claim lapse before the two are compared.
                &["1000", "30000"][..],
            ),
            ("release", &release, &release_args, &["publish"][..]),
        ] {
            let together = run_script(&mut admin, script, &batch, args, tail).await;
            let mut one_by_one = Vec::new();
            for lock in &alone {
                let mut outcome =
                    run_script(&mut admin, script, std::slice::from_ref(lock), args, tail).await;
                one_by_one.push(outcome.remove(0));
            }
            assert_eq!(
                together, one_by_one,
                "case {case}, {what} of setups {setups:?}: a batch answered otherwise than its locks alone"
            );
            for (b, a) in batch.iter().zip(&alone) {
                let claims = (precedence_of(&b.0), precedence_of(&a.0));
                for (key_b, key_a) in [(&b.0, &a.0), (&b.1, &a.1), (&claims.0, &claims.1)] {
                    assert_eq!(
                        contents(&mut admin, key_b).await,
                        contents(&mut admin, key_a).await,
                        "case {case}, {what} of setups {setups:?}: {key_b} differs from {key_a}"
                    );
                }
            }
        }
    }
}

/// The commands the server ran since `CONFIG RESETSTAT`, by name, with
/// how many times each, leaving out the test's own (`EVALSHA`, `CONFIG`,
/// `INFO`).
async fn commands_called(admin: &mut MultiplexedConnection) -> Vec<(String, u64)> {
    let info: String = cmd(admin, &["INFO", "commandstats"]).await;
    let mut called: Vec<(String, u64)> = info
        .lines()
        .filter_map(|line| {
            let (name, fields) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = fields
                .strip_prefix("calls=")?
                .split(',')
                .next()?
                .parse()
                .ok()?;
            let own = ["evalsha", "config", "info"]
                .iter()
                .any(|command| name.starts_with(command));
            (!own).then(|| (name.to_owned(), calls))
        })
        .collect();
    called.sort();
    called
}

/// The uncontended cycle's cost on the server (issue 36): a free lock
/// nobody claimed is taken with EXISTS (the lock and its claim in one
/// call), INCR, HSET and PEXPIRE, and released with HMGET (the owner's
/// count and a waiter's mark) and DEL: no PUBLISH, since no waiter marked
/// the hold. Each command a script calls has a fixed cost well above the
/// command's own work; before, every fresh acquire also checked the lock's
/// TYPE and read its claim (GET), and every release published: 8 commands
/// per lock, then 7, 6 now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncontended_cycle_calls_six_commands_per_lock() {
    let server = common::server();
    let mut admin = common::admin(&server).await;
    let (acquire, release) = redlatch::Lock::script_sources();
    let (acquire, release) = (redis::Script::new(acquire), redis::Script::new(release));
    let _: String = acquire
        .prepare_invoke()
        .load_async(&mut admin)
        .await
        .unwrap();
    let _: String = release
        .prepare_invoke()
        .load_async(&mut admin)
        .await
        .unwrap();
    let locks: Vec<(String, String)> = (0..3)
        .map(|i| {
            let lock = format!("cycle:{i}");
            let counter = format!("redisson_lock_token:{{{lock}}}");
            (lock, counter)
        })
        .collect();
    let acquire_args = |(lock, counter): &(String, String)| {
        (
            vec![lock.clone(), counter.clone(), precedence_of(lock)],
            vec!["30000".to_owned(), "me".to_owned(), "0".to_owned()],
        )
    };
    let release_args = |(lock, _): &(String, String)| {
        (
            vec![lock.clone()],
            vec![format!("ch:{lock}"), "30000".to_owned(), "me".to_owned()],
        )
    };
    // Counters that exist: a counter's first INCR starts it at the
    // server's time instead (TIME and SET, once per counter's life).
    for (_, counter) in &locks {
        let _: () = cmd(&mut admin, &["SET", counter, "5"]).await;
    }
    let _: () = cmd(&mut admin, &["CONFIG", "RESETSTAT"]).await;
    let acquired = run_script(&mut admin, &acquire, &locks, acquire_args, &["1000", "200"]).await;
    let released = run_script(&mut admin, &release, &locks, release_args, &["publish"]).await;
    assert_eq!(acquired, vec![(1, Some(redis::Value::Int(6))); 3]);
    assert_eq!(released, vec![(1, Some(redis::Value::Int(0))); 3]);
    let per_lock = |name: &str| (name.to_owned(), 3);
    assert_eq!(
        commands_called(&mut admin).await,
        ["del", "exists", "hmget", "hset", "incr", "pexpire"].map(per_lock),
        "the commands an uncontended cycle of three locks called"
    );
}
