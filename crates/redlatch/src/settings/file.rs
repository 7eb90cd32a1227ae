//! Settings read from a TOML file (the `settings-file` feature): every
//! field optional, durations written as `"500ms"`, `"30s"`, `"2m"`.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::settings::Settings;

impl Settings {
    /// Parses settings from TOML text. Fields left out take their defaults;
    /// unknown fields are errors (a typo must not pass silently).
    ///
    /// ```
    /// let settings = redlatch::Settings::from_toml(r#"
    ///     [lock]
    ///     default_lease = "10s"
    ///     key_prefix = "shop:"
    ///     wait_timeout = "500ms"
    ///     [retry]
    ///     attempts = 5
    ///     [connection]
    ///     response_timeout = "1s"
    /// "#)?;
    /// assert_eq!(settings.default_lease, std::time::Duration::from_secs(10));
    /// assert_eq!(settings.retry.attempts, 5);
    /// # Ok::<(), redlatch::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] with the parser's message, or the errors of
    /// [`Settings::validate`].
    #[cfg_attr(docsrs, doc(cfg(feature = "settings-file")))]
    pub fn from_toml(text: &str) -> Result<Settings> {
        let file: SettingsFile = toml::from_str(text)
            .map_err(|error| Error::InvalidConfig(error.to_string().trim().to_owned()))?;
        let settings = file.into_settings()?;
        settings.validate()?;
        Ok(settings)
    }

    /// Reads and parses a TOML settings file (see [`Settings::from_toml`]).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the file when it cannot be read or parsed.
    #[cfg_attr(docsrs, doc(cfg(feature = "settings-file")))]
    pub fn load(path: impl AsRef<Path>) -> Result<Settings> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|error| Error::InvalidConfig(format!("{}: {error}", path.display())))?;
        Settings::from_toml(&text).map_err(|error| match error {
            Error::InvalidConfig(reason) => {
                Error::InvalidConfig(format!("{}: {reason}", path.display()))
            }
            other => other,
        })
    }
}

/// The file's shape: every field optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SettingsFile {
    #[serde(default)]
    lock: LockSection,
    #[serde(default)]
    retry: RetrySection,
    #[serde(default)]
    connection: ConnectionSection,
    /// Where Redis runs: read by [`Deployment`](crate::Deployment).
    #[serde(default, rename = "redis")]
    _redis: Option<toml::Table>,
    /// TLS files: read by [`Deployment`](crate::Deployment).
    #[serde(default, rename = "tls")]
    _tls: Option<toml::Table>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LockSection {
    default_lease: Option<String>,
    key_prefix: Option<String>,
    wait_timeout: Option<String>,
    handoff_grace: Option<String>,
    fair_lock_wait_timeout: Option<String>,
    per_name_token_counters: Option<bool>,
    redisson_waiters: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RetrySection {
    attempts: Option<u32>,
    base_delay: Option<String>,
    max_delay: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConnectionSection {
    connect_timeout: Option<String>,
    response_timeout: Option<String>,
}

fn duration(field: &str, text: &str) -> Result<Duration> {
    humantime::parse_duration(text).map_err(|error| {
        Error::InvalidConfig(format!(
            "{field} = {text:?}: {error} (try \"500ms\", \"30s\", \"2m\")"
        ))
    })
}

impl SettingsFile {
    fn into_settings(self) -> Result<Settings> {
        let mut settings = Settings::default();
        if let Some(text) = &self.lock.default_lease {
            settings.default_lease = duration("lock.default_lease", text)?;
        }
        if let Some(prefix) = self.lock.key_prefix {
            settings.key_prefix = prefix;
        }
        if let Some(text) = &self.lock.wait_timeout {
            settings.wait_timeout = Some(duration("lock.wait_timeout", text)?);
        }
        if let Some(text) = &self.lock.handoff_grace {
            settings.handoff_grace = duration("lock.handoff_grace", text)?;
        }
        if let Some(text) = &self.lock.fair_lock_wait_timeout {
            settings.fair_lock_wait_timeout = duration("lock.fair_lock_wait_timeout", text)?;
        }
        if let Some(per_name) = self.lock.per_name_token_counters {
            settings.per_name_token_counters = per_name;
        }
        if let Some(redisson) = self.lock.redisson_waiters {
            settings.redisson_waiters = redisson;
        }
        if let Some(attempts) = self.retry.attempts {
            settings.retry.attempts = attempts;
        }
        if let Some(text) = &self.retry.base_delay {
            settings.retry.base_delay = duration("retry.base_delay", text)?;
        }
        if let Some(text) = &self.retry.max_delay {
            settings.retry.max_delay = duration("retry.max_delay", text)?;
        }
        if let Some(text) = &self.connection.connect_timeout {
            settings.connect_timeout = duration("connection.connect_timeout", text)?;
        }
        if let Some(text) = &self.connection.response_timeout {
            settings.response_timeout = duration("connection.response_timeout", text)?;
        }
        Ok(settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_gives_defaults() {
        assert_eq!(Settings::from_toml("").unwrap(), Settings::default());
    }

    #[test]
    fn every_field_is_read() {
        let settings = Settings::from_toml(
            r#"
            [lock]
            default_lease = "2s"
            key_prefix = "p:"
            wait_timeout = "250ms"
            fair_lock_wait_timeout = "20s"
            per_name_token_counters = true
            redisson_waiters = true
            [retry]
            attempts = 7
            base_delay = "10ms"
            max_delay = "1s"
            [connection]
            connect_timeout = "5s"
            response_timeout = "750ms"
            "#,
        )
        .unwrap();
        assert_eq!(settings.default_lease, Duration::from_secs(2));
        assert_eq!(settings.key_prefix, "p:");
        assert_eq!(settings.wait_timeout, Some(Duration::from_millis(250)));
        assert_eq!(settings.fair_lock_wait_timeout, Duration::from_secs(20));
        assert!(settings.per_name_token_counters);
        assert!(settings.redisson_waiters);
        assert_eq!(settings.retry.attempts, 7);
        assert_eq!(settings.retry.base_delay, Duration::from_millis(10));
        assert_eq!(settings.retry.max_delay, Duration::from_secs(1));
        assert_eq!(settings.connect_timeout, Duration::from_secs(5));
        assert_eq!(settings.response_timeout, Duration::from_millis(750));
    }

    #[test]
    fn bad_files_name_the_problem() {
        let banana = Settings::from_toml("[lock]\ndefault_lease = \"banana\"").unwrap_err();
        assert!(
            banana.to_string().contains("lock.default_lease"),
            "{banana}"
        );
        let typo = Settings::from_toml("[lock]\ndefault_leese = \"1s\"").unwrap_err();
        assert!(typo.to_string().contains("default_leese"), "{typo}");
        let short = Settings::from_toml("[lock]\ndefault_lease = \"1ms\"").unwrap_err();
        assert!(matches!(short, Error::InvalidDuration { .. }));
        let syntax = Settings::from_toml("[lock").unwrap_err();
        assert!(matches!(syntax, Error::InvalidConfig(_)));
        assert!(matches!(
            Settings::load("/no/such/file.toml"),
            Err(Error::InvalidConfig(_))
        ));
    }

    #[test]
    fn example_file_parses_and_matches_the_defaults_it_documents() {
        let settings = Settings::from_toml(include_str!("../../redlatch.example.toml")).unwrap();
        let expected = Settings {
            wait_timeout: Some(Duration::from_secs(5)),
            ..Settings::default()
        };
        assert_eq!(settings, expected);
    }
}
