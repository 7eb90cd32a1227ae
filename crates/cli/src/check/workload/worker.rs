//! One worker process (`redlatch __check-worker`): acquire, read the
//! shared counter, wait a random while, write it back incremented,
//! release; until told to stop with `SIGTERM`.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nix::sys::prctl::set_pdeathsig;
use nix::sys::signal::Signal;
use nix::unistd::getppid;
use tokio::signal::unix::{SignalKind, signal};

use crate::check::clock::now_ns;
use crate::check::event::{EventLog, What};
use crate::check::points::{Point, Points};
use crate::check::random::Random;
use crate::check::recipes::recipe::{LockServers, Recipe};
use crate::check::recipes::{AsyncRecipeFn, RecipeName, with_recipe};
use crate::check::resource::Resource;
use crate::exit::{self, Failure};

/// The hidden `__check-worker` command line, written by the lab.
#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    /// The recipe to run.
    #[arg(long)]
    recipe: RecipeName,
    /// The lock servers (several for Redlock).
    #[arg(long, required = true)]
    lock_url: Vec<String>,
    /// The store.
    #[arg(long)]
    resource_url: String,
    /// This worker's number.
    #[arg(long)]
    id: u32,
    /// The lease, in milliseconds.
    #[arg(long)]
    lease_ms: u64,
    /// Where to append events.
    #[arg(long)]
    events: PathBuf,
    /// Where to stop when armed with SIGUSR1.
    #[arg(long)]
    point: Option<Point>,
    /// The lab's process id: the worker dies with it.
    #[arg(long)]
    lab_pid: i32,
    /// The lock URLs are Sentinels watching the master of this name.
    #[arg(long)]
    sentinel_master: Option<String>,
    /// Longest wait between reading and writing in a section, in milliseconds.
    #[arg(long, default_value_t = 20)]
    think_ms: u64,
}

/// Longest single wait for the lock, so a stop request is seen soon.
const ACQUIRE_WAIT: Duration = Duration::from_millis(500);

/// Runs the worker until SIGTERM.
pub async fn worker(args: WorkerArgs) -> Result<u8, Failure> {
    let failure =
        |what: &str, error: String| Failure::new(exit::SOFTWARE, format!("{what}: {error}"));
    die_with_lab(args.lab_pid).map_err(|error| failure("parent death signal", error))?;
    let log = EventLog::create(&args.events, args.id)
        .map_err(|error| failure("event log", error.to_string()))?;
    let armed = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    flag_on_signal(SignalKind::user_defined1(), armed.clone())
        .map_err(|error| failure("SIGUSR1", error))?;
    flag_on_signal(SignalKind::terminate(), stop.clone())
        .map_err(|error| failure("SIGTERM", error))?;
    let points = Points::new(args.point, armed, log);
    let fenced = args.recipe.info().fenced;
    let resource = Resource::connect(&args.resource_url, fenced)
        .await
        .map_err(|error| failure("store", error))?;
    let lease = Duration::from_millis(args.lease_ms);
    let work = Loop {
        id: args.id,
        points,
        resource,
        stop,
        lease,
        think_ms: args.think_ms,
    };
    let servers = LockServers {
        urls: &args.lock_url,
        sentinel_master: args.sentinel_master.as_deref(),
    };
    with_recipe(args.recipe, servers, lease, work).await
}

/// Has the kernel SIGKILL this worker when the lab goes away: a lab
/// killed mid-run must not leave workers looping behind it.
fn die_with_lab(lab: i32) -> Result<(), String> {
    set_pdeathsig(Signal::SIGKILL).map_err(|error| error.to_string())?;
    // The lab may have died before the signal was set up.
    if getppid().as_raw() != lab {
        std::process::exit(0);
    }
    Ok(())
}

/// Sets `flag` each time `kind` arrives.
fn flag_on_signal(kind: SignalKind, flag: Arc<AtomicBool>) -> Result<(), String> {
    let mut stream = signal(kind).map_err(|error| error.to_string())?;
    tokio::spawn(async move {
        while stream.recv().await.is_some() {
            flag.store(true, Ordering::SeqCst);
        }
    });
    Ok(())
}

