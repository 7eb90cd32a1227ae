//! Who holds a lock: the host, process and program of the client behind an
//! owner field, since when it holds the lock, and what for.
//!
//! Each client that holds something keeps one hash beside the locks,
//! `<key prefix>redlatch_holder:{<client id>}` (the client id is the uuid
//! every owner field of that client starts with), refreshed while it holds
//! anything and expiring a minute after it stops: `host`, `pid`, `program`,
//! `purpose`, and one field per hold held longer than a moment (its key and
//! owner) whose value is the server time it was acquired at, in ms. The
//! lock keys themselves keep Redisson's layout; a reader that knows nothing
//! of this hash (Redisson) is not disturbed by it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The client behind a holder, as it described itself
/// ([`Holder::identity`](crate::Holder::identity)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HolderIdentity {
    /// The host name of the machine the client runs on.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// Its program's file name (`std::env::current_exe`).
    pub program: String,
    /// What the holder said it holds locks for
    /// ([`ClientBuilder::holder_purpose`](crate::ClientBuilder::holder_purpose)).
    pub purpose: Option<String>,
    /// When it acquired this lock, by the server's clock (to within one
    /// round trip); `None` for a hold younger than the publishing delay
    /// (about 50 ms) or published before the record was last refreshed.
    pub since: Option<SystemTime>,
}

impl HolderIdentity {
    /// `host pid 4242 (program)`, then `, since <how long> ago` and
    /// `: purpose` where known; `now` is the reader's idea of the time.
    ///
    /// ```
    /// # use std::time::{Duration, SystemTime};
    /// # fn show(identity: &redlatch::HolderIdentity) {
    /// println!("held by {}", identity.describe(SystemTime::now()));
    /// # }
    /// ```
    pub fn describe(&self, now: SystemTime) -> String {
        let mut text = format!("{} pid {} ({})", self.host, self.pid, self.program);
        if let Some(since) = self.since {
            let held = now.duration_since(since).unwrap_or_default();
            let held = Duration::from_secs(held.as_secs());
            text.push_str(&format!(", since {} ago", humantime::format_duration(held)));
        }
        if let Some(purpose) = &self.purpose {
            text.push_str(&format!(": {purpose}"));
        }
        text
    }
}

/// The record's key for the client whose id is `client_id`.
pub(crate) fn record_key(prefix: &str, client_id: &str) -> String {
    format!("{prefix}redlatch_holder:{{{client_id}}}")
}

/// The record's field for one hold: the owner's length first, so that no
/// two (owner, key) pairs share a field.
pub(crate) fn hold_field(key: &str, owner: &str) -> String {
    format!("hold:{}:{owner}{key}", owner.len())
}

/// The client id an owner field starts with, where it has one.
pub(crate) fn client_id(owner: &str) -> Option<&str> {
    looks_like_owner(owner).then(|| &owner[..36])
}

/// True when a hash field looks like a lock owner: `<uuid>:<owner>`, as
/// redlatch and Redisson write them.
pub(crate) fn looks_like_owner(field: &str) -> bool {
    field.len() > 37 && field.as_bytes()[36] == b':' && uuid::Uuid::try_parse(&field[..36]).is_ok()
}

/// Reads a record's `HMGET host pid program purpose <hold field>` reply.
pub(crate) fn from_fields(fields: &[Option<String>]) -> Option<HolderIdentity> {
    let [host, pid, program, purpose, since] = fields else {
        return None;
    };
    Some(HolderIdentity {
        host: host.clone()?,
        pid: pid.as_deref()?.parse().ok()?,
        program: program.clone().unwrap_or_default(),
        purpose: purpose.clone().filter(|purpose| !purpose.is_empty()),
        since: since
            .as_deref()
            .and_then(|ms| ms.parse::<u64>().ok())
            .map(|ms| UNIX_EPOCH + Duration::from_millis(ms)),
    })
}

/// This process as a holder describes itself: host, pid, program.
pub(crate) fn this_process() -> (String, u32, String) {
    let program = std::env::current_exe()
        .ok()
        .and_then(|path| {
            path.file_name()
                .map(|name| name.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned());
    (host_name(), std::process::id(), program)
}

fn host_name() -> String {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if let Ok(name) = nix::unistd::gethostname() {
        return name.to_string_lossy().into_owned();
    }
    ["HOSTNAME", "COMPUTERNAME"]
        .iter()
        .find_map(|var| std::env::var(var).ok())
        .unwrap_or_else(|| "unknown".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_and_a_partial_one_is_none() {
        let some = |text: &str| Some(text.to_owned());
        let identity = from_fields(&[
            some("db-1"),
            some("4242"),
            some("backup"),
            None,
            some("1000"),
        ])
        .unwrap();
        assert_eq!(identity.pid, 4242);
        assert_eq!(identity.since, Some(UNIX_EPOCH + Duration::from_secs(1)));
        let later = UNIX_EPOCH + Duration::from_secs(62);
        assert_eq!(
            identity.describe(later),
            "db-1 pid 4242 (backup), since 1m 1s ago"
        );
        assert_eq!(from_fields(&[None, some("1"), None, None, None]), None);
        assert_eq!(from_fields(&[some("h"), some("x"), None, None, None]), None);
    }

    #[test]
    fn owner_fields_are_recognised() {
        assert!(looks_like_owner("3f0e6c1a-8a52-4cf1-9e0b-4c1b9d7a2e11:57"));
        assert!(looks_like_owner("3f0e6c1a-8a52-4cf1-9e0b-4c1b9d7a2e11:#3"));
        assert!(!looks_like_owner("3f0e6c1a-8a52-4cf1-9e0b-4c1b9d7a2e11:"));
        assert!(!looks_like_owner("name"));
        assert!(!looks_like_owner("not-a-uuid-at-all-but-36-chars-long!:1"));
    }

    #[test]
    fn hold_fields_never_collide() {
        assert_ne!(hold_field("ab", "c"), hold_field("b", "ca"));
    }
}
