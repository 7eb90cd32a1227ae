//! The try-sets now share `scripts/lib/set_once.lua`, so the function
//! library's content and name changed. A server may still hold the library
//! of a redlatch from before (its try-sets written out in full): both
//! libraries live side by side, and the old try-sets and the new ones give
//! the same replies, messages and keys on the same data, but where the
//! semaphore's try-set now refuses a count its acquire refuses (a value
//! that is not a decimal 64-bit integer: the old one read it with
//! `tonumber` and answered "already set").

use std::time::Duration;

use futures_util::StreamExt;
use redis::AsyncCommands;

use crate::common;

/// The library of a redlatch from before: the same as the new one but for
/// the try-sets' bodies (as they were before `set_once`), under a name of its own.
const OLD_NAME: &str = "redlatch_0ld0000000000";

const OLD_SEMAPHORE_TRY_SET: &str = "local publish = ARGV[3] or 'publish'
local kind = redis.call('type', KEYS[1]).ok
if kind ~= 'none' then
  if kind ~= 'string' or not tonumber(redis.call('get', KEYS[1])) then
    return -1
  end
  return 0
end
redis.call('set', KEYS[1], ARGV[2])
redis.call(publish, ARGV[1], ARGV[2])
return 1";

const OLD_LATCH_TRY_SET: &str = "local publish = ARGV[3] or 'publish'
local kind = redis.call('type', KEYS[1]).ok
if kind ~= 'none' then
  if kind ~= 'string' or not integer(redis.call('get', KEYS[1])) then
    return -1
  end
  return 0
end
redis.call('set', KEYS[1], ARGV[2])
redis.call(publish, ARGV[1], 1)
return 1";

fn text(value: &redis::Value) -> Option<String> {
    match value {
        redis::Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        redis::Value::SimpleString(text) => Some(text.clone()),
        _ => None,
    }
}

/// The (name, code) of every library on the server.
async fn libraries(admin: &mut redis::aio::MultiplexedConnection) -> Vec<(String, String)> {
    let reply: redis::Value = redis::cmd("FUNCTION")
        .arg("LIST")
        .arg("WITHCODE")
        .query_async(admin)
        .await
        .unwrap();
    let redis::Value::Array(libraries) = reply else {
        panic!("FUNCTION LIST answered {reply:?}");
    };
    libraries
        .iter()
        .map(|library| {
            let pairs: Vec<(String, redis::Value)> = match library {
                redis::Value::Array(flat) => flat
                    .chunks(2)
                    .map(|pair| (text(&pair[0]).unwrap(), pair[1].clone()))
                    .collect(),
                redis::Value::Map(map) => map
                    .iter()
                    .map(|(key, value)| (text(key).unwrap(), value.clone()))
                    .collect(),
                other => panic!("a library as {other:?}"),
            };
            let field = |name: &str| {
                let found = pairs.iter().find(|(key, _)| key == name);
                text(&found.expect(name).1).unwrap()
            };
            (field("library_name"), field("library_code"))
        })
        .collect()
}

/// Loads the old library beside the new one (which a client loaded): the
/// new one's code with the try-sets' bodies of before, renamed. Returns the
/// new library's name.
async fn load_old_beside(admin: &mut redis::aio::MultiplexedConnection) -> String {
    let found = libraries(admin).await;
    assert_eq!(
        found.len(),
        1,
        "{:?}",
        found.iter().map(|l| &l.0).collect::<Vec<_>>()
    );
    let (name, code) = &found[0];
    let mut old = code.replace(name.as_str(), OLD_NAME);
    for (new_body, old_body) in [
        (
            "return set_once(KEYS[1], ARGV[2], ARGV[1], ARGV[2], ARGV[3], integer)",
            OLD_SEMAPHORE_TRY_SET,
        ),
        (
            "return set_once(KEYS[1], ARGV[2], ARGV[1], 1, ARGV[3], integer)",
            OLD_LATCH_TRY_SET,
        ),
    ] {
        // The plain function and its re-send-safe form.
        assert_eq!(old.matches(new_body).count(), 2, "{new_body}");
        old = old.replace(new_body, old_body);
    }
    let loaded: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(old)
        .query_async(admin)
        .await
        .unwrap();
    assert_eq!(loaded, OLD_NAME);
    name.clone()
}

/// FCALL of `library`'s `function` on one key: its reply.
async fn fcall(
    admin: &mut redis::aio::MultiplexedConnection,
    library: &str,
    function: &str,
    key: &str,
    args: &[&str],
) -> redis::Value {
    redis::cmd("FCALL")
        .arg(format!("{library}_{function}"))
        .arg(1)
        .arg(key)
        .arg(args)
        .query_async(admin)
        .await
        .unwrap()
}

