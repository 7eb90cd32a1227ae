//! Publishes who holds this client's locks (`base/holder_identity.rs`): a
//! task per client that writes each hold into the client's record once the
//! hold has lasted [`SETTLE`], and takes it out within [`REFRESH`] after it
//! ends (the whole record with the last hold). Off the callers' path: the short holds of a busy client cost
//! nothing, a long one a field write and a field delete, and the record
//! one refresh per [`REFRESH`] while anything is held.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::engine::hold::Hold;
use crate::engine::owner_field::OwnerPrefix;
use crate::engine::paged::Paged;
use crate::scripts::holder_keys::hold_field;
use crate::settings::SharedSettings;
use crate::transport::Connection;
use crate::transport::detached::Detached;

/// How long a hold lasts before it is published.
pub(crate) const SETTLE: Duration = Duration::from_millis(50);
/// How often the record is refreshed and ended holds taken out.
pub(crate) const REFRESH: Duration = Duration::from_secs(1);
/// The record outlives its last refresh by this much: five refreshes, so a
/// slow server does not make a live holder's record lapse, and a holder that
/// ended without taking its record out (killed, `process::exit`, a signal)
/// leaves it a few seconds at most. A lock whose holder died may outlive its
/// record: its lease runs on (docs/REDIS-DATA.md).
pub(crate) const RECORD_TTL: Duration = Duration::from_secs(5);
/// How long a program ending with its runtime waits for its record to go.
const LAST_WORD_LIMIT: Duration = Duration::from_secs(1);

/// The handle the watchdog sends new holds to.
#[derive(Clone)]
pub(crate) struct IdentityPublisher {
    held: UnboundedSender<(Arc<Hold>, SystemTime)>,
}

impl IdentityPublisher {
    /// Starts the task (it ends with `shutdown`), writing to `record`;
    /// `last_word` deletes the record when the runtime stops under the task.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn start(
        conn: Connection,
        last_word: Detached,
        record: String,
        purpose: Option<String>,
        settings: SharedSettings,
        owner_prefix: Arc<OwnerPrefix>,
        runtime: &tokio::runtime::Handle,
        shutdown: CancellationToken,
    ) -> IdentityPublisher {
        let (held, incoming) = mpsc::unbounded_channel();
        let task = Task {
            conn,
            last_word,
            record,
            purpose,
            settings,
            clock_offset: None,
            published: Paged::default(),
            owner_prefix,
        };
        runtime.spawn(task.run(incoming, shutdown));
        IdentityPublisher { held }
    }

    /// Publishes one more hold, acquired now, once it has lasted [`SETTLE`].
    pub(crate) fn publish(&self, hold: Arc<Hold>) {
        // The task is gone only when the client is.
        let _ = self.held.send((hold, SystemTime::now()));
    }
}

struct Task {
    conn: Connection,
    /// Deletes the record when the task is dropped with it written (the
    /// runtime stopped before the task could).
    last_word: Detached,
    record: String,
    purpose: Option<String>,
    settings: SharedSettings,
    /// Server time minus this machine's, in ms, once learned (`TIME`).
    clock_offset: Option<i64>,
    /// Published holds, and when each was acquired (server ms), to write it
    /// again if the record lapsed: 16 bytes a hold. A hold is kept here
    /// until the refresh after it ended (its key and owner name the field
    /// to take out); two of one named owner on one key may both be here, the
    /// older ended. In pages: no doubling's slack on a client holding many.
    published: Paged<Published>,
    /// The client's anonymous owners' prefix, to write a hold's owner.
    owner_prefix: Arc<OwnerPrefix>,
}

/// A published hold, and when it was acquired (server ms).
type Published = (Arc<Hold>, i64);

