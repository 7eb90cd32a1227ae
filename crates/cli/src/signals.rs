//! SIGINT, SIGTERM and SIGHUP for `run`.
//!
//! The command runs in a process group of its own (see `job`), so whoever
//! sent a signal (a terminal's Ctrl-C or hang-up, `kill`, a supervisor),
//! the job gets it only when redlatch forwards it: every one is forwarded.
//! This module installs its own handler rather than `tokio::signal::unix`'s
//! so that a signal ignored when redlatch started (`nohup`) stays ignored,
//! and is not forwarded: the handler writes one byte per signal (its number)
//! to a pipe that an async task reads, the classic self-pipe.

use std::io;
use std::os::fd::IntoRawFd;
use std::sync::atomic::{AtomicI32, Ordering};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
use tokio::net::unix::pipe;

/// The signals `run` forwards to the command.
const HANDLED: [Signal; 3] = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP];

/// The pipe's write end, for the handler; -1 until installed. Never closed.
static WRITE_FD: AtomicI32 = AtomicI32::new(-1);

/// The stream of handled signals.
pub struct Signals {
    pipe: pipe::Receiver,
}

impl Signals {
    /// Installs the handlers. Signals that were ignored when redlatch started
    /// (`nohup`, a background job) stay ignored, for redlatch and the command.
    pub fn install() -> io::Result<Signals> {
        let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)?;
        // Kept open for the life of the process: a handler may run at any time.
        WRITE_FD.store(write.into_raw_fd(), Ordering::SeqCst);
        let pipe = pipe::Receiver::from_owned_fd(read)?;
        let action = SigAction::new(
            SigHandler::Handler(on_signal),
            SaFlags::SA_RESTART,
            SigSet::empty(),
        );
        for signal in HANDLED {
            // SAFETY: `on_signal` only calls async-signal-safe functions.
            let old = unsafe { sigaction(signal, &action) }?;
            if matches!(old.handler(), SigHandler::SigIgn) {
                // SAFETY: restoring the disposition we found.
                unsafe { sigaction(signal, &old) }?;
            }
        }
        Ok(Signals { pipe })
    }

    /// The next signal. Cancel safe: a signal is consumed only when returned.
    pub async fn recv(&mut self) -> Signal {
        loop {
            let mut byte = [0u8; 1];
            match self.pipe.try_read(&mut byte) {
                Ok(1) => {
                    if let Ok(signal) = Signal::try_from(i32::from(byte[0])) {
                        return signal;
                    }
                }
                Ok(_) => std::future::pending::<()>().await, // cannot happen: we never close the write end
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    if let Err(error) = self.pipe.readable().await {
                        tracing::warn!(%error, "redlatch: signal pipe failed; signals are no longer forwarded");
                        std::future::pending::<()>().await;
                    }
                }
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => {
                    tracing::warn!(%error, "redlatch: signal pipe failed; signals are no longer forwarded");
                    std::future::pending::<()>().await;
                }
            }
        }
    }
}

/// The handler: one `write(2)` of one byte, errno preserved.
extern "C" fn on_signal(signo: libc::c_int) {
    let saved = Errno::last_raw();
    // The handled signals' numbers (1, 2, 15) fit a byte.
    let byte = [signo as u8];
    let fd = WRITE_FD.load(Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: write(2) is async-signal-safe; the fd stays open for good and
        // is non-blocking, so a full pipe drops the byte instead of hanging.
        unsafe { libc::write(fd, byte.as_ptr().cast(), 1) };
    }
    Errno::set_raw(saved);
}
