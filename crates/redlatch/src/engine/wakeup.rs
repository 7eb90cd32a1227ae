//! Wake-ups for waiters: one pub/sub connection per client, waiters parked per lock.
//!
//! A waiter joins the lock's channel (`redisson_lock__channel:{NAME}`) and
//! parks. When the holder's final release publishes `0`, the subscriber task
//! wakes **one** parked waiter of this process (FIFO), not all of them: the
//! others would only find the lock taken again and cost Redis a round trip
//! each. Every waiter also sleeps at most until the holder's lease ends, so a
//! holder that dies (no message) or a message lost while the subscription
//! reconnects costs at most one lease. When the subscription comes back after
//! a disconnect every parked waiter is woken, since messages may have been
//! missed meanwhile.
//!
//! On a Redis Cluster the channel is a sharded channel: the subscription is
//! made with `SSUBSCRIBE` (see `transport/subscription.rs`), so whatever publishes
//! on a lock channel must use the command
//! [`Connection::publish_command`](crate::transport::Connection::publish_command)
//! names (`SPUBLISH` there); a plain `PUBLISH` would reach no waiter.
//!
//! A channel stays subscribed for [`SUBSCRIPTION_LINGER`] after its last
//! waiter leaves: a lock taken in turns by two processes would otherwise cost
//! a SUBSCRIBE round trip on every contended acquire, and a releaser would
//! often find nobody subscribed to hand the lock to.

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::lease_clock::LeaseInstant;
use crate::sync::{AtomicBool, AtomicU8, AtomicU64, Mutex, Ordering};

use tokio::sync::{Notify, mpsc, watch};
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::settings::SharedSettings;
use crate::transport::subscription::{Event, Session, SubscriptionSource};

/// How often a subscription connection to a Sentinel-named master is checked
/// with a PING (see [`Session::needs_liveness_checks`]).
const LIVENESS_CHECK: Duration = Duration::from_secs(2);

/// How long a channel stays subscribed after its last waiter left.
const SUBSCRIPTION_LINGER: Duration = Duration::from_millis(500);

/// How a parked waiter was woken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// An unlock message arrived (or a wake-up was passed on).
    Message,
    /// The wait ran out: the holder's lease should be over, or the caller's deadline.
    TimedOut,
    /// The subscription was re-established: messages may have been missed.
    Resubscribed,
}

/// Per-channel state shared by the waiters of one lock in this process.
pub(crate) struct Channel {
    name: String,
    notify: Notify,
    /// True while the subscription connection is subscribed to this channel.
    subscribed: watch::Sender<bool>,
    /// Bumped each time the subscription is (re)established.
    epoch: AtomicU64,
    /// When the current holder's lease ends, as last reported to a waiter.
    lease_ends: Mutex<Option<LeaseInstant>>,
    /// Every message wakes every waiter (read-write locks: all readers may enter).
    broadcast: AtomicBool,
    /// Messages received (and wake-ups passed on for permits left), numbered
    /// from 1. A waiter reads it before each attempt: a message numbered
    /// higher came after its attempt began, so the attempt may not have seen
    /// what the message announces.
    messages: AtomicU64,
    /// The parked waiters of a channel whose messages wake one waiter each.
    queue: Mutex<Queue>,
    /// The fencing token of a hold a fair release handed to this channel's
    /// waiter (its own channel), until the waiter takes it.
    handed: Mutex<Option<u64>>,
    /// Never subscribed: its messages come from this process ([`Nudge`]:
    /// a tracked key's invalidation, a release by this client).
    local: bool,
    /// Tells the channel's timer (see [`Queue::timer`]) that a waiter parked
    /// with an earlier deadline than the one it sleeps toward.
    rearm: Arc<Notify>,
}

/// The waiters of a one-waiter-per-message channel, and the wake-up nobody
/// took. The rule that keeps a message from being lost or circling: a
/// message goes to the oldest waiter whose last attempt began before it
/// (`Slot::seen` lower than its number), a waiter that claimed the lock's
/// next turn before the others (the freed lock would refuse them). A waiter that cannot use it hands
/// it on under the same rule; having attempted since, it cannot take it
/// back, so each message reaches each waiter at most once, and reaches the
/// next waiter that has not seen it, parked now or parking later.
#[derive(Default)]
struct Queue {
    parked: VecDeque<Arc<Slot>>,
    /// The newest message no parked waiter could take (0: none): the next
    /// waiter to park whose attempt began before it takes it.
    pending: u64,
    /// The channel's timer, which ends the parks whose deadline passed: one
    /// task per channel while some parked waiter has a deadline, rather
    /// than a `tokio::time::Sleep` (112 bytes) in every parked waiter.
    /// `Some(at)`: it runs, and looks at the parked waiters at `at` at the
    /// latest (the earliest deadline among them when it was set).
    timer: Option<LeaseInstant>,
}

/// One parked waiter: its one registration, which the message handed to
/// it, a resubscription of the channel, or the channel's timer ends.
struct Slot {
    /// The messages counted before this waiter's last attempt.
    seen: u64,
    /// This waiter claimed the lock's next turn: woken first.
    first: bool,
    /// When the park runs out (`None`: never).
    deadline: Option<LeaseInstant>,
    /// The message handed to this waiter (0: none), set under the queue's lock.
    handed: AtomicU64,
    /// How the park ended other than by a message: [`RESUBSCRIBED`],
    /// [`TIMED_OUT`] (0: it did not).
    ended: AtomicU8,
    /// The parked task, woken when any of the above is set. The standard
    /// mutex, also under the permutation checks: a leaf, taken under the
    /// queue's lock and holding nothing else, whose exchange of a waker
    /// those checks need not cut in two (they explore the atomics around
    /// it); as a scheduling point it let a waiter be left holding the
    /// queue's lock when the checks drop their tasks at the end.
    waker: crate::sync::unpoisoned::Mutex<Option<Waker>>,
}

/// [`Slot::ended`]: the park ran out.
const TIMED_OUT: u8 = 1;
/// [`Slot::ended`]: the subscription was made again (messages may have
/// been missed); it outranks a deadline, as a resubscription did before.
const RESUBSCRIBED: u8 = 2;

impl Slot {
    fn new(seen: u64, first: bool, deadline: Option<LeaseInstant>) -> Slot {
        Slot {
            seen,
            first,
            deadline,
            handed: AtomicU64::new(0),
            ended: AtomicU8::new(0),
            waker: crate::sync::unpoisoned::Mutex::new(None),
        }
    }

    /// Hands message `number` to this waiter and wakes it.
    fn hand(&self, number: u64) {
        self.handed.store(number, Ordering::Release);
        self.wake();
    }

    /// Ends the park for `reason` ([`TIMED_OUT`], [`RESUBSCRIBED`]).
    fn end(&self, reason: u8) {
        self.ended.fetch_max(reason, Ordering::AcqRel);
        self.wake();
    }

