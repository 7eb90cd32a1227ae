//! A Redis Cluster of throwaway servers.

use std::io;
use std::path::PathBuf;
use std::process::Command;
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::server::RedisServer;

/// How long the cluster may take to agree on its slots after creation.
const FORM_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a replica may take to replace a killed master.
const FAILOVER_TIMEOUT: Duration = Duration::from_secs(30);

/// A Redis Cluster: `masters` masters sharing the 16384 slots, each with
/// `replicas` replicas, created with `redis-cli --cluster create`.
///
/// Nodes run with `cluster-node-timeout 1000`, so a killed master is
/// replaced by one of its replicas within a few seconds
/// ([`kill_master_of`](Self::kill_master_of)).
///
/// ```no_run
/// let mut cluster = testkit::Cluster::start(3, 1)?;
/// let urls = cluster.urls(); // any of them lets a client find the rest
/// let old = cluster.master_of("order:42")?;
/// let new = cluster.kill_master_of("order:42")?; // a replica took over
/// assert_ne!(old, new);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct Cluster {
    nodes: Vec<RedisServer>,
}

impl Cluster {
    /// Starts `masters × (1 + replicas)` nodes, joins them into a cluster
    /// and waits until every node reports `cluster_state:ok`.
    ///
    /// # Errors
    ///
    /// If a node does not start, `redis-cli` is missing or fails (a cluster
    /// needs at least 3 masters), or the cluster does not form within 30 s.
    pub fn start(masters: usize, replicas: usize) -> io::Result<Cluster> {
        Cluster::start_with_args(masters, replicas, &[])
    }

    /// As [`start`](Self::start), with extra `redis.conf` directives on every
    /// node, e.g. `("enable-debug-command", "yes")` for `DEBUG SLEEP`.
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start); a directive the server refuses fails the start.
    pub fn start_with_args(
        masters: usize,
        replicas: usize,
        args: &[(&str, &str)],
    ) -> io::Result<Cluster> {
        let mut builder = RedisServer::builder()
            .arg("cluster-enabled", "yes")
            .arg("cluster-config-file", "nodes.conf")
            .arg("cluster-node-timeout", "1000")
            // Any replica may take over, however long ago it last heard from its master.
            .arg("cluster-replica-validity-factor", "0")
            // Replicas sync at once instead of after Redis's default 5 s grace.
            .arg("repl-diskless-sync-delay", "0");
        for (name, value) in args {
            builder = builder.arg(name, value);
        }
        let count = masters * (1 + replicas);
        let nodes = std::thread::scope(|scope| {
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
                .collect::<io::Result<Vec<_>>>()
        })?;
        let mut create = Command::new(redis_cli_path()?);
        create.arg("--cluster").arg("create");
        for node in &nodes {
            create.arg(format!("127.0.0.1:{}", node.port()));
        }
        let output = create
            .arg("--cluster-replicas")
            .arg(replicas.to_string())
            .arg("--cluster-yes")
            .output()?;
        if !output.status.success() {
            return Err(io::Error::other(format!(
                "redis-cli --cluster create failed: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )));
        }
        let cluster = Cluster { nodes };
        cluster.wait_until_ok(FORM_TIMEOUT)?;
        Ok(cluster)
    }

    /// The URLs of the live nodes.
    pub fn urls(&self) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|node| node.pid().is_some())
            .map(RedisServer::url)
            .collect()
    }

    /// Every node, killed ones included.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// The port of the master serving `key`'s slot, as a live node sees it.
    ///
    /// # Errors
    ///
    /// If no live node answers, or none serves the slot.
    pub fn master_of(&self, key: &str) -> io::Result<u16> {
        let node = self.live_node()?;
        let mut conn = node.conn();
        let slot: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut conn)
            .map_err(io::Error::other)?;
        let nodes: String = redis::cmd("CLUSTER")
            .arg("NODES")
            .query(&mut conn)
            .map_err(io::Error::other)?;
        master_serving(&nodes, slot)
            .ok_or_else(|| io::Error::other(format!("no live master serves slot {slot}")))
    }

    /// Kills (`SIGKILL`) the master serving `key`, waits until one of its
    /// replicas took over and every live node reports `cluster_state:ok`,
    /// and returns the new master's port.
    ///
    /// # Errors
    ///
    /// If the master cannot be found or killed, or no failover completes in 30 s.
    pub fn kill_master_of(&mut self, key: &str) -> io::Result<u16> {
        let old = self.master_of(key)?;
        let node = self
            .nodes
            .iter_mut()
            .find(|node| node.port() == old)
            .ok_or_else(|| io::Error::other(format!("no node on port {old}")))?;
        node.kill()?;
        let deadline = Instant::now() + FAILOVER_TIMEOUT;
        loop {
            if let Ok(new) = self.master_of(key)
                && new != old
                && self.wait_until_ok(Duration::ZERO).is_ok()
            {
                return Ok(new);
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "no replica replaced the master on port {old} within {FAILOVER_TIMEOUT:?}"
                    ),
                ));
            }
            sleep(Duration::from_millis(50));
        }
    }

    fn live_node(&self) -> io::Result<&RedisServer> {
        self.nodes
            .iter()
            .find(|node| node.pid().is_some())
            .ok_or_else(|| io::Error::other("every node was killed"))
    }

    /// Waits until every live node reports `cluster_state:ok` and sees
    /// every slot assigned; a zero `timeout` checks once.
    fn wait_until_ok(&self, timeout: Duration) -> io::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let ok = self
                .nodes
                .iter()
                .filter(|node| node.pid().is_some())
                .all(|node| {
                    let info: redis::RedisResult<String> = node
                        .client()
                        .get_connection_with_timeout(Duration::from_secs(1))
                        .and_then(|mut conn| redis::cmd("CLUSTER").arg("INFO").query(&mut conn));
                    info.is_ok_and(|info| {
                        info.contains("cluster_state:ok") && info.contains("cluster_slots_ok:16384")
                    })
                });
            if ok {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("the cluster did not report cluster_state:ok within {timeout:?}"),
                ));
            }
            sleep(Duration::from_millis(50));
        }
    }
}

