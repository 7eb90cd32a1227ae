//! Exit statuses, and the one-line failure every command can end with.
//!
//! The numbers follow BSD's sysexits.h where one fits, so shell scripts and
//! cron wrappers can tell "busy" from "broken" from "the command failed".

use std::fmt;

/// `status --held`: the lock is free.
pub const FREE: u8 = 1;
/// Usage error, or a request refused (`unlock` without `--force`).
pub const USAGE: u8 = 64;
/// The key exists but is not a lock (`WRONGTYPE`).
pub const DATA: u8 = 65;
/// Redis cannot be reached, refuses us (credentials, ACL, a certificate), or
/// did not answer the connect in time.
pub const UNAVAILABLE: u8 = 69;
/// A bug: an answer the library did not understand, a panic.
pub const SOFTWARE: u8 = 70;
/// The lock was not acquired within `--wait`.
pub const NOT_ACQUIRED: u8 = 75;
/// The wait for the lock closed a wait-for cycle (a deadlock): refused at
/// once instead of waiting for ever. Next to 75 (not acquired); no sysexits
/// code fits.
pub const DEADLOCK: u8 = 76;
/// A file named by a flag or the `--config` file cannot be read or used
/// (`--config` itself, `--redis-password-file`, TLS files), or the
/// `--config` file names servers wrongly.
pub const CONFIG: u8 = 78;
/// The lock was lost while the command ran.
pub const LOST: u8 = 79;
/// The command was found but could not be executed (shell convention).
pub const CANNOT_EXECUTE: u8 = 126;
/// The command was not found (shell convention).
pub const NOT_FOUND: u8 = 127;
/// Added to a signal number: the command (or redlatch, while waiting) died of it.
pub const SIGNAL_BASE: u8 = 128;

/// The text of `redlatch --help`'s exit status section and of the README table.
pub const TABLE: &str = "\
Exit status:
  0..255  run: the command's own exit status
  1       check: a recipe broke a promise it documents;
          status --held: the lock is free (0: held)
  64      usage error; unlock without --force; --redis names a Redis
          Cluster node (use --redis-cluster)
  65      the key exists but is not a lock
  69      Redis unreachable, refusing the connection, or not answering
          within run's --wait or the connect timeout
  70      internal error (please report it)
  75      run: lock not acquired within --wait; the command did not run
  76      run: deadlock: waiting for the lock would close a cycle (this
          job waits for a lock whose holder waits, in turn, for one this
          job holds); the command did not run
  78      the --config, --redis-password-file or a TLS file is missing,
          unreadable or invalid; the --config file's servers are wrong
  79      run: the lock was lost while the command ran; the command was stopped
  126/127 run: the command could not be executed / was not found
  128+N   run: the command was killed by signal N (or redlatch was, while waiting)
A command may exit with 64..79 itself; redlatch's own failures print one line
on stderr starting with \"redlatch:\".";

/// Why a command stopped early: an exit status and one line for stderr.
#[derive(Debug)]
pub struct Failure {
    /// The process exit status.
    pub code: u8,
    message: String,
}

impl Failure {
    /// A failure with exit status `code`; the message is kept to one line,
    /// passwords masked.
    pub fn new(code: u8, message: impl Into<String>) -> Failure {
        let message = crate::redact::redact(&message.into());
        Failure {
            code,
            message: message
                .lines()
                .map(str::trim)
                .filter(|line| !line.is_empty())
                .collect::<Vec<_>>()
                .join(" "),
        }
    }

    /// A library error, sorted into the exit status a script can act on.
    /// `context` says what we were doing ("status of lock x").
    pub fn lib(context: &str, error: &redlatch::Error) -> Failure {
        use redlatch::Error as E;
        let code = match error {
            E::InvalidName { .. }
            | E::InvalidOwner { .. }
            | E::InvalidDuration { .. }
            | E::InvalidConfig(_)
            | E::ClusterNode { .. } => USAGE,
            E::TlsFile { .. } => CONFIG,
            E::Timeout { .. } => NOT_ACQUIRED,
            E::Deadlock { .. } => DEADLOCK,
            E::NotHeld { .. } => LOST,
            E::WrongType { .. } => DATA,
            E::Unavailable { .. }
            | E::ResponseTimeout { .. }
            | E::OutcomeUnknown { .. }
            | E::Redis { .. }
            | E::ConnectTimeout { .. }
            | E::TlsCertificate { .. }
            | E::QuorumFailed { .. } => UNAVAILABLE,
            _ => SOFTWARE,
        };
        Failure::new(code, format!("{context}: {error}"))
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "redlatch: {}", self.message)
    }
}

/// The exit status of a command that ended by itself or by a signal.
pub fn of_child(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        // An exit status is 0..=255 on Unix; the mask documents that.
        (Some(code), _) => (code & 0xff) as u8,
        (None, Some(signal)) => SIGNAL_BASE.saturating_add(signal as u8),
        (None, None) => SOFTWARE,
    }
}
