//! Who waits for whom: the wait-for edges the library writes while a party
//! waits, read back with `Client::waits` (every master's, on a cluster),
//! joined with the lock hashes' holders, and the cycle of a snapshot that has one, computed here
//! from what was read (the library refuses one party of a cycle; a cycle
//! shown here is one caught before that, or one the library cannot see).
//!
//! A holder's party is the library's (`redlatch::deadlock::party_of`): a
//! named owner `<client-id>:<name>` is `n:<name>` in every process; an
//! anonymous owner `<client-id>:#<seq>@<task>` is `<client-id>@<task>`. An
//! edge whose waiter already holds its lock is stale (its DEL is on the
//! way): ignored.

use std::collections::{BTreeMap, BTreeSet};

use redlatch::Client;
use redlatch::deadlock::party_of as party;
use serde::Serialize;

use crate::names::shown;

/// A lock already read: its name and its holders' owner fields.
pub type Known = (String, Vec<String>);

/// One party waiting for one lock, as the wait keys say.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Wait {
    /// The waiting party.
    pub party: String,
    /// The lock it waits for (its name, without the key prefix).
    pub lock: String,
}

/// One step of a cycle: `party` waits for `lock`, held by the next step's party.
pub type Cycle = Vec<Wait>;

/// The waits of a snapshot, the holders' parties per lock, and the cycle.
#[derive(Debug, Default)]
pub struct Waits {
    /// Every current wait (stale edges left out), sorted.
    pub waits: Vec<Wait>,
    /// Lock name → its holders' parties.
    pub holders: BTreeMap<String, BTreeSet<String>>,
    /// The cycles found, each starting at its smallest party.
    pub cycles: Vec<Cycle>,
}

impl Waits {
    /// Builds the graph from the edges read and the holders of every lock
    /// they name (`holders`: lock name → owner fields).
    pub fn new(edges: Vec<Wait>, holders: &BTreeMap<String, Vec<String>>) -> Waits {
        let holders: BTreeMap<String, BTreeSet<String>> = holders
            .iter()
            .map(|(lock, owners)| (lock.clone(), owners.iter().map(|o| party(o)).collect()))
            .collect();
        let mut waits: Vec<Wait> = edges
            .into_iter()
            .filter(|wait| {
                !holders
                    .get(&wait.lock)
                    .is_some_and(|parties| parties.contains(&wait.party))
            })
            .collect();
        waits.sort();
        waits.dedup();
        let cycles = cycles(&waits, &holders);
        Waits {
            waits,
            holders,
            cycles,
        }
    }

    /// The parties waiting for `lock`.
    pub fn waiting_for(&self, lock: &str) -> Vec<&str> {
        self.waits
            .iter()
            .filter(|wait| wait.lock == lock)
            .map(|wait| wait.party.as_str())
            .collect()
    }

    /// The lock `party` waits for.
    pub fn lock_of(&self, party: &str) -> Option<&str> {
        self.waits
            .iter()
            .find(|wait| wait.party == party)
            .map(|wait| wait.lock.as_str())
    }

    /// The cycle through `lock`, if any.
    pub fn cycle_through(&self, lock: &str) -> Option<&Cycle> {
        self.cycles
            .iter()
            .find(|cycle| cycle.iter().any(|wait| wait.lock == lock))
    }
}

impl Waits {
    /// `status`'s lines on `lock`: who waits for it, what its holders wait
    /// for, and the cycle through it.
    pub fn status_lines(&self, lock: &str) -> Vec<String> {
        let mut lines: Vec<String> = self
            .waiting_for(lock)
            .into_iter()
            .map(|party| format!("waiter   {} waits for it", shown(party)))
            .collect();
        for holder in self.holders.get(lock).into_iter().flatten() {
            if let Some(other) = self.lock_of(holder) {
                lines.push(format!(
                    "holder   {} waits for {}",
                    shown(holder),
                    shown(other)
                ));
            }
        }
        if let Some(cycle) = self.cycle_through(lock) {
            lines.push(format!("deadlock {}", cycle_text(cycle)));
        }
        lines
    }

    /// Reads the waits, or `None` (with a debug message) when they cannot
    /// be read: the listing goes on without them.
    pub async fn read_quietly(client: &Client, known: &[Known]) -> Option<Waits> {
        read(client, known)
            .await
            .inspect_err(|error| tracing::debug!(%error, "wait keys not read"))
            .ok()
    }
}