    fn wake(&self) {
        // Taken under the lock the parked task stores it under: set before
        // the task looks again, or woken after it stored its waker.
        if let Some(waker) = self.waker.lock().take() {
            waker.wake();
        }
    }

    /// How the park ended, if it did: a message first, then a
    /// resubscription, then the deadline (the order the park's `select!`
    /// had).
    fn outcome(&self) -> Option<Wake> {
        if self.handed.load(Ordering::Acquire) != 0 {
            return Some(Wake::Message);
        }
        match self.ended.load(Ordering::Acquire) {
            0 => None,
            RESUBSCRIBED => Some(Wake::Resubscribed),
            _ => Some(Wake::TimedOut),
        }
    }
}

/// Resolves when the slot's park ends: what a parked waiter awaits (a
/// pointer, where two `Notified` and a `Sleep` took 240 bytes).
struct SlotEnded<'a>(&'a Slot);

impl Future for SlotEnded<'_> {
    type Output = Wake;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Wake> {
        let slot = self.0;
        if let Some(wake) = slot.outcome() {
            return Poll::Ready(wake);
        }
        {
            let mut waker = slot.waker.lock();
            match &mut *waker {
                Some(kept) if kept.will_wake(cx.waker()) => {}
                kept => *kept = Some(cx.waker().clone()),
            }
        }
        // Set between the first look and the waker stored: seen now.
        match slot.outcome() {
            Some(wake) => Poll::Ready(wake),
            None => Poll::Pending,
        }
    }
}

impl Queue {
    /// Hands message `number` to the oldest parked waiter that has not seen
    /// it, or keeps it for the next such waiter to park.
    fn deliver(&mut self, number: u64) {
        let unseen = |slot: &Arc<Slot>| slot.seen < number;
        let claimant = self
            .parked
            .iter()
            .position(|slot| slot.first && unseen(slot));
        match claimant.or_else(|| self.parked.iter().position(unseen)) {
            Some(index) => {
                let slot = self.parked.remove(index).expect("found above");
                slot.hand(number);
            }
            None => self.pending = self.pending.max(number),
        }
    }
}

impl Channel {
    /// One unlock message: wakes one waiter that has not seen it (see
    /// [`Queue`]); on a broadcast channel, wakes every waiter.
    fn dispatch(&self) {
        if self.broadcast.load(Ordering::Acquire) {
            self.messages.fetch_add(1, Ordering::AcqRel);
            self.notify.notify_waiters();
        } else {
            let mut queue = self.queue.lock();
            let number = self.messages.fetch_add(1, Ordering::AcqRel) + 1;
            queue.deliver(number);
        }
    }

    /// Waiters parked now (one-waiter-per-message channels).
    #[cfg(all(test, feature = "__permutation-checks"))]
    fn parked(&self) -> usize {
        self.queue.lock().parked.len()
    }

    /// The subscription was made again (its epoch bumped before): every
    /// waiter parked on it checks its lock again.
    fn resubscribed(&self) {
        self.notify.notify_waiters();
        for slot in &self.queue.lock().parked {
            slot.end(RESUBSCRIBED);
        }
    }
}

struct Member {
    channel: Arc<Channel>,
    waiters: usize,
}

enum Command {
    Subscribe(String),
    Unsubscribe(String),
}

struct Registry {
    channels: Mutex<HashMap<String, Member>>,
    commands: mpsc::UnboundedSender<Command>,
    /// The client's runtime, which runs the channels' timers: it runs the
    /// subscriber too, so it is driven while the client is used, where a
    /// waiter's own runtime may not be (a current-thread runtime nobody
    /// blocks on). `None` only in checks that start no timer.
    runtime: Option<tokio::runtime::Handle>,
}

impl Registry {
    /// An unlock message on `channel_name`, for its waiters in this process;
    /// `handed`: the token of a hold it hands over, kept for the waiter
    /// before it is woken.
    fn dispatch(&self, channel_name: &str, handed: Option<u64>) {
        let channels = self.channels.lock();
        // A lingering channel has nobody to wake; a stored wake-up would only
        // cost its next waiter a needless attempt.
        if let Some(member) = channels
            .get(channel_name)
            .filter(|member| member.waiters > 0)
        {
            if handed.is_some() {
                *member.channel.handed.lock() = handed;
            }
            member.channel.dispatch();
        }
    }
}

/// The client's wake-up service: the registry of parked waiters and the
/// handle to the subscriber task that feeds it.
pub(crate) struct Wakeups {
    registry: Arc<Registry>,
}

/// A waiter's membership in a lock's channel. Dropping it leaves the channel;
/// the last member to leave unsubscribes, so a cancelled wait leaves no
/// subscription behind.
pub(crate) struct Ticket {
    registry: Arc<Registry>,
    channel: Arc<Channel>,
    /// The message that ended this waiter's last park (0: none), to hand
    /// on if the waiter cannot use it.
    woken_by: AtomicU64,
    /// The subscription generation and the messages counted before the
    /// waiter's last attempt ([`Ticket::mark`]): its next park returns at
    /// once for anything newer.
    marked: (u64, u64),
}

impl Ticket {
    fn new(registry: Arc<Registry>, channel: Arc<Channel>) -> Ticket {
        Ticket {
            registry,
            channel,
            woken_by: AtomicU64::new(0),
            marked: (0, 0),
        }
    }

    /// Notes the subscription generation and the messages counted so far:
    /// called before each attempt, for [`Ticket::park_from_mark`].
    pub(crate) fn mark(&mut self) {
        self.marked = (self.epoch(), self.messages());
    }

    /// Notes `epoch` and `seen` as if read before the last attempt.
    pub(crate) fn mark_as(&mut self, epoch: u64, seen: u64) {
        self.marked = (epoch, seen);
    }

    /// [`Ticket::park`] from what the last [`Ticket::mark`] noted.
    pub(crate) fn park_from_mark(
        &self,
        limit: Duration,
        first: bool,
    ) -> impl Future<Output = Wake> + '_ {
        let (epoch, seen) = self.marked;
        self.park(epoch, seen, limit, first)
    }
}

impl Channel {
    fn new(name: &str, local: bool) -> Channel {
        Channel {
            name: name.to_owned(),
            notify: Notify::new(),
            // A local channel hears everything from the start.
            subscribed: watch::Sender::new(local),
            epoch: AtomicU64::new(u64::from(local)),
            lease_ends: Mutex::new(None),
            broadcast: AtomicBool::new(false),
            messages: AtomicU64::new(0),
            queue: Mutex::new(Queue::default()),
            handed: Mutex::new(None),
            local,
            rearm: Arc::new(Notify::new()),
        }
    }
}

/// Wakes the parked waiters of a local channel, sent from this process: a
/// change of the key they wait for (the loss watch's connection was told of
/// it). Does nothing once the channel is gone.
#[derive(Clone)]
pub(crate) struct Nudge(std::sync::Weak<Channel>);

