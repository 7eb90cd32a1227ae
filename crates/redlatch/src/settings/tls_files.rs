//! Which certificate files a client uses for `rediss://` URLs: plain data,
//! read when connecting (`transport/tls.rs`).

use std::path::PathBuf;

use crate::error::{Error, Result};

/// Certificate files for `rediss://` connections, all in PEM.
///
/// Without a CA file the system's trust store is used. A client certificate
/// and its key go together (mutual TLS).
///
/// ```
/// let tls = redlatch::TlsFiles::default()
///     .with_ca("/etc/redis/ca.crt")
///     .with_client_cert("/etc/redis/client.crt", "/etc/redis/client.key");
/// assert!(tls.validate().is_ok());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TlsFiles {
    /// CA certificate(s) that signed the servers' certificates.
    pub ca: Option<PathBuf>,
    /// This client's certificate chain.
    pub cert: Option<PathBuf>,
    /// The private key of [`cert`](Self::cert).
    pub key: Option<PathBuf>,
}

impl TlsFiles {
    /// Trusts the CA certificate(s) in `path` instead of the system's store.
    pub fn with_ca(mut self, path: impl Into<PathBuf>) -> Self {
        self.ca = Some(path.into());
        self
    }

    /// Presents this certificate and key to servers that ask for one.
    pub fn with_client_cert(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.cert = Some(cert.into());
        self.key = Some(key.into());
        self
    }

    /// Checks that a certificate comes with its key (the files are read when connecting).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the missing field (`tls.cert` or `tls.key`).
    pub fn validate(&self) -> Result<()> {
        match (&self.cert, &self.key) {
            (Some(_), None) => Err(Error::InvalidConfig(
                "tls.key: a client certificate needs its private key".to_owned(),
            )),
            (None, Some(_)) => Err(Error::InvalidConfig(
                "tls.cert: a private key needs its client certificate".to_owned(),
            )),
            _ => Ok(()),
        }
    }
}
