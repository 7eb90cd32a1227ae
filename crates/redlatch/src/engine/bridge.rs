//! The runtime behind one blocking client: every blocking call is a future
//! handed to it, and the calling thread waits for the answer.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;

use crate::error::{Error, Result};

/// The runtime behind one blocking client and everything made from it.
pub(crate) struct Bridge {
    /// `Some` until dropped.
    runtime: Option<tokio::runtime::Runtime>,
}

impl std::fmt::Debug for Bridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Bridge")
    }
}

impl Bridge {
    /// Starts the runtime: one worker thread for the connection, the
    /// subscription and the watchdog.
    pub(crate) fn start() -> Result<Arc<Bridge>> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("redlatch-blocking")
            .enable_all()
            .build()
            .map_err(|error| {
                Error::InvalidConfig(format!(
                    "cannot start the blocking client's runtime: {error}"
                ))
            })?;
        Ok(Arc::new(Bridge {
            runtime: Some(runtime),
        }))
    }

    /// Runs `call` on the runtime and blocks the calling thread until it is
    /// done. Never panics, even inside another runtime.
    pub(crate) fn run<T, F>(&self, op: &'static str, call: F) -> Result<T>
    where
        T: Send + 'static,
        F: Future<Output = Result<T>> + Send + 'static,
    {
        let Some(runtime) = &self.runtime else {
            return Err(Error::RuntimeGone { op });
        };
        let (reply_to, reply) = std::sync::mpsc::sync_channel(1);
        // Acquires count for the calling thread (deadlock detection's party).
        runtime.spawn(crate::deadlock::on_caller_thread(async move {
            let _ = reply_to.send(call.await);
        }));
        // A closed channel: the task was dropped (runtime shut down, or a panic).
        reply.recv().unwrap_or(Err(Error::RuntimeGone { op }))
    }
}

impl Bridge {
    /// Runs a future that borrows from the caller on the calling thread,
    /// within the runtime's context (its timers and connections are driven by
    /// the runtime's worker). For the few calls that cannot be handed to a task.
    pub(crate) fn run_borrowed<T>(&self, call: impl Future<Output = Result<T>>) -> Result<T> {
        let Some(runtime) = &self.runtime else {
            return Err(Error::RuntimeGone { op: "call" });
        };
        let _context = runtime.enter();
        let mut call = pin!(call);
        let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
        let mut context = Context::from_waker(&waker);
        loop {
            match call.as_mut().poll(&mut context) {
                Poll::Ready(outcome) => return outcome,
                // Woken spuriously at times: polling again is harmless.
                Poll::Pending => std::thread::park(),
            }
        }
    }
}

/// Wakes the thread that polls a borrowed future.
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// The longest the last handle's drop waits for the runtime to stop: the
/// client's last word (its holder record deleted on a connection of its
/// own) takes a second at most.
const SHUTDOWN_LIMIT: std::time::Duration = std::time::Duration::from_secs(2);

impl Drop for Bridge {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            if tokio::runtime::Handle::try_current().is_ok() {
                // Waiting for the worker panics inside an async context.
                runtime.shutdown_background();
            } else {
                // A program may end right after this drop: what the client
                // leaves in Redis goes before it returns.
                runtime.shutdown_timeout(SHUTDOWN_LIMIT);
            }
        }
    }
}
