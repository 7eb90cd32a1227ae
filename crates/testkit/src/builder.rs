//! How a [`RedisServer`](crate::RedisServer) is configured before it
//! starts: the builder's methods (its data is in `server_settings.rs`).

use std::fmt::Write as _;
use std::io;
use std::path::Path;

use crate::server::RedisServer;
use crate::server_settings::{Auth, LOG_FILE, ServerBuilder, TlsSettings};

impl ServerBuilder {
    /// Require this password for the `default` user (`requirepass`).
    /// [`RedisServer::url`] then carries `default:PASSWORD@`.
    pub fn password(mut self, pw: &str) -> Self {
        self.password = Some(pw.to_owned());
        self
    }

    /// Add an ACL user with full access (`user NAME on >PW ~* &* +@all`);
    /// [`RedisServer::url`] then logs in as that user.
    ///
    /// Unless [`password`](Self::password) is also set, the `default` user is
    /// switched off, so unauthenticated connections are rejected.
    pub fn acl_user(mut self, user: &str, pw: &str) -> Self {
        self.acl_user = Some((user.to_owned(), pw.to_owned()));
        self
    }

    /// Add a config directive, written as the line `NAME VALUE` after the
    /// testkit's own settings (so it wins over them), e.g.
    /// `.arg("maxmemory", "10mb")` or `.arg("save", "60 1")`.
    ///
    /// `VALUE` is used verbatim, as in `redis.conf`, so it may hold several
    /// words; an empty value is written as `""`. Do not override `port`,
    /// `bind`, `dir`, `logfile` or `daemonize`: the testkit relies on them
    /// (`port` is given on the command line and always wins anyway).
    pub fn arg(mut self, name: &str, value: &str) -> Self {
        self.args.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Set an environment variable for the `redis-server` process (kept
    /// across [`restart`](RedisServer::restart)), e.g. `LD_PRELOAD` to run
    /// it under libfaketime.
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Also listen with TLS on a second port ([`RedisServer::tls_url`]),
    /// with the server certificate of `certs`; with `client_certs`, clients
    /// must present a certificate signed by its CA (`tls-auth-clients yes`).
    /// The plain port stays open (the testkit checks readiness on it).
    pub fn tls(mut self, certs: &crate::tls::TlsCertificates, client_certs: bool) -> Self {
        self.tls = Some(TlsSettings {
            cert: certs.server_cert(),
            key: certs.server_key(),
            ca: certs.ca(),
            client_certs,
        });
        self
    }

    /// Start the server and wait until it answers `PING`.
    ///
    /// # Errors
    ///
    /// If `redis-server` cannot be found (see
    /// [`redis_server_path`](crate::redis_server_path)), if a directive
    /// contains a line break, or if no server came up after 10 attempts on
    /// fresh ports; the error then includes the tail of the server's log.
    pub fn start(self) -> io::Result<RedisServer> {
        RedisServer::launch(self)
    }

    /// Run the process as a Redis Sentinel (`--sentinel`); its `sentinel ...`
    /// directives come from [`arg`](Self::arg).
    pub(crate) fn sentinel_mode(mut self) -> Self {
        self.sentinel = true;
        self
    }

    /// Who clients must log in as, if anyone.
    pub(crate) fn auth(&self) -> Option<Auth<'_>> {
        match (&self.acl_user, &self.password) {
            (Some((user, password)), _) => Some(Auth { user, password }),
            (None, Some(password)) => Some(Auth {
                user: "default",
                password,
            }),
            (None, None) => None,
        }
    }

    /// The `redis.conf` text for a server living in `dir`. The port is not
    /// in it: it is passed on the command line, as it changes between
    /// start attempts.
    pub(crate) fn config_text(&self, dir: &Path) -> io::Result<String> {
        let dir_str = dir
            .to_str()
            .ok_or_else(|| invalid(format!("temp dir {} is not UTF-8", dir.display())))?;
        let log = dir.join(LOG_FILE);
        let log_str = log.to_str().unwrap_or(dir_str);

        let mut text = String::new();
        text.push_str("bind 127.0.0.1\n");
        text.push_str("save \"\"\n");
        text.push_str("appendonly no\n");
        text.push_str("daemonize no\n");
        text.push_str("protected-mode no\n");
        let _ = writeln!(text, "dir {}", quote(dir_str));
        let _ = writeln!(text, "logfile {}", quote(log_str));

        if let Some(pw) = &self.password {
            let _ = writeln!(text, "requirepass {}", quote(pw));
        }
        if let Some((user, pw)) = &self.acl_user {
            if self.password.is_none() {
                // Otherwise the nopass default user would let anyone in.
                text.push_str("user default off\n");
            }
            let _ = writeln!(
                text,
                "user {} on {} ~* &* +@all",
                quote(user),
                quote(&format!(">{pw}"))
            );
        }
        if let Some(tls) = &self.tls {
            for (name, path) in [
                ("tls-cert-file", &tls.cert),
                ("tls-key-file", &tls.key),
                ("tls-ca-cert-file", &tls.ca),
            ] {
                let path = path
                    .to_str()
                    .ok_or_else(|| invalid(format!("{} is not UTF-8", path.display())))?;
                let _ = writeln!(text, "{name} {}", quote(path));
            }
            let _ = writeln!(
                text,
                "tls-auth-clients {}",
                if tls.client_certs { "yes" } else { "no" }
            );
        }
        for (name, value) in &self.args {
            if name.contains(['\n', '\r']) || value.contains(['\n', '\r']) {
                return Err(invalid(format!(
                    "config directive {name:?} {value:?} contains a line break"
                )));
            }
            let value = if value.is_empty() { "\"\"" } else { value };
            let _ = writeln!(text, "{name} {value}");
        }
        Ok(text)
    }
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// Quote `s` as one `redis.conf` argument: redis splits lines with
/// `sdssplitargs`, which understands `\\`, `\"` and `\xHH` inside double
/// quotes, so any byte (spaces, quotes, non-ASCII) survives.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for b in s.bytes() {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            0x20..=0x7e => out.push(b as char),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_escapes_specials_and_non_printables() {
        assert_eq!(quote("plain"), "\"plain\"");
        assert_eq!(quote(r#"a"b\c d"#), r#""a\"b\\c d""#);
        assert_eq!(quote("é\n"), "\"\\xc3\\xa9\\x0a\"");
    }

    #[test]
    fn acl_user_without_password_turns_default_user_off() {
        let text = ServerBuilder::default()
            .acl_user("alice", "pw")
            .config_text(Path::new("/tmp/x"))
            .unwrap();
        assert!(text.contains("user default off\n"));
        assert!(text.contains("user \"alice\" on \">pw\" ~* &* +@all\n"));
    }

    #[test]
    fn acl_user_with_password_keeps_default_user() {
        let text = ServerBuilder::default()
            .password("pw0")
            .acl_user("alice", "pw")
            .config_text(Path::new("/tmp/x"))
            .unwrap();
        assert!(!text.contains("user default off"));
        assert!(text.contains("requirepass \"pw0\"\n"));
    }

    #[test]
    fn extra_args_come_last_and_empty_values_are_quoted() {
        let text = ServerBuilder::default()
            .arg("maxmemory", "10mb")
            .arg("save", "")
            .config_text(Path::new("/tmp/x"))
            .unwrap();
        assert!(text.ends_with("maxmemory 10mb\nsave \"\"\n"));
    }

    #[test]
    fn line_breaks_in_args_are_rejected() {
        let err = ServerBuilder::default()
            .arg("maxmemory", "10mb\nport 1")
            .config_text(Path::new("/tmp/x"))
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn auth_prefers_the_acl_user() {
        let b = ServerBuilder::default().password("p").acl_user("u", "q");
        let auth = b.auth().unwrap();
        assert_eq!((auth.user, auth.password), ("u", "q"));
        let b = ServerBuilder::default().password("p");
        let auth = b.auth().unwrap();
        assert_eq!((auth.user, auth.password), ("default", "p"));
        assert!(ServerBuilder::default().auth().is_none());
    }
}
