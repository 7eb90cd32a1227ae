//! Several independent servers, e.g. the N masters of a Redlock test.

use std::io;
use std::ops::{Index, IndexMut};

use crate::server::RedisServer;
use crate::server_settings::ServerBuilder;

/// N independent [`RedisServer`]s (no replication between them), each on its
/// own port. Index it like a slice: `servers[0].kill()`.
#[derive(Debug)]
pub struct Servers(Vec<RedisServer>);

impl Servers {
    /// Start `n` servers with default settings, in parallel.
    ///
    /// # Errors
    ///
    /// The first error of any server (the others are then stopped).
    pub fn start(n: usize) -> io::Result<Servers> {
        Self::start_with(n, &ServerBuilder::default())
    }

    /// Start `n` servers, all configured like `builder`, in parallel.
    ///
    /// # Errors
    ///
    /// The first error of any server (the others are then stopped).
    pub fn start_with(n: usize, builder: &ServerBuilder) -> io::Result<Servers> {
        // Starting is mostly waiting for the process to listen, so threads
        // make N servers cost about as much as one.
        std::thread::scope(|scope| {
            let starting: Vec<_> = (0..n)
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
                .map(Servers)
        })
    }

    /// The [URL](RedisServer::url) of every server, in order.
    pub fn urls(&self) -> Vec<String> {
        self.0.iter().map(RedisServer::url).collect()
    }

    /// Number of servers.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are no servers (`Servers::start(0)`).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The servers, in order.
    pub fn iter(&self) -> std::slice::Iter<'_, RedisServer> {
        self.0.iter()
    }

    /// The servers, mutably (to [`kill`](RedisServer::kill) or
    /// [`restart`](RedisServer::restart) them).
    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, RedisServer> {
        self.0.iter_mut()
    }
}

impl Index<usize> for Servers {
    type Output = RedisServer;

    /// The `i`-th server; panics if `i >= len()`.
    fn index(&self, i: usize) -> &RedisServer {
        &self.0[i]
    }
}

impl IndexMut<usize> for Servers {
    /// The `i`-th server; panics if `i >= len()`.
    fn index_mut(&mut self, i: usize) -> &mut RedisServer {
        &mut self.0[i]
    }
}

impl<'a> IntoIterator for &'a Servers {
    type Item = &'a RedisServer;
    type IntoIter = std::slice::Iter<'a, RedisServer>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<'a> IntoIterator for &'a mut Servers {
    type Item = &'a mut RedisServer;
    type IntoIter = std::slice::IterMut<'a, RedisServer>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter_mut()
    }
}

impl IntoIterator for Servers {
    type Item = RedisServer;
    type IntoIter = std::vec::IntoIter<RedisServer>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}
