//! One throwaway `redis-server` child process.

use std::collections::BTreeSet;
use std::fmt;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::thread::sleep;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::process::{self, Launch};
use crate::ready::{self, Probe};
use crate::server_settings::{CONFIG_FILE, LOG_FILE, STDIO_FILE, ServerBuilder};

/// Fresh ports tried by [`RedisServer::start`] before giving up.
const START_ATTEMPTS: usize = 10;
/// How long one start attempt may take before we try another port.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long [`RedisServer::restart`] may take, port reuse included.
const RESTART_TIMEOUT: Duration = Duration::from_secs(10);
/// Readiness polling interval.
const POLL: Duration = Duration::from_millis(5);
/// A server that keeps rejecting our `AUTH`/`PING` this long, while our child
/// is alive, is misconfigured rather than someone else's.
const REJECTION_GRACE: Duration = Duration::from_secs(1);

/// One running `redis-server` child process, listening on `127.0.0.1` on a
/// port of its own, with its own temp dir, no persistence, and an empty
/// dataset.
///
/// Dropping it kills the process (`SIGKILL`) and deletes its temp dir. On
/// Linux the process is also killed if the test process dies abruptly.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    tls_port: Option<u16>,
    paused: AtomicBool,
    settings: ServerBuilder,
    program: PathBuf,
    dir: TempDir,
}

/// Why one attempt to bring a server up failed.
enum Failure {
    /// Worth another attempt (port taken, too slow).
    Retry(io::Error),
    /// Another attempt would fail the same way.
    Fatal(io::Error),
}

impl RedisServer {
    /// Start a server with default settings (no password, no extra config)
    /// and wait until it answers `PING`.
    ///
    /// # Errors
    ///
    /// As [`ServerBuilder::start`].
    pub fn start() -> io::Result<RedisServer> {
        Self::builder().start()
    }

    /// A [`ServerBuilder`] to set a password, an ACL user or config
    /// directives before starting.
    pub fn builder() -> ServerBuilder {
        ServerBuilder::default()
    }

    pub(crate) fn launch(settings: ServerBuilder) -> io::Result<RedisServer> {
        let program = crate::binary::redis_server_path()?;
        let dir = tempfile::Builder::new()
            .prefix("redlatch-redis-")
            .tempdir()?;
        std::fs::write(
            dir.path().join(CONFIG_FILE),
            settings.config_text(dir.path())?,
        )?;
        let mut server = RedisServer {
            child: None,
            port: 0,
            tls_port: None,
            paused: AtomicBool::new(false),
            settings,
            program,
            dir,
        };
        let mut last_error = None;
        for _ in 0..START_ATTEMPTS {
            // Another process may grab the port between here and redis's
            // bind; the attempt then fails and we pick another port.
            server.port = reserve_free_port()?;
            if server.settings.tls.is_some() {
                server.tls_port = Some(reserve_free_port()?);
            }
            match server.spawn_until_ready(Instant::now() + ATTEMPT_TIMEOUT) {
                Ok(()) => return Ok(server),
                Err(Failure::Fatal(e)) => return Err(e),
                Err(Failure::Retry(e)) => {
                    release_port(std::mem::take(&mut server.port));
                    if let Some(port) = server.tls_port.take() {
                        release_port(port);
                    }
                    last_error = Some(e);
                }
            }
        }
        let last = last_error.expect("START_ATTEMPTS > 0");
        Err(io::Error::new(
            last.kind(),
            format!(
                "redis-server did not start in {START_ATTEMPTS} attempts on fresh ports; last: {last}"
            ),
        ))
    }

    /// The URL to connect to this server: `redis://127.0.0.1:PORT`, or
    /// `redis://USER:PASSWORD@127.0.0.1:PORT` (percent-encoded) when the
    /// builder set an [ACL user](ServerBuilder::acl_user) or, with user
    /// `default`, a [password](ServerBuilder::password).
    pub fn url(&self) -> String {
        match self.settings.auth() {
            Some(auth) => format!(
                "redis://{}:{}@127.0.0.1:{}",
                percent_encode(auth.user),
                percent_encode(auth.password),
                self.port
            ),
            None => format!("redis://127.0.0.1:{}", self.port),
        }
    }

