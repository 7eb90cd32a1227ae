//! The command `run` starts, as a job: a process group of its own that
//! redlatch signals as a whole, that dies with redlatch, and that owns the
//! terminal while it runs in the foreground.
//!
//! Why a group: on a lost lock, a script's long step (a grandchild) must stop
//! too, not just the script. `kill(-pgid)` reaches every process that stayed
//! in the group; one that leaves it (`setsid`, a daemon's double fork) is out
//! of reach, which the README says.
//!
//! Dying with redlatch takes two pieces: the kernel kills the command itself
//! (`PR_SET_PDEATHSIG`, set before exec, so with no window once it runs);
//! the rest of the group, which no death signal covers (it is not
//! inherited), is killed by a reaper: a small `redlatch __job-reaper`
//! process in a group of its own that waits for EOF on a pipe only
//! redlatch holds, and SIGKILLs the job's group when it comes. redlatch
//! kills the reaper when it is done with the job.
//!
//! What the group changes, and how each is handled:
//! - Signals: the job is not in redlatch's group, so nothing sent to
//!   redlatch's group reaches it but through redlatch, which forwards every
//!   SIGINT, SIGTERM and SIGHUP it gets, once, to the whole job.
//! - The terminal: a background group that reads it is stopped (SIGTTIN).
//!   When redlatch is the terminal's foreground, the job is made the
//!   foreground instead (as a shell does for a job), so a prompt works and
//!   Ctrl-C goes straight to the job (not to redlatch, so it is not forwarded
//!   a second time). redlatch takes the terminal back when the job ends.
//! - Job control: a job stopped by Ctrl-Z (or by reading the terminal from
//!   the background) stops redlatch the same way, so the shell sees a
//!   stopped job; `fg`/`bg` continue redlatch, which continues the job (and
//!   gives it the terminal again if redlatch got it back). When no shell can
//!   continue redlatch, a job stopped for the terminal gets SIGHUP instead.

use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::signal::{SigSet, SigmaskHow, Signal, kill, pthread_sigmask};
use nix::sys::stat::Mode;
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
use nix::unistd::{Pid, getpgrp, tcgetpgrp, tcsetpgrp};

/// How often `run` looks whether a lost job's group has emptied after its
/// leader exited (no event says when a group's last member exits).
pub const GONE_POLL: Duration = Duration::from_millis(20);

/// A running job: the process group its leader (the command) made.
#[derive(Debug)]
pub struct Job {
    group: Pid,
    terminal: Option<Terminal>,
    /// Killed (`kill_on_drop`) with the job, so that it never fires on a
    /// group redlatch is done with.
    _reaper: Option<tokio::process::Child>,
}

impl Job {
    /// Whether no process is left in the group (zombies still count).
    pub fn is_gone(&self) -> bool {
        kill(Pid::from_raw(-self.group.as_raw()), None) == Err(Errno::ESRCH)
    }

    /// After a SIGCHLD: if the leader was stopped by job control (Ctrl-Z,
    /// the terminal read or written from the background), stops redlatch the
    /// same way and, once redlatch is continued, continues the job.
    pub fn relay_stop(&self) {
        let flags = WaitPidFlag::WSTOPPED | WaitPidFlag::WNOHANG;
        let Ok(WaitStatus::Stopped(_, stop)) = waitid(Id::Pid(self.group), flags) else {
            return;
        };
        // A SIGSTOP is someone's deliberate act on the job; theirs to undo.
        if !matches!(stop, Signal::SIGTSTP | Signal::SIGTTIN | Signal::SIGTTOU) {
            return;
        }
        if let Some(terminal) = &self.terminal {
            terminal.give_back(self.group);
        }
        // Stops this process until SIGCONT (`fg`, `bg`). The kernel discards
        // it when redlatch's group is orphaned (no shell could continue it),
        // and the job is simply continued.
        if let Err(error) = kill(Pid::this(), stop) {
            tracing::debug!(%error, "could not stop redlatch with the job");
        }
        if let Some(terminal) = &self.terminal {
            terminal.give_if_ours(self.group);
        }
        // Stopped for a terminal it still cannot have, and no shell can
        // continue redlatch (say, `(redlatch run ... &)`): continued alone, it
        // would stop again at once, over and over. Do what the kernel does to
        // an orphaned group with a stopped member: SIGHUP, then SIGCONT.
        let has_terminal = self
            .terminal
            .as_ref()
            .is_some_and(|terminal| terminal.is_foreground(self.group));
        if stop != Signal::SIGTSTP && !has_terminal && own_group_orphaned() {
            signal(Some(self), Signal::SIGHUP);
        }
        signal(Some(self), Signal::SIGCONT);
    }
}

