//! Settings file and connection, shared by every command.

use std::path::Path;
use std::time::Duration;

use redlatch::{Client, Settings};

use crate::exit::{self, Failure};

/// Reads `--config` if given: exit 78 when it cannot be read or is invalid.
pub fn load_settings(config: Option<&Path>) -> Result<Settings, Failure> {
    match config {
        None => Ok(Settings::default()),
        Some(path) => Settings::load(path).map_err(|error| config_failure(path, &error)),
    }
}

/// The exit-78 failure for a settings file the library refused.
pub fn config_failure(path: &Path, error: &redlatch::Error) -> Failure {
    let text = error.to_string();
    // The library names the file in most messages; add it where it does not.
    if text.contains(&*path.to_string_lossy()) {
        Failure::new(exit::CONFIG, format!("config {text}"))
    } else {
        Failure::new(exit::CONFIG, format!("config {}: {text}", path.display()))
    }
}

/// Connects to `url` with `settings`, `lease` (from `--lease`) overriding the
/// file's default lease. Unreachable Redis: exit 69.
pub async fn client(
    url: &str,
    settings: Settings,
    lease: Option<Duration>,
) -> Result<Client, Failure> {
    let mut builder = Client::builder(url).settings(settings);
    if let Some(lease) = lease {
        builder = builder.default_lease(lease);
    }
    builder.connect().await.map_err(|error| {
        if error.is_transient() || matches!(error, redlatch::Error::Redis { .. }) {
            Failure::new(
                exit::UNAVAILABLE,
                format!("cannot reach Redis at {}: {error}", redact(url)),
            )
        } else {
            Failure::lib("cannot connect", &error)
        }
    })
}

/// The URL with its password replaced by `***`, for messages.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    // The userinfo ends at the last '@' before the path.
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return url.to_owned();
    };
    match rest[..at].split_once(':') {
        Some((user, _password)) => format!("{scheme}://{user}:***@{}", &rest[at + 1..]),
        None if rest[..at].is_empty() => url.to_owned(),
        // `redis://password@host` is not how redis-rs reads it, but be safe.
        None => format!("{scheme}://***@{}", &rest[at + 1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(
            redact("redis://app:s3cret@db:6379/0"),
            "redis://app:***@db:6379/0"
        );
        assert_eq!(redact("redis://:s3cret@db"), "redis://:***@db");
        assert_eq!(redact("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
        assert_eq!(redact("rediss://s3cret@db/1"), "rediss://***@db/1");
        assert_eq!(redact("not a url"), "not a url");
    }
}
