//! Certificates for TLS tests: a throwaway CA, a server certificate for
//! `127.0.0.1`/`localhost` and a client certificate, as PEM files.

use std::io;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use tempfile::TempDir;

/// A CA and the certificates it signed, in a temp dir removed on drop.
///
/// ```no_run
/// let certs = testkit::TlsCertificates::generate()?;
/// let server = testkit::RedisServer::builder().tls(&certs, true).start()?;
/// assert!(server.tls_url().unwrap().starts_with("rediss://127.0.0.1:"));
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct TlsCertificates {
    dir: TempDir,
}

impl TlsCertificates {
    /// Generates the CA, the server and the client certificates.
    ///
    /// # Errors
    ///
    /// When a key cannot be generated or a file cannot be written.
    pub fn generate() -> io::Result<TlsCertificates> {
        let dir = tempfile::Builder::new().prefix("redlatch-tls-").tempdir()?;
        let ca = {
            let mut params = CertificateParams::new(Vec::<String>::new()).map_err(other)?;
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            params
                .distinguished_name
                .push(DnType::CommonName, "redlatch test CA");
            params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
            CertifiedIssuer::self_signed(params, KeyPair::generate().map_err(other)?)
                .map_err(other)?
        };
        std::fs::write(dir.path().join("ca.crt"), ca.pem())?;
        for (name, usage, names) in [
            (
                "server",
                ExtendedKeyUsagePurpose::ServerAuth,
                vec!["127.0.0.1".to_owned(), "localhost".to_owned()],
            ),
            ("client", ExtendedKeyUsagePurpose::ClientAuth, Vec::new()),
        ] {
            let mut params = CertificateParams::new(names).map_err(other)?;
            params
                .distinguished_name
                .push(DnType::CommonName, format!("redlatch test {name}"));
            params.extended_key_usages = vec![usage];
            let key = KeyPair::generate().map_err(other)?;
            let cert = params.signed_by(&key, &ca).map_err(other)?;
            std::fs::write(dir.path().join(format!("{name}.crt")), cert.pem())?;
            std::fs::write(dir.path().join(format!("{name}.key")), key.serialize_pem())?;
        }
        Ok(TlsCertificates { dir })
    }

    /// The CA certificate that signed both others.
    pub fn ca(&self) -> PathBuf {
        self.file("ca.crt")
    }

    /// The server's certificate (for `127.0.0.1` and `localhost`).
    pub fn server_cert(&self) -> PathBuf {
        self.file("server.crt")
    }

    /// The server's private key.
    pub fn server_key(&self) -> PathBuf {
        self.file("server.key")
    }

    /// A client certificate, for servers with `tls-auth-clients yes`.
    pub fn client_cert(&self) -> PathBuf {
        self.file("client.crt")
    }

    /// The client certificate's private key.
    pub fn client_key(&self) -> PathBuf {
        self.file("client.key")
    }

    /// The directory holding the files.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

fn other(error: rcgen::Error) -> io::Error {
    io::Error::other(format!("certificate generation: {error}"))
}
