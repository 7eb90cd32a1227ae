//! One lock as `status`, `list` and `top` show it, on one server or over
//! Redlock masters, with one JSON shape for both; and the servers `list`,
//! `top` and `unlock` read: one client, or one client per Redlock master.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use redlatch::{Client, Deployment, LockMode, LockStatus, RedlockStatus, Servers, Settings};
use serde::{Serialize, Serializer};

use crate::config_file;
use crate::connect;
use crate::exit::{self, Failure};
use crate::global::Global;
use crate::names::shown;
use crate::waits::{Cycle, Known, Waits, cycle_text};

/// One lock: its JSON is `status --json`'s object, each element of
/// `list --json` and each lock of `top --json`.
///
/// On one server the fields are that server's. Over Redlock masters, `held`
/// means "held by one owner on a majority of the masters", `holders` is that
/// owner, `ttl_ms` the shortest lease it has left on those masters, `token`
/// the highest any master handed out, `waiting` the most waiters any master
/// counts; `quorum`, `answered` and `nodes` give each master's own view.
#[derive(Debug, Clone, Serialize)]
pub struct LockView {
    /// The lock's name, without the key prefix.
    pub name: String,
    /// Held (over Redlock: by one owner on a majority of the masters).
    pub held: bool,
    /// The owners holding it, with their hold counts.
    pub holders: Vec<HolderView>,
    /// Remaining lease; `null` when free or without expiry. Milliseconds in
    /// JSON, for `status`, `list` and `top` alike.
    #[serde(rename = "ttl_ms", serialize_with = "millis")]
    pub ttl: Option<Duration>,
    /// The last fencing token handed out.
    pub token: Option<u64>,
    /// Client connections waiting on it.
    pub waiting: u64,
    /// `read` or `write` for a held read-write lock; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "mode_name")]
    pub mode: Option<LockMode>,
    /// A fair lock's waiting line, oldest first; absent when nobody is in line.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub line: Vec<String>,
    /// The parties waiting for it, as their wait keys say (deadlock
    /// detection); absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub waited_by: Vec<String>,
    /// The wait-for cycle through it, when the snapshot has one: each
    /// step's party waits for the step's lock, held by the next step's party.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cycle: Option<Cycle>,
    /// Redlock only: each master's view.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub masters: Option<Masters>,
}

/// One owner holding a lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HolderView {
    /// The owner field, `<client-id>:<owner>`.
    pub owner: String,
    /// Hold count (re-entries included).
    pub count: u64,
    /// Who the holder is, where its client published it; absent for a
    /// Redisson holder, a hold younger than about 50 ms, or a client that
    /// does not publish.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity: Option<IdentityView>,
}

/// The client behind a holder, as it described itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IdentityView {
    /// Host name of its machine.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// Its program's file name (`redlatch` for `redlatch run`).
    pub program: String,
    /// What it holds locks for; `null` when it did not say.
    pub purpose: Option<String>,
    /// When it acquired the lock, by the server's clock: RFC 3339 UTC text
    /// with milliseconds (`2026-11-27T11:30:00.123Z`); `null` when unknown.
    #[serde(serialize_with = "rfc3339")]
    pub since: Option<SystemTime>,
}

fn rfc3339<S: Serializer>(at: &Option<SystemTime>, serializer: S) -> Result<S::Ok, S::Error> {
    at.map(|at| humantime::format_rfc3339_millis(at).to_string())
        .serialize(serializer)
}

impl IdentityView {
    /// As the library read it from the holder's record.
    pub fn new(identity: &redlatch::HolderIdentity) -> IdentityView {
        IdentityView {
            host: identity.host.clone(),
            pid: identity.pid,
            program: identity.program.clone(),
            purpose: identity.purpose.clone(),
            since: identity.since,
        }
    }

    /// `host pid N (program)`, escaped: what tells processes apart.
    pub fn process(&self) -> String {
        format!(
            "{} pid {} ({})",
            shown(&self.host),
            self.pid,
            shown(&self.program)
        )
    }

