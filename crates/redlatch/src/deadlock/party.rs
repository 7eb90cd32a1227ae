//! Parties and where their wait-for edges live: the key layout of deadlock
//! detection (docs/REDIS-DATA.md, "Wait-for edges").
//!
//! A party is derived from an owner field alone, so that the holders read
//! from a lock hash name their parties with no table in any client, and
//! the uncontended path needs no write. `deadlock/deadlock_check.lua`
//! applies the same rules (`party_of` there); the tests below pin both to
//! one table of cases.

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// What every wait-for edge key starts with, after the client's key prefix.
pub const WAIT_KEY_PREFIX: &str = "redlatch_wait:";

/// The longest a wait-for edge lives, however long its waiter's wait: a
/// waiter that dies (a process killed) leaves its edge this long at most,
/// so a wait-for cycle through a dead waiter refuses nobody past it. A
/// waiter that checks parks a little less at most, then attempts and
/// checks again, rewriting its edge.
pub const MAX_EDGE_LIFE: Duration = Duration::from_secs(3);

/// The key of `party`'s wait-for edge: a string naming the lock key it
/// waits for, with an expiry tied to its wait.
///
/// On one server (`tag` `None`): `PREFIX redlatch_wait:<party>`. On a
/// Redis Cluster, where a script reaches one slot only, the edge lives in
/// the slot of the lock it waits for: `PREFIX redlatch_wait:{<tag>}:<party>`,
/// `tag` being that lock key's hash tag (a lock key without one is not
/// checked on a cluster).
pub fn wait_key(key_prefix: &str, party: &str, tag: Option<&str>) -> String {
    match tag {
        Some(tag) => format!("{key_prefix}{WAIT_KEY_PREFIX}{{{tag}}}:{party}"),
        None => format!("{key_prefix}{WAIT_KEY_PREFIX}{party}"),
    }
}

/// The party a wait-for edge's key names, the client's key prefix taken
/// off: the inverse of [`wait_key`]; `None` for a key of another layout.
/// (A hash tag holds no `}`, so the first `}:` of a tagged key ends it.)
pub(crate) fn party_of_wait_key(key: &str) -> Option<&str> {
    let rest = key.strip_prefix(WAIT_KEY_PREFIX)?;
    let party = match rest.strip_prefix('{') {
        Some(tagged) => tagged.split_once("}:")?.1,
        None => rest,
    };
    (!party.is_empty()).then_some(party)
}

/// The party an owner field belongs to: the holds and waits that count as
/// one in a wait-for cycle.
///
/// - A named owner (`<client-id>:<name>`, [`Lock::with_owner`](crate::Lock::with_owner)):
///   `n:<name>`, the same in every client, so one name across processes is
///   one party (a `redlatch run` job is the named owner `job:<id>`, and the
///   runs it starts take its name).
/// - An anonymous owner written inside a tokio task
///   (`<client-id>:#<n>@<task-id>`): `<client-id>@<task-id>`, every hold
///   and wait of one client in one task. Outside a task (a blocking
///   facade's caller, a thread of its own): `<client-id>@t<k>`, `k` a
///   number per thread of the process.
/// - Anything else is a party of its own, the field itself: an anonymous
///   owner with no task (older clients, Redlock's), a name of digits only
///   (Redisson writes `<client-id>:<thread-id>`: a thread of a JVM, not
///   the same name elsewhere), a field that is not an owner.
///
/// A read-write lock's writer field (`…:write`) is its owner's party.
pub fn party_of(owner_field: &str) -> String {
    let field = owner_field.strip_suffix(":write").unwrap_or(owner_field);
    if !crate::scripts::holder_keys::looks_like_owner(field) {
        return owner_field.to_owned();
    }
    let (client, rest) = (&field[..36], &field[37..]);
    if let Some(anonymous) = rest.strip_prefix('#') {
        return match anonymous.split_once('@') {
            Some((_, tail)) if !tail.is_empty() => format!("{client}@{tail}"),
            _ => field.to_owned(),
        };
    }
    if rest.bytes().all(|b| b.is_ascii_digit()) {
        return field.to_owned();
    }
    format!("n:{rest}")
}

/// What follows an anonymous owner's number, `@<task-id>` or `@t<k>`: the
/// caller's party within its client, written into the owner field. A
/// blocking facade's call runs in a task of its own, made per call: it
/// counts for the thread that called ([`on_caller_thread`]).
pub(crate) fn anonymous_suffix() -> Suffix {
    if let Ok(k) = CALLER_THREAD.try_with(|k| *k) {
        return Suffix::Thread(k);
    }
    match tokio::task::try_id() {
        Some(id) => Suffix::Task(task_number(id)),
        None => Suffix::Thread(thread_number()),
    }
}

