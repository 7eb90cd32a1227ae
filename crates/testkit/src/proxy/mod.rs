//! A TCP proxy that puts network faults between a client and a server:
//! latency with jitter, loss, and partitions (one way or both) that heal.
//!
//! The faults are those of a TCP connection, as an application sees them:
//! bytes are never dropped, reordered or corrupted (TCP sees to that), only
//! late. So a lost segment is a delay of one retransmission timeout for it
//! and everything behind it, and a partition holds the bytes sent into it
//! and delivers them when it heals, as TCP's retransmissions would (unless
//! either side closed the connection meanwhile).

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

/// Linux's smallest TCP retransmission timeout: what one lost segment costs.
pub const RETRANSMISSION_TIMEOUT: Duration = Duration::from_millis(200);

/// One direction of a proxied connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Client to server (requests).
    ToServer,
    /// Server to client (replies).
    ToClient,
}

/// The faults of one direction.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LinkFaults {
    /// Delay added to every chunk of bytes.
    pub latency: Duration,
    /// The delay varies uniformly by up to this much either way (bytes keep
    /// their order: a chunk never overtakes the one before it).
    pub jitter: Duration,
    /// Probability (0 to 1) that a chunk is lost once and retransmitted
    /// after [`RETRANSMISSION_TIMEOUT`].
    pub loss: f64,
    /// Nothing gets through; what is sent waits until the cut heals.
    pub cut: bool,
}

/// A proxy on a free port of `127.0.0.1` in front of one server; each
/// accepted client gets its own connection to the server. Faults apply to
/// every connection, open or future, from the moment they are set.
///
/// ```no_run
/// use std::time::Duration;
/// use testkit::{Direction, LinkFaults, Proxy, RedisServer};
///
/// let server = RedisServer::start()?;
/// let proxy = Proxy::start(server.addr())?;
/// let url = proxy.url(); // give this to the client
/// proxy.set(Direction::ToServer, LinkFaults { latency: Duration::from_millis(50), ..LinkFaults::default() });
/// proxy.cut(Direction::ToClient); // requests run, replies wait
/// proxy.heal();                   // the replies arrive
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

#[derive(Debug, Default)]
struct Shared {
    faults: Mutex<[LinkFaults; 2]>,
    /// Every connection's two sockets, shut down when the proxy is dropped.
    streams: Mutex<Vec<TcpStream>>,
    stopped: AtomicBool,
    seed: AtomicU64,
}