    /// How long it has held the lock at `now` (this machine's clock against
    /// the server's: a skew shows as an error of that size, never below 0).
    pub fn held_for(&self, now: SystemTime) -> Option<Duration> {
        self.since
            .map(|since| now.duration_since(since).unwrap_or_default())
    }

    /// `host pid N (program) since 3s: purpose`, for messages.
    pub fn describe(&self, now: SystemTime) -> String {
        let mut text = self.process();
        if let Some(held) = self.held_for(now) {
            text.push_str(&format!(" since {}", whole_seconds(held)));
        }
        if let Some(purpose) = &self.purpose {
            text.push_str(&format!(": {}", shown(purpose)));
        }
        text
    }
}

/// `27s`, `1m 1s`: whole seconds (rounded), as messages give durations.
pub fn whole_seconds(duration: Duration) -> String {
    let secs = (duration.as_millis() + 500) / 1000;
    humantime::format_duration(Duration::from_secs(u64::try_from(secs).unwrap_or(u64::MAX)))
        .to_string()
}

impl HolderView {
    fn new(holder: &redlatch::Holder) -> HolderView {
        HolderView {
            owner: holder.owner.clone(),
            count: holder.count,
            identity: holder.identity.as_ref().map(IdentityView::new),
        }
    }

    /// The owner as people read it: its process where known (host, pid,
    /// program), then what the holder called itself (the `<owner>` part,
    /// `--owner`), then the client id it writes with; the part that tells
    /// holders apart comes first, where a narrow column still shows it.
    pub fn label(&self) -> String {
        let owner = match self.owner.split_once(':') {
            Some((client, owner)) if !owner.is_empty() => {
                format!("{} {}", shown(owner), shown(client))
            }
            _ => shown(&self.owner),
        };
        match &self.identity {
            Some(identity) => format!("{} {owner}", identity.process()),
            None => owner,
        }
    }
}

/// A Redlock lock's view on each master.
#[derive(Debug, Clone, Serialize)]
pub struct Masters {
    /// How many masters make a majority.
    pub quorum: usize,
    /// How many masters answered.
    pub answered: usize,
    /// Each master, in the order of `--redis`.
    pub nodes: Vec<NodeView>,
}

/// One master's view of a Redlock lock.
#[derive(Debug, Clone, Serialize)]
pub struct NodeView {
    /// The master's URL, password hidden.
    pub node: String,
    /// What it holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<LockView>,
    /// Why it could not say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn millis<S: Serializer>(ttl: &Option<Duration>, serializer: S) -> Result<S::Ok, S::Error> {
    ttl.map(|ttl| u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX))
        .serialize(serializer)
}

fn mode_name<S: Serializer>(mode: &Option<LockMode>, serializer: S) -> Result<S::Ok, S::Error> {
    mode.map(LockMode::as_str).serialize(serializer)
}

impl LockView {
    /// The lock as one server holds it.
    pub fn single(status: &LockStatus) -> LockView {
        LockView {
            name: status.name.clone(),
            held: status.held,
            holders: status.holders.iter().map(HolderView::new).collect(),
            ttl: status.ttl,
            token: status.last_token,
            waiting: status.waiting_clients,
            mode: status.mode,
            line: status.line.clone(),
            waited_by: Vec::new(),
            cycle: None,
            masters: None,
        }
    }

