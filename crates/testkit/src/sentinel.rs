//! A master, its replicas and three Sentinels watching them.

use std::io;
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::replication::ReplicaSet;
use crate::server::RedisServer;
use crate::server_settings::ServerBuilder;

/// The name the Sentinels know the master by.
pub const MASTER_NAME: &str = "testkit-master";

/// Sentinels started per group: a quorum of 2 and a majority to elect a leader.
const SENTINELS: usize = 3;
/// How long the Sentinels take to see each other and the replicas.
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a failover may take.
const FAILOVER_TIMEOUT: Duration = Duration::from_secs(60);

/// A Sentinel-monitored group: a master, replicas and three Sentinels
/// (`redis-server CONF --sentinel`), quorum 2, `down-after-milliseconds`
/// 500 and `failover-timeout` 1000, so a failover takes a few seconds.
///
/// ```no_run
/// let mut group = testkit::SentinelGroup::start(1)?;
/// let urls = group.sentinel_urls(); // give these to the client
/// let old = group.master_port()?;
/// let new = group.kill_master()?;   // returns once a replica took over
/// assert_ne!(old, new);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct SentinelGroup {
    /// Master first, then replicas; a killed master stays, killed.
    servers: Vec<RedisServer>,
    sentinels: Vec<RedisServer>,
}

impl SentinelGroup {
    /// Starts a master with `replicas` replicas (at least 1 for a failover),
    /// then three Sentinels, and waits until every Sentinel knows the
    /// replicas and the other Sentinels.
    ///
    /// # Errors
    ///
    /// If a process does not start, or discovery takes longer than 30 s.
    pub fn start(replicas: usize) -> io::Result<SentinelGroup> {
        SentinelGroup::start_with(replicas, &RedisServer::builder())
    }