impl Nudge {
    /// Wakes every waiter parked on the channel now (one message each; at
    /// least one, kept for the next to park): each of them waits for the
    /// key's change. A waiter busy meanwhile looks at the key after its
    /// attempt and needs none.
    pub(crate) fn send(&self) {
        if let Some(channel) = self.0.upgrade() {
            let mut queue = channel.queue.lock();
            for _ in 0..queue.parked.len().max(1) {
                let number = channel.messages.fetch_add(1, Ordering::AcqRel) + 1;
                queue.deliver(number);
            }
        }
    }

    /// False once every waiter of the channel left.
    pub(crate) fn is_live(&self) -> bool {
        self.0.strong_count() > 0
    }

    /// The same channel as `other`'s.
    pub(crate) fn same_channel(&self, other: &Nudge) -> bool {
        std::sync::Weak::ptr_eq(&self.0, &other.0)
    }
}

impl Wakeups {
    /// Starts the subscriber task on `runtime`. It connects through `source`,
    /// keeps reconnecting while the service lives, and stops at `shutdown`.
    pub(crate) fn start(
        source: SubscriptionSource,
        settings: SharedSettings,
        runtime: &tokio::runtime::Handle,
        shutdown: CancellationToken,
    ) -> Wakeups {
        let (commands, receiver) = mpsc::unbounded_channel();
        let registry = Arc::new(Registry {
            channels: Mutex::new(HashMap::new()),
            commands,
            runtime: Some(runtime.clone()),
        });
        let subscriber = Subscriber {
            source,
            settings,
            registry: Arc::downgrade(&registry),
            commands: receiver,
            shutdown,
        };
        runtime.spawn(subscriber.run());
        Wakeups { registry }
    }

    /// Joins `channel`, subscribing if this is its first waiter.
    pub(crate) fn join(&self, channel: &str) -> Ticket {
        let mut channels = self.registry.channels.lock();
        if let Some(member) = channels.get_mut(channel) {
            // Possibly a lingering subscription with no waiters: still subscribed.
            member.waiters += 1;
            return Ticket::new(self.registry.clone(), member.channel.clone());
        }
        let entry = Arc::new(Channel::new(channel, false));
        channels.insert(
            channel.to_owned(),
            Member {
                channel: entry.clone(),
                waiters: 1,
            },
        );
        drop(channels);
        let _ = self
            .registry
            .commands
            .send(Command::Subscribe(channel.to_owned()));
        Ticket::new(self.registry.clone(), entry)
    }

    /// Joins `channel` as a local channel: never subscribed, it counts as
    /// subscribed from the start, and its messages are [`Nudge`]s sent by
    /// this process (a token lock's waiters, woken by the loss watch's
    /// tracking of the key they wait for, or by a release of this client).
    pub(crate) fn join_local(&self, channel: &str) -> Ticket {
        let mut channels = self.registry.channels.lock();
        let member = channels
            .entry(channel.to_owned())
            .or_insert_with(|| Member {
                channel: Arc::new(Channel::new(channel, true)),
                waiters: 0,
            });
        member.waiters += 1;
        Ticket::new(self.registry.clone(), member.channel.clone())
    }

    /// One message on the local channel `channel` for this client's
    /// waiters, if it has any (a release by this client).
    pub(crate) fn nudge_local(&self, channel: &str) {
        self.registry.dispatch(channel, None);
    }

    /// Joins `channel` as a broadcast channel: each message wakes every
    /// waiter of this process on it, not one. For read-write locks, where a
    /// release may let every waiting reader in at once.
    pub(crate) fn join_broadcast(&self, channel: &str) -> Ticket {
        let ticket = self.join(channel);
        ticket.channel.broadcast.store(true, Ordering::Release);
        ticket
    }

    /// Joins `channel` only if other waiters of this process are already
    /// parked on it, and says until when the holder's lease is known to run.
    ///
    /// A new acquire that finds a queue joins it instead of trying first, so
    /// a task that just released cannot take the lock straight back ahead of
    /// the waiters its release woke (barging).
    pub(crate) fn join_queue(&self, channel: &str) -> Option<(Ticket, LeaseInstant)> {
        let mut channels = self.registry.channels.lock();
        let member = channels
            .get_mut(channel)
            .filter(|member| member.waiters > 0)?;
        let lease_ends = (*member.channel.lease_ends.lock())?;
        if lease_ends <= LeaseInstant::now() {
            return None;
        }
        member.waiters += 1;
        Some((
            Ticket::new(self.registry.clone(), member.channel.clone()),
            lease_ends,
        ))
    }
}

impl Wakeups {
    /// True while this client is subscribed to `channel` or about to be
    /// (it has waiters, or had some less than a linger ago).
    pub(crate) fn is_listening(&self, channel: &str) -> bool {
        self.registry.channels.lock().contains_key(channel)
    }

    /// As [`Wakeups::is_listening`], for a channel name not written out
    /// yet: written only when this client listens on some channel (a
    /// release asks on every cycle, mostly of a client that listens on none).
    pub(crate) fn is_listening_to(&self, channel: impl std::fmt::Display) -> bool {
        let channels = self.registry.channels.lock();
        !channels.is_empty() && channels.contains_key(channel.to_string().as_str())
    }
}

/// Where a fair lock waiter finds the hold a release handed to it: on its
/// own channel, which no other waiter shares.
pub(crate) struct Handed(Arc<Channel>);

impl Handed {
    /// The fencing token of the hold handed over since the last call, if any.
    pub(crate) fn take(&self) -> Option<u64> {
        self.0.handed.lock().take()
    }
}

impl Ticket {
    /// A message for this ticket's (local) channel, sent from elsewhere.
    pub(crate) fn nudge(&self) -> Nudge {
        Nudge(Arc::downgrade(&self.channel))
    }

    /// Where holds handed to this channel's waiter arrive.
    pub(crate) fn handed(&self) -> Handed {
        Handed(self.channel.clone())
    }

    /// The subscription generation; pass it back to [`Ticket::park`].
    pub(crate) fn epoch(&self) -> u64 {
        self.channel.epoch.load(Ordering::Acquire)
    }

    /// Waits until the channel is subscribed, at most `limit`. Returns whether it is.
    pub(crate) async fn subscribed(&self, limit: Duration) -> bool {
        let mut state = self.channel.subscribed.subscribe();
        matches!(
            tokio::time::timeout(limit, state.wait_for(|subscribed| *subscribed)).await,
            Ok(Ok(_))
        )
    }

    /// Messages counted so far; read it before an attempt and pass it to
    /// [`Ticket::park`].
    pub(crate) fn messages(&self) -> u64 {
        self.channel.messages.load(Ordering::Acquire)
    }

    /// Records when the holder's lease ends, as the last failed attempt saw it.
    pub(crate) fn note_lease_end(&self, at: LeaseInstant) {
        *self.channel.lease_ends.lock() = Some(at);
    }