    /// The lock over Redlock masters: each master's status (or why it gave
    /// none), and the verdict of the majority.
    pub fn redlock(
        name: &str,
        quorum: usize,
        nodes: Vec<(String, Result<LockStatus, String>)>,
    ) -> LockView {
        let answered: Vec<&LockStatus> = nodes
            .iter()
            .filter_map(|(_, status)| status.as_ref().ok())
            .collect();
        let mut counts: Vec<(&str, usize)> = Vec::new();
        for holder in answered.iter().flat_map(|status| &status.holders) {
            match counts.iter_mut().find(|(owner, _)| *owner == holder.owner) {
                Some((_, count)) => *count += 1,
                None => counts.push((&holder.owner, 1)),
            }
        }
        let majority = counts
            .iter()
            .find(|(_, count)| *count >= quorum)
            .map(|(owner, _)| *owner);
        let holding: Vec<&LockStatus> = answered
            .iter()
            .copied()
            .filter(|status| {
                majority.is_some_and(|owner| status.holders.iter().any(|h| h.owner == owner))
            })
            .collect();
        let first = holding.first();
        let mut holders: Vec<HolderView> = first.map_or_else(Vec::new, |status| {
            status
                .holders
                .iter()
                .filter(|holder| Some(holder.owner.as_str()) == majority)
                .map(HolderView::new)
                .collect()
        });
        // Any master that names the holder will do: its record may be
        // missing on some (written late, or lost with a restart).
        for holder in holders.iter_mut().filter(|h| h.identity.is_none()) {
            holder.identity = holding
                .iter()
                .flat_map(|status| &status.holders)
                .filter(|h| h.owner == holder.owner)
                .find_map(|h| h.identity.as_ref().map(IdentityView::new));
        }
        let view = LockView {
            name: name.to_owned(),
            held: majority.is_some(),
            holders,
            // The hold is valid only while a majority keeps it: the shortest lease counts.
            ttl: holding.iter().filter_map(|status| status.ttl).min(),
            token: answered.iter().filter_map(|status| status.last_token).max(),
            waiting: answered
                .iter()
                .map(|status| status.waiting_clients)
                .max()
                .unwrap_or(0),
            mode: first.and_then(|status| status.mode),
            line: first.map_or_else(Vec::new, |status| status.line.clone()),
            waited_by: Vec::new(),
            cycle: None,
            masters: None,
        };
        let answered = answered.len();
        LockView {
            masters: Some(Masters {
                quorum,
                answered,
                nodes: nodes
                    .into_iter()
                    .map(|(node, status)| match status {
                        Ok(status) => NodeView {
                            node,
                            status: Some(LockView::single(&status)),
                            error: None,
                        },
                        Err(error) => NodeView {
                            node,
                            status: None,
                            error: Some(error),
                        },
                    })
                    .collect(),
            }),
            ..view
        }
    }

    /// `status` over Redlock masters, as the library reads it.
    pub fn from_redlock(status: &RedlockStatus) -> LockView {
        LockView::redlock(
            &status.name,
            status.quorum,
            status
                .nodes
                .iter()
                .map(|node| {
                    (
                        node.node.clone(),
                        node.status
                            .as_ref()
                            .map(Clone::clone)
                            .map_err(ToString::to_string),
                    )
                })
                .collect(),
        )
    }