/// `A waits for L2 held by B, B waits for L1 held by A`: a cycle for people.
pub fn cycle_text(cycle: &Cycle) -> String {
    cycle
        .iter()
        .enumerate()
        .map(|(at, wait)| {
            let next = &cycle[(at + 1) % cycle.len()].party;
            format!(
                "{} waits for {} held by {}",
                shown(&wait.party),
                shown(&wait.lock),
                shown(next)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The shortest cycle through each party that is in one, found by
/// following each party's single wait (a party waits for one lock at a
/// time) to the lock's holders: one breadth-first search per party, so the
/// work grows with parties times waits, never with the number of paths (a
/// search of every path took minutes on 16 layers of 4 waiting parties).
fn cycles(waits: &[Wait], holders: &BTreeMap<String, BTreeSet<String>>) -> Vec<Cycle> {
    let lock_of: BTreeMap<&str, &str> = waits
        .iter()
        .map(|wait| (wait.party.as_str(), wait.lock.as_str()))
        .collect();
    let next = |party: &str| {
        lock_of
            .get(party)
            .and_then(|lock| holders.get(*lock))
            .into_iter()
            .flatten()
            .map(String::as_str)
    };
    let mut found: BTreeSet<Vec<Wait>> = BTreeSet::new();
    for &start in lock_of.keys() {
        // Who reached each party first, from `start`.
        let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start]);
        'search: while let Some(party) = queue.pop_front() {
            for holder in next(party) {
                if holder == start {
                    let mut path = vec![party];
                    while let Some(&before) = came_from.get(path[path.len() - 1]) {
                        path.push(before);
                    }
                    path.reverse();
                    found.insert(canonical(&path, &lock_of));
                    break 'search;
                }
                if holder != start && !came_from.contains_key(holder) {
                    came_from.insert(holder, party);
                    queue.push_back(holder);
                }
            }
        }
    }
    found.into_iter().collect()
}

/// The cycle as waits, rotated to start at its smallest party (so each
/// cycle is found once whichever member the search started from).
fn canonical(parties: &[&str], lock_of: &BTreeMap<&str, &str>) -> Cycle {
    let first = (0..parties.len())
        .min_by_key(|&at| parties[at])
        .unwrap_or(0);
    parties[first..]
        .iter()
        .chain(&parties[..first])
        .map(|party| Wait {
            party: (*party).to_owned(),
            lock: lock_of[party].to_owned(),
        })
        .collect()
}

/// Reads the waits ([`Client::waits`]: every wait-for edge under the
/// client's key prefix, on a cluster every master's) and the holders of
/// every lock they name or `known` lists, and builds the graph.
pub async fn read(client: &Client, known: &[Known]) -> redlatch::Result<Waits> {
    let mut holders: BTreeMap<String, Vec<String>> = known.iter().cloned().collect();
    let edges: Vec<Wait> = client
        .waits()
        .await?
        .into_iter()
        .map(|waiting| Wait {
            party: waiting.party,
            lock: waiting.lock,
        })
        .collect();
    for edge in &edges {
        if !holders.contains_key(&edge.lock) {
            let owners = owners_of(client, &edge.lock).await?;
            holders.insert(edge.lock.clone(), owners);
        }
    }
    Ok(Waits::new(edges, &holders))
}

/// The owner fields holding lock `name`; a key that is not a lock hash
/// holds nobody here.
async fn owners_of(client: &Client, name: &str) -> redlatch::Result<Vec<String>> {
    match client.lock(name).status().await {
        Ok(status) => Ok(status.holders.into_iter().map(|h| h.owner).collect()),
        Err(redlatch::Error::WrongType { .. } | redlatch::Error::InvalidName { .. }) => {
            Ok(Vec::new())
        }
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait(party: &str, lock: &str) -> Wait {
        Wait {
            party: party.to_owned(),
            lock: lock.to_owned(),
        }
    }

    #[test]
    fn a_cycle_is_found_once_and_a_stale_edge_is_ignored() {
        let id = "0b7c5d3e-4f7a-4c1e-9a55-2f0d6b3f2a11";
        let holders = BTreeMap::from([
            ("l1".to_owned(), vec![format!("{id}:a")]),
            ("l2".to_owned(), vec![format!("{id}:b")]),
            ("l3".to_owned(), vec![format!("{id}:c")]),
        ]);
        let waits = Waits::new(
            vec![
                wait("n:a", "l2"),
                wait("n:b", "l1"),
                // c holds l3 already: its edge is stale.
                wait("n:c", "l3"),
                wait("n:d", "l3"),
            ],
            &holders,
        );
        assert_eq!(
            waits.cycles,
            vec![vec![wait("n:a", "l2"), wait("n:b", "l1")]]
        );
        assert_eq!(waits.waiting_for("l3"), vec!["n:d"]);
        assert!(waits.cycle_through("l3").is_none());
        assert_eq!(
            cycle_text(&waits.cycles[0]),
            "n:a waits for l2 held by n:b, n:b waits for l1 held by n:a"
        );
    }
}