    /// As [`start`](Self::start), the master and replicas configured like
    /// `builder`; a [password](crate::ServerBuilder::password) is also given
    /// to the replicas (`masterauth`) and the Sentinels (`auth-pass`). The
    /// Sentinels themselves need none.
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start).
    pub fn start_with(replicas: usize, builder: &ServerBuilder) -> io::Result<SentinelGroup> {
        let servers = ReplicaSet::start_with(replicas, builder)?.into_servers();
        let master_port = servers[0].port();
        let mut sentinel = RedisServer::builder().arg(
            "sentinel monitor",
            &format!("{MASTER_NAME} 127.0.0.1 {master_port} 2"),
        );
        if let Some(password) = &builder.password {
            sentinel = sentinel.arg("sentinel auth-pass", &format!("{MASTER_NAME} {password}"));
        }
        let builder = sentinel
            .arg(
                "sentinel down-after-milliseconds",
                &format!("{MASTER_NAME} 500"),
            )
            .arg("sentinel failover-timeout", &format!("{MASTER_NAME} 1000"))
            .sentinel_mode();
        let sentinels = std::thread::scope(|scope| {
            let starting: Vec<_> = (0..SENTINELS)
                .map(|_| scope.spawn(|| builder.clone().start()))
                .collect();
            starting
                .into_iter()
                .map(|handle| {
                    handle
                        .join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                })
                .collect::<io::Result<Vec<_>>>()
        })?;
        let group = SentinelGroup { servers, sentinels };
        group.wait_for_discovery(replicas)?;
        Ok(group)
    }

    /// The Sentinels' URLs.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels.iter().map(RedisServer::url).collect()
    }

    /// The master's port as the first Sentinel that answers reports it.
    ///
    /// # Errors
    ///
    /// If no Sentinel answers.
    pub fn master_port(&self) -> io::Result<u16> {
        let mut last = io::Error::other("no sentinel");
        for sentinel in &self.sentinels {
            let Ok(mut conn) = sentinel
                .client()
                .get_connection_with_timeout(Duration::from_secs(1))
            else {
                continue;
            };
            let reply: redis::RedisResult<(String, u16)> = redis::cmd("SENTINEL")
                .arg("get-master-addr-by-name")
                .arg(MASTER_NAME)
                .query(&mut conn);
            match reply {
                Ok((_, port)) => return Ok(port),
                Err(error) => last = io::Error::other(error),
            }
        }
        Err(last)
    }

    /// The data server (master or replica) listening on `port`, if any.
    pub fn server_on(&self, port: u16) -> Option<&RedisServer> {
        self.servers.iter().find(|server| server.port() == port)
    }

    /// Kills the current master (`SIGKILL`) and waits until every Sentinel
    /// reports a replica as the new master and it answers `ROLE` as a master.
    /// Returns the new master's port.
    ///
    /// # Errors
    ///
    /// If the master cannot be killed, or no failover completes within 60 s.
    pub fn kill_master(&mut self) -> io::Result<u16> {
        let old = self.master_port()?;
        let server = self
            .servers
            .iter_mut()
            .find(|server| server.port() == old)
            .ok_or_else(|| io::Error::other(format!("no server of the group on port {old}")))?;
        server.kill()?;
        self.wait_for_new_master(old)
    }

    /// Freezes the current master (`SIGSTOP`: connections stay open, nothing
    /// is answered) and waits until a replica replaces it, as for
    /// [`kill_master`](Self::kill_master). Returns the new master's port; the
    /// old master stays paused until the group is dropped.
    ///
    /// # Errors
    ///
    /// If the master cannot be paused, or no failover completes within 60 s.
    pub fn pause_master(&self) -> io::Result<u16> {
        let old = self.master_port()?;
        self.server_on(old)
            .ok_or_else(|| io::Error::other(format!("no server of the group on port {old}")))?
            .pause()?;
        self.wait_for_new_master(old)
    }

    fn wait_for_new_master(&self, old: u16) -> io::Result<u16> {
        let deadline = Instant::now() + FAILOVER_TIMEOUT;
        loop {
            if let Ok(port) = self.master_port()
                && port != old
                && self.server_on(port).is_some_and(is_master)
            {
                self.wait_until_all_report(port, deadline)?;
                return Ok(port);
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "no new master within {FAILOVER_TIMEOUT:?} after losing port {old}{}",
                        self.sentinel_logs()
                    ),
                ));
            }
            sleep(Duration::from_millis(50));
        }
    }

    /// Asks the Sentinels for a failover (`SENTINEL FAILOVER`) while the
    /// master is alive: a replica is promoted and the old master is turned
    /// into its replica (by the testkit at once, where Sentinel would take up
    /// to 10 s; its clients stay connected, so their next write meets
    /// `READONLY`). Returns the new master's port once the Sentinels report
    /// it and it answers `ROLE` as a master.
    ///
    /// # Errors
    ///
    /// If no Sentinel accepts the request, or the failover does not complete in 60 s.
    pub fn failover(&self) -> io::Result<u16> {
        let old = self.master_port()?;
        let deadline = Instant::now() + FAILOVER_TIMEOUT;
        let mut requested = false;
        loop {
            if !requested {
                // Refused ("NOGOODSLAVE") while no replica is ready yet: ask again.
                requested = self.sentinels.iter().any(|sentinel| {
                    redis::cmd("SENTINEL")
                        .arg("failover")
                        .arg(MASTER_NAME)
                        .exec(&mut sentinel.conn())
                        .is_ok()
                });
            }
            if requested
                && let Ok(port) = self.master_port()
                && port != old
                && self.server_on(port).is_some_and(is_master)
            {
                // Sentinel demotes the old master at its next look at it, up
                // to 10 s later; do it now, as Sentinel would (but without
                // closing its clients' connections).
                if let Some(server) = self.server_on(old) {
                    redis::cmd("REPLICAOF")
                        .arg("127.0.0.1")
                        .arg(port)
                        .exec(&mut server.conn())
                        .map_err(io::Error::other)?;
                }
                self.wait_until_all_report(port, deadline)?;
                return Ok(port);
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no failover away from port {old} within {FAILOVER_TIMEOUT:?}"),
                ));
            }
            sleep(Duration::from_millis(50));
        }
    }

    /// Waits until every Sentinel's own view (`SENTINEL MASTER`, what
    /// clients look up) has the master on `port`: during a failover
    /// `get-master-addr-by-name` names the promoted replica before the
    /// Sentinels switch over.
    fn wait_until_all_report(&self, port: u16, deadline: Instant) -> io::Result<()> {
        let wanted = port.to_string();
        loop {
            let agreed = self.sentinels.iter().all(|sentinel| {
                let view: redis::RedisResult<std::collections::HashMap<String, String>> =
                    redis::cmd("SENTINEL")
                        .arg("master")
                        .arg(MASTER_NAME)
                        .query(&mut sentinel.conn());
                view.is_ok_and(|view| {
                    view.get("port") == Some(&wanted)
                        && view.get("flags").is_some_and(|flags| flags == "master")
                })
            });
            if agreed {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("the sentinels did not all switch to port {port} in time"),
                ));
            }
            sleep(Duration::from_millis(50));
        }
    }

    /// The last lines of every Sentinel's log, for error messages.
    fn sentinel_logs(&self) -> String {
        self.sentinels
            .iter()
            .map(|sentinel| crate::ready::log_tail(sentinel.dir()))
            .collect()
    }

    fn wait_for_discovery(&self, replicas: usize) -> io::Result<()> {
        let deadline = Instant::now() + DISCOVERY_TIMEOUT;
        loop {
            let ready = self.sentinels.iter().all(|sentinel| {
                let mut conn = sentinel.conn();
                let mut known = |what: &str| -> usize {
                    redis::cmd("SENTINEL")
                        .arg(what)
                        .arg(MASTER_NAME)
                        .query::<Vec<redis::Value>>(&mut conn)
                        .map_or(0, |list| list.len())
                };
                known("replicas") >= replicas && known("sentinels") >= SENTINELS - 1
            });
            if ready {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("sentinels did not discover the group within {DISCOVERY_TIMEOUT:?}"),
                ));
            }
            sleep(Duration::from_millis(50));
        }
    }
}

fn is_master(server: &RedisServer) -> bool {
    let Ok(mut conn) = server
        .client()
        .get_connection_with_timeout(Duration::from_secs(1))
    else {
        return false;
    };
    let role: redis::RedisResult<Vec<redis::Value>> = redis::cmd("ROLE").query(&mut conn);
    matches!(role.as_deref(), Ok([redis::Value::BulkString(role), ..]) if role == b"master")
}
