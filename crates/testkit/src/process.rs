//! Spawning `redis-server` children so that they die with the test process.
//!
//! On Linux each child asks the kernel for `SIGKILL` when its parent goes
//! away (`PR_SET_PDEATHSIG`). The kernel's "parent" is the *thread* that
//! forked, not the process, so children are forked from one long-lived
//! spawner thread: a server created in a short-lived thread (a test thread,
//! a thread of [`Servers::start`](crate::Servers::start), a `OnceLock`
//! initialiser) must outlive that thread.

use std::fs::OpenOptions;
use std::io;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc;

/// Everything needed to fork one `redis-server`.
#[derive(Debug)]
pub(crate) struct Launch {
    pub(crate) program: PathBuf,
    pub(crate) config: PathBuf,
    pub(crate) port: u16,
    /// A second port for TLS connections, when the server has TLS files.
    pub(crate) tls_port: Option<u16>,
    pub(crate) dir: PathBuf,
    /// Where the child's stdout and stderr go. Redis writes its log to its
    /// `logfile`, but fatal config errors only reach stderr.
    pub(crate) stdio_log: PathBuf,
    /// Start as a Sentinel.
    pub(crate) sentinel: bool,
    /// Extra environment variables for the child.
    pub(crate) env: Vec<(String, String)>,
}

struct Request {
    launch: Launch,
    reply: mpsc::Sender<io::Result<Child>>,
}

/// Spawn `redis-server` as described by `launch` (from the spawner thread).
pub(crate) fn spawn(launch: Launch) -> io::Result<Child> {
    let gone = || io::Error::other("testkit: the redis-server spawner thread is gone");
    let spawner = spawner().ok_or_else(gone)?;
    let (reply, answer) = mpsc::channel();
    spawner
        .send(Request { launch, reply })
        .map_err(|_| gone())?;
    answer.recv().map_err(|_| gone())?
}

/// The spawner thread's inbox, started on first use. The sender lives in a
/// static, so the thread's loop never ends before the process does.
fn spawner() -> Option<&'static mpsc::Sender<Request>> {
    static SPAWNER: OnceLock<Option<mpsc::Sender<Request>>> = OnceLock::new();
    SPAWNER
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<Request>();
            std::thread::Builder::new()
                .name("testkit-spawner".into())
                .spawn(move || {
                    for request in rx {
                        // Cannot fail: the requester blocks on the answer.
                        let _ = request.reply.send(spawn_here(&request.launch));
                    }
                })
                .ok()?;
            Some(tx)
        })
        .as_ref()
}

fn spawn_here(launch: &Launch) -> io::Result<Child> {
    let stdio = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&launch.stdio_log)?;
    let mut cmd = Command::new(&launch.program);
    cmd.arg(&launch.config)
        .arg("--port")
        .arg(launch.port.to_string())
        .args(
            launch
                .tls_port
                .into_iter()
                .flat_map(|port| ["--tls-port".to_owned(), port.to_string()]),
        )
        .args(launch.sentinel.then_some("--sentinel"))
        .current_dir(&launch.dir)
        .stdin(Stdio::null())
        .stdout(stdio.try_clone()?)
        .stderr(stdio)
        .envs(launch.env.iter().map(|(name, value)| (name, value)));
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt as _;
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: the hook runs in the forked child before exec, where only
        // async-signal-safe operations are allowed. `die_with_parent` only
        // makes the raw syscalls prctl, getppid and _exit, reads errno, and
        // neither allocates nor takes locks.
        unsafe {
            cmd.pre_exec(move || die_with_parent(parent));
        }
    }
    cmd.spawn()
}

/// Runs in the child between fork and exec: have the kernel SIGKILL us when
/// the forking thread dies.
#[cfg(target_os = "linux")]
fn die_with_parent(parent: libc::pid_t) -> io::Result<()> {
    // SAFETY: plain syscalls with constant, valid arguments.
    unsafe {
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
            return Err(io::Error::last_os_error());
        }
        // If the parent died before prctl took effect we have already been
        // re-parented and the signal will never come: exit now instead.
        if libc::getppid() != parent {
            libc::_exit(1);
        }
    }
    Ok(())
}
