//! The `failover` fault's lock servers: a Sentinel group (a master, two
//! replicas, three Sentinels). The lab breaks the replication link, lets a
//! worker take the lock on the master, and kills the master before the
//! replica has reconnected: the grant exists nowhere else. Sentinel then
//! promotes the replica, which never saw it.

use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use testkit::{MASTER_NAME, SentinelGroup};

use crate::check::recipes::recipe::LOCK_KEY;

/// The Sentinel group and what the lab did to it.
pub struct SentinelLock {
    group: SentinelGroup,
    /// The killed master's port, until a replica replaced it.
    killed: Option<u16>,
    /// When the lab broke replication, until it killed the master.
    broken_at: std::cell::Cell<Option<Instant>>,
    /// Whether the master was killed (once per run).
    done: bool,
    /// When the lab last asked the Sentinels about the master.
    asked: Instant,
    /// The replicas whose replication the lab broke.
    broken: std::cell::RefCell<Vec<u16>>,
}

/// Looks at the lock on the master, 1 ms apart, before giving up on
/// seeing it free.
const FREE_TRIES: usize = 2000;
/// How often the lab asks the Sentinels whether the failover is done.
const ASK_EVERY: Duration = Duration::from_millis(100);

impl SentinelLock {
    /// Starts the group; returns once the Sentinels know every member.
    ///
    /// # Errors
    /// When a process does not start or discovery takes too long.
    pub fn start() -> Result<SentinelLock, String> {
        let group = SentinelGroup::start(2).map_err(|error| format!("sentinel group: {error}"))?;
        Ok(SentinelLock {
            group,
            killed: None,
            broken_at: std::cell::Cell::default(),
            done: false,
            asked: Instant::now(),
            broken: std::cell::RefCell::default(),
        })
    }

    /// The Sentinels' URLs, for the workers.
    pub fn urls(&self) -> Vec<String> {
        self.group.sentinel_urls()
    }

    /// The name the Sentinels know the master by.
    pub fn master_name() -> &'static str {
        MASTER_NAME
    }

    /// Breaks replication at a moment the lock is free: every replica is
    /// told to authenticate as a user the master does not have, then the
    /// master closes their links (`CLIENT KILL TYPE replica`), so every
    /// reconnection fails and what the master grants from now on exists on
    /// the master alone. Writes are held (`CLIENT PAUSE WRITE`) while the
    /// lab looks at the lock, so the replicas keep a copy where it is free.
    ///
    /// # Errors
    /// When a server does not answer, or the lock is never seen free.
    pub fn break_replication(&self) -> Result<(), String> {
        let master = self.master()?;
        let mut conn = master.conn();
        let replicas = replicas_of(&mut conn)?;
        for _ in 0..FREE_TRIES {
            redis::cmd("CLIENT")
                .arg("PAUSE")
                .arg(100)
                .arg("WRITE")
                .exec(&mut conn)
                .map_err(|error| error.to_string())?;
            let held: bool = redis::cmd("EXISTS")
                .arg(LOCK_KEY)
                .query(&mut conn)
                .map_err(|error| error.to_string())?;
            if !held {
                let broken = self.set_replication_user(&replicas, "nobody-here", "wrong");
                let killed = redis::cmd("CLIENT")
                    .arg("KILL")
                    .arg("TYPE")
                    .arg("replica")
                    .exec(&mut conn);
                let _ = redis::cmd("CLIENT").arg("UNPAUSE").exec(&mut conn);
                self.broken.replace(replicas);
                self.broken_at.set(Some(Instant::now()));
                broken?;
                return killed.map_err(|error| error.to_string());
            }
            let _ = redis::cmd("CLIENT").arg("UNPAUSE").exec(&mut conn);
            std::thread::sleep(Duration::from_millis(1));
        }
        Err("the lock was never free on the master".to_owned())
    }

    /// Lets the replicas replicate again (whoever the master is now).
    fn heal_replication(&self) {
        let replicas = self.broken.take();
        let _ = self.set_replication_user(&replicas, "", "");
    }

    fn set_replication_user(
        &self,
        replicas: &[u16],
        user: &str,
        password: &str,
    ) -> Result<(), String> {
        for port in replicas {
            let replica = self
                .group
                .server_on(*port)
                .ok_or_else(|| format!("no server on port {port}"))?;
            let mut conn = replica.conn();
            for (name, value) in [("masteruser", user), ("masterauth", password)] {
                redis::cmd("CONFIG")
                    .arg("SET")
                    .arg(name)
                    .arg(value)
                    .exec(&mut conn)
                    .map_err(|error| error.to_string())?;
            }
        }
        Ok(())
    }

    fn master(&self) -> Result<&testkit::RedisServer, String> {
        let port = self
            .group
            .master_port()
            .map_err(|error| error.to_string())?;
        self.group
            .server_on(port)
            .ok_or_else(|| format!("no server on port {port}"))
    }

    /// Whether replication has been broken this long without the master
    /// being killed yet: no worker got the lock meanwhile (replica
    /// acknowledgement refuses every grant), so the lab kills it anyway.
    pub fn broken_for(&self, long: Duration) -> bool {
        !self.done && self.broken_at.get().is_some_and(|at| at.elapsed() >= long)
    }

    /// Whether the master has been killed already (once per run).
    pub fn master_killed(&self) -> bool {
        self.done
    }

    /// Kills the master with SIGKILL, then lets the replicas replicate
    /// again (the network heals); Sentinel notices the death and promotes a
    /// replica on its own (see [`promoted`](Self::promoted)).
    ///
    /// # Errors
    /// When the master cannot be found or signalled.
    pub fn kill_master(&mut self) -> Result<u16, String> {
        let port = self
            .group
            .master_port()
            .map_err(|error| error.to_string())?;
        let pid = self
            .group
            .server_on(port)
            .and_then(testkit::RedisServer::pid)
            .ok_or_else(|| format!("no live server on port {port}"))?;
        let pid = Pid::from_raw(i32::try_from(pid).map_err(|error| error.to_string())?);
        kill(pid, Signal::SIGKILL).map_err(|error| error.to_string())?;
        self.killed = Some(port);
        self.done = true;
        self.heal_replication();
        Ok(port)
    }

    /// Once the Sentinels report a new master after a kill: its port and
    /// whether it has the lock key (it has not, if the grant was lost).
    /// Asks at most every 100 ms; `None` meanwhile.
    pub fn promoted(&mut self) -> Option<(u16, bool)> {
        let old = self.killed?;
        if self.asked.elapsed() < ASK_EVERY {
            return None;
        }
        self.asked = Instant::now();
        let port = self.group.master_port().ok()?;
        if port == old {
            return None;
        }
        let server = self.group.server_on(port)?;
        let mut conn = server
            .client()
            .get_connection_with_timeout(Duration::from_millis(500))
            .ok()?;
        let _ = conn.set_read_timeout(Some(Duration::from_millis(500)));
        let exists: bool = redis::cmd("EXISTS").arg(LOCK_KEY).query(&mut conn).ok()?;
        self.killed = None;
        Some((port, exists))
    }
}

/// The ports of the master's replicas, from `ROLE`:
/// `["master", offset, [[host, port, offset], ...]]`.
fn replicas_of(master: &mut redis::Connection) -> Result<Vec<u16>, String> {
    let role: (String, i64, Vec<(String, String, String)>) = redis::cmd("ROLE")
        .query(master)
        .map_err(|error| error.to_string())?;
    role.2
        .iter()
        .map(|(_, port, _)| port.parse().map_err(|_| format!("replica port {port:?}")))
        .collect()
}