/// The port of the non-failed master serving `slot`, from `CLUSTER NODES`.
fn master_serving(nodes: &str, slot: u16) -> Option<u16> {
    nodes.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let flags = fields.get(2)?;
        if !flags.split(',').any(|flag| flag == "master") || flags.contains("fail") {
            return None;
        }
        let serves = fields.iter().skip(8).any(|range| {
            let mut bounds = range.splitn(2, '-');
            let first = bounds.next().and_then(|start| start.parse::<u16>().ok());
            let last = bounds.next().map_or(first, |end| end.parse::<u16>().ok());
            matches!((first, last), (Some(first), Some(last)) if (first..=last).contains(&slot))
        });
        if !serves {
            return None;
        }
        let address = fields.get(1)?.split(['@', ',']).next()?;
        address.rsplit_once(':')?.1.parse().ok()
    })
}

/// The server's own command-line client (`redis-cli`, or `valkey-cli`
/// beside a `valkey-server`), else `redis-cli` on `PATH`.
fn redis_cli_path() -> io::Result<PathBuf> {
    let server = crate::binary::redis_server_path()?;
    for name in ["redis-cli", "valkey-cli"] {
        let beside = server.with_file_name(name);
        if beside.is_file() {
            return Ok(beside);
        }
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("redis-cli"))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "redis-cli not found beside redis-server nor on PATH (Debian: apt-get install redis-tools)",
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_master_serving_a_slot_is_read_from_cluster_nodes() {
        let nodes = "\
a 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460
b 127.0.0.1:7001@17001 master,fail - 0 0 2 connected 5461-10922
c 127.0.0.1:7003@17003 master - 0 0 4 connected 5461-10922 16000
d 127.0.0.1:7004@17004 slave a 0 0 1 connected
";
        assert_eq!(master_serving(nodes, 0), Some(7000));
        assert_eq!(master_serving(nodes, 6000), Some(7003));
        assert_eq!(master_serving(nodes, 16000), Some(7003));
        assert_eq!(master_serving(nodes, 12000), None);
    }
}
