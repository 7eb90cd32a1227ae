//! The lock servers of a run, what faults can do to them, and the
//! libfaketime set-up for clock jumps.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;
use std::time::Instant;

use testkit::RedisServer;

use crate::check::recipes::recipe::LOCK_KEY;

/// Where Debian's `faketime` package puts the library.
const LIBFAKETIME: [&str; 2] = [
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
];

/// The lock servers (one, or several for Redlock), and what a fault left
/// to undo. Faults hit the first server only: for Redlock, a minority.
pub struct LockServer {
    /// The server faults are injected on.
    server: RedisServer,
    /// The others, never faulted.
    others: Vec<RedisServer>,
    /// The libfaketime offset file, for clock jumps.
    clock_file: Option<PathBuf>,
    /// Seconds the server's clock has been moved forward.
    clock_offset: u64,
}

/// The libfaketime library, if installed and usable with this
/// redis-server (checked once per process).
///
/// # Errors
/// Why clock jumps cannot be injected here.
pub fn faketime_library() -> Result<&'static str, String> {
    static PROBE: OnceLock<Result<&'static str, String>> = OnceLock::new();
    PROBE.get_or_init(probe_faketime).clone()
}

/// Starts redis-server under libfaketime on a Unix socket for up to 3 s:
/// usable if it gets ready. Some builds (jemalloc) recurse into
/// `clock_gettime` at start-up under libfaketime and never get ready.
fn probe_faketime() -> Result<&'static str, String> {
    let library = LIBFAKETIME
        .iter()
        .copied()
        .find(|path| Path::new(path).exists())
        .ok_or("libfaketime is not installed (Debian package `faketime`)")?;
    let program = testkit::redis_server_path().map_err(|error| error.to_string())?;
    let dir = tempfile::tempdir().map_err(|error| error.to_string())?;
    let log = dir.path().join("probe.log");
    let mut child = Command::new(program)
        .args(["--port", "0", "--save", "", "--appendonly", "no"])
        .arg("--unixsocket")
        .arg(dir.path().join("probe.sock"))
        .arg("--logfile")
        .arg(&log)
        .current_dir(dir.path())
        .env("LD_PRELOAD", library)
        .env("FAKETIME", "+0")
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|error| error.to_string())?;
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut ready = false;
    while Instant::now() < deadline && !ready {
        std::thread::sleep(Duration::from_millis(50));
        ready = std::fs::read_to_string(&log)
            .is_ok_and(|text| text.to_lowercase().contains("ready to accept connections"));
        if matches!(child.try_wait(), Ok(Some(_))) {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    if ready {
        Ok(library)
    } else {
        Err(
            "libfaketime is installed but this redis-server does not start under it \
             (it recurses into clock_gettime at start-up)"
                .to_owned(),
        )
    }
}

impl LockServer {
    /// Starts `count` lock servers; the first under libfaketime when
    /// `clock` is set.
    ///
    /// # Errors
    /// Why the servers (or libfaketime) are not available.
    pub fn start(count: usize, clock: bool, dir: &Path) -> Result<LockServer, String> {
        let others = (1..count)
            .map(|_| RedisServer::start().map_err(|error| error.to_string()))
            .collect::<Result<Vec<_>, _>>()?;
        if !clock {
            let server = RedisServer::start().map_err(|error| error.to_string())?;
            return Ok(LockServer {
                server,
                others,
                clock_file: None,
                clock_offset: 0,
            });
        }
        let library = faketime_library()?;
        let clock_file = dir.join("faketime.rc");
        std::fs::write(&clock_file, "+0\n").map_err(|error| error.to_string())?;
        let server = RedisServer::builder()
            .env("LD_PRELOAD", library)
            .env("FAKETIME_TIMESTAMP_FILE", &clock_file.to_string_lossy())
            .env("FAKETIME_NO_CACHE", "1")
            // Only the wall clock jumps, as an NTP step would make it.
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
            .start()
            .map_err(|error| {
                let first = error.to_string();
                let first = first.lines().next().unwrap_or_default().to_owned();
                format!("redis-server does not start under libfaketime: {first}")
            })?;
        Ok(LockServer {
            server,
            others,
            clock_file: Some(clock_file),
            clock_offset: 0,
        })
    }

    /// Every lock server's URL, the faulted one first.
    pub fn urls(&self) -> Vec<String> {
        std::iter::once(&self.server)
            .chain(&self.others)
            .map(RedisServer::url)
            .collect()
    }

    /// Every lock server's address, the faulted one first.
    pub fn addrs(&self) -> Vec<std::net::SocketAddr> {
        std::iter::once(&self.server)
            .chain(&self.others)
            .map(RedisServer::addr)
            .collect()
    }

    fn server_at(&mut self, index: usize) -> Result<&mut RedisServer, String> {
        match index {
            0 => Ok(&mut self.server),
            other => self
                .others
                .get_mut(other - 1)
                .ok_or_else(|| format!("no lock server {other}")),
        }
    }

    /// Stops the faulted server with SIGSTOP.
    ///
    /// # Errors
    /// When it cannot be signalled.
    pub fn pause(&mut self) -> Result<(), String> {
        self.server.pause().map_err(|error| error.to_string())
    }

    /// Lets the paused server go on.
    ///
    /// # Errors
    /// When it cannot be signalled.
    pub fn resume(&mut self) -> Result<(), String> {
        self.server.resume().map_err(|error| error.to_string())
    }

    /// Kills lock server `index` with SIGKILL (0: the faulted one).
    ///
    /// # Errors
    /// When there is no such server, or it cannot be killed.
    pub fn kill(&mut self, index: usize) -> Result<(), String> {
        self.server_at(index)?
            .kill()
            .map_err(|error| error.to_string())
    }

    /// Restarts lock server `index` empty (0: the faulted one), killing it
    /// first if it runs.
    ///
    /// # Errors
    /// When there is no such server, or it cannot be restarted.
    pub fn restart(&mut self, index: usize) -> Result<(), String> {
        self.server_at(index)?
            .restart()
            .map_err(|error| error.to_string())
    }

    /// Moves the faulted server's wall clock forward by `by`, in whole
    /// seconds (libfaketime's offset unit), at least one.
    ///
    /// # Errors
    /// When the server does not run under libfaketime.
    pub fn jump_clock(&mut self, by: Duration) -> Result<(), String> {
        let file = self.clock_file.as_ref().ok_or("not under libfaketime")?;
        self.clock_offset += by.as_secs().max(1);
        std::fs::write(file, format!("+{}\n", self.clock_offset)).map_err(|error| error.to_string())
    }

    /// The lock key as the run leaves it, when it is still there: a key
    /// without expiry explains a run where nobody acquires any more.
    pub fn describe_key(&self) -> Option<String> {
        let mut conn = self
            .server
            .client()
            .get_connection_with_timeout(Duration::from_secs(1))
            .ok()?;
        let _ = conn.set_read_timeout(Some(Duration::from_secs(1)));
        let ttl: i64 = redis::cmd("PTTL").arg(LOCK_KEY).query(&mut conn).ok()?;
        match ttl {
            -2 => None,
            -1 => Some(format!(
                "at the end, {LOCK_KEY} exists with no expiry: nobody can take it"
            )),
            ttl => Some(format!("at the end, {LOCK_KEY} expires in {ttl} ms")),
        }
    }

    /// Sends `cmd` to the faulted server.
    ///
    /// # Errors
    /// When the server cannot be reached or refuses it.
    pub fn admin(&self, cmd: &redis::Cmd) -> Result<(), String> {
        let mut conn = self
            .server
            .client()
            .get_connection_with_timeout(Duration::from_secs(2))
            .map_err(|error| error.to_string())?;
        cmd.exec(&mut conn).map_err(|error| error.to_string())
    }
}