    /// Parks until an unlock message, a resubscription after `epoch`, or
    /// `limit`. `seen`: the messages counted before the waiter's attempt
    /// ([`Ticket::messages`]); a message that came while it was busy ends
    /// the park at once (on a broadcast channel, any such message; on the
    /// others, one that no other waiter took). `first`: the waiter claimed
    /// the lock's next turn, and is woken before this client's others.
    pub(crate) fn park(
        &self,
        epoch: u64,
        seen: u64,
        limit: Duration,
        first: bool,
    ) -> impl Future<Output = Wake> + '_ {
        self.park_until(epoch, seen, first, Some(limit))
    }

    /// [`Ticket::park`], running out after `limit` (`None`: never, as the
    /// permutation checks, which have no clock, park).
    ///
    /// A plain function around an `async` block, one layer: an `async fn`
    /// keeps its arguments twice (as given, and as the locals its body
    /// uses), and a parked waiter sits in this future. On a channel whose
    /// messages wake one waiter each, the park is one registration in the
    /// channel's queue ([`Slot`]), ended by the message handed to it, a
    /// resubscription, or the channel's timer: the future keeps a pointer
    /// to it. A broadcast channel's park (read-write locks) is boxed.
    #[expect(
        clippy::manual_async_fn,
        reason = "an `async fn` keeps its arguments twice in a parked waiter"
    )]
    fn park_until(
        &self,
        epoch: u64,
        seen: u64,
        first: bool,
        limit: Option<Duration>,
    ) -> impl Future<Output = Wake> {
        async move {
            let channel = &*self.channel;
            if channel.broadcast.load(Ordering::Acquire) {
                return Box::pin(self.park_broadcast(epoch, seen, limit)).await;
            }
            if channel.epoch.load(Ordering::Acquire) != epoch {
                return Wake::Resubscribed;
            }
            let deadline = limit.and_then(|limit| LeaseInstant::now().checked_add(limit));
            let (slot, start_timer) = {
                let mut queue = channel.queue.lock();
                if first && self.messages() > seen {
                    // A claimant of the next turn: a release since its attempt
                    // began is for it, whoever was handed the message (the
                    // freed lock refuses them).
                    return Wake::Message;
                }
                if queue.pending > seen {
                    // Came while this waiter was busy, and nobody took it.
                    let number = std::mem::take(&mut queue.pending);
                    self.woken_by.store(number, Ordering::Release);
                    return Wake::Message;
                }
                let slot = Arc::new(Slot::new(seen, first, deadline));
                queue.parked.push_back(slot.clone());
                (
                    slot,
                    deadline.is_some_and(|at| queue.arm_timer(at, channel)),
                )
            };
            if start_timer {
                // After the queue's lock is let go: a timer dropped unrun
                // (a runtime shutting down) takes it. On the client's
                // runtime, not this waiter's: a timer on a runtime nobody
                // drives would end no park, its own or a later waiter's.
                let timer = Timer::of(&self.channel).run();
                match &self.registry.runtime {
                    Some(runtime) => drop(runtime.spawn(timer)),
                    None => drop(tokio::spawn(timer)),
                }
            }
            let mut parked = Parked {
                channel,
                slot,
                claimed: false,
            };
            // Read again once parked: a resubscription bumps the epoch, then
            // ends the parks of the waiters in the queue under its lock, so
            // one that came before this waiter parked is seen here (its
            // place is left as a dropped park's is).
            if channel.epoch.load(Ordering::Acquire) != epoch {
                return Wake::Resubscribed;
            }
            let wake = SlotEnded(&parked.slot).await;
            if wake == Wake::Message {
                parked.claimed = true;
                self.woken_by.store(
                    parked.slot.handed.load(Ordering::Acquire),
                    Ordering::Release,
                );
            }
            wake
        }
    }

    /// [`Ticket::park_until`] on a broadcast channel: every message wakes
    /// every waiter, so there is no queue to register in.
    async fn park_broadcast(&self, epoch: u64, seen: u64, limit: Option<Duration>) -> Wake {
        let channel = &*self.channel;
        // Registered before the epoch is checked: a resubscription in between still wakes it.
        let resubscribed = channel.notify.notified();
        tokio::pin!(resubscribed);
        resubscribed.as_mut().enable();
        if channel.epoch.load(Ordering::Acquire) != epoch {
            return Wake::Resubscribed;
        }
        if self.messages() != seen {
            return Wake::Message;
        }
        let timer = crate::engine::sleep::sleep_until(
            limit.and_then(|limit| tokio::time::Instant::now().checked_add(limit)),
        );
        tokio::select! {
            biased;
            _ = &mut resubscribed => {
                if channel.epoch.load(Ordering::Acquire) != epoch {
                    Wake::Resubscribed
                } else {
                    Wake::Message
                }
            }
            _ = timer => Wake::TimedOut,
        }
    }
}

impl Queue {
    /// A waiter parked with deadline `at`: makes sure the channel's timer
    /// looks at the queue by then. Returns true when no timer runs (the
    /// caller starts one, once the queue's lock is let go).
    fn arm_timer(&mut self, at: LeaseInstant, channel: &Channel) -> bool {
        match self.timer {
            None => {
                self.timer = Some(at);
                true
            }
            Some(armed) if at < armed => {
                self.timer = Some(at);
                channel.rearm.notify_one();
                false
            }
            Some(_) => false,
        }
    }

    /// The last parked waiter with a deadline left (cancelled, or woken by
    /// a message): the channel's timer ends now rather than at a deadline
    /// nobody waits for any more (a lease's length, for a cancelled wait).
    fn stop_idle_timer(&mut self, channel: &Channel) {
        if self.timer.is_some() && !self.parked.iter().any(|slot| slot.deadline.is_some()) {
            self.timer = None;
            channel.rearm.notify_one();
        }
    }

    /// Ends the parks whose deadline is `due` (they leave the queue: no
    /// message is handed to them), and says when the next one is.
    fn time_out(&mut self, due: impl Fn(LeaseInstant) -> bool) -> Option<LeaseInstant> {
        let mut next: Option<LeaseInstant> = None;
        self.parked.retain(|slot| match slot.deadline {
            Some(at) if due(at) => {
                slot.end(TIMED_OUT);
                false
            }
            Some(at) => {
                next = Some(next.map_or(at, |next| next.min(at)));
                true
            }
            None => true,
        });
        next
    }
}

/// A channel's timer: a task that sleeps until the earliest deadline of
/// the channel's parked waiters and ends the parks that ran out; it ends
/// when none is left with a deadline. It keeps the channel weakly (a
/// channel all of whose waiters left is gone, [`Nudge::is_live`]).
/// It runs on the client's runtime. Dropped before its end (that runtime
/// shut down), it wakes the parked waiters that have a deadline: they look
/// at their lock again. The last waiter with a deadline to leave the queue
/// ends it ([`Queue::stop_idle_timer`]).
struct Timer {
    channel: std::sync::Weak<Channel>,
    rearm: Arc<Notify>,
    done: bool,
}

