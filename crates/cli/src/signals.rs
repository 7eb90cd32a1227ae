//! SIGINT, SIGTERM and SIGHUP for `run`, with whether the kernel sent them.
//!
//! The command runs in redlatch's process group, so a signal the kernel sends
//! to the group (Ctrl-C, or a hang-up of the terminal) reaches it
//! directly; forwarding that one too would deliver it twice, and many programs
//! treat a second Ctrl-C as "quit now, skip the cleanup". Only the signal's
//! `si_code` tells a terminal's signal from a `kill(2)`, and
//! `tokio::signal::unix` does not pass it on, so this module installs its own
//! handler: it writes one byte per signal (number, plus a kernel flag) to a
//! pipe that an async task reads, the classic self-pipe.

use std::io;
use std::os::fd::IntoRawFd;
use std::sync::atomic::{AtomicI32, Ordering};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
use tokio::net::unix::pipe;

/// The signals `run` forwards to the command.
const HANDLED: [Signal; 3] = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP];
/// Set in a pipe byte when the kernel (a terminal) sent the signal.
const FROM_KERNEL: u8 = 0x80;

/// The pipe's write end, for the handler; -1 until installed. Never closed.
static WRITE_FD: AtomicI32 = AtomicI32::new(-1);

/// One signal received.
#[derive(Clone, Copy, Debug)]
pub struct Received {
    /// Which one.
    pub signal: Signal,
    /// Sent by the kernel to the whole foreground process group (a terminal),
    /// so the command got it as well.
    pub from_kernel: bool,
}

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
            SigHandler::SigAction(on_signal),
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
    pub async fn recv(&mut self) -> Received {
        loop {
            let mut byte = [0u8; 1];
            match self.pipe.try_read(&mut byte) {
                Ok(1) => {
                    let number = i32::from(byte[0] & !FROM_KERNEL);
                    if let Ok(signal) = Signal::try_from(number) {
                        return Received {
                            signal,
                            from_kernel: byte[0] & FROM_KERNEL != 0,
                        };
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
extern "C" fn on_signal(
    signo: libc::c_int,
    info: *mut libc::siginfo_t,
    _context: *mut libc::c_void,
) {
    let saved = Errno::last_raw();
    // SAFETY: the kernel passes a valid siginfo_t to an SA_SIGINFO handler.
    // si_code > 0 (SI_KERNEL) means the kernel sent it; kill(2) gives SI_USER (0),
    // sigqueue(3) and tgkill(2) negative codes.
    let from_kernel = !info.is_null() && unsafe { (*info).si_code } > 0;
    let byte = [(signo as u8 & !FROM_KERNEL) | if from_kernel { FROM_KERNEL } else { 0 }];
    let fd = WRITE_FD.load(Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: write(2) is async-signal-safe; the fd stays open for good and
        // is non-blocking, so a full pipe drops the byte instead of hanging.
        unsafe { libc::write(fd, byte.as_ptr().cast(), 1) };
    }
    Errno::set_raw(saved);
}
