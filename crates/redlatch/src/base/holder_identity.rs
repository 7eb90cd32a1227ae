//! Who holds a lock: the host, process and program of the client behind an
//! owner field, since when it holds the lock, and what for.
//!
//! Each client that holds something keeps one hash beside the locks,
//! `<key prefix>redlatch_holder:{<client id>}` (the client id is the uuid
//! every owner field of that client starts with), refreshed while it holds
//! anything, deleted with its last hold, and expiring a minute after a
//! client that died: `host`, `pid`, `program`,
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
}