impl Timer {
    fn of(channel: &Arc<Channel>) -> Timer {
        Timer {
            channel: Arc::downgrade(channel),
            rearm: channel.rearm.clone(),
            done: false,
        }
    }

    async fn run(mut self) {
        loop {
            let Some(channel) = self.channel.upgrade() else {
                self.done = true;
                return;
            };
            let Some(at) = channel.queue.lock().timer else {
                self.done = true;
                return;
            };
            drop(channel);
            let sleep = tokio::time::sleep(at.saturating_duration_since(LeaseInstant::now()));
            tokio::select! {
                _ = sleep => {}
                // An earlier deadline: look at the queue's timer again.
                _ = self.rearm.notified() => continue,
            }
            let Some(channel) = self.channel.upgrade() else {
                self.done = true;
                return;
            };
            let mut queue = channel.queue.lock();
            let now = LeaseInstant::now();
            let next = queue.time_out(|at| at <= now);
            queue.timer = next;
            if next.is_none() {
                self.done = true;
                return;
            }
        }
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if let Some(channel) = self.channel.upgrade() {
            let mut queue = channel.queue.lock();
            queue.timer = None;
            // Each of them starts a timer again as it parks again.
            queue.time_out(|_| true);
        }
    }
}

impl Ticket {
    /// Wakes the next waiter of this channel in this process (parked, or
    /// the next to park): a waiter that took some of several released
    /// permits passes the wake-up on when permits are left, since one
    /// message wakes one waiter. Counts as a new message: every waiter that
    /// has not attempted since may use it.
    pub(crate) fn pass_on(&self) {
        let channel = &*self.channel;
        if channel.broadcast.load(Ordering::Acquire) {
            channel.notify.notify_one();
            return;
        }
        let mut queue = channel.queue.lock();
        let number = channel.messages.fetch_add(1, Ordering::AcqRel) + 1;
        queue.deliver(number);
    }

    /// Hands the message that woke this waiter, which it could not use (its
    /// attempt found too few permits, or failed), to the next waiter that
    /// has not seen it (see [`Queue`]): parked now, or the next to park
    /// whose attempt began before the message.
    pub(crate) fn pass_on_unused(&self) {
        let number = self.woken_by.swap(0, Ordering::AcqRel);
        if number == 0 || self.channel.broadcast.load(Ordering::Acquire) {
            return;
        }
        self.channel.queue.lock().deliver(number);
    }
}

/// A waiter's place in its channel's queue while it is parked. Leaving it
/// without taking the message it was handed (the park timed out or was
/// dropped at the same moment) hands that message on.
struct Parked<'a> {
    channel: &'a Channel,
    slot: Arc<Slot>,
    claimed: bool,
}

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        let mut queue = self.channel.queue.lock();
        if let Some(index) = queue
            .parked
            .iter()
            .position(|slot| Arc::ptr_eq(slot, &self.slot))
        {
            queue.parked.remove(index);
        } else {
            let handed = self.slot.handed.load(Ordering::Acquire);
            if handed != 0 && !self.claimed {
                queue.deliver(handed);
            }
        }
        if self.slot.deadline.is_some() {
            queue.stop_idle_timer(self.channel);
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut channels = self.registry.channels.lock();
        let Some(member) = channels.get_mut(&self.channel.name) else {
            return;
        };
        member.waiters -= 1;
        if member.waiters == 0 && self.channel.local {
            // Nothing to unsubscribe, nothing to linger for.
            channels.remove(&self.channel.name);
            return;
        }
        if member.waiters == 0 {
            drop(channels);
            // The subscriber drops the channel after the linger, if still unused.
            let _ = self
                .registry
                .commands
                .send(Command::Unsubscribe(self.channel.name.clone()));
        }
    }
}

/// The task that owns the subscription connection.
struct Subscriber {
    source: SubscriptionSource,
    settings: SharedSettings,
    registry: std::sync::Weak<Registry>,
    commands: mpsc::UnboundedReceiver<Command>,
    shutdown: CancellationToken,
}

/// Why a connected session ended.
enum SessionEnd {
    Shutdown,
    Disconnected,
}

impl Subscriber {
    fn connect_timeout(&self) -> Duration {
        self.settings.read().connect_timeout
    }

    fn response_timeout(&self) -> Duration {
        self.settings.read().response_timeout
    }

    async fn run(mut self) {
        let mut backoff = Duration::from_millis(50);
        loop {
            if self.shutdown.is_cancelled() {
                return;
            }
            let connected = tokio::select! {
                _ = self.shutdown.cancelled() => return,
                connected = tokio::time::timeout(self.connect_timeout(), self.source.open()) => connected,
            };
            match connected {
                Ok(Ok(session)) => {
                    backoff = Duration::from_millis(50);
                    match self.session(session).await {
                        SessionEnd::Shutdown => return,
                        SessionEnd::Disconnected => {
                            // With no channel wanted nothing was missed: a
                            // server that closes idle connections (`timeout
                            // N`) ends an unsubscribed one every N s.
                            if self.registered_channels().is_empty() {
                                debug!(
                                    "redlatch: idle subscription connection closed, reconnecting"
                                );
                            } else {
                                warn!("redlatch: subscription connection lost, reconnecting");
                            }
                            self.mark_all_unsubscribed();
                        }
                    }
                }
                Ok(Err(error)) => debug!(%error, "redlatch: subscription connect failed"),
                Err(_) => debug!("redlatch: subscription connect timed out"),
            }
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                _ = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(Duration::from_secs(2));
        }
    }