    /// The TLS URL, `rediss://[USER:PASSWORD@]127.0.0.1:TLS_PORT`, when the
    /// builder gave it [TLS files](ServerBuilder::tls).
    pub fn tls_url(&self) -> Option<String> {
        let port = self.tls_port?;
        let plain = self.url();
        let at = plain.rfind(':')?;
        Some(format!("rediss{}:{port}", &plain["redis".len()..at]))
    }

    /// The TCP port the server listens on (kept across [`restart`](Self::restart)).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// The process id, or `None` while [killed](Self::kill).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// A redis-rs client for this server, logged in as [`url`](Self::url)
    /// says. Creating it does not connect.
    ///
    /// # Panics
    ///
    /// Never in practice: only if redis-rs rejected the URL the testkit built.
    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).unwrap_or_else(|e| {
            panic!(
                "testkit: redis-rs rejected the URL of the server on port {}: {e}",
                self.port
            )
        })
    }

    /// A new synchronous connection (connect timeout 5 s, no read timeout:
    /// set one with `set_read_timeout` when talking to a paused server).
    ///
    /// # Panics
    ///
    /// With a message naming the server and its state if it cannot connect,
    /// e.g. because the server was killed or is paused.
    pub fn conn(&self) -> redis::Connection {
        self.client()
            .get_connection_with_timeout(Duration::from_secs(5))
            .unwrap_or_else(|e| {
                panic!(
                    "testkit: cannot connect to redis-server at {} (pid {:?}, paused: {}): {e}",
                    self.addr(),
                    self.pid(),
                    self.is_paused()
                )
            })
    }

    /// Freeze the process with `SIGSTOP`: connections are still accepted by
    /// the kernel but nothing is answered until [`resume`](Self::resume).
    /// Returns once the process is actually stopped (on Linux).
    ///
    /// # Errors
    ///
    /// If the server is killed, or the signal cannot be sent.
    pub fn pause(&self) -> io::Result<()> {
        let pid = self.running_pid()?;
        signal(pid, libc::SIGSTOP)?;
        self.paused.store(true, Ordering::SeqCst);
        wait_for_stopped(pid, true);
        Ok(())
    }

    /// Let a [paused](Self::pause) process run again with `SIGCONT`.
    ///
    /// # Errors
    ///
    /// If the server is killed, or the signal cannot be sent.
    pub fn resume(&self) -> io::Result<()> {
        let pid = self.running_pid()?;
        signal(pid, libc::SIGCONT)?;
        self.paused.store(false, Ordering::SeqCst);
        wait_for_stopped(pid, false);
        Ok(())
    }

    /// Whether the server is [paused](Self::pause).
    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::SeqCst)
    }

    /// Kill the process with `SIGKILL` (no chance to save or answer
    /// anything) and reap it. Does nothing if already killed.
    ///
    /// # Errors
    ///
    /// If the signal cannot be sent or the process cannot be reaped.
    pub fn kill(&mut self) -> io::Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        // A stopped process dies from SIGKILL too; no need to resume first.
        if let Err(e) = signal(child.id(), libc::SIGKILL) {
            self.child = Some(child);
            return Err(e);
        }
        self.paused.store(false, Ordering::SeqCst);
        child.wait()?;
        Ok(())
    }

    /// Kill the server if it runs, then start a fresh one with an empty
    /// dataset on the same port with the same settings, and wait until it
    /// answers `PING`. Models a crash and restart without persistence.
    ///
    /// # Errors
    ///
    /// If the old process cannot be killed, the port stays taken, or the new
    /// server does not answer within 10 s (the error then includes the tail
    /// of its log).
    pub fn restart(&mut self) -> io::Result<()> {
        self.kill()?;
        self.clear_data()?;
        self.start_again()
    }

    /// Kill the server if it runs (`SIGKILL`), then start it again on the
    /// same port with the same settings and the files it left in its
    /// [`dir`](Self::dir), and wait until it answers `PING`. Models a crash
    /// and restart with persistence: what it kept depends on its settings
    /// (e.g. `.arg("appendonly", "yes").arg("appendfsync", "always")` keeps
    /// every write, functions included).
    ///
    /// # Errors
    ///
    /// As [`restart`](Self::restart).
    pub fn restart_keeping_data(&mut self) -> io::Result<()> {
        self.kill()?;
        self.start_again()
    }

    fn start_again(&mut self) -> io::Result<()> {
        let deadline = Instant::now() + RESTART_TIMEOUT;
        loop {
            wait_until_bindable(self.port, deadline)?;
            match self.spawn_until_ready(deadline) {
                Ok(()) => return Ok(()),
                Err(Failure::Fatal(e)) => return Err(e),
                Err(Failure::Retry(e)) if Instant::now() >= deadline => return Err(e),
                // Probably lost the port to another process for a moment.
                Err(Failure::Retry(_)) => sleep(Duration::from_millis(50)),
            }
        }
    }

    /// The server's own temp dir (its `dir`, config and log files); deleted
    /// when the server is dropped.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn running_pid(&self) -> io::Result<u32> {
        self.pid().ok_or_else(|| {
            io::Error::other(format!(
                "redis-server on port {} is not running (it was killed)",
                self.port
            ))
        })
    }

    /// Spawn on `self.port` and poll until the server answers, the child
    /// exits, or `deadline` passes. On failure no child is left behind.
    fn spawn_until_ready(&mut self, deadline: Instant) -> Result<(), Failure> {
        let launch = Launch {
            program: self.program.clone(),
            config: self.dir().join(CONFIG_FILE),
            port: self.port,
            tls_port: self.tls_port,
            dir: self.dir().to_path_buf(),
            stdio_log: self.dir().join(STDIO_FILE),
            sentinel: self.settings.sentinel,
            env: self.settings.env.clone(),
        };
        let child = process::spawn(launch).map_err(|e| {
            Failure::Fatal(io::Error::new(
                e.kind(),
                format!("cannot run {}: {e}", self.program.display()),
            ))
        })?;
        let mut child = ChildGuard(Some(child));
        let pid = child.id();
        let mut rejected_since = None;
        loop {
            match child.try_wait() {
                Ok(None) => {}
                Ok(Some(status)) => {
                    return Err(Failure::Retry(io::Error::other(format!(
                        "redis-server on port {} exited during startup ({status}){}",
                        self.port,
                        ready::log_tail(self.dir())
                    ))));
                }
                Err(e) => return Err(Failure::Fatal(e)),
            }
            match ready::probe(self.addr(), self.settings.auth(), pid) {
                Probe::Ready => {
                    self.child = child.0.take();
                    return Ok(());
                }
                Probe::NotYet => rejected_since = None,
                Probe::Rejected(msg) => {
                    let since = *rejected_since.get_or_insert_with(Instant::now);
                    if since.elapsed() >= REJECTION_GRACE {
                        return Err(Failure::Fatal(io::Error::other(format!(
                            "redis-server on port {} rejects the testkit's AUTH/PING: {msg}{}",
                            self.port,
                            ready::log_tail(self.dir())
                        ))));
                    }
                }
            }
            if Instant::now() >= deadline {
                return Err(Failure::Retry(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "redis-server on port {} did not answer PING in time{}",
                        self.port,
                        ready::log_tail(self.dir())
                    ),
                )));
            }
            sleep(POLL);
        }
    }

    /// Delete whatever the old process may have persisted (dump, AOF), so a
    /// restart starts empty even if the builder enabled persistence.
    fn clear_data(&self) -> io::Result<()> {
        for entry in std::fs::read_dir(self.dir())? {
            let entry = entry?;
            let name = entry.file_name();
            if [CONFIG_FILE, LOG_FILE, STDIO_FILE]
                .iter()
                .any(|keep| name == *keep)
            {
                continue;
            }
            if entry.file_type()?.is_dir() {
                std::fs::remove_dir_all(entry.path())?;
            } else {
                std::fs::remove_file(entry.path())?;
            }
        }
        Ok(())
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if self.is_paused() {
            let _ = self.resume();
        }
        let _ = self.kill();
        release_port(self.port);
        if let Some(port) = self.tls_port {
            release_port(port);
        }
        // `self.dir` (a TempDir) is removed when the fields drop, ignoring errors.
    }
}

