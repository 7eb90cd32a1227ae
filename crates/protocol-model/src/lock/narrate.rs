//! The lock model's steps in the safety lab's words.

use crate::server::Reply;
use crate::timeline::{Line, Narrated};

use super::LockModel;
use super::properties::believers;
use super::state::{Action, Kind, LockState, Phase, Request};

impl Narrated for LockModel {
    fn narrate(&self, before: &LockState, action: &Action, after: &LockState) -> Vec<Line> {
        let now = before.now;
        let worker = |c: u8, text: String| vec![Line::worker(now, c, text)];
        match *action {
            Action::Tick => {
                if before.master.hold.is_some() && after.master.hold.is_none() {
                    vec![Line::other(
                        after.now,
                        "redis",
                        "lab:lock expired (its lease ran out)",
                    )]
                } else {
                    Vec::new()
                }
            }
            Action::Acquire(c) => worker(c, "tries to acquire".into()),
            Action::Reenter(c) => worker(
                c,
                format!("re-enters with a fixed lease of {}", lease_of(after, c)),
            ),
            Action::Renew(c) => worker(c, format!("watchdog renews (lease {})", self.config.lease)),
            Action::Check(c) => match after.clients[usize::from(c)].read {
                Some(value) => worker(c, format!("is_held() is true; read counter = {value}")),
                None => worker(c, "sees the lock lost; skips its write".into()),
            },
            Action::Write(c) => {
                let client = &before.clients[usize::from(c)];
                let read = client.read.unwrap_or_default();
                let written = before.store.clone().write(
                    read,
                    client.token,
                    client.grant,
                    before.received_grant,
                    self.config.fenced,
                );
                let token = if self.config.fenced {
                    format!(" (token {})", client.token)
                } else {
                    String::new()
                };
                let text = crate::store::Store::describe(read, client.token, written);
                worker(c, format!("{text}{token}"))
            }
            Action::Release(c) => worker(c, "releases".into()),
            Action::Run(id) | Action::RunLosingMessage(id) => {
                let request = find_request(before, id);
                let mut lines = vec![Line::other(now, "redis", run_text(before, after, &request))];
                if matches!(action, Action::RunLosingMessage(_)) {
                    lines.push(Line::other(
                        now,
                        "lab",
                        "the unlock message is lost (subscription killed)",
                    ));
                }
                lines
            }
            Action::Noscript(id) => {
                let request = find_request(before, id);
                vec![Line::other(
                    now,
                    "redis",
                    format!(
                        "NOSCRIPT for w{}'s {}: loaded and sent again, behind later requests",
                        request.client + 1,
                        script_of(request.kind)
                    ),
                )]
            }
            Action::Deliver(id) => deliver_text(before, after, id),
            Action::LoseReply(id) => {
                let request = before
                    .answers
                    .iter()
                    .find(|a| a.request.id == id)
                    .map(|a| a.request.clone())
                    .expect("the reply exists");
                vec![Line::other(
                    now,
                    "lab",
                    format!(
                        "the reply to w{}'s {} is lost; the request is sent again",
                        request.client + 1,
                        script_of(request.kind)
                    ),
                )]
            }
            Action::Pause(c) => {
                let point = if before.clients[usize::from(c)].read.is_some() {
                    "stops itself at between (SIGSTOP)"
                } else {
                    "stops itself (SIGSTOP)"
                };
                worker(c, point.into())
            }
            Action::Resume(c) => vec![
                Line::other(now, "lab", format!("SIGCONT w{}", c + 1)),
                Line::worker(now, c, "runs again"),
            ],
            Action::Cancel(c) => worker(c, "its acquire is cancelled (future dropped)".into()),
            Action::Replicate => vec![Line::other(
                now,
                "replica",
                "receives the master's writes so far",
            )],
            Action::Failover => vec![Line::other(
                now,
                "lab",
                "failover: the replica becomes master with what it had received",
            )],
            Action::OtherName => vec![Line::other(
                now,
                "redis",
                format!(
                    "another name takes token {} from the shared counter",
                    after.master.counter
                ),
            )],
            Action::LoseCounter => vec![Line::other(
                now,
                "lab",
                "the fencing counter vanishes (evicted, deleted)",
            )],
            Action::RestartEmpty => {
                vec![Line::other(now, "lab", "redis restarts without its data")]
            }
        }
    }

    fn verdict(&self, last: &LockState, property: &str) -> Line {
        let holders: Vec<String> = last
            .clients
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                c.phase == Phase::Holding && (last.now < c.believed_until || c.read.is_some())
            })
            .map(|(i, _)| format!("w{}", i + 1))
            .collect();
        let who = if believers(last) > 1 {
            format!(" ({} believe they hold the lock)", holders.join(" and "))
        } else {
            String::new()
        };
        Line::other(last.now, "lab", format!("BROKEN: {property}{who}"))
    }
}