    /// Serves one connection: resubscribes everything, then relays messages and commands.
    async fn session(&mut self, mut session: Session) -> SessionEnd {
        let mut subscribed: HashSet<String> = HashSet::new();
        // Channels whose last waiter left, with when to drop them (FIFO: one linger for all).
        let mut lingering: VecDeque<(tokio::time::Instant, String)> = VecDeque::new();
        let mut liveness = tokio::time::interval(LIVENESS_CHECK);
        liveness.reset();
        // Whatever waiters registered before (or while we were away) get subscribed now.
        for name in self.registered_channels() {
            if !self.subscribe(&mut session, &mut subscribed, &name).await {
                return SessionEnd::Disconnected;
            }
        }
        loop {
            tokio::select! {
                _ = self.shutdown.cancelled() => return SessionEnd::Shutdown,
                event = session.next() => match event {
                    Some(Event::Message(channel, handed)) => self.dispatch(&channel, handed),
                    Some(Event::Resync) => {
                        // Subscribe again before waking anyone: the cluster client
                        // restores its subscriptions by itself, but not necessarily
                        // before a holder publishes its unlock, and waiters woken
                        // first would park again and miss it. Repeating a
                        // subscription is harmless.
                        if !self.resubscribe_all(&mut session, &subscribed).await {
                            return SessionEnd::Disconnected;
                        }
                        self.resync_all();
                    }
                    None => return SessionEnd::Disconnected,
                },
                command = self.commands.recv() => match command {
                    None => return SessionEnd::Shutdown,
                    Some(Command::Subscribe(name)) => {
                        if !self.subscribe(&mut session, &mut subscribed, &name).await {
                            return SessionEnd::Disconnected;
                        }
                    }
                    Some(Command::Unsubscribe(name)) => {
                        lingering.push_back((tokio::time::Instant::now() + SUBSCRIPTION_LINGER, name));
                    }
                },
                _ = liveness.tick(), if session.needs_liveness_checks() => {
                    // A master frozen or cut off keeps the connection open and
                    // silent; after a failover the messages come from elsewhere.
                    let alive = tokio::time::timeout(self.response_timeout(), session.ping()).await;
                    if !matches!(alive, Ok(Ok(()))) {
                        return SessionEnd::Disconnected;
                    }
                }
                _ = crate::engine::sleep::sleep_until(lingering.front().map(|(due, _)| *due)) => {
                    if let Some((_, name)) = lingering.pop_front()
                        && self.forget_if_unused(&name)
                        && subscribed.remove(&name)
                    {
                        let done = tokio::time::timeout(self.response_timeout(), session.unsubscribe(&name)).await;
                        if !matches!(done, Ok(Ok(()))) {
                            return SessionEnd::Disconnected;
                        }
                    }
                }
            }
        }
    }

    /// Subscribes `name` unless already subscribed, then tells its waiters.
    /// Returns false when the connection looks broken.
    async fn subscribe(
        &self,
        session: &mut Session,
        subscribed: &mut HashSet<String>,
        name: &str,
    ) -> bool {
        let Some(channel) = self.channel(name) else {
            return true; // every waiter left before we got to it
        };
        if !subscribed.contains(name) {
            match tokio::time::timeout(self.response_timeout(), session.subscribe(name)).await {
                Ok(Ok(())) => {
                    subscribed.insert(name.to_owned());
                }
                _ => return false,
            }
        }
        if !*channel.subscribed.borrow() {
            channel.epoch.fetch_add(1, Ordering::AcqRel);
            channel.subscribed.send_replace(true);
            // Unlock messages may have been missed while unsubscribed: everyone re-checks.
            channel.resubscribed();
        }
        true
    }

    fn dispatch(&self, channel_name: &str, handed: Option<u64>) {
        if let Some(registry) = self.registry.upgrade() {
            registry.dispatch(channel_name, handed);
        }
    }

    /// Drops a channel from the registry if it still has no waiters; returns
    /// whether it did (then it should be unsubscribed).
    fn forget_if_unused(&self, name: &str) -> bool {
        let Some(registry) = self.registry.upgrade() else {
            return false;
        };
        let mut channels = registry.channels.lock();
        if channels.get(name).is_some_and(|member| member.waiters == 0) {
            channels.remove(name);
            return true;
        }
        // In use again, or already forgotten (then it was never resubscribed).
        !channels.contains_key(name)
    }

    fn channel(&self, name: &str) -> Option<Arc<Channel>> {
        let registry = self.registry.upgrade()?;
        let channels = registry.channels.lock();
        channels.get(name).map(|member| member.channel.clone())
    }

    /// The channels waiters asked to subscribe (local ones are not).
    fn registered_channels(&self) -> Vec<String> {
        match self.registry.upgrade() {
            Some(registry) => registry
                .channels
                .lock()
                .iter()
                .filter(|(_, member)| !member.channel.local)
                .map(|(name, _)| name.clone())
                .collect(),
            None => Vec::new(),
        }
    }

    /// Sends every subscription again on a session whose connection came
    /// back by itself. Returns false when the connection looks broken.
    async fn resubscribe_all(&self, session: &mut Session, subscribed: &HashSet<String>) -> bool {
        for name in subscribed {
            let done = tokio::time::timeout(self.response_timeout(), session.subscribe(name)).await;
            if !matches!(done, Ok(Ok(()))) {
                return false;
            }
        }
        true
    }

    /// Messages may have been lost under a connection that came back by
    /// itself (a cluster node): every parked waiter checks its lock again.
    fn resync_all(&self) {
        if let Some(registry) = self.registry.upgrade() {
            for member in registry.channels.lock().values() {
                member.channel.epoch.fetch_add(1, Ordering::AcqRel);
                member.channel.resubscribed();
            }
        }
    }

    fn mark_all_unsubscribed(&self) {
        if let Some(registry) = self.registry.upgrade() {
            for member in registry.channels.lock().values() {
                if !member.channel.local {
                    member.channel.subscribed.send_replace(false);
                }
            }
        }
    }
}

/// Every interleaving of waiters parking, attempting, passing wake-ups on
/// and being dropped, with unlock messages arriving at any point
/// (docs/TESTING.md, "Permutation checks"). The waiters follow the wait
/// loop (`engine/wait.rs`) of a waiter that passes on a wake-up it cannot
/// use; their timers never fire, so a lost wake-up shows as a deadlock.
/// A wake-up service with no subscriber task and no client runtime, for
/// the checks: they dispatch messages themselves, and a timer starts on
/// the runtime of the waiter that parks first.
#[cfg(test)]
fn unsubscribed() -> Wakeups {
    let (commands, _) = mpsc::unbounded_channel();
    Wakeups {
        registry: Arc::new(Registry {
            channels: Mutex::new(HashMap::new()),
            commands,
            runtime: None,
        }),
    }
}

#[cfg(all(test, feature = "__permutation-checks"))]
mod permutation_checks {
    use shuttle::future::{block_on, spawn};

    use super::*;
    use crate::sync::AtomicUsize;
    use crate::sync::permutations::{eventually, explore};

    const CHANNEL: &str = "redisson_lock__channel:{checked}";

    use super::unsubscribed as wakeups;

