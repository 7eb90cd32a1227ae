//! TLS (custom CA, client certificates) and ACL users: the least-privilege
//! ACL documented in docs/DEPLOYMENT.md is the one tested here, read from
//! the document itself.

use std::time::Duration;

use redlatch::TlsFiles;
use testkit::{RedisServer, TlsCertificates};

use crate::common::code;
use crate::harness::Deployment;
use crate::topologies::every_command_works;

const PASSWORD: &str = "s3cret-pass";

/// The `user ...` line of the least-privilege ACL in docs/DEPLOYMENT.md
/// (the first ```acl block), for key prefix `app:`, with our password.
fn documented_acl() -> String {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/DEPLOYMENT.md"
    ))
    .expect("docs/DEPLOYMENT.md");
    let block = doc
        .split("```acl\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("an ```acl block in docs/DEPLOYMENT.md");
    let line = block
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .collect::<Vec<_>>()
        .join(" ");
    let rule = line
        .strip_prefix("user ")
        .expect("the ACL block holds a `user` line")
        .replace(">CHANGE-ME", &format!(">{PASSWORD}"));
    assert!(
        rule.contains(PASSWORD),
        "the documented rule sets >CHANGE-ME: {rule}"
    );
    rule
}

/// A settings file with key prefix `app:` (the documented ACL's).
fn prefix_config(dir: &tempfile::TempDir) -> String {
    let path = dir.path().join("app.toml");
    std::fs::write(&path, "[lock]\nkey_prefix = \"app:\"\n").expect("write config");
    path.to_string_lossy().into_owned()
}

fn tls_flags(certs: &TlsCertificates, url: String, client_cert: bool) -> Vec<String> {
    let mut flags = vec![
        "--redis".to_owned(),
        url,
        "--tls-ca".to_owned(),
        certs.ca().to_string_lossy().into_owned(),
    ];
    if client_cert {
        flags.extend([
            "--tls-cert".to_owned(),
            certs.client_cert().to_string_lossy().into_owned(),
            "--tls-key".to_owned(),
            certs.client_key().to_string_lossy().into_owned(),
        ]);
    }
    flags
}

#[test]
fn tls_with_client_certificates_and_the_least_privilege_acl_user_runs_every_command() {
    let certs = TlsCertificates::generate().expect("certificates");
    let server = RedisServer::builder()
        .tls(&certs, true)
        .arg("user", &documented_acl())
        .start()
        .expect("redis-server with TLS");
    let url = server.tls_url().expect("TLS port").replacen(
        "rediss://",
        &format!("rediss://locker:{PASSWORD}@"),
        1,
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let mut flags = tls_flags(&certs, url.clone(), true);
    flags.extend(["--config".to_owned(), prefix_config(&dir)]);
    every_command_works(&Deployment::new(flags, ()), "tls-acl");

    // Every primitive of the library with the same user and files.
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let client = redlatch::Client::builder(&url)
            .key_prefix("app:")
            .tls(
                TlsFiles::default()
                    .with_ca(certs.ca())
                    .with_client_cert(certs.client_cert(), certs.client_key()),
            )
            .connect()
            .await
            .expect("connect over TLS as the ACL user");
        let guard = client.lock("orders").acquire().await.expect("lock");
        guard.release().await.expect("release");
        let fair = client.fair_lock("fair").acquire().await.expect("fair lock");
        fair.release().await.expect("fair release");
        let rw = client.read_write_lock("table");
        let read = rw.try_read().await.expect("read").expect("read held");
        read.release().await.expect("read release");
        let write = rw.try_write().await.expect("write").expect("write held");
        write.release().await.expect("write release");
        let semaphore = client.semaphore("pool");
        semaphore.add_permits(2).await.expect("add permits");
        let permit = semaphore.acquire().await.expect("permit");
        permit.release().await.expect("permit release");
        let expirable = client.permit_semaphore("slots");
        expirable
            .add_permits(1)
            .await
            .expect("add expirable permits");
        let slot = expirable
            .clone()
            .with_lease(Duration::from_secs(5))
            .acquire()
            .await
            .expect("expirable permit");
        slot.release().await.expect("expirable release");
        let listed = client.locks("").await.expect("list locks");
        assert!(listed.is_empty(), "{listed:?}");
    });
}

#[test]
fn tls_refuses_a_missing_ca_or_a_missing_client_certificate_with_exit_69() {
    let certs = TlsCertificates::generate().expect("certificates");
    let server = RedisServer::builder()
        .tls(&certs, true)
        .start()
        .expect("redis-server with TLS");
    let url = server.tls_url().expect("TLS port");
    for (flags, what) in [
        (
            vec!["--redis".to_owned(), url.clone()],
            "no CA: the server's certificate is unknown",
        ),
        (
            tls_flags(&certs, url.clone(), false),
            "no client certificate",
        ),
    ] {
        let output = Deployment::new(flags, ()).output(&["status", "x"]);
        assert_eq!(code(output.status), 69, "{what}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.starts_with("redlatch: cannot reach Redis"),
            "{what}: {stderr}"
        );
    }
    // A certificate without its key is a usage error before any connection.
    let output = Deployment::new(
        vec![
            "--redis".to_owned(),
            url,
            "--tls-cert".to_owned(),
            certs.client_cert().to_string_lossy().into_owned(),
        ],
        (),
    )
    .output(&["status", "x"]);
    assert_eq!(code(output.status), 64);
}

#[test]
fn a_wrong_password_names_authentication_and_a_missing_permission_names_the_command() {
    let server = RedisServer::builder()
        .arg("user", &documented_acl())
        .arg(
            "user",
            "reader on >r3ader ~* &* -@all +@connection +hgetall +pttl +get +type +scan +pubsub|numsub",
        )
        .start()
        .expect("redis-server with ACL users");
    let port = server.port();
    let wrong = Deployment::new(
        vec![
            "--redis".into(),
            format!("redis://locker:wrong@127.0.0.1:{port}"),
        ],
        (),
    )
    .output(&["status", "x"]);
    assert_eq!(code(wrong.status), 69);
    let stderr = String::from_utf8_lossy(&wrong.stderr).to_lowercase();
    assert!(
        stderr.contains("auth") || stderr.contains("password"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("wrong@"),
        "the password is shown: {stderr}"
    );

    // A user without the script commands: every command names what it lacks.
    let reader = Deployment::new(
        vec![
            "--redis".into(),
            format!("redis://reader:r3ader@127.0.0.1:{port}"),
        ],
        (),
    );
    for command in [
        &["status", "x"][..],
        &["run", "x", "--wait", "1s", "--", "true"],
    ] {
        let refused = reader.output(command);
        assert_ne!(code(refused.status), 0, "{command:?}");
        let stderr = String::from_utf8_lossy(&refused.stderr).to_lowercase();
        assert!(stderr.contains("noperm"), "{command:?}: {stderr}");
        assert!(stderr.contains("evalsha"), "{command:?}: {stderr}");
    }
}