/// What a key holds: its type and, for a string, its value.
async fn held(
    admin: &mut redis::aio::MultiplexedConnection,
    key: &str,
) -> (String, Option<String>) {
    let kind: String = redis::cmd("TYPE")
        .arg(key)
        .query_async(admin)
        .await
        .unwrap();
    let value = if kind == "string" {
        Some(admin.get(key).await.unwrap())
    } else {
        None
    };
    (kind, value)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_old_try_sets_and_the_new_answer_alike_side_by_side_but_on_counts_the_acquire_refuses()
{
    let server = common::server();
    let client = common::client(&server).await; // loads the new library
    let mut admin = common::admin(&server).await;
    let new = load_old_beside(&mut admin).await;
    let mut pubsub = server.client().get_async_pubsub().await.unwrap();
    pubsub.psubscribe("channel:*").await.unwrap();
    let mut messages = pubsub.into_on_message();
    // Every kind of data a key may hold, each set up twice: once for each library.
    let setups: [(&str, Option<&str>); 13] = [
        ("absent", None),
        ("zero", Some("0")),
        ("count", Some("3")),
        ("negative", Some("-2")),
        ("fraction", Some("1.5")),
        ("padded", Some(" 3")),
        ("hex", Some("0x10")),
        ("exponent", Some("1e3")),
        ("huge", Some("99999999999999999999")),
        ("top", Some("9223372036854775807")),
        ("empty", Some("")),
        ("text", Some("ten")),
        ("hash", None),
    ];
    let mut differences = Vec::new();
    for function in ["semaphore_try_set", "latch_try_set"] {
        for (what, value) in setups {
            let mut outcomes = Vec::new();
            for library in [OLD_NAME, new.as_str()] {
                let key = format!("{function}:{what}:{library}");
                if what == "hash" {
                    let () = admin.hset(&key, "f", 1).await.unwrap();
                } else if let Some(value) = value {
                    let () = admin.set(&key, value).await.unwrap();
                }
                let channel = format!("channel:{key}");
                let reply = fcall(
                    &mut admin,
                    library,
                    function,
                    &key,
                    &[&channel, "7", "publish"],
                )
                .await;
                let message = if reply == redis::Value::Int(1) {
                    let message = tokio::time::timeout(Duration::from_secs(5), messages.next())
                        .await
                        .expect("the set's message")
                        .unwrap();
                    assert_eq!(message.get_channel_name(), channel);
                    Some(message.get_payload::<String>().unwrap())
                } else {
                    None
                };
                outcomes.push((reply, message, held(&mut admin, &key).await));
            }
            if outcomes[0] != outcomes[1] {
                differences.push(format!(
                    "{function} on {what}: old {:?}, new {:?}",
                    outcomes[0], outcomes[1]
                ));
            }
        }
    }
    // The one change: the semaphore's try-set refuses (-1, key left alone)
    // the values its acquire refuses, where the old one answered 0.
    let refused_now = ["fraction", "padded", "hex", "exponent", "huge"];
    let expected: Vec<String> = refused_now
        .iter()
        .map(|what| {
            let value = setups.iter().find(|s| s.0 == *what).unwrap().1.unwrap();
            let kept = ("string".to_owned(), Some(value.to_owned()));
            format!(
                "semaphore_try_set on {what}: old {:?}, new {:?}",
                (redis::Value::Int(0), None::<String>, kept.clone()),
                (redis::Value::Int(-1), None::<String>, kept)
            )
        })
        .collect();
    assert_eq!(differences, expected);
    // The client still calls its own library, the old one beside it.
    let latch = client.count_down_latch("side-by-side");
    assert!(latch.try_set_count(2).await.unwrap());
    assert_eq!(
        fcall(
            &mut admin,
            OLD_NAME,
            "latch_try_set",
            "side-by-side",
            &["c", "9"]
        )
        .await,
        redis::Value::Int(0)
    );
    assert_eq!(latch.count_down().await.unwrap(), 1);
    // A client that connects now loads nothing and finds both.
    let other = common::client(&server).await;
    assert_eq!(
        other
            .semaphore("side-pool")
            .available_permits()
            .await
            .unwrap(),
        0
    );
    let names: Vec<String> = libraries(&mut admin)
        .await
        .into_iter()
        .map(|l| l.0)
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    // Both flushed: the new client loads its own again, not the old one.
    let () = redis::cmd("FUNCTION")
        .arg("FLUSH")
        .query_async(&mut admin)
        .await
        .unwrap();
    assert_eq!(latch.count_down().await.unwrap(), 0);
    let names: Vec<String> = libraries(&mut admin)
        .await
        .into_iter()
        .map(|l| l.0)
        .collect();
    assert_eq!(names, [new]);
}