    /// Takes one of the released units, if any is left.
    fn take(units: &AtomicUsize) -> bool {
        units
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
                left.checked_sub(1)
            })
            .is_ok()
    }

    /// One waiter: attempt, pass on a wake-up it could not use, park again;
    /// counts the messages that woke it. `wants` false: it can use no
    /// wake-up (a semaphore waiter wanting more permits than are freed).
    /// `first`: it parks as a claimant of the next turn (woken first).
    async fn waiter(
        ticket: Ticket,
        units: Arc<AtomicUsize>,
        wants: bool,
        first: bool,
        woken: Arc<AtomicUsize>,
    ) {
        let mut by_message = false;
        loop {
            let (epoch, seen) = (ticket.epoch(), ticket.messages());
            if wants && take(&units) {
                if units.load(Ordering::Acquire) > 0 {
                    // More left: one message wakes one waiter, let the next look too.
                    ticket.pass_on();
                }
                return;
            }
            if by_message {
                ticket.pass_on_unused();
            }
            let wake = ticket.park_until(epoch, seen, first, None).await;
            by_message = wake == Wake::Message;
            if by_message {
                woken.fetch_add(1, Ordering::SeqCst);
            }
        }
    }

    /// Three waiters that want a unit each, one of them dropped at a point
    /// of the schedule's choosing (maybe while notified); three units are
    /// released, one message each, while they attempt and park: the two
    /// kept get theirs.
    fn released_units_reach_the_waiters_left() {
        block_on(async {
            let wakeups = wakeups();
            let units = Arc::new(AtomicUsize::new(0));
            let woken = Arc::new(AtomicUsize::new(0));
            let start = || {
                let ticket = wakeups.join(CHANNEL);
                spawn(waiter(ticket, units.clone(), true, false, woken.clone()))
            };
            let dropped = start();
            let takers = [start(), start()];
            for _ in 0..3 {
                units.fetch_add(1, Ordering::AcqRel);
                wakeups.registry.dispatch(CHANNEL, None);
            }
            dropped.abort();
            for taker in takers {
                taker.await.expect("a waiter gets a released unit");
            }
        });
    }

    /// Two waiters that want a unit each and one that can use none (dropped
    /// at a point of the schedule's choosing); two units are released, one
    /// message each, while they attempt and park: both get theirs.
    fn every_released_unit_reaches_a_waiter() {
        released_units_pass_a_useless_waiter(false);
    }

    /// The same with the waiter that can use no wake-up parked as the
    /// claimant of the next turn, which every message reaches first.
    fn every_released_unit_passes_a_useless_claimant() {
        released_units_pass_a_useless_waiter(true);
    }

    fn released_units_pass_a_useless_waiter(first: bool) {
        block_on(async {
            let wakeups = wakeups();
            let units = Arc::new(AtomicUsize::new(0));
            let woken = Arc::new(AtomicUsize::new(0));
            let start = |wants: bool| {
                let ticket = wakeups.join(CHANNEL);
                let first = first && !wants;
                spawn(waiter(ticket, units.clone(), wants, first, woken.clone()))
            };
            let useless = start(false);
            let takers = [start(true), start(true)];
            for _ in 0..2 {
                units.fetch_add(1, Ordering::AcqRel);
                wakeups.registry.dispatch(CHANNEL, None);
            }
            useless.abort();
            for taker in takers {
                taker.await.expect("a waiter gets a released unit");
            }
        });
    }

    /// Three waiters parked, none able to use a wake-up; one message: it
    /// goes round, each waiter woken by it at most once and every one of
    /// them reached.
    fn one_message_reaches_each_parked_waiter_once() {
        block_on(async {
            let wakeups = wakeups();
            let units = Arc::new(AtomicUsize::new(0));
            let counts: Vec<Arc<AtomicUsize>> = (0..3).map(|_| Arc::default()).collect();
            let waiters: Vec<_> = counts
                .iter()
                .map(|count| {
                    let ticket = wakeups.join(CHANNEL);
                    spawn(waiter(ticket, units.clone(), false, false, count.clone()))
                })
                .collect();
            let channel = wakeups.registry.channels.lock()[CHANNEL].channel.clone();
            let parked = eventually(1000, || channel.parked() == 3).await;
            assert!(parked, "the waiters never all parked");
            wakeups.registry.dispatch(CHANNEL, None);
            let total = || {
                counts
                    .iter()
                    .map(|c| c.load(Ordering::SeqCst))
                    .sum::<usize>()
            };
            let reached = eventually(1000, || total() == 3).await;
            let each: Vec<_> = counts.iter().map(|c| c.load(Ordering::SeqCst)).collect();
            assert!(reached, "one message reached {each:?} wake-ups");
            assert!(each.iter().all(|&n| n == 1), "one message woke {each:?}");
            // Ended here, not dropped when the check ends: a waiter dropped
            // then leaves the queue, whose lock another may hold, and
            // nothing runs any more to let it go.
            for waiter in waiters {
                waiter.abort();
                let _ = waiter.await;
            }
        });
    }

    #[test]
    fn permutation_released_units_reach_waiters_that_park_as_messages_arrive() {
        explore(released_units_reach_the_waiters_left);
    }

    /// Found by this check, fixed by numbering messages (see [`Queue`]):
    /// two messages that arrived while no waiter was parked left one stored
    /// wake-up that could not be passed on (the passes counted only waiters
    /// parked at dispatch); a waiter that could not use it took it, and a
    /// waiter that could use the second unit slept until its timer (the
    /// holder's lease end in the engine; never here).
    #[test]
    fn permutation_a_wake_up_a_waiter_cannot_use_reaches_one_that_can() {
        explore(every_released_unit_reaches_a_waiter);
    }

    #[test]
    fn permutation_a_wake_up_passes_a_claimant_that_cannot_use_it() {
        explore(every_released_unit_passes_a_useless_claimant);
    }

    #[test]
    fn permutation_one_message_wakes_each_parked_waiter_at_most_once() {
        explore(one_message_reaches_each_parked_waiter_once);
    }

    /// A park as [`Ticket::park_until`] makes it, with a deadline (which no
    /// clock here reaches: the timer below ends it), awaited in a task of
    /// its own. Returns how it ended.
    fn park_with_deadline(channel: &Arc<Channel>, seen: u64) -> shuttle::future::JoinHandle<Wake> {
        let deadline = Some(LeaseInstant::now());
        let slot = Arc::new(Slot::new(seen, false, deadline));
        channel.queue.lock().parked.push_back(slot.clone());
        let channel = channel.clone();
        spawn(async move {
            let mut parked = Parked {
                channel: &channel,
                slot,
                claimed: false,
            };
            let wake = SlotEnded(&parked.slot).await;
            parked.claimed = wake == Wake::Message;
            wake
        })
    }

    /// Two waiters parked with a deadline; the channel's timer ends the
    /// parks whose deadline passed, a resubscription ends every park, and
    /// one message comes, each at a point of the schedule's choosing: both
    /// parks end (none left asleep with its waker stored after the end was
    /// set), and the message is taken by one of them or kept for the next.
    fn a_timer_a_resubscription_and_a_message_end_every_park() {
        block_on(async {
            let wakeups = wakeups();
            let ticket = wakeups.join(CHANNEL);
            let channel = ticket.channel.clone();
            let parks = [
                park_with_deadline(&channel, 0),
                park_with_deadline(&channel, 0),
            ];
            let timer = {
                let channel = channel.clone();
                spawn(async move {
                    let mut queue = channel.queue.lock();
                    queue.timer = queue.time_out(|_| true);
                })
            };
            let resubscription = {
                let channel = channel.clone();
                spawn(async move {
                    channel.epoch.fetch_add(1, Ordering::AcqRel);
                    channel.resubscribed();
                })
            };
            wakeups.registry.dispatch(CHANNEL, None);
            let mut woken_by_message = 0;
            for park in parks {
                if park.await.expect("a park ends") == Wake::Message {
                    woken_by_message += 1;
                }
            }
            timer.await.unwrap();
            resubscription.await.unwrap();
            let queue = channel.queue.lock();
            assert!(queue.parked.is_empty(), "a slot outlived its park");
            let kept = usize::from(queue.pending == 1);
            assert_eq!(
                woken_by_message + kept,
                1,
                "one message: {woken_by_message} waiters took it, {kept} kept"
            );
        });
    }

    #[test]
    fn permutation_a_timer_a_resubscription_and_a_message_end_every_park() {
        explore(a_timer_a_resubscription_and_a_message_end_every_park);
    }
}

