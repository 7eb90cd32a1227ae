//! The lock model's steps: what may happen in a state, and what it leads to.

use stateright::{Model, Property};

use crate::server::{Effects, Reply, Server, WakeRule};
use crate::store::Store;

use super::LockModel;
use super::state::{Action, Answer, Client, History, Kind, LockState, Phase, Request};

impl Model for LockModel {
    type State = LockState;
    type Action = Action;

    fn init_states(&self) -> Vec<LockState> {
        let client = Client {
            phase: Phase::Wants,
            guards: 0,
            token: 0,
            grant: 0,
            believed_until: 0,
            read: None,
            wrote: false,
            reentered: false,
            renewals: 0,
            paused: false,
            busy_on: None,
        };
        vec![LockState {
            now: 0,
            master: Server::default(),
            replica: Server::default(),
            requests: Vec::new(),
            answers: Vec::new(),
            clients: vec![client; usize::from(self.config.clients)],
            store: Store::default(),
            budget: self.config.faults.clone(),
            next_id: 0,
            grants: 0,
            received_grant: 0,
            last_token: 0,
            micros: 1,
            history: History::default(),
        }]
    }

    fn actions(&self, state: &LockState, actions: &mut Vec<Action>) {
        if self.may_tick(state) {
            actions.push(Action::Tick);
        }
        for (c, client) in state.clients.iter().enumerate() {
            let c = c as u8;
            if client.paused {
                actions.push(Action::Resume(c));
                continue;
            }
            self.client_actions(state, c, client, actions);
        }
        for (i, request) in state.requests.iter().enumerate() {
            let earlier = &state.requests[..i];
            let own_earlier = earlier.iter().filter(|r| r.client == request.client);
            // One connection runs a client's requests in order, except that
            // a request answered NOSCRIPT is re-sent behind later ones.
            if own_earlier.clone().all(|r| r.noscript) {
                actions.push(Action::Run(request.id));
                let releases = matches!(request.kind, Kind::Release | Kind::GiveBack);
                if releases && state.budget.lost_messages > 0 {
                    actions.push(Action::RunLosingMessage(request.id));
                }
            }
            let later_own = state.requests[i + 1..]
                .iter()
                .any(|r| r.client == request.client);
            if state.budget.noscript > 0 && !request.noscript && later_own {
                actions.push(Action::Noscript(request.id));
            }
        }
        for answer in &state.answers {
            if state.clients[usize::from(answer.request.client)].paused {
                continue;
            }
            if self.awaits_ack(state, answer) {
                continue;
            }
            actions.push(Action::Deliver(answer.request.id));
            if state.budget.lost_replies > 0 {
                actions.push(Action::LoseReply(answer.request.id));
            }
        }
        let replicates = state.budget.failovers > 0 || self.config.replica_ack;
        if replicates && state.replica.writes != state.master.writes {
            actions.push(Action::Replicate);
        }
        if state.budget.failovers > 0 {
            actions.push(Action::Failover);
        }
        if state.budget.other_names > 0 {
            actions.push(Action::OtherName);
        }
        if state.budget.counter_losses > 0 && state.master.counter > 0 {
            actions.push(Action::LoseCounter);
        }
        if state.budget.empty_restarts > 0 {
            actions.push(Action::RestartEmpty);
        }
    }