    /// The holders for people: `OWNER CLIENT-ID xCOUNT, ...`.
    pub fn holders_text(&self) -> String {
        self.holders
            .iter()
            .map(|holder| format!("{} x{}", holder.label(), holder.count))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// One line of `list`: `NAME  held by OWNER xCOUNT  ttl 12.3s  token 7`,
    /// the holder's `host pid N (program)` before OWNER where known (`held
    /// (read) by ...` for a read-write lock; over Redlock, on how many masters).
    pub fn list_line(&self) -> String {
        let holders: Vec<String> = self
            .holders
            .iter()
            .map(|holder| match &holder.identity {
                Some(identity) => format!(
                    "{} {} x{}",
                    identity.process(),
                    shown(&holder.owner),
                    holder.count
                ),
                None => format!("{} x{}", shown(&holder.owner), holder.count),
            })
            .collect();
        let mut state = match self.mode {
            Some(mode) if self.held => format!("held ({mode}) by {}", holders.join(", ")),
            _ if self.held => format!("held by {}", holders.join(", ")),
            _ => "free".to_owned(),
        };
        if let Some(masters) = &self.masters {
            let holding = self.holding_masters();
            let nodes = masters.nodes.len();
            state = if self.held {
                format!("{state} on {holding} of {nodes} masters")
            } else {
                format!(
                    "no majority ({} needed, {} of {nodes} masters answered)",
                    masters.quorum, masters.answered
                )
            };
        }
        let mut line = format!(
            "{}  {state}  ttl {}  token {}",
            shown(&self.name),
            self.ttl.map_or_else(
                || if self.held { "none" } else { "-" }.to_owned(),
                |ttl| format!("{:.1}s", ttl.as_secs_f64())
            ),
            self.token
                .map_or_else(|| "-".to_owned(), |token| token.to_string())
        );
        line.push_str(&self.waits_text());
        line
    }

    /// The lock's name and its holders' owner fields, for reading the waits.
    pub fn known(&self) -> Known {
        let owners = self.holders.iter().map(|h| h.owner.clone()).collect();
        (self.name.clone(), owners)
    }

    /// Fills `waited_by` and `cycle` from a snapshot of the waits.
    pub fn add_waits(&mut self, waits: &Waits) {
        self.waited_by = waits
            .waiting_for(&self.name)
            .into_iter()
            .map(str::to_owned)
            .collect();
        self.cycle = waits.cycle_through(&self.name).cloned();
    }

    /// `  waited for by P, Q  DEADLOCK: ...`: what the wait keys say of
    /// this lock, for `list` and `top`; empty when nobody waits.
    pub fn waits_text(&self) -> String {
        let mut text = String::new();
        if !self.waited_by.is_empty() {
            let parties: Vec<String> = self.waited_by.iter().map(|p| shown(p)).collect();
            text.push_str(&format!("  waited for by {}", parties.join(", ")));
        }
        if let Some(cycle) = &self.cycle {
            text.push_str(&format!("  DEADLOCK: {}", cycle_text(cycle)));
        }
        text
    }

    /// Who holds the lock and for how much longer, for a "busy" message:
    /// `db-1 pid 4242 (redlatch) since 3s: nightly report, for 27s more`
    /// (the owner where the holder is not named); `None` when free.
    pub fn busy_text(&self, now: SystemTime) -> Option<String> {
        if !self.held || self.holders.is_empty() {
            return None;
        }
        let holders: Vec<String> = self
            .holders
            .iter()
            .map(|holder| match &holder.identity {
                Some(identity) => identity.describe(now),
                None => holder.label(),
            })
            .collect();
        let left = match self.ttl {
            Some(ttl) => format!("for {} more", whole_seconds(ttl)),
            None => "with no expiry".to_owned(),
        };
        Some(format!("{}, {left}", holders.join(" and ")))
    }

    /// Over Redlock: how many masters the majority owner holds it on.
    pub fn holding_masters(&self) -> usize {
        let Some(masters) = &self.masters else {
            return usize::from(self.held);
        };
        masters
            .nodes
            .iter()
            .filter_map(|node| node.status.as_ref())
            .filter(|status| {
                self.holders
                    .iter()
                    .any(|holder| status.holders.iter().any(|h| h.owner == holder.owner))
            })
            .count()
    }
}

/// The servers `list`, `top` and `unlock` work on.
pub enum Source {
    /// One server, cluster or Sentinel group.
    One(Client),
    /// Redlock masters (several `--redis`), each connected on its own.
    Masters(Vec<Master>),
}

/// One Redlock master.
pub struct Master {
    /// Its URL, password hidden.
    pub label: String,
    /// Its client, or why it could not connect.
    pub client: Result<Client, String>,
    /// How to connect it again.
    deployment: Deployment,
    settings: Settings,
}

impl Master {
    async fn connect(deployment: Deployment, settings: Settings) -> Master {
        let label = deployment.servers.label();
        let client = match deployment.builder(settings.clone()) {
            Ok(builder) => builder.connect().await.map_err(|error| error.to_string()),
            Err(error) => Err(error.to_string()),
        };
        Master {
            label,
            client,
            deployment,
            settings,
        }
    }
}

/// How long `top` waits for a failed Redlock master to connect again, per refresh.
const RECONNECT_LIMIT: Duration = Duration::from_secs(1);

/// Connects to what `global` names for `command`: one client, or each
/// Redlock master (a master that cannot connect is kept as failed; fewer
/// than a majority connected is exit 69).
pub async fn connect_source(global: &Global, command: &str) -> Result<Source, Failure> {
    let settings = config_file::load_settings(global.config.as_deref())?;
    let deployment = global.deployment()?;
    let Servers::Redlock(masters) = &deployment.servers else {
        return Ok(Source::One(
            connect::client(global, command, settings, None, None, None, false).await?,
        ));
    };
    let connecting: Vec<_> = masters
        .iter()
        .map(|master| {
            // The flags' TLS files and replica waits, for this master alone.
            let mut one = deployment.clone();
            one.servers = master.clone();
            tokio::spawn(Master::connect(one, settings.clone()))
        })
        .collect();
    let mut connected = Vec::with_capacity(connecting.len());
    for task in connecting {
        connected.push(
            task.await
                .map_err(|error| Failure::new(exit::SOFTWARE, format!("{command}: {error}")))?,
        );
    }
    let up = connected
        .iter()
        .filter(|master| master.client.is_ok())
        .count();
    let quorum = connected.len() / 2 + 1;
    if up < quorum {
        return Err(Failure::new(
            exit::UNAVAILABLE,
            format!(
                "{command}: {up} of {} Redlock masters connected, {quorum} needed: {}",
                connected.len(),
                failures(&connected)
            ),
        ));
    }
    Ok(Source::Masters(connected))
}

/// `URL: error; ...` for the masters that failed.
fn failures(masters: &[Master]) -> String {
    masters
        .iter()
        .filter_map(|master| {
            let error = master.client.as_ref().err()?;
            Some(format!("{}: {error}", master.label))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

impl Source {
    /// Tries again to connect the Redlock masters that failed to, each for
    /// at most [`RECONNECT_LIMIT`] (`top` must keep refreshing meanwhile).
    pub async fn reconnect_failed(&mut self) {
        let Source::Masters(masters) = self else {
            return;
        };
        for master in masters.iter_mut().filter(|master| master.client.is_err()) {
            let again = Master::connect(master.deployment.clone(), master.settings.clone());
            if let Ok(connected) = tokio::time::timeout(RECONNECT_LIMIT, again).await {
                *master = connected;
            }
        }
    }

    /// The locks held now whose names start with `prefix`, sorted by name.
    /// Over Redlock: every lock held on any master, with each master's
    /// view; fewer than a majority of masters answering is an error.
    /// `command` names the caller in messages.
    pub async fn locks(
        &self,
        global: &Global,
        command: &str,
        prefix: &str,
    ) -> Result<Vec<LockView>, Failure> {
        let masters = match self {
            Source::One(client) => {
                let locks = client
                    .locks(prefix)
                    .await
                    .map_err(|error| connect::call_failure(global, command, &error))?;
                let mut views: Vec<LockView> = locks.iter().map(LockView::single).collect();
                let known: Vec<Known> = views.iter().map(LockView::known).collect();
                if let Some(waits) = Waits::read_quietly(client, &known).await {
                    views.iter_mut().for_each(|view| view.add_waits(&waits));
                }
                return Ok(views);
            }
            Source::Masters(masters) => masters,
        };
        // Every master at once: a frozen one must not hold up the others.
        let listing: Vec<_> = masters
            .iter()
            .map(|master| {
                let client = master.client.clone();
                let prefix = prefix.to_owned();
                tokio::spawn(async move {
                    match client {
                        Ok(client) => client.locks(&prefix).await.map_err(|e| e.to_string()),
                        Err(error) => Err(error),
                    }
                })
            })
            .collect();
        let mut listed: Vec<Result<Vec<LockStatus>, String>> = Vec::new();
        for task in listing {
            listed.push(task.await.unwrap_or_else(|error| Err(error.to_string())));
        }
        let quorum = masters.len() / 2 + 1;
        let answered = listed.iter().filter(|one| one.is_ok()).count();
        if answered < quorum {
            let errors: Vec<String> = masters
                .iter()
                .zip(&listed)
                .filter_map(|(master, one)| {
                    Some(format!("{}: {}", master.label, one.as_ref().err()?))
                })
                .collect();
            return Err(Failure::new(
                exit::UNAVAILABLE,
                format!(
                    "{command}: {answered} of {} Redlock masters answered, {quorum} needed: {}",
                    masters.len(),
                    errors.join("; ")
                ),
            ));
        }
        let names: BTreeSet<&str> = listed
            .iter()
            .filter_map(|one| one.as_ref().ok())
            .flatten()
            .map(|status| status.name.as_str())
            .collect();
        let mut views = Vec::with_capacity(names.len());
        for name in names {
            let mut nodes = Vec::with_capacity(masters.len());
            for (master, one) in masters.iter().zip(&listed) {
                let status = match (one, &master.client) {
                    (Ok(locks), Ok(client)) => match locks.iter().find(|s| s.name == name) {
                        Some(status) => Ok(status.clone()),
                        // Not held there: ask for its token and waiters all the same.
                        None => client
                            .lock(name)
                            .status()
                            .await
                            .map_err(|error| error.to_string()),
                    },
                    (Err(error), _) | (_, Err(error)) => Err(error.clone()),
                };
                nodes.push((master.label.clone(), status));
            }
            views.push(LockView::redlock(name, quorum, nodes));
        }
        Ok(views)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn named(purpose: Option<&str>) -> HolderView {
        HolderView {
            owner: "0b7c5d3e-4f7a-4c1e-9a55-2f0d6b3f2a11:#0".to_owned(),
            count: 1,
            identity: Some(IdentityView {
                host: "db-1".to_owned(),
                pid: 4242,
                program: "redlatch".to_owned(),
                purpose: purpose.map(str::to_owned),
                since: Some(UNIX_EPOCH + Duration::from_millis(1_000_049)),
            }),
        }
    }

    #[test]
    fn a_named_holder_is_labelled_by_process_and_serialised_with_rfc3339() {
        let holder = named(Some("nightly\nreport"));
        assert_eq!(
            holder.label(),
            "db-1 pid 4242 (redlatch) #0 0b7c5d3e-4f7a-4c1e-9a55-2f0d6b3f2a11"
        );
        let json = serde_json::to_value(&holder).unwrap();
        assert_eq!(json["identity"]["since"], "1970-01-01T00:16:40.049Z");
        assert_eq!(json["identity"]["purpose"], "nightly\nreport");
        let unnamed = serde_json::to_value(HolderView {
            identity: None,
            ..holder
        })
        .unwrap();
        assert_eq!(unnamed.get("identity"), None, "{unnamed}");
    }

    #[test]
    fn the_busy_text_says_who_and_for_how_much_longer() {
        let mut view = LockView {
            name: "report".to_owned(),
            held: true,
            holders: vec![named(Some("nightly\nreport"))],
            ttl: Some(Duration::from_millis(26_600)),
            token: Some(1),
            waiting: 0,
            mode: None,
            line: Vec::new(),
            waited_by: Vec::new(),
            cycle: None,
            masters: None,
        };
        let now = UNIX_EPOCH + Duration::from_millis(1_003_100);
        assert_eq!(
            view.busy_text(now).unwrap(),
            "db-1 pid 4242 (redlatch) since 3s: nightly\\nreport, for 27s more"
        );
        view.holders[0].identity = None;
        view.ttl = None;
        assert_eq!(
            view.busy_text(now).unwrap(),
            "#0 0b7c5d3e-4f7a-4c1e-9a55-2f0d6b3f2a11, with no expiry"
        );
        view.held = false;
        assert_eq!(view.busy_text(now), None);
    }
}