#[cfg(test)]
mod queue_order {
    use super::*;

    fn slot(seen: u64, first: bool) -> Arc<Slot> {
        Arc::new(Slot::new(seen, first, None))
    }

    /// A message goes to the claimant of the next turn before older
    /// waiters, and to the oldest when nobody claims; a claimant that has
    /// seen the message (it attempted after it) is passed over.
    #[test]
    fn a_message_goes_to_the_claimant_first_then_the_oldest() {
        let (oldest, claimant, youngest) = (slot(0, false), slot(0, true), slot(0, false));
        let mut queue = Queue::default();
        queue
            .parked
            .extend([oldest.clone(), claimant.clone(), youngest.clone()]);
        queue.deliver(1);
        assert_eq!(claimant.handed.load(Ordering::Acquire), 1);
        queue.deliver(2);
        assert_eq!(oldest.handed.load(Ordering::Acquire), 2);

        let seen_claimant = slot(3, true);
        queue.parked.push_back(seen_claimant.clone());
        queue.deliver(3);
        assert_eq!(youngest.handed.load(Ordering::Acquire), 3);
        assert_eq!(seen_claimant.handed.load(Ordering::Acquire), 0);
    }
}

/// The channel's timer, which ends the parks of a one-waiter-per-message
/// channel at their deadlines (one task per channel, not a timer per
/// parked waiter).
#[cfg(all(test, not(feature = "__permutation-checks")))]
mod channel_timer {
    use std::task::Context;
    use std::time::Instant;

    use super::*;

    const CHANNEL: &str = "redisson_lock__channel:{timed}";
    /// Far beyond every wait here: an end this late is a park never ended.
    const NEVER: Duration = Duration::from_secs(3600);
    /// Generous: the machine may be loaded.
    const PATIENCE: Duration = Duration::from_secs(10);

    use super::unsubscribed as wakeups;

    fn parked(ticket: &Ticket) -> usize {
        ticket.channel.queue.lock().parked.len()
    }

    async fn park(ticket: Arc<Ticket>, limit: Duration) -> Wake {
        ticket
            .park(ticket.epoch(), ticket.messages(), limit, false)
            .await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_waiters_sharing_one_deadline_all_time_out() {
        let wakeups = wakeups();
        let ticket = Arc::new(wakeups.join(CHANNEL));
        let limit = Duration::from_millis(200);
        let started = Instant::now();
        let parks: Vec<_> = (0..200)
            .map(|_| tokio::spawn(park(ticket.clone(), limit)))
            .collect();
        for park in parks {
            let wake = tokio::time::timeout(PATIENCE, park).await;
            assert_eq!(
                wake.expect("a park outlived its deadline").unwrap(),
                Wake::TimedOut
            );
        }
        assert!(started.elapsed() >= limit, "timed out early");
        assert_eq!(parked(&ticket), 0, "a timed-out waiter stayed in the queue");
        assert_eq!(
            ticket.channel.queue.lock().timer,
            None,
            "the timer kept running"
        );
    }

    /// A waiter parked with an earlier deadline than the one the timer
    /// sleeps toward wakes at its own.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_earlier_deadline_wakes_before_a_later_one() {
        let wakeups = wakeups();
        let ticket = Arc::new(wakeups.join(CHANNEL));
        let late = tokio::spawn(park(ticket.clone(), NEVER));
        let parked_late = async {
            while parked(&ticket) == 0 {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(PATIENCE, parked_late).await.unwrap();
        let early = park(ticket.clone(), Duration::from_millis(100));
        let wake = tokio::time::timeout(PATIENCE, early).await;
        assert_eq!(wake.expect("waited for the later deadline"), Wake::TimedOut);
        assert!(!late.is_finished(), "the later deadline's park ended too");
        late.abort();
    }

    /// A park polled once, then not until after its deadline (its task
    /// busy elsewhere, its waker lost): the next poll says it timed out.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_park_polled_rarely_reads_its_deadline() {
        let wakeups = wakeups();
        let ticket = wakeups.join(CHANNEL);
        let mut park = std::pin::pin!(ticket.park(0, 0, Duration::from_millis(100), false));
        let mut cx = Context::from_waker(futures_util::task::noop_waker_ref());
        assert!(park.as_mut().poll(&mut cx).is_pending());
        let ended = async {
            while parked(&ticket) > 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::time::timeout(PATIENCE, ended)
            .await
            .expect("never timed out");
        assert_eq!(park.as_mut().poll(&mut cx), Poll::Ready(Wake::TimedOut));
    }

    /// A service with no client runtime (as here) starts the timer on the
    /// runtime of the waiter that parks first; when that runtime shuts
    /// down, a waiter of another runtime parked under it is woken (it looks
    /// at its lock again), and its next park, which starts a timer on its
    /// own runtime, still times out.
    #[test]
    fn a_waiter_wakes_when_the_timer_s_runtime_shuts_down() {
        let runtime = || {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap()
        };
        let (first, second) = (runtime(), runtime());
        let wakeups = wakeups();
        let ticket = Arc::new(wakeups.join(CHANNEL));
        let _starter = first.spawn(park(ticket.clone(), NEVER));
        let deadline = Instant::now() + PATIENCE;
        while ticket.channel.queue.lock().timer.is_none() {
            assert!(Instant::now() < deadline, "the first waiter never parked");
            std::thread::sleep(Duration::from_millis(5));
        }
        let other = second.spawn(park(ticket.clone(), NEVER));
        while parked(&ticket) < 2 {
            assert!(Instant::now() < deadline, "the second waiter never parked");
            std::thread::sleep(Duration::from_millis(5));
        }
        drop(first);
        second.block_on(async {
            let wake = tokio::time::timeout(PATIENCE, other).await;
            assert_eq!(wake.expect("left parked").unwrap(), Wake::TimedOut);
            let again = park(ticket.clone(), Duration::from_millis(100));
            let wake = tokio::time::timeout(PATIENCE, again).await;
            assert_eq!(wake.expect("no timer after the first's"), Wake::TimedOut);
        });
        assert_eq!(parked(&ticket), 0);
    }
}
