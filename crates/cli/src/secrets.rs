//! Redis passwords: where they may come from besides the URL, and keeping
//! them out of everything redlatch prints.
//!
//! A password written in `--redis` sits in redlatch's argv, which every user
//! of the machine reads in `ps` for the whole run; Rust offers no safe way to
//! overwrite it. So the password can come from a file
//! (`--redis-password-file`) or from `REDLATCH_REDIS_PASSWORD`, and is put
//! into the URLs in memory only; every password seen is handed to
//! [`crate::redact`], which masks it in everything redlatch prints.

use std::path::Path;

use redlatch::{Deployment, Servers};

use crate::exit::{self, Failure};
use crate::redact::{percent_encode, remember, url_password};

/// The variable a password may come from (read by redlatch, never passed on).
pub const PASSWORD_ENV: &str = "REDLATCH_REDIS_PASSWORD";

/// Variables that carry credentials: removed from the command's environment.
pub const CHILD_ENV_REMOVED: [&str; 2] = ["REDIS_URL", PASSWORD_ENV];

/// The password for URLs that have none: `--redis-password-file` (its first
/// line), else `REDLATCH_REDIS_PASSWORD`; exit 78 for an unreadable or empty
/// file.
pub fn password(file: Option<&Path>) -> Result<Option<String>, Failure> {
    let password = match file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|error| {
                Failure::new(
                    exit::CONFIG,
                    format!("--redis-password-file {}: {error}", path.display()),
                )
            })?;
            let line = text.lines().next().unwrap_or_default().to_owned();
            if line.is_empty() {
                return Err(Failure::new(
                    exit::CONFIG,
                    format!(
                        "--redis-password-file {}: the first line is empty",
                        path.display()
                    ),
                ));
            }
            Some(line)
        }
        None => std::env::var(PASSWORD_ENV)
            .ok()
            .filter(|text| !text.is_empty()),
    };
    if let Some(password) = &password {
        remember(password);
    }
    Ok(password)
}

/// Puts `password` into every URL of `deployment` without one (a Sentinel
/// group's master gets it through [`redlatch::ClientBuilder::master_auth`]
/// instead, in `connect`), and remembers the passwords the URLs carry.
pub fn apply(deployment: &mut Deployment, password: Option<&str>) {
    let mut urls = Vec::new();
    collect_urls(&mut deployment.servers, &mut urls);
    for url in urls {
        if let Some(password) = password
            && let Some(with) = with_password(url, password)
        {
            *url = with;
        }
        if let Some(own) = url_password(url) {
            remember(own);
        }
    }
}

/// The URLs that take a server's password: a server's, a cluster's seeds,
/// and those of each Redlock master (not Sentinels': theirs are their own).
fn collect_urls<'a>(servers: &'a mut Servers, urls: &mut Vec<&'a mut String>) {
    match servers {
        Servers::Single(url) => urls.push(url),
        Servers::Cluster(seeds) => urls.extend(seeds.iter_mut()),
        Servers::Redlock(masters) => {
            for master in masters {
                collect_urls(master, urls);
            }
        }
        Servers::Sentinel { sentinels, .. } => {
            // Not given the password, but masked if they carry one.
            for url in sentinels.iter() {
                if let Some(own) = url_password(url) {
                    remember(own);
                }
            }
        }
        _ => {}
    }
}

/// `url` with `password` added, or `None` when it has one (it wins) or is
/// not `scheme://...`.
fn with_password(url: &str, password: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let encoded = percent_encode(password);
    match rest[..authority_end].rfind('@') {
        Some(at) if rest[..at].contains(':') => None,
        Some(at) => Some(format!(
            "{scheme}://{}:{encoded}@{}",
            &rest[..at],
            &rest[at + 1..]
        )),
        None => Some(format!("{scheme}://:{encoded}@{rest}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_added_only_where_missing() {
        assert_eq!(
            with_password("redis://h:1/0", "p@ss word").as_deref(),
            Some("redis://:p%40ss%20word@h:1/0")
        );
        assert_eq!(
            with_password("rediss://app@h:1", "pw").as_deref(),
            Some("rediss://app:pw@h:1")
        );
        assert_eq!(with_password("redis://app:own@h:1", "pw"), None);
        assert_eq!(with_password("not a url", "pw"), None);
    }
}
