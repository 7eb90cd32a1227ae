//! The network between the workers and the lock servers: for faults that
//! need one, every worker reaches every lock server through a proxy of its
//! own, so the lab can slow, cut or heal one worker's links, or everyone's.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use testkit::{Direction, LinkFaults, Proxy};

/// 50 ms ± 20 ms each way and 5% loss: a slow, lossy network.
pub const SLOW: LinkFaults = LinkFaults {
    latency: Duration::from_millis(50),
    jitter: Duration::from_millis(20),
    loss: 0.05,
    cut: false,
};

/// Each worker's proxies, one per lock server, in the servers' order.
#[derive(Debug, Default)]
pub struct Links {
    /// The lock servers' addresses; empty when the run uses no proxies.
    servers: Vec<SocketAddr>,
    proxies: HashMap<u32, Vec<Proxy>>,
    /// Faults every new link starts with (set by [`Links::set_all`]).
    everyone: LinkFaults,
    /// For each worker, the servers it cannot reach at all (its lasting cuts).
    unreachable: HashMap<u32, Vec<usize>>,
}

impl Links {
    /// Proxies to `servers` for every worker, or none when `servers` is empty.
    pub fn new(servers: Vec<SocketAddr>) -> Links {
        Links {
            servers,
            ..Links::default()
        }
    }

    /// The lock server URLs worker `id` uses: its proxies, or `direct` when
    /// the run uses no proxies.
    ///
    /// # Errors
    /// When a proxy cannot be started.
    pub fn urls_for(&mut self, id: u32, direct: &[String]) -> Result<Vec<String>, String> {
        if self.servers.is_empty() {
            return Ok(direct.to_vec());
        }
        let cut = self.unreachable.get(&id).cloned().unwrap_or_default();
        let mut proxies = Vec::new();
        for (index, server) in self.servers.iter().enumerate() {
            let proxy = Proxy::start(*server).map_err(|error| format!("proxy: {error}"))?;
            proxy.set_both(LinkFaults {
                cut: cut.contains(&index),
                ..self.everyone
            });
            proxies.push(proxy);
        }
        let urls = proxies.iter().map(Proxy::url).collect();
        self.proxies.insert(id, proxies);
        Ok(urls)
    }

    /// Worker `id` never reaches the servers at `indexes` (for the run).
    pub fn keep_apart(&mut self, id: u32, indexes: Vec<usize>) {
        self.unreachable.insert(id, indexes);
    }

    /// Cuts worker `id` off from every lock server, both ways.
    pub fn cut_off(&self, id: u32) {
        for proxy in self.proxies.get(&id).into_iter().flatten() {
            proxy.partition();
        }
    }

    /// Drops the lock servers' replies to worker `id`; its requests still arrive.
    pub fn cut_replies(&self, id: u32) {
        for proxy in self.proxies.get(&id).into_iter().flatten() {
            proxy.cut(Direction::ToClient);
        }
    }

    /// Ends worker `id`'s temporary cuts (its lasting ones stay).
    pub fn heal(&self, id: u32) {
        let lasting = self.unreachable.get(&id).cloned().unwrap_or_default();
        for (index, proxy) in self.proxies.get(&id).into_iter().flatten().enumerate() {
            if !lasting.contains(&index) {
                proxy.heal();
            }
        }
    }

    /// Sets `faults` on every link, now and for links made later.
    pub fn set_all(&mut self, faults: LinkFaults) {
        self.everyone = faults;
        for (id, proxies) in &self.proxies {
            let lasting = self.unreachable.get(id).cloned().unwrap_or_default();
            for (index, proxy) in proxies.iter().enumerate() {
                proxy.set_both(LinkFaults {
                    cut: lasting.contains(&index),
                    ..faults
                });
            }
        }
    }
}