/// The worker's loop, run once the recipe is connected.
struct Loop {
    id: u32,
    points: Points,
    resource: Resource,
    stop: Arc<AtomicBool>,
    lease: Duration,
    think_ms: u64,
}

impl AsyncRecipeFn<Result<u8, Failure>> for Loop {
    async fn call<R: Recipe>(mut self, recipe: Result<R, String>) -> Result<u8, Failure> {
        let mut recipe = recipe
            .map_err(|error| Failure::new(exit::UNAVAILABLE, format!("lock server: {error}")))?;
        let mut random = Random::seeded();
        self.points.log(What::Ready);
        while !self.stop.load(Ordering::SeqCst) {
            if let Err(message) = self.section(&mut recipe, &mut random).await {
                self.points.log(What::Error { message });
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        Ok(0)
    }
}

impl Loop {
    /// One critical section (or one wait that timed out).
    async fn section<R: Recipe>(
        &mut self,
        recipe: &mut R,
        random: &mut Random,
    ) -> Result<(), String> {
        let points = &self.points;
        points.log(What::AcquireStart);
        let Some(token) = recipe.acquire(points, ACQUIRE_WAIT).await? else {
            return Ok(());
        };
        points.log(What::Acquired { token });
        let outcome = if points.reach(Point::Holding) {
            // The lab did something to this holder's world while it was
            // stopped (cut it off, restarted a master): it goes on working.
            long_work(
                points,
                &mut self.resource,
                self.id,
                recipe,
                token,
                self.lease,
            )
            .await
        } else {
            let think = Duration::from_millis(random.between(self.think_ms.min(2), self.think_ms));
            work(points, &mut self.resource, self.id, recipe, token, think).await
        };
        points.log(What::ReleaseStart);
        let released = recipe.release(points).await;
        if let Ok(ok) = released {
            points.log(What::Released { ok });
        }
        outcome.and(released.map(drop))
    }
}

/// Read, wait `think`, check, write.
async fn work<R: Recipe>(
    points: &Points,
    resource: &mut Resource,
    id: u32,
    recipe: &R,
    token: Option<u64>,
    think: Duration,
) -> Result<(), String> {
    let read = resource.read().await?;
    points.log(What::Read { value: read });
    if !think.is_zero() {
        tokio::time::sleep(think).await;
    }
    if !recipe.still_held() {
        points.log(What::Lost);
        return Ok(());
    }
    points.reach(Point::BeforeWrite);
    write(points, resource, id, token, read).await
}

/// Writes `read + 1` with `token` and logs how the store took it.
async fn write(
    points: &Points,
    resource: &mut Resource,
    id: u32,
    token: Option<u64>,
    read: i64,
) -> Result<(), String> {
    let sent = now_ns();
    let outcome = resource.write(id, token, read).await?;
    points.log(What::Write {
        sent,
        token,
        read,
        found: outcome.found,
        accepted: outcome.accepted,
    });
    Ok(())
}

/// A long critical section: 15 writes, lease/5 apart (at most 250 ms), each
/// after checking the lock, until the recipe says the lock is lost.
async fn long_work<R: Recipe>(
    points: &Points,
    resource: &mut Resource,
    id: u32,
    recipe: &R,
    token: Option<u64>,
    lease: Duration,
) -> Result<(), String> {
    let step = (lease / 5).min(Duration::from_millis(250));
    for _ in 0..15 {
        let read = resource.read().await?;
        points.log(What::Read { value: read });
        if !held_through(recipe, step).await {
            points.log(What::Lost);
            return Ok(());
        }
        write(points, resource, id, token, read).await?;
    }
    Ok(())
}

/// Waits `wait`, watching the lock: false as soon as the recipe sees it
/// lost (so the worker stops believing it holds the moment it could know).
async fn held_through<R: Recipe>(recipe: &R, wait: Duration) -> bool {
    let until = tokio::time::Instant::now() + wait;
    while tokio::time::Instant::now() < until {
        if !recipe.still_held() {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    recipe.still_held()
}