/// Whether redlatch's process group is orphaned (POSIX): no member has a
/// parent in another group of the same session, so no shell can continue it
/// and the kernel does not stop it. Read from /proc; unreadable: not orphaned.
fn own_group_orphaned() -> bool {
    // (pid, parent, group, session) of every process we can see.
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    let processes: Vec<[i32; 4]> = entries
        .filter_map(|entry| {
            let pid: i32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // After the parenthesised name: state, ppid, pgrp, session.
            let mut fields = stat.rsplit_once(')')?.1.split_whitespace().skip(1);
            let mut next = || fields.next()?.parse::<i32>().ok();
            Some([pid, next()?, next()?, next()?])
        })
        .collect();
    let group = getpgrp().as_raw();
    let Some(session) = processes
        .iter()
        .find(|process| process[0] == nix::unistd::getpid().as_raw())
        .map(|process| process[3])
    else {
        return false;
    };
    !processes
        .iter()
        .filter(|member| member[2] == group)
        .any(|member| {
            processes
                .iter()
                .any(|parent| parent[0] == member[1] && parent[2] != group && parent[3] == session)
        })
}

impl Drop for Job {
    fn drop(&mut self) {
        if let Some(terminal) = &self.terminal {
            terminal.give_back(self.group);
        }
    }
}