    fn next_state(&self, state: &LockState, action: Action) -> Option<LockState> {
        let mut next = state.clone();
        match action {
            Action::Tick => {
                next.now += 1;
                next.micros += MICROS_PER_TICK;
                next.master.expire(next.now);
                next.replica.expire(next.now);
            }
            Action::Acquire(c) => {
                next.clients[usize::from(c)].phase = Phase::Acquiring;
                send(&mut next, c, Kind::Acquire, self.config.lease);
            }
            Action::Reenter(c) => {
                next.clients[usize::from(c)].reentered = true;
                let lease = self.config.reentry_lease.unwrap_or(self.config.lease);
                send(&mut next, c, Kind::Reenter, lease);
            }
            Action::Renew(c) => {
                next.clients[usize::from(c)].renewals -= 1;
                send(&mut next, c, Kind::Renew, self.config.lease);
            }
            Action::Check(c) => {
                let now = next.now;
                let value = next.store.value;
                let client = &mut next.clients[usize::from(c)];
                if now < client.believed_until {
                    client.read = Some(value);
                } else {
                    client.phase = Phase::Lost;
                    client.wrote = true;
                }
            }
            Action::Write(c) => {
                let client = &mut next.clients[usize::from(c)];
                let read = client.read.take().expect("writes follow a read");
                client.wrote = true;
                let (token, grant) = (client.token, client.grant);
                next.store
                    .write(read, token, grant, next.received_grant, self.config.fenced);
            }
            Action::Release(c) => {
                let client = &mut next.clients[usize::from(c)];
                client.guards -= 1;
                if client.guards == 0 {
                    client.phase = Phase::Releasing;
                }
                send(&mut next, c, Kind::Release, self.config.lease);
            }
            Action::Run(id) => self.run(&mut next, id, false),
            Action::RunLosingMessage(id) => {
                next.budget.lost_messages -= 1;
                self.run(&mut next, id, true);
            }
            Action::Noscript(id) => {
                next.budget.noscript -= 1;
                let request = next.requests.iter_mut().find(|r| r.id == id)?;
                request.noscript = true;
            }
            Action::Deliver(id) => {
                let at = next.answers.iter().position(|a| a.request.id == id)?;
                let answer = next.answers.remove(at);
                self.deliver(&mut next, answer);
            }
            Action::LoseReply(id) => {
                next.budget.lost_replies -= 1;
                let at = next.answers.iter().position(|a| a.request.id == id)?;
                let mut request = next.answers.remove(at).request;
                // The outcome is unknown: the same request goes again.
                request.noscript = false;
                next.requests.push(request);
            }
            Action::Pause(c) => {
                next.budget.pauses -= 1;
                next.history.paused = true;
                next.clients[usize::from(c)].paused = true;
            }
            Action::Resume(c) => next.clients[usize::from(c)].paused = false,
            Action::Cancel(c) => {
                next.budget.cancels -= 1;
                next.clients[usize::from(c)].phase = Phase::Cancelled;
            }
            Action::Replicate => next.replica = next.master.clone(),
            Action::OtherName => {
                next.budget.other_names -= 1;
                let clock = self.clock(&next);
                next.master.next_token(clock);
                next.micros += 1;
                if self.config.faults.failovers > 0 || self.config.replica_ack {
                    next.master.writes += 1;
                }
            }
            Action::LoseCounter => {
                next.budget.counter_losses -= 1;
                next.master.counter = 0;
            }
            Action::RestartEmpty => {
                next.budget.empty_restarts -= 1;
                next.history.failed_over = true;
                next.master.hold = None;
                next.master.counter = 0;
                next.master.records.clear();
            }
            Action::Failover => {
                next.budget.failovers -= 1;
                next.history.failed_over = true;
                next.history.unacknowledged_failover |= !self.config.replica_ack;
                if self.config.replica_ack {
                    // WAIT never confirmed what the replica lacks: those
                    // acquisitions fail (the engine undoes them).
                    let offset = next.replica.writes;
                    for answer in &mut next.answers {
                        let fresh = matches!(answer.reply, Reply::Acquired { fresh: true, .. });
                        if fresh && answer.request.kind == Kind::Acquire && answer.offset > offset {
                            answer.reply = Reply::NotAcknowledged;
                        }
                    }
                }
                next.master = next.replica.clone();
            }
        }
        Some(next)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        self.lock_properties()
    }
}

impl LockModel {
    /// The clock moves only while something waits on it (a lease, a parked
    /// client), so every path ends; and a running client that checked
    /// `is_held()` writes before its belief runs out (it is not paused).
    fn may_tick(&self, state: &LockState) -> bool {
        let lease_pending = [&state.master, &state.replica].iter().any(|server| {
            server
                .hold
                .as_ref()
                .is_some_and(|hold| hold.deadline > state.now)
        });
        let parked_pending = state.clients.iter().any(|client| {
            matches!(client.phase, Phase::Parked { until, woken: false } if until > state.now)
        });
        let running_writer_due = state.clients.iter().any(|client| {
            !client.paused
                && client.phase == Phase::Holding
                && client.read.is_some()
                && state.now + 1 >= client.believed_until
        });
        (lease_pending || parked_pending) && !running_writer_due
    }