impl Proxy {
    /// Starts a proxy to `upstream`, with no faults.
    ///
    /// # Errors
    ///
    /// If no port can be bound.
    pub fn start(upstream: SocketAddr) -> io::Result<Proxy> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        shared.seed.store(seed(), Ordering::Relaxed);
        let accepting = shared.clone();
        thread::Builder::new()
            .name(format!("proxy-{}", addr.port()))
            .spawn(move || accept_loop(&listener, upstream, &accepting))?;
        Ok(Proxy { addr, shared })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The proxy's port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `redis://127.0.0.1:PORT` of the proxy.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port())
    }

    /// Sets the faults of one direction.
    pub fn set(&self, direction: Direction, faults: LinkFaults) {
        lock(&self.shared.faults)[index(direction)] = faults;
    }

    /// The same faults on both directions.
    pub fn set_both(&self, faults: LinkFaults) {
        *lock(&self.shared.faults) = [faults; 2];
    }

    /// The faults of one direction now.
    pub fn faults(&self, direction: Direction) -> LinkFaults {
        lock(&self.shared.faults)[index(direction)]
    }

    /// Cuts one direction (a one-way partition); other faults stay.
    pub fn cut(&self, direction: Direction) {
        lock(&self.shared.faults)[index(direction)].cut = true;
    }

    /// Cuts both directions (a full partition).
    pub fn partition(&self) {
        for faults in lock(&self.shared.faults).iter_mut() {
            faults.cut = true;
        }
    }

    /// Ends every cut; bytes held meanwhile are delivered, in order.
    pub fn heal(&self) {
        for faults in lock(&self.shared.faults).iter_mut() {
            faults.cut = false;
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        // Wakes the accept loop, which then sees `stopped`.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(100));
        for stream in lock(&self.shared.streams).drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

fn index(direction: Direction) -> usize {
    match direction {
        Direction::ToServer => 0,
        Direction::ToClient => 1,
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn accept_loop(listener: &TcpListener, upstream: SocketAddr, shared: &Arc<Shared>) {
    for client in listener.incoming() {
        if shared.stopped.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = client else { continue };
        let Ok(server) = TcpStream::connect(upstream) else {
            // The server is down: the client sees its connection closed.
            continue;
        };
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        if let Err(error) = link(&client, &server, shared) {
            eprintln!("proxy to {upstream}: {error}");
        }
    }
}

/// Starts the two directions of one proxied connection.
fn link(client: &TcpStream, server: &TcpStream, shared: &Arc<Shared>) -> io::Result<()> {
    {
        let mut streams = lock(&shared.streams);
        streams.push(client.try_clone()?);
        streams.push(server.try_clone()?);
    }
    pipe(
        client.try_clone()?,
        server.try_clone()?,
        Direction::ToServer,
        shared,
    )?;
    pipe(
        server.try_clone()?,
        client.try_clone()?,
        Direction::ToClient,
        shared,
    )
}

/// A chunk of bytes and when it may be delivered; `None` bytes: end of stream.
type Queue = Arc<(Mutex<VecDeque<(Instant, Option<Vec<u8>>)>>, Condvar)>;

/// Copies `from` to `to` through the faults of `direction`: a reader thread
/// stamps each chunk with its delivery time, a writer thread delivers it
/// then (or when the cut heals).
fn pipe(
    mut from: TcpStream,
    mut to: TcpStream,
    direction: Direction,
    shared: &Arc<Shared>,
) -> io::Result<()> {
    let queue: Queue = Arc::default();
    let reading = (queue.clone(), shared.clone());
    thread::Builder::new()
        .name("proxy-read".into())
        .spawn(move || {
            let (queue, shared) = reading;
            let mut random = Random(
                shared
                    .seed
                    .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
                    | 1,
            );
            let mut last_due = Instant::now();
            let mut buffer = vec![0; 64 * 1024];
            loop {
                let read = from.read(&mut buffer);
                let chunk = match read {
                    Ok(0) | Err(_) => None,
                    Ok(n) => Some(buffer[..n].to_vec()),
                };
                let faults = lock(&shared.faults)[index(direction)];
                let mut delay = faults.latency;
                if !faults.jitter.is_zero() {
                    let spread = faults.jitter.as_secs_f64() * (random.unit() * 2.0 - 1.0);
                    delay = Duration::from_secs_f64((delay.as_secs_f64() + spread).max(0.0));
                }
                if faults.loss > 0.0 && random.unit() < faults.loss {
                    delay += RETRANSMISSION_TIMEOUT;
                }
                // In order: never before the chunk ahead of it.
                let due = (Instant::now() + delay).max(last_due);
                last_due = due;
                let end = chunk.is_none();
                lock(&queue.0).push_back((due, chunk));
                queue.1.notify_all();
                if end {
                    return;
                }
            }
        })?;
    let writing = shared.clone();
    thread::Builder::new()
        .name("proxy-write".into())
        .spawn(move || {
            let shared = writing;
            loop {
                let Some(chunk) = next_due(&queue, &shared, direction) else {
                    let _ = to.shutdown(Shutdown::Write);
                    return;
                };
                if to.write_all(&chunk).is_err() {
                    let _ = to.shutdown(Shutdown::Both);
                    lock(&queue.0).clear();
                    return;
                }
            }
        })?;
    Ok(())
}

/// Waits for the next chunk to come due while its direction is not cut;
/// `None` at the end of the stream or when the proxy stops.
fn next_due(queue: &Queue, shared: &Shared, direction: Direction) -> Option<Vec<u8>> {
    const TICK: Duration = Duration::from_millis(5);
    loop {
        if shared.stopped.load(Ordering::SeqCst) {
            return None;
        }
        let cut = lock(&shared.faults)[index(direction)].cut;
        let mut pending = lock(&queue.0);
        match pending.front() {
            Some(&(due, _)) if !cut && due <= Instant::now() => {
                return pending.pop_front().and_then(|(_, chunk)| chunk);
            }
            Some(&(due, _)) if !cut => {
                let wait = due.saturating_duration_since(Instant::now()).min(TICK);
                drop(queue.1.wait_timeout(pending, wait));
            }
            // Empty, or cut: wait for bytes; faults are read again every tick.
            _ => drop(queue.1.wait_timeout(pending, TICK)),
        }
    }
}

fn seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64);
    nanos ^ u64::from(std::process::id()).rotate_left(32)
}

/// xorshift64: random enough for delays.
struct Random(u64);

impl Random {
    /// A number in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests;