impl Task {
    async fn run(
        mut self,
        mut incoming: UnboundedReceiver<(Arc<Hold>, SystemTime)>,
        shutdown: CancellationToken,
    ) {
        let mut settling: VecDeque<(Instant, Arc<Hold>, SystemTime)> = VecDeque::new();
        let mut refresh = tokio::time::interval(REFRESH);
        refresh.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let next_settled = settling.front().map(|(at, _, _)| *at);
            tokio::select! {
                () = shutdown.cancelled() => return self.withdraw().await,
                Some((watched, since)) = incoming.recv() => {
                    settling.push_back((Instant::now() + SETTLE, watched, since));
                }
                () = crate::engine::sleep::sleep_until(next_settled) => {
                    let now = Instant::now();
                    let mut due = Vec::new();
                    while settling.front().is_some_and(|(at, _, _)| *at <= now) {
                        if let Some((_, hold, since)) = settling.pop_front()
                            && is_held(&hold)
                        {
                            due.push((hold, since));
                        }
                    }
                    if settling.is_empty() {
                        // A burst of holds leaves no queue behind it.
                        settling.shrink_to(16);
                    }
                    if !due.is_empty() {
                        self.write(due).await;
                    }
                }
                _ = refresh.tick() => self.refresh().await,
            }
        }
    }

    /// Writes `due` holds (and the process's own fields) into the record.
    async fn write(&mut self, due: Vec<(Arc<Hold>, SystemTime)>) {
        let offset = self.clock_offset().await;
        let mut holds = Vec::with_capacity(due.len());
        for (hold, since) in due {
            let since = server_ms(since, offset);
            holds.push((
                hold_field(&hold.key, &hold.owner.text(&self.owner_prefix)),
                since,
            ));
            self.published.push((hold, since));
        }
        let mut pipe = redis::pipe();
        // Whether the record was there: one that lapsed (a stall longer than
        // its TTL, an eviction) is written again whole, or the holds named
        // before would stay out of it (the refresh finds this write's record).
        pipe.cmd("EXISTS").arg(&self.record);
        self.describe(&mut pipe, &holds);
        if self.query::<(bool,)>(pipe).await == Some((false,)) && self.published.len() > holds.len()
        {
            self.write_whole().await;
        }
    }

    /// Takes ended holds out and keeps the record alive while any is held.
    async fn refresh(&mut self) {
        if self.published.is_empty() {
            return;
        }
        let mut ended: Vec<Arc<Hold>> = Vec::new();
        self.published.retain(|(hold, _)| {
            let held = is_held(hold);
            if !held {
                ended.push(hold.clone());
            }
            held
        });
        // A named owner's field may name a newer hold of the same owner on
        // the same key, still published: that field stays.
        let still_named: HashSet<(&str, &str)> = if ended.iter().any(|hold| hold.named_owner) {
            self.published
                .iter()
                .filter(|(hold, _)| hold.named_owner)
                .map(|(hold, _)| (&*hold.key, hold.owner.as_str(&self.owner_prefix)))
                .collect()
        } else {
            HashSet::new()
        };
        let ended: Vec<String> = ended
            .iter()
            .filter(|hold| {
                // Only a named owner's text is kept (and compared) here.
                !(hold.named_owner
                    && still_named.contains(&(&*hold.key, hold.owner.as_str(&self.owner_prefix))))
            })
            .map(|hold| hold_field(&hold.key, &hold.owner.text(&self.owner_prefix)))
            .collect();
        drop(still_named);
        let mut pipe = redis::pipe();
        if self.published.is_empty() {
            // Nothing held any more: the record goes with the last hold.
            pipe.cmd("DEL").arg(&self.record).ignore();
            self.send(pipe).await;
            return;
        }
        if !ended.is_empty() {
            pipe.cmd("HDEL").arg(&self.record).arg(&ended).ignore();
        }
        pipe.cmd("PEXPIRE")
            .arg(&self.record)
            .arg(RECORD_TTL.as_millis() as u64);
        if self.query::<(bool,)>(pipe).await == Some((false,)) {
            // The record lapsed (a stall longer than its TTL) or was
            // flushed: write it whole again.
            self.write_whole().await;
        }
    }

    /// Writes the record again with every published hold.
    async fn write_whole(&mut self) {
        let holds: Vec<(String, i64)> = self
            .published
            .iter()
            .map(|(hold, since)| {
                (
                    hold_field(&hold.key, &hold.owner.text(&self.owner_prefix)),
                    *since,
                )
            })
            .collect();
        let mut pipe = redis::pipe();
        self.describe(&mut pipe, &holds);
        self.send(pipe).await;
    }

    /// The client is gone, so are its holds: the record goes now rather
    /// than at its TTL (a refresh would have deleted it within [`REFRESH`]).
    /// A server that did not answer within the response timeout (it stalls)
    /// leaves the record to its TTL: the task's drop, which runs on the
    /// runtime's thread here, must not block it to try again. A connection
    /// that failed (the runtime may be stopping under it) leaves the record
    /// to the drop, which says it on a connection of its own.
    async fn withdraw(mut self) {
        if self.published.is_empty() {
            return;
        }
        let mut del = redis::cmd("DEL");
        del.arg(&self.record);
        let limit = self.settings.read().response_timeout;
        let sent = tokio::time::timeout(limit, del.query_async::<()>(&mut self.conn)).await;
        match sent {
            Ok(Err(error)) if !error.is_timeout() => {
                debug!(%error, "redlatch: holder record not withdrawn; trying on a connection of its own");
            }
            _ => self.published.clear(),
        }
    }

    /// Adds to `pipe` the writes that describe this process and `holds`
    /// (field, acquired at) in the record, and keep it alive.
    fn describe(&self, pipe: &mut redis::Pipeline, holds: &[(String, i64)]) {
        let (host, pid, program) = this_process();
        let mut hset = redis::cmd("HSET");
        hset.arg(&self.record)
            .arg("host")
            .arg(host)
            .arg("pid")
            .arg(pid)
            .arg("program")
            .arg(program)
            .arg("purpose")
            .arg(self.purpose.as_deref().unwrap_or_default());
        for (field, since) in holds {
            hset.arg(field).arg(since);
        }
        pipe.add_command(hset).ignore();
        pipe.cmd("PEXPIRE")
            .arg(&self.record)
            .arg(RECORD_TTL.as_millis() as u64)
            .ignore();
    }

    async fn send(&mut self, pipe: redis::Pipeline) {
        let _ = self.query::<()>(pipe).await;
    }

    /// Runs `pipe`; its reply, or `None` when it failed or timed out.
    async fn query<T: redis::FromRedisValue>(&mut self, pipe: redis::Pipeline) -> Option<T> {
        let limit = self.settings.read().response_timeout;
        let sent = tokio::time::timeout(limit, pipe.query_async::<T>(&mut self.conn)).await;
        // Naming holders is a courtesy: a refusal (an ACL that leaves the
        // record's key out) or an outage costs the names, nothing else.
        match sent {
            Ok(Ok(reply)) => Some(reply),
            Ok(Err(error)) => {
                debug!(%error, "redlatch: holder identity not written");
                None
            }
            Err(_) => {
                debug!("redlatch: holder identity not written in time");
                None
            }
        }
    }

    /// Server time minus local time in ms, learned once with `TIME`; zero
    /// (this machine's clock) where the server will not say.
    async fn clock_offset(&mut self) -> i64 {
        if let Some(offset) = self.clock_offset {
            return offset;
        }
        let limit = self.settings.read().response_timeout;
        let asked = SystemTime::now();
        let time = tokio::time::timeout(
            limit,
            redis::cmd("TIME").query_async::<(u64, u64)>(&mut self.conn),
        )
        .await;
        let offset = match time {
            Ok(Ok((secs, micros))) => {
                let server = secs as i64 * 1000 + micros as i64 / 1000;
                server - millis(asked)
            }
            _ => 0,
        };
        self.clock_offset = Some(offset);
        offset
    }
}