    fn client_actions(&self, state: &LockState, c: u8, client: &Client, actions: &mut Vec<Action>) {
        let in_flight = |kind: Kind| {
            state
                .requests
                .iter()
                .any(|r| r.client == c && r.kind == kind)
                || state
                    .answers
                    .iter()
                    .any(|a| a.request.client == c && a.request.kind == kind)
        };
        match client.phase {
            Phase::Wants => actions.push(Action::Acquire(c)),
            Phase::Parked { until, woken }
                if woken || (self.config.lease_end_recheck && state.now >= until) =>
            {
                actions.push(Action::Acquire(c));
            }
            Phase::Holding => {
                if self.config.reentry_lease.is_some() && !client.reentered && !client.wrote {
                    actions.push(Action::Reenter(c));
                }
                if client.renewals > 0 && !in_flight(Kind::Renew) {
                    actions.push(Action::Renew(c));
                }
                if client.read.is_none() && !client.wrote {
                    actions.push(Action::Check(c));
                }
                if client.read.is_some() {
                    actions.push(Action::Write(c));
                }
                if client.wrote && client.guards > 0 && !in_flight(Kind::Reenter) {
                    actions.push(Action::Release(c));
                }
            }
            Phase::Lost if client.guards > 0 && !in_flight(Kind::Reenter) => {
                actions.push(Action::Release(c));
            }
            _ => {}
        }
        let waiting = matches!(client.phase, Phase::Acquiring | Phase::Parked { .. });
        if waiting && state.budget.cancels > 0 {
            actions.push(Action::Cancel(c));
        }
        let finished = matches!(client.phase, Phase::Done | Phase::Cancelled);
        if !finished && state.budget.pauses > 0 {
            actions.push(Action::Pause(c));
        }
    }

    /// With `wait_for_replicas`, a fresh acquisition's reply waits for the
    /// replica to have it.
    fn awaits_ack(&self, state: &LockState, answer: &Answer) -> bool {
        let fresh = matches!(answer.reply, Reply::Acquired { fresh: true, .. });
        self.config.replica_ack
            && fresh
            && answer.request.kind == Kind::Acquire
            && state.replica.writes < answer.offset
    }

    /// The server runs one request: its script, atomically, on the master;
    /// on a cluster the request record answers a re-send instead.
    fn run(&self, state: &mut LockState, id: u8, lose_message: bool) {
        let Some(at) = state.requests.iter().position(|r| r.id == id) else {
            return;
        };
        let request = state.requests.remove(at);
        if state.requests[..at]
            .iter()
            .any(|r| r.client == request.client)
        {
            state.history.reordered = true;
        }
        let records = self.config.request_records;
        let recorded = if records {
            state.master.recorded(id)
        } else {
            None
        };
        let reply = match recorded {
            Some(reply) => reply,
            None => {
                let (reply, effects) = self.script(state, &request);
                // The offset only matters where something replicates; kept at
                // 0 elsewhere so that it does not split equal states.
                if self.config.faults.failovers > 0 || self.config.replica_ack {
                    state.master.writes += 1;
                }
                if records {
                    state.master.record(id, &reply);
                }
                note_effects(state, &request, &reply, &effects, lose_message);
                reply
            }
        };
        let offset = state.master.writes;
        state.answers.push(Answer {
            request,
            reply,
            offset,
        });
    }

    /// The script a request runs (see `crate::scripts` for the files).
    fn script(&self, state: &mut LockState, request: &Request) -> (Reply, Effects) {
        let (now, owner, lease, rule) =
            (state.now, request.client, request.lease, self.config.rule);
        let grant = state.grants + 1;
        let clock = self.clock(state);
        let master = &mut state.master;
        match request.kind {
            Kind::Acquire => {
                let ran = master.acquire(now, owner, lease, rule, grant, clock);
                if ran.1.issued.is_some() {
                    state.micros += 1;
                }
                ran
            }
            Kind::Reenter => master.reenter(now, owner, lease, rule, grant),
            Kind::Renew => master.renew(now, owner, lease, rule),
            Kind::Release => master.release(now, owner, lease, rule, self.config.wake),
            Kind::GiveBack => master.release(now, owner, lease, rule, WakeRule::Always),
        }
    }

    /// What `TIME` gives a counter that starts afresh, if it starts from the clock.
    fn clock(&self, state: &LockState) -> Option<u32> {
        self.config.counter_from_clock.then_some(state.micros)
    }

