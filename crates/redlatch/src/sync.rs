//! The synchronisation primitives of the engine's in-process state machines
//! (`lock/coalesce.rs`, `engine/cancel.rs`, `engine/wakeup.rs`): a mutex,
//! atomics, and where background tasks are started.
//!
//! Normally they are the standard mutex (without poisoning, see
//! [`unpoisoned`]), the standard atomics and the client's tokio runtime. In the crate's own unit tests built with the
//! internal feature `__permutation-checks` they are shuttle's, so that the
//! permutation checks (docs/TESTING.md) can run those state machines under
//! every interleaving of their tasks. The feature changes nothing else: a
//! build of the library is the same with it or without it.

use std::future::Future;

use tokio::runtime::Handle;

pub(crate) use std::sync::atomic::Ordering;

#[cfg(not(all(test, feature = "__permutation-checks")))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64};
#[cfg(not(all(test, feature = "__permutation-checks")))]
pub(crate) use unpoisoned::Mutex;

#[cfg(all(test, feature = "__permutation-checks"))]
pub(crate) use checked::Mutex;
#[cfg(all(test, feature = "__permutation-checks"))]
pub(crate) use shuttle::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, AtomicUsize};

/// The standard mutex and read-write lock without poisoning: `lock()`,
/// `read()` and `write()` give the guard directly, as the `parking_lot`
/// locks they replace did (the code was written for that behaviour). On
/// Linux the standard ones are futexes too, and they cost no crates.
pub(crate) mod unpoisoned {
    use std::sync::{MutexGuard, PoisonError, RwLockReadGuard, RwLockWriteGuard};

    /// A mutex whose `lock` ignores poisoning.
    #[derive(Debug, Default)]
    pub(crate) struct Mutex<T>(std::sync::Mutex<T>);

    impl<T> Mutex<T> {
        pub(crate) const fn new(value: T) -> Mutex<T> {
            Mutex(std::sync::Mutex::new(value))
        }

        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            self.0.lock().unwrap_or_else(PoisonError::into_inner)
        }
    }

    /// A read-write lock whose `read` and `write` ignore poisoning.
    #[derive(Debug, Default)]
    pub(crate) struct RwLock<T>(std::sync::RwLock<T>);

    impl<T> RwLock<T> {
        pub(crate) const fn new(value: T) -> RwLock<T> {
            RwLock(std::sync::RwLock::new(value))
        }

        pub(crate) fn read(&self) -> RwLockReadGuard<'_, T> {
            self.0.read().unwrap_or_else(PoisonError::into_inner)
        }

        pub(crate) fn write(&self) -> RwLockWriteGuard<'_, T> {
            self.0.write().unwrap_or_else(PoisonError::into_inner)
        }
    }
}

/// Starts the engine's background tasks on the client's runtime (under the
/// permutation checks, as shuttle tasks).
#[derive(Clone, Debug)]
pub(crate) struct Spawner {
    #[cfg(not(all(test, feature = "__permutation-checks")))]
    runtime: Handle,
    /// The tasks it started that have not ended, if it counts them (a
    /// gauge for callers, outside what the permutation checks explore).
    running: Option<std::sync::Arc<std::sync::atomic::AtomicUsize>>,
}

/// Counts one running task down when the task ends or is dropped unrun.
struct Running(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Spawner {
    /// Spawns on `runtime`.
    #[cfg_attr(all(test, feature = "__permutation-checks"), allow(unused_variables))]
    pub(crate) fn new(runtime: &Handle) -> Spawner {
        Spawner {
            #[cfg(not(all(test, feature = "__permutation-checks")))]
            runtime: runtime.clone(),
            running: None,
        }
    }

    /// Spawns on `runtime`, and counts the tasks that have not ended yet
    /// (see [`running`](Self::running)).
    pub(crate) fn counted(runtime: &Handle) -> Spawner {
        let mut spawner = Spawner::new(runtime);
        spawner.running = Some(Default::default());
        spawner
    }

    /// The tasks this spawner (or a clone) started that have not ended;
    /// zero for a spawner that does not count.
    pub(crate) fn running(&self) -> usize {
        self.running
            .as_ref()
            .map_or(0, |running| running.load(Ordering::SeqCst))
    }

    /// Starts `task`, which nobody joins. If the runtime is shutting down the
    /// task is dropped without running.
    pub(crate) fn spawn<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let running = self.running.as_ref().map(|running| {
            running.fetch_add(1, Ordering::SeqCst);
            Running(running.clone())
        });
        let task = async move {
            let _running = running;
            task.await;
        };
        #[cfg(not(all(test, feature = "__permutation-checks")))]
        drop(self.runtime.spawn(task));
        #[cfg(all(test, feature = "__permutation-checks"))]
        drop(shuttle::future::spawn(task));
    }
}

#[cfg(all(test, feature = "__permutation-checks"))]
mod checked {
    use std::sync::PoisonError;

    /// shuttle's mutex with [`unpoisoned`](super::unpoisoned)'s interface.
    #[derive(Debug, Default)]
    pub(crate) struct Mutex<T>(shuttle::sync::Mutex<T>);

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Mutex<T> {
            Mutex(shuttle::sync::Mutex::new(value))
        }

        pub(crate) fn lock(&self) -> shuttle::sync::MutexGuard<'_, T> {
            self.0.lock().unwrap_or_else(PoisonError::into_inner)
        }
    }

    impl crate::sync::Spawner {
        /// For the permutation checks, which run without a tokio runtime.
        pub(crate) fn for_checks() -> crate::sync::Spawner {
            crate::sync::Spawner { running: None }
        }
    }
}

/// Running the permutation checks: how many schedules each explores.
#[cfg(all(test, feature = "__permutation-checks"))]
pub(crate) mod permutations {
    /// Schedules per scheduler (random, then PCT) and check, unless `REDLATCH_PERMUTATIONS`
    /// says otherwise (the long mode, docs/TESTING.md).
    const DEFAULT_SCHEDULES: usize = 2500;

    /// PCT's bug depth: how many priority changes a schedule may make.
    const PCT_DEPTH: usize = 3;

    fn schedules() -> usize {
        std::env::var("REDLATCH_PERMUTATIONS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(DEFAULT_SCHEDULES)
    }

    /// Runs `check` under random schedules, then under as many PCT ones.
    pub(crate) fn explore<F>(check: F)
    where
        F: Fn() + Send + Sync + 'static,
    {
        let check = std::sync::Arc::new(check);
        let random = check.clone();
        shuttle::check_random(move || random(), schedules());
        shuttle::check_pct(move || check(), schedules(), PCT_DEPTH);
    }

    /// Yields to the other tasks until `done`, at most `rounds` times;
    /// returns whether `done` became true.
    pub(crate) async fn eventually(rounds: usize, done: impl Fn() -> bool) -> bool {
        for _ in 0..rounds {
            if done() {
                return true;
            }
            shuttle::future::yield_now().await;
        }
        done()
    }

    /// Polls `future` once with a waker that does nothing, as a `select!`
    /// does with a branch it keeps.
    pub(crate) fn poll_once<F: std::future::Future>(future: std::pin::Pin<&mut F>) {
        let mut context = std::task::Context::from_waker(std::task::Waker::noop());
        let _ = future.poll(&mut context);
    }
}
