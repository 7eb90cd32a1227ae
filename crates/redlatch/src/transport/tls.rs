//! TLS for `rediss://` URLs: which certificates to trust and present.
//!
//! Built only with the `tls` feature; without it a `rediss://` URL or a
//! [`TlsFiles`] is refused with [`Error::InvalidConfig`] when connecting,
//! rather than failing somewhere inside the TLS stack.

#[cfg(feature = "tls")]
use std::path::Path;

use redis::ConnectionInfo;
use redis::cluster::ClusterClientBuilder;

use crate::error::{Error, Result};
use crate::settings::tls_files::TlsFiles;

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
    let root_cert = files.ca.as_deref().map(read_ca).transpose()?;
    let client_tls = match (&files.cert, &files.key) {
        (Some(cert), Some(key)) => Some(read_client_pair(cert, key)?),
        _ => None,
    };
    Ok(Certificates {
        loaded: Some(redis::TlsCertificates {
            client_tls,
            root_cert,
        }),
    })
}

/// How to re-issue an X.509 v1 certificate, which rustls refuses.
const V1_FIX: &str = "re-issue it as X.509 v3, e.g. `openssl x509 -req ... \
     -extfile <(printf 'basicConstraints=CA:FALSE')`";

#[cfg(feature = "tls")]
fn file_error(field: &'static str, path: &Path, reason: impl Into<String>) -> Error {
    Error::TlsFile {
        field,
        path: path.to_owned(),
        reason: reason.into(),
    }
}

#[cfg(feature = "tls")]
fn read(field: &'static str, path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|error| file_error(field, path, error.to_string()))
}

/// The certificates of a PEM file: at least one, or a [`Error::TlsFile`].
#[cfg(feature = "tls")]
fn certificates(
    field: &'static str,
    path: &Path,
    pem: &[u8],
) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|error| file_error(field, path, format!("not a PEM certificate file: {error}")))?;
    if certs.is_empty() {
        return Err(file_error(
            field,
            path,
            "no PEM certificate in it (no -----BEGIN CERTIFICATE----- block)",
        ));
    }
    Ok(certs)
}

/// The CA file, refused unless every certificate in it can be trusted.
#[cfg(feature = "tls")]
fn read_ca(path: &Path) -> Result<Vec<u8>> {
    let pem = read("tls.ca", path)?;
    let mut store = rustls::RootCertStore::empty();
    for cert in certificates("tls.ca", path, &pem)? {
        store.add(cert).map_err(|error| {
            file_error(
                "tls.ca",
                path,
                format!(
                    "not a usable CA certificate: {}",
                    explain(&error.to_string(), "")
                ),
            )
        })?;
    }
    Ok(pem)
}

/// The client certificate and its key, refused unless the TLS stack can
/// present them: a key that is not the certificate's, an X.509 v1 certificate.
#[cfg(feature = "tls")]
fn read_client_pair(cert: &Path, key: &Path) -> Result<redis::ClientTlsConfig> {
    use rustls::pki_types::PrivateKeyDer;
    use rustls::pki_types::pem::PemObject;
    let client_cert = read("tls.cert", cert)?;
    let client_key = read("tls.key", key)?;
    let chain = certificates("tls.cert", cert, &client_cert)?;
    let der = PrivateKeyDer::from_pem_slice(&client_key).map_err(|error| {
        file_error("tls.key", key, format!("no PEM private key in it: {error}"))
    })?;
    rustls::ClientConfig::builder()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_client_auth_cert(chain, der)
        .map_err(|error| match error {
            rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => file_error(
                "tls.key",
                key,
                format!(
                    "this private key does not belong to the certificate tls.cert = {}",
                    cert.display()
                ),
            ),
            other => file_error(
                "tls.cert",
                cert,
                format!("cannot be presented: {}", explain(&other.to_string(), "")),
            ),
        })?;
    Ok(redis::ClientTlsConfig {
        client_cert,
        client_key,
    })
}

/// A TLS stack's complaint about a certificate, with the fix where it is
/// known; `names` is added to the fix of an X.509 v1 certificate.
fn explain(text: &str, names: &str) -> String {
    if text.contains("UnsupportedCertVersion") {
        format!(
            "an X.509 v1 certificate (made without v3 extensions), which rustls refuses \
             though OpenSSL accepts it; {V1_FIX}{names} (rustls: UnsupportedCertVersion)"
        )
    } else {
        text.to_owned()
    }
}

/// A failed connect whose cause is a certificate, as [`Error::TlsCertificate`]:
/// the server's, which we refused (rustls: "invalid peer certificate"), or
/// ours, which the server refused (a TLS alert about a certificate).
pub(crate) fn certificate_error(text: &str) -> Option<Error> {
    if let Some(at) = text.find("invalid peer certificate") {
        let detail = &text[at..];
        let hint = if detail.contains("UnknownIssuer") {
            "it is not signed by a CA this client trusts (give its CA as tls.ca)".to_owned()
        } else if detail.contains("NotValidForName") {
            "it is not made out for the host name or address in the URL".to_owned()
        } else if detail.contains("Expired") || detail.contains("NotValidYet") {
            "it is outside its validity period".to_owned()
        } else {
            explain(
                detail,
                "; a server's certificate also needs its names: \
                 `subjectAltName=DNS:host,IP:address`",
            )
        };
        let detail = if hint == detail || hint.contains("(rustls: ") {
            hint
        } else {
            format!("{hint} ({detail})")
        };
        return Some(Error::TlsCertificate {
            whose: "the server's",
            detail,
        });
    }
    let alert = text.find("received fatal alert: ")?;
    let detail = &text[alert..];
    let about_ours = [
        "CertificateRequired",
        "BadCertificate",
        "UnknownCA",
        "UnsupportedCertificate",
        "CertificateUnknown",
        "CertificateExpired",
    ]
    .iter()
    .any(|alert| detail.contains(alert));
    about_ours.then(|| Error::TlsCertificate {
        whose: "our client",
        detail: format!(
            "the server ended the handshake ({detail}): it wants a client certificate \
             signed by a CA it trusts (tls.cert and tls.key)"
        ),
    })
}

#[cfg(not(feature = "tls"))]
fn load_enabled(_files: Option<&TlsFiles>) -> Result<Certificates> {
    Err(Error::InvalidConfig(
        "TLS (rediss:// or certificate files) needs redlatch built with the `tls` feature"
            .to_owned(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificate_errors_say_whose_certificate() {
        let server = certificate_error(
            "io error: invalid peer certificate: Other(OtherError(UnsupportedCertVersion))",
        );
        match server {
            Some(Error::TlsCertificate { whose, detail }) => {
                assert_eq!(whose, "the server's");
                assert!(detail.contains("X.509 v1"), "{detail}");
                assert!(detail.contains("subjectAltName"), "{detail}");
            }
            other => panic!("{other:?}"),
        }
        let unknown = certificate_error("invalid peer certificate: UnknownIssuer");
        assert!(
            matches!(&unknown, Some(Error::TlsCertificate { detail, .. }) if detail.contains("tls.ca")),
            "{unknown:?}"
        );
        let ours = certificate_error("received fatal alert: CertificateRequired");
        assert!(
            matches!(
                ours,
                Some(Error::TlsCertificate {
                    whose: "our client",
                    ..
                })
            ),
            "{ours:?}"
        );
        assert!(certificate_error("Connection refused (os error 111)").is_none());
    }
}