impl fmt::Debug for RedisServer {
    // Hand-written: the facts a failing test needs, not the internals.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisServer")
            .field("addr", &self.addr())
            .field("pid", &self.pid())
            .field("paused", &self.is_paused())
            .field("dir", &self.dir())
            .finish_non_exhaustive()
    }
}

/// A child that is killed and reaped when dropped, unless taken out: a
/// start attempt that fails leaves nothing behind.
struct ChildGuard(Option<Child>);

impl std::ops::Deref for ChildGuard {
    type Target = Child;
    fn deref(&self) -> &Child {
        self.0.as_ref().expect("ChildGuard used after take")
    }
}

impl std::ops::DerefMut for ChildGuard {
    fn deref_mut(&mut self) -> &mut Child {
        self.0.as_mut().expect("ChildGuard used after take")
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            // std's kill, unlike a raw kill(2), does not signal a pid that
            // try_wait already reaped (and that may have been recycled).
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Ports of this process's live servers, killed ones included: a killed
/// server wants its port back on restart, so new servers must not take it.
static RESERVED_PORTS: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// A port that was free a moment ago and that no other server of this
/// process owns; reserved until [`release_port`].
fn reserve_free_port() -> io::Result<u16> {
    let mut reserved = RESERVED_PORTS
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    // Keep rejected listeners open so the kernel offers a different port.
    let mut rejected = Vec::new();
    loop {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        let port = listener.local_addr()?.port();
        if reserved.insert(port) {
            return Ok(port);
        }
        rejected.push(listener);
    }
}

/// Give a reserved port back; 0 (no port) is ignored.
fn release_port(port: u16) {
    if port != 0 {
        let mut reserved = RESERVED_PORTS
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        reserved.remove(&port);
    }
}

/// Wait until `port` can be bound again (std sets `SO_REUSEADDR`, as redis
/// does, so `TIME_WAIT` connections do not block it; a dying process might).
fn wait_until_bindable(port: u16, deadline: Instant) -> io::Result<()> {
    loop {
        match TcpListener::bind((Ipv4Addr::LOCALHOST, port)) {
            Ok(_) => return Ok(()),
            Err(e) if Instant::now() >= deadline => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("port {port} is still taken, cannot restart redis-server on it: {e}"),
                ));
            }
            Err(_) => sleep(Duration::from_millis(10)),
        }
    }
}