/// Makes `command` start as a job: leader of a new process group, the
/// terminal's foreground if redlatch is, killed by the kernel (SIGKILL) if
/// redlatch dies first. Call `started` with the child's pid after spawning.
pub fn configure(command: &mut tokio::process::Command) -> Starting {
    // Our pid, read before the fork: the child compares it with its parent's.
    let redlatch = nix::unistd::getpid();
    let terminal = Terminal::controlling();
    let foreground = terminal
        .as_ref()
        .filter(|terminal| terminal.is_foreground(getpgrp()))
        .map(|terminal| terminal.tty.as_raw_fd());
    // SAFETY: the hook runs in the forked child before exec and calls only
    // async-signal-safe functions (setpgid, sigprocmask, tcsetpgrp, prctl,
    // getppid); it allocates nothing.
    unsafe {
        command.pre_exec(move || {
            if libc::setpgid(0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(tty) = foreground {
                // Here, before exec, so the job's first read of the terminal
                // finds it in the foreground. A background group's
                // tcsetpgrp raises SIGTTOU unless it is blocked.
                let mut block: libc::sigset_t = std::mem::zeroed();
                let mut old: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut block);
                libc::sigaddset(&mut block, libc::SIGTTOU);
                libc::sigprocmask(libc::SIG_BLOCK, &block, &mut old);
                libc::tcsetpgrp(tty, libc::getpid());
                libc::sigprocmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            }
            // The death signal fires when the thread that forked us exits:
            // `run` spawns from the main thread (block_on), which lives as
            // long as redlatch.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // redlatch died between fork and prctl: the signal was missed.
            if nix::unistd::getppid() != redlatch {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
    Starting {
        terminal,
        handed: foreground.is_some(),
    }
}

/// A job being spawned: what `configure` set up for it.
#[derive(Debug)]
pub struct Starting {
    terminal: Option<Terminal>,
    /// Whether the child takes the terminal before exec.
    handed: bool,
}

impl Starting {
    /// The job whose leader (and group id) is `pid`, with its reaper.
    pub fn started(mut self, pid: i32) -> Job {
        Job {
            group: Pid::from_raw(pid),
            terminal: self.terminal.take(),
            _reaper: spawn_reaper(pid),
        }
    }
}

impl Drop for Starting {
    /// A spawn that failed after the child took the terminal (exec failed):
    /// take it back from the dead group.
    fn drop(&mut self) {
        if let Some(terminal) = &self.terminal
            && self.handed
            && !terminal.is_foreground(getpgrp())
        {
            terminal.set_foreground(getpgrp());
        }
    }
}

/// Arguments of `redlatch __job-reaper`.
#[derive(Debug, clap::Args)]
pub struct ReaperArgs {
    /// The job's process group (never 1 or less: kill(-1) is everyone)
    #[arg(value_parser = clap::value_parser!(i32).range(2..))]
    group: i32,
}

/// Starts the reaper of group `group`; `None` (the command alone then dies
/// with redlatch) if it cannot start.
fn spawn_reaper(group: i32) -> Option<tokio::process::Child> {
    // /proc/self/exe: this very binary, even if replaced on disk meanwhile.
    let reaper = tokio::process::Command::new("/proc/self/exe")
        .arg("__job-reaper")
        .arg(group.to_string())
        .env_clear()
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        // Out of reach of the terminal's signals to redlatch's group.
        .process_group(0)
        .kill_on_drop(true)
        .spawn();
    reaper
        .inspect_err(|error| {
            tracing::warn!(%error, "no reaper: if redlatch dies, the command's children may run on");
        })
        .ok()
}

/// `redlatch __job-reaper GROUP`: waits for EOF on stdin (a pipe whose
/// other end only `run` holds), then SIGKILLs the group. `run` kills this
/// process first when it ends normally.
pub fn reaper(args: &ReaperArgs) -> u8 {
    use std::io::Read;
    let mut byte = [0u8; 1];
    loop {
        match std::io::stdin().read(&mut byte) {
            Ok(0) => break,
            Ok(_) => {}
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    // The group's id cannot go to another group while any of the job lives;
    // once none does, this finds nobody.
    let _ = kill(Pid::from_raw(-args.group), Signal::SIGKILL);
    0
}

/// Sends `signal` to the whole job; a job already gone is not an error.
pub fn signal(job: Option<&Job>, signal: Signal) {
    if let Some(job) = job
        && let Err(error) = kill(Pid::from_raw(-job.group.as_raw()), signal)
    {
        tracing::debug!(%signal, %error, "could not signal the command's process group");
    }
}

/// redlatch's controlling terminal.
#[derive(Debug)]
struct Terminal {
    tty: OwnedFd,
}

impl Terminal {
    /// The controlling terminal, if there is one (none under cron, systemd).
    fn controlling() -> Option<Terminal> {
        let flags = OFlag::O_RDWR | OFlag::O_CLOEXEC | OFlag::O_NOCTTY;
        let tty = nix::fcntl::open("/dev/tty", flags, Mode::empty()).ok()?;
        Some(Terminal { tty })
    }

    /// Whether `group` is the terminal's foreground.
    fn is_foreground(&self, group: Pid) -> bool {
        tcgetpgrp(&self.tty).is_ok_and(|foreground| foreground == group)
    }

    /// Gives the terminal back to redlatch's group if `job` has it (and not
    /// if the shell took it meanwhile, after a `bg`).
    fn give_back(&self, job: Pid) {
        if self.is_foreground(job) {
            self.set_foreground(getpgrp());
        }
    }

    /// Gives the terminal to `job` if redlatch's group has it (after `fg`).
    fn give_if_ours(&self, job: Pid) {
        if self.is_foreground(getpgrp()) {
            self.set_foreground(job);
        }
    }

    /// tcsetpgrp with SIGTTOU blocked in this thread: from a background
    /// group the call would otherwise stop us.
    fn set_foreground(&self, group: Pid) {
        let mut ttou = SigSet::empty();
        ttou.add(Signal::SIGTTOU);
        let mut old = SigSet::empty();
        if pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&ttou), Some(&mut old)).is_err() {
            return;
        }
        if let Err(error) = tcsetpgrp(&self.tty, group) {
            tracing::debug!(%error, %group, "could not hand the terminal over");
        }
        let _ = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&old), None);
    }
}