    /// A reply reaches its client: the engine's handling of each reply.
    fn deliver(&self, state: &mut LockState, answer: Answer) {
        let c = answer.request.client;
        let now = state.now;
        let request = &answer.request;
        let confirmed_until = request.sent_at + request.lease;
        let client = &mut state.clients[usize::from(c)];
        match (request.kind, answer.reply) {
            (Kind::Acquire, Reply::Acquired { token, grant, .. }) => {
                if client.phase == Phase::Cancelled {
                    // Nobody received this hold: the attempt gives it back.
                    send(state, c, Kind::GiveBack, self.config.lease);
                    return;
                }
                state.received_grant = state.received_grant.max(grant);
                let history = &mut state.history;
                if history.received.iter().any(|&(earlier, seen)| {
                    (earlier < grant && seen >= token) || (earlier > grant && seen <= token)
                }) {
                    history.received_token_went_back = true;
                }
                history.received.push((grant, token));
                history.received.sort_unstable();
                let client = &mut state.clients[usize::from(c)];
                *client = Client {
                    phase: Phase::Holding,
                    guards: 1,
                    token,
                    grant,
                    believed_until: confirmed_until,
                    read: None,
                    wrote: false,
                    reentered: false,
                    renewals: self.config.renewals,
                    paused: false,
                    busy_on: None,
                };
            }
            (Kind::Acquire, Reply::NotAcknowledged) if client.phase != Phase::Cancelled => {
                client.phase = Phase::Wants;
            }
            (Kind::Acquire, Reply::Busy { pttl }) if client.phase != Phase::Cancelled => {
                client.phase = Phase::Parked {
                    until: now + pttl,
                    woken: false,
                };
            }
            (Kind::Reenter, Reply::Acquired { .. }) => {
                client.guards += 1;
                client.believed_until = client.believed_until.max(confirmed_until);
            }
            (Kind::Renew, Reply::Renewed) if client.phase == Phase::Holding => {
                client.believed_until = client.believed_until.max(confirmed_until);
            }
            (Kind::Reenter | Kind::Renew, Reply::NotHeld) if client.phase == Phase::Holding => {
                client.phase = Phase::Lost;
            }
            (Kind::Release, _) if client.phase == Phase::Releasing => {
                client.phase = Phase::Done;
            }
            _ => {}
        }
    }
}

/// How far the server's clock in microseconds moves in a tick (any step
/// forward will do: a tick is far longer than a script).
const MICROS_PER_TICK: u32 = 8;

/// A client sends a new request.
fn send(state: &mut LockState, client: u8, kind: Kind, lease: u8) {
    state.requests.push(Request {
        id: state.next_id,
        client,
        kind,
        lease,
        sent_at: state.now,
        noscript: false,
    });
    state.next_id += 1;
}

/// Records what a script run did, for the properties; delivers the unlock
/// message to parked clients unless it is lost.
fn note_effects(
    state: &mut LockState,
    request: &Request,
    reply: &Reply,
    effects: &Effects,
    lose_message: bool,
) {
    let took_effect = matches!(reply, Reply::Acquired { .. } | Reply::Released { .. });
    if took_effect {
        if state.history.applied.contains(&request.id) {
            state.history.ran_twice = true;
        } else {
            state.history.applied.push(request.id);
            state.history.applied.sort_unstable();
        }
    }
    if let Some(token) = effects.issued {
        state.grants += 1;
        if token <= state.last_token {
            state.history.token_went_back = true;
        }
        state.last_token = state.last_token.max(token);
    }
    if effects.shortened {
        state.history.shortened = true;
    }
    if let (Kind::Acquire, Reply::Busy { .. }) = (request.kind, reply) {
        // Answered busy by the hold there now: its release must wake it.
        let hold = state.master.hold.as_ref().map(|hold| hold.token);
        state.clients[usize::from(request.client)].busy_on = hold;
    }
    if let Some(ended) = effects.ended
        && !effects.published
        && state.clients.iter().any(|client| {
            client.busy_on == Some(ended)
                && matches!(
                    client.phase,
                    Phase::Acquiring | Phase::Parked { woken: false, .. }
                )
        })
    {
        state.history.lost_wakeup = true;
    }
    if effects.published && !lose_message {
        for client in &mut state.clients {
            if let Phase::Parked { woken, .. } = &mut client.phase {
                *woken = true;
            }
        }
    }
}
