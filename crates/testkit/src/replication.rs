//! A master with replicas (plain asynchronous replication, no failover).

use std::io;
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::server::RedisServer;
use crate::server_settings::ServerBuilder;

/// How long replicas may take to connect and finish their first sync.
const SYNC_TIMEOUT: Duration = Duration::from_secs(20);

/// A master and its replicas (`replicaof`), each a [`RedisServer`], started
/// and synchronised: every replica is online when [`start`](Self::start)
/// returns.
///
/// ```no_run
/// let set = testkit::ReplicaSet::start(1)?;
/// redis::cmd("SET").arg("k").arg("v").exec(&mut set.master().conn())?;
/// set.replica(0).pause()?; // the master's WAIT now times out
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct ReplicaSet {
    master: RedisServer,
    replicas: Vec<RedisServer>,
}

impl ReplicaSet {
    /// Starts a master and `replicas` replicas of it, and waits until every
    /// replica is online (first sync done).
    ///
    /// # Errors
    ///
    /// If a server does not start, or the replicas are not online within 20 s.
    pub fn start(replicas: usize) -> io::Result<ReplicaSet> {
        ReplicaSet::start_with(replicas, &RedisServer::builder())
    }

    /// As [`start`](Self::start), every server configured like `builder`;
    /// a [password](crate::ServerBuilder::password) is also given to the
    /// replicas as `masterauth`.
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start).
    pub fn start_with(replicas: usize, builder: &ServerBuilder) -> io::Result<ReplicaSet> {
        let master = builder
            .clone()
            // Replicas sync at once instead of after Redis's default 5 s grace.
            .arg("repl-diskless-sync-delay", "0")
            .start()?;
        let replicas = start_replicas_of(master.port(), replicas, builder)?;
        wait_for_replicas(&master, replicas.len())?;
        Ok(ReplicaSet { master, replicas })
    }

    /// The master.
    pub fn master(&self) -> &RedisServer {
        &self.master
    }

    /// Replica `index` (0-based).
    ///
    /// # Panics
    ///
    /// If there is no such replica.
    pub fn replica(&self, index: usize) -> &RedisServer {
        &self.replicas[index]
    }

    /// Every server, master first, for [`Sentinel`](crate::SentinelGroup)
    /// setups that need to move them.
    pub(crate) fn into_servers(self) -> Vec<RedisServer> {
        let mut servers = vec![self.master];
        servers.extend(self.replicas);
        servers
    }
}

/// Starts `count` replicas of the master on `master_port`, in parallel.
pub(crate) fn start_replicas_of(
    master_port: u16,
    count: usize,
    builder: &ServerBuilder,
) -> io::Result<Vec<RedisServer>> {
    let mut builder = builder.clone();
    if let Some(password) = builder.password.clone() {
        builder = builder.arg("masterauth", &password);
    }
    let builder = builder
        .arg("replicaof", &format!("127.0.0.1 {master_port}"))
        // A replica promoted by Sentinel or the cluster must accept writes;
        // until then it refuses them (the default).
        .arg("replica-read-only", "yes")
        // A promoted replica syncs its own replicas at once.
        .arg("repl-diskless-sync-delay", "0");
    std::thread::scope(|scope| {
        let starting: Vec<_> = (0..count)
            .map(|_| scope.spawn(|| builder.clone().start()))
            .collect();
        starting
            .into_iter()
            .map(|handle| {
                handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    })
}

/// Waits until `master` reports `count` online replicas, and they
/// acknowledge a write (so `WAIT` works from the first call on).
pub(crate) fn wait_for_replicas(master: &RedisServer, count: usize) -> io::Result<()> {
    let deadline = Instant::now() + SYNC_TIMEOUT;
    wait_until_online(master, count, deadline)?;
    let mut conn = master.conn();
    loop {
        // A write and its undo leave the dataset empty; WAIT needs a write to confirm.
        let (_, _, acknowledged): ((), (), usize) = redis::pipe()
            .cmd("SET")
            .arg("testkit:replication-check")
            .arg(1)
            .cmd("DEL")
            .arg("testkit:replication-check")
            .cmd("WAIT")
            .arg(count)
            .arg(1000)
            .query(&mut conn)
            .map_err(io::Error::other)?;
        if acknowledged >= count {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "{acknowledged} of {count} replicas acknowledge writes after {SYNC_TIMEOUT:?}"
                ),
            ));
        }
    }
}

fn wait_until_online(master: &RedisServer, count: usize, deadline: Instant) -> io::Result<()> {
    loop {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut master.conn())
            .map_err(io::Error::other)?;
        let online = info
            .lines()
            .filter(|line| line.starts_with("slave") && line.contains("state=online"))
            .count();
        if online >= count {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("{online} of {count} replicas online after {SYNC_TIMEOUT:?}:\n{info}"),
            ));
        }
        sleep(Duration::from_millis(20));
    }
}