fn lease_of(state: &LockState, client: u8) -> u8 {
    state
        .requests
        .iter()
        .rev()
        .find(|r| r.client == client)
        .map_or(0, |r| r.lease)
}

fn find_request(state: &LockState, id: u8) -> Request {
    state
        .requests
        .iter()
        .find(|r| r.id == id)
        .cloned()
        .expect("the request exists")
}

/// The `.lua` file a request runs.
fn script_of(kind: Kind) -> &'static str {
    match kind {
        Kind::Acquire => "acquire.lua",
        Kind::Reenter => "reenter.lua",
        Kind::Renew => "renew.lua",
        Kind::Release | Kind::GiveBack => "release.lua",
    }
}

fn run_text(before: &LockState, after: &LockState, request: &Request) -> String {
    let reply = after
        .answers
        .iter()
        .find(|a| a.request.id == request.id)
        .map(|a| a.reply.clone())
        .expect("the run answered");
    let who = format!("w{}", request.client + 1);
    let script = script_of(request.kind);
    if before.master.recorded(request.id).is_some() {
        return format!("answers {who}'s re-sent {script} from its request record (runs nothing)");
    }
    let expiry = after.master.hold.as_ref().map_or(String::new(), |hold| {
        format!(", key expires at t={}", hold.deadline)
    });
    let lease = request.lease;
    match reply {
        Reply::Acquired {
            token, fresh: true, ..
        } => {
            format!("runs {script} for {who}: a fresh hold, token {token}{expiry}")
        }
        Reply::Acquired { .. } => {
            format!("runs {script} for {who} (lease {lease}): one more hold{expiry}")
        }
        Reply::Busy { pttl } => {
            format!(
                "runs {script} for {who}: held by another owner for {pttl} more, marks the hold"
            )
        }
        Reply::Renewed => format!("runs {script} for {who} (lease {lease}){expiry}"),
        Reply::Released { last: true } => {
            let marked = before.master.hold.as_ref().is_some_and(|hold| hold.marked);
            let lost = after.history.lost_wakeup && !before.history.lost_wakeup;
            let published = match (request.kind, lost, marked) {
                (Kind::GiveBack, ..) => "publishes the unlock message",
                (_, true, _) => "publishes nothing, though a waiter it turned away waits for it",
                (_, false, true) => "publishes the unlock message (a waiter marked the hold)",
                (_, false, false) => "publishes nothing (no waiter marked the hold)",
            };
            format!("runs {script} for {who}: deletes the lock key, {published}")
        }
        Reply::Released { last: false } => {
            format!("runs {script} for {who} (lease {lease}): one hold fewer{expiry}")
        }
        Reply::NotHeld => format!("runs {script} for {who}: it does not hold the lock"),
        Reply::NotAcknowledged => format!("runs {script} for {who}"),
    }
}

fn deliver_text(before: &LockState, after: &LockState, id: u8) -> Vec<Line> {
    let answer = before
        .answers
        .iter()
        .find(|a| a.request.id == id)
        .cloned()
        .expect("the reply exists");
    let c = answer.request.client;
    let now = before.now;
    let was = &before.clients[usize::from(c)];
    let is = &after.clients[usize::from(c)];
    let text = match (answer.request.kind, &answer.reply) {
        (Kind::Acquire, Reply::Acquired { token, .. }) if was.phase == Phase::Cancelled => {
            format!(
                "its cancelled attempt took a hold (token {token}) nobody received: gives it back"
            )
        }
        (Kind::Acquire, Reply::Acquired { token, .. }) => format!(
            "acquired the lock (token {token}); believes it holds until t={}",
            is.believed_until
        ),
        (Kind::Acquire, Reply::Busy { .. }) => match is.phase {
            Phase::Parked { until, .. } => {
                format!("lock busy: waits for the unlock message, or t={until}")
            }
            _ => "lock busy (its call was cancelled)".to_owned(),
        },
        (Kind::Reenter, Reply::Acquired { .. }) => {
            format!(
                "re-entered; believes it holds until t={}",
                is.believed_until
            )
        }
        (Kind::Renew, Reply::Renewed) => {
            format!(
                "renewal confirmed; believes it holds until t={}",
                is.believed_until
            )
        }
        (Kind::Reenter | Kind::Renew, Reply::NotHeld) => "sees the lock lost".to_owned(),
        (Kind::Release, Reply::Released { last: true }) => {
            "released (deleted the lock key)".to_owned()
        }
        (Kind::Release, Reply::Released { last: false }) => "released one hold".to_owned(),
        (Kind::Release, _) => "release: the lock was no longer its own".to_owned(),
        (Kind::GiveBack, _) => "gave back the hold nobody received".to_owned(),
        (Kind::Acquire, Reply::NotAcknowledged) => {
            "error: replicas did not confirm the acquisition (undone); tries again".to_owned()
        }
        _ => "got a reply".to_owned(),
    };
    vec![Line::worker(now, c, text)]
}
