//! TLS for `rediss://` URLs: which certificates to trust and present.
//!
//! Built only with the `tls` feature; without it a `rediss://` URL or a
//! [`TlsFiles`] is refused with [`Error::InvalidConfig`] when connecting,
//! rather than failing somewhere inside the TLS stack.

#[cfg(feature = "tls")]
use std::path::Path;
use std::path::PathBuf;

use redis::ConnectionInfo;
use redis::cluster::ClusterClientBuilder;

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

/// The certificates read from [`TlsFiles`], ready for redis-rs.
#[derive(Clone, Default)]
pub(crate) struct Certificates {
    #[cfg(feature = "tls")]
    loaded: Option<redis::TlsCertificates>,
}

impl Certificates {
    /// Reads the files (when TLS is wanted) and makes sure the TLS stack can run.
    pub(crate) fn load(files: Option<&TlsFiles>, urls: &[&str]) -> Result<Certificates> {
        let wants_tls = files.is_some() || urls.iter().any(|url| url.starts_with("rediss://"));
        if !wants_tls {
            return Ok(Certificates::default());
        }
        if let Some(files) = files {
            files.validate()?;
        }
        load_enabled(files)
    }

    /// A client for one server.
    pub(crate) fn client(&self, info: ConnectionInfo) -> Result<redis::Client> {
        #[cfg(feature = "tls")]
        if let Some(certs) = &self.loaded {
            return redis::Client::build_with_tls(info, certs.clone())
                .map_err(|error| Error::InvalidConfig(format!("tls: {error}")));
        }
        redis::Client::open(info)
            .map_err(|error| Error::InvalidConfig(format!("redis URL: {error}")))
    }

    /// The cluster client builder, with the certificates if any.
    pub(crate) fn cluster(&self, builder: ClusterClientBuilder) -> ClusterClientBuilder {
        #[cfg(feature = "tls")]
        if let Some(certs) = &self.loaded {
            return builder.certs(certs.clone());
        }
        builder
    }

    /// Through Sentinel only the URLs' `rediss://` is followed; custom
    /// certificates are refused rather than silently ignored.
    pub(crate) fn refuse_custom(&self, what: &str) -> Result<()> {
        #[cfg(feature = "tls")]
        if self.loaded.is_some() {
            return Err(Error::InvalidConfig(format!(
                "tls: custom CA or client certificates are not supported with {what} yet \
                 (rediss:// URLs with certificates the system trusts are)"
            )));
        }
        let _ = what;
        Ok(())
    }
}

#[cfg(feature = "tls")]
fn load_enabled(files: Option<&TlsFiles>) -> Result<Certificates> {
    // rustls needs a process-wide crypto provider; install ring's unless the
    // application chose one (losing the race to another thread is fine).
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    let Some(files) = files else {
        return Ok(Certificates::default());
    };
    let root_cert = files
        .ca
        .as_deref()
        .map(|path| read("tls.ca", path))
        .transpose()?;
    let client_tls = match (&files.cert, &files.key) {
        (Some(cert), Some(key)) => Some(redis::ClientTlsConfig {
            client_cert: read("tls.cert", cert)?,
            client_key: read("tls.key", key)?,
        }),
        _ => None,
    };
    Ok(Certificates {
        loaded: Some(redis::TlsCertificates {
            client_tls,
            root_cert,
        }),
    })
}

#[cfg(not(feature = "tls"))]
fn load_enabled(_files: Option<&TlsFiles>) -> Result<Certificates> {
    Err(Error::InvalidConfig(
        "TLS (rediss:// or certificate files) needs redlatch built with the `tls` feature"
            .to_owned(),
    ))
}

#[cfg(feature = "tls")]
fn read(field: &str, path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path)
        .map_err(|error| Error::InvalidConfig(format!("{field} = {}: {error}", path.display())))
}