fn signal(pid: u32, sig: libc::c_int) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(io::Error::other)?;
    // SAFETY: kill(2) has no memory-safety preconditions. The pid is our
    // unreaped child, so it cannot have been recycled for another process.
    if unsafe { libc::kill(pid, sig) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Wait (up to 1 s) until the kernel reports `pid` stopped or running, so
/// that `pause()` really has taken effect when it returns. Linux only; a
/// no-op elsewhere.
fn wait_for_stopped(pid: u32, stopped: bool) {
    #[cfg(target_os = "linux")]
    {
        let deadline = Instant::now() + Duration::from_secs(1);
        let stat = format!("/proc/{pid}/stat");
        while Instant::now() < deadline {
            let Ok(text) = std::fs::read_to_string(&stat) else {
                return;
            };
            // The state letter follows the command name, which is in
            // parentheses and may itself contain ") ".
            let state = text
                .rsplit_once(") ")
                .and_then(|(_, rest)| rest.chars().next());
            if state.is_none() || (state == Some('T')) == stopped {
                return;
            }
            sleep(Duration::from_millis(1));
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (pid, stopped);
}

/// Percent-encode everything but RFC 3986 unreserved characters, for the
/// user and password parts of a URL.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_reserved(port: u16) -> bool {
        RESERVED_PORTS.lock().unwrap().contains(&port)
    }

    #[test]
    fn reserved_ports_are_not_handed_out_twice() {
        let a = reserve_free_port().unwrap();
        let b = reserve_free_port().unwrap();
        assert_ne!(a, b);
        assert!(is_reserved(a) && is_reserved(b));
        release_port(a);
        release_port(b);
        assert!(!is_reserved(a) && !is_reserved(b));
    }

    #[test]
    fn a_killed_server_keeps_its_port_reserved_until_dropped() {
        let mut server = RedisServer::start().unwrap();
        let port = server.port();
        assert!(is_reserved(port));
        server.kill().unwrap();
        assert!(is_reserved(port), "a killed server must keep its port");
        drop(server);
        assert!(!is_reserved(port));
    }

    #[test]
    fn percent_encode_keeps_only_unreserved_characters() {
        assert_eq!(percent_encode("aZ9-._~"), "aZ9-._~");
        assert_eq!(percent_encode("p@ss w:rd/é"), "p%40ss%20w%3Ard%2F%C3%A9");
    }
}