impl Drop for Task {
    /// The task is dropped with the record written: its runtime stopped
    /// (the program is ending) before the refresh or the withdrawal could
    /// take the record out. Say it on a connection of its own, briefly.
    fn drop(&mut self) {
        if self.published.is_empty() {
            return;
        }
        let mut del = redis::cmd("DEL");
        del.arg(&self.record);
        let limit = self.settings.read().response_timeout.min(LAST_WORD_LIMIT);
        if !self.last_word.send_blocking(del, limit) {
            debug!("redlatch: holder record left to its TTL");
        }
    }
}

/// True while a guard (or the watchdog) keeps `hold` and it is held: this
/// task's is then not the only reference to it.
fn is_held(hold: &Arc<Hold>) -> bool {
    Arc::strong_count(hold) > 1 && hold.is_held()
}

fn millis(at: SystemTime) -> i64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as i64)
}

fn server_ms(at: SystemTime, offset: i64) -> i64 {
    millis(at) + offset
}

/// This process as a holder describes itself: host, pid, program.
pub(crate) fn this_process() -> (String, u32, String) {
    let program = std::env::current_exe()
        .ok()
        .and_then(|path| {
            path.file_name()
                .map(|name| name.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned());
    (host_name(), std::process::id(), program)
}

fn host_name() -> String {
    // What gethostname(2) answers, read without a crate for one call.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if let Ok(name) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
        return name.trim_end().to_owned();
    }
    ["HOSTNAME", "COMPUTERNAME"]
        .iter()
        .find_map(|var| std::env::var(var).ok())
        .unwrap_or_else(|| "unknown".to_owned())
}
