//! What `status`, `list` and `unlock` print: text for people, JSON for scripts
//! (the lock objects themselves: `crate::locks`).

use std::io::Write;
use std::time::{Duration, SystemTime};

use redlatch::LockStatus;
use serde::Serialize;

use crate::exit::{self, Failure};
use crate::locks::{IdentityView, whole_seconds};
use crate::names::shown;

/// `value` as one line of JSON.
pub fn json<T: Serialize + ?Sized>(value: &T) -> Result<String, Failure> {
    serde_json::to_string(value)
        .map_err(|error| Failure::new(exit::SOFTWARE, format!("cannot write JSON: {error}")))
}

/// `status` for people: one `field  value` line each.
pub fn status_text(status: &LockStatus) -> String {
    let mut lines = vec![format!("lock     {}", shown(&status.name))];
    if status.key != status.name {
        lines.push(format!("key      {}", shown(&status.key)));
    }
    lines.push(if status.held {
        format!("held     yes, by {}", holders(status))
    } else {
        "held     no".to_owned()
    });
    lines.extend(identities(status, SystemTime::now()));
    lines.push(format!("ttl      {}", ttl(status)));
    lines.push(format!("token    {}", token(status)));
    if let Some(mode) = status.mode {
        lines.push(format!("mode     {mode}"));
    }
    lines.push(format!("waiting  {} client(s)", status.waiting_clients));
    if !status.line.is_empty() {
        let line: Vec<String> = status.line.iter().map(|owner| shown(owner)).collect();
        lines.push(format!("line     {}", line.join(", ")));
    }
    lines.join("\n")
}

fn holders(status: &LockStatus) -> String {
    status
        .holders
        .iter()
        .map(|holder| format!("{} x{}", shown(&holder.owner), holder.count))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Per named holder: `holder`, `since` and `purpose` lines (the owner
/// field again when several hold it, to say which is which).
fn identities(status: &LockStatus, now: SystemTime) -> Vec<String> {
    let several = status.holders.len() > 1;
    let mut lines = Vec::new();
    for holder in &status.holders {
        let Some(identity) = holder.identity.as_ref().map(IdentityView::new) else {
            continue;
        };
        let mut line = format!("holder   {}", identity.process());
        if several {
            line.push_str(&format!(" as {}", shown(&holder.owner)));
        }
        lines.push(line);
        if let (Some(since), Some(held)) = (identity.since, identity.held_for(now)) {
            lines.push(format!(
                "since    {} ({} ago)",
                humantime::format_rfc3339_seconds(since),
                whole_seconds(held)
            ));
        }
        if let Some(purpose) = &identity.purpose {
            lines.push(format!("purpose  {}", shown(purpose)));
        }
    }
    lines
}

fn ttl(status: &LockStatus) -> String {
    match status.ttl {
        Some(ttl) => seconds(ttl),
        None if status.held => "none (no expiry)".to_owned(),
        None => "-".to_owned(),
    }
}

fn token(status: &LockStatus) -> String {
    status
        .last_token
        .map_or_else(|| "-".to_owned(), |token| token.to_string())
}

/// `12.3s`: tenths are enough to see a lease run down.
fn seconds(duration: Duration) -> String {
    format!("{:.1}s", duration.as_secs_f64())
}

/// Writes `text` and a newline to stdout. A closed pipe (`| head`) is not an error.
pub fn emit(text: &str) -> Result<(), Failure> {
    let mut stdout = std::io::stdout().lock();
    match writeln!(stdout, "{text}").and_then(|()| stdout.flush()) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(error) => Err(Failure::new(
            exit::SOFTWARE,
            format!("cannot write to stdout: {error}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::seconds;
    use std::time::Duration;

    #[test]
    fn ttl_shows_tenths_of_seconds() {
        assert_eq!(seconds(Duration::from_millis(12_345)), "12.3s");
        assert_eq!(seconds(Duration::from_millis(40)), "0.0s");
    }
}