/// A task id's number (tokio shows it, and keeps it to itself otherwise):
/// written on the stack, read back, so an acquire allocates nothing more.
fn task_number(id: tokio::task::Id) -> u64 {
    use std::io::Write;
    let mut buf = [0u8; 24];
    let mut cursor = std::io::Cursor::new(&mut buf[..]);
    if write!(cursor, "{id}").is_err() {
        return 0;
    }
    let len = usize::try_from(cursor.position()).unwrap_or(0);
    std::str::from_utf8(&buf[..len])
        .ok()
        .and_then(|digits| digits.parse().ok())
        .unwrap_or(0)
}

tokio::task_local! {
    /// The number of the thread a blocking call came from.
    static CALLER_THREAD: u32;
}

/// `call`, its acquires counting for the calling thread (the blocking
/// facade runs each call in a task of its own).
#[cfg(feature = "blocking")]
pub(crate) fn on_caller_thread<F: std::future::Future>(
    call: F,
) -> impl std::future::Future<Output = F::Output> {
    CALLER_THREAD.scope(thread_number(), call)
}

/// An anonymous owner's suffix: its task or thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Suffix {
    /// A tokio task's id.
    Task(u64),
    /// A thread's number ([`thread_number`]).
    Thread(u32),
}

impl std::fmt::Display for Suffix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Suffix::Task(id) => write!(f, "@{id}"),
            Suffix::Thread(k) => write!(f, "@t{k}"),
        }
    }
}

/// A number per thread of the process, given at its first acquire and
/// kept for its life (std's thread ids have no stable number).
fn thread_number() -> u32 {
    static NEXT: AtomicU32 = AtomicU32::new(1);
    thread_local! {
        static MINE: Cell<u32> = const { Cell::new(0) };
    }
    MINE.with(|mine| {
        if mine.get() == 0 {
            mine.set(NEXT.fetch_add(1, Ordering::Relaxed));
        }
        mine.get()
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    const ID: &str = "3f0e6c1a-8a52-4cf1-9e0b-4c1b9d7a2e11";

    #[test]
    fn a_wait_key_gives_back_its_party_with_or_without_a_tag() {
        for party in ["n:job:7", &format!("{ID}@12"), "n:{odd}:name"] {
            for tag in [None, Some("orders"), Some("a:b")] {
                let key = wait_key("", party, tag);
                assert_eq!(party_of_wait_key(&key), Some(party), "{key}");
            }
        }
        assert_eq!(party_of_wait_key("lock:1"), None);
        assert_eq!(party_of_wait_key(WAIT_KEY_PREFIX), None);
        assert_eq!(party_of_wait_key("redlatch_wait:{tag-without-end"), None);
    }

    /// Owner field → party: the table `deadlock_check.lua` is checked
    /// against too (trust::deadlock).
    pub(crate) fn cases() -> Vec<(String, String)> {
        vec![
            (format!("{ID}:#7@42"), format!("{ID}@42")),
            (format!("{ID}:#7@42:write"), format!("{ID}@42")),
            (format!("{ID}:#0@t3"), format!("{ID}@t3")),
            (format!("{ID}:#7"), format!("{ID}:#7")),
            (format!("{ID}:#7@"), format!("{ID}:#7@")),
            (format!("{ID}:worker"), "n:worker".to_owned()),
            (format!("{ID}:job:12:write"), "n:job:12".to_owned()),
            (format!("{ID}:a@b"), "n:a@b".to_owned()),
            (format!("{ID}:57"), format!("{ID}:57")),
            ("permit-id".to_owned(), "permit-id".to_owned()),
        ]
    }

    #[test]
    fn parties_follow_the_owner_field() {
        for (field, party) in cases() {
            assert_eq!(party_of(&field), party, "{field}");
        }
    }

    #[test]
    fn wait_keys_sit_in_their_lock_slot_on_a_cluster() {
        assert_eq!(wait_key("app:", "n:w", None), "app:redlatch_wait:n:w");
        assert_eq!(
            wait_key("", "n:w", Some("orders")),
            "redlatch_wait:{orders}:n:w"
        );
    }

    #[tokio::test]
    async fn a_task_is_named_by_its_id() {
        let id = tokio::spawn(async { (tokio::task::id(), anonymous_suffix()) });
        let (id, suffix) = id.await.unwrap();
        assert_eq!(suffix, Suffix::Task(id.to_string().parse().unwrap()));
    }

    #[test]
    fn a_thread_keeps_its_number() {
        let mine = thread_number();
        assert_eq!(thread_number(), mine);
        let other = std::thread::spawn(thread_number).join().unwrap();
        assert_ne!(other, mine);
    }
}
