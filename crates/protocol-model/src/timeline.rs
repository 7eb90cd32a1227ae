//! Counter-examples as timelines, one line per event, in the safety lab's
//! words (`crates/cli/src/check/checker.rs`, `describe`): the same verbs
//! for the same events, with the model's ticks where the lab has seconds.

use std::fmt;

use stateright::{Model, Path};

use crate::server::Tick;

/// One line of a timeline: when, who (`w1`, `w2`, …, `redis`, `lab`), what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    /// The server's clock when it happened.
    pub at: Tick,
    /// Who acted.
    pub who: String,
    /// What happened, in the lab's words.
    pub text: String,
}

impl Line {
    /// A line for worker `client` (0-based; printed `w1`, `w2`, …).
    pub fn worker(at: Tick, client: u8, text: impl Into<String>) -> Line {
        Line {
            at,
            who: format!("w{}", client + 1),
            text: text.into(),
        }
    }

    /// A line for someone else: `redis`, `lab`, a node.
    pub fn other(at: Tick, who: &str, text: impl Into<String>) -> Line {
        Line {
            at,
            who: who.to_owned(),
            text: text.into(),
        }
    }
}

impl fmt::Display for Line {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "  t={:<3}{:<8}{}", self.at, self.who, self.text)
    }
}

/// A model whose steps can be told.
pub trait Narrated: Model {
    /// The lines for `action` taken in `before`, leading to `after`; steps
    /// nobody would see (a tick of the clock) may say nothing.
    fn narrate(
        &self,
        before: &Self::State,
        action: &Self::Action,
        after: &Self::State,
    ) -> Vec<Line>;

    /// The closing line: what is wrong in the last state.
    fn verdict(&self, last: &Self::State, property: &str) -> Line;
}

/// The timeline of a path found by the checker, ending with what it breaks.
pub fn timeline<M>(model: &M, path: Path<M::State, M::Action>, property: &str) -> Vec<String>
where
    M: Narrated,
    M::State: Clone,
    M::Action: Clone,
{
    let steps = path.into_vec();
    let mut lines = Vec::new();
    for pair in steps.windows(2) {
        let (before, action) = &pair[0];
        let (after, _) = &pair[1];
        if let Some(action) = action {
            lines.extend(model.narrate(before, action, after));
        }
    }
    if let Some((last, _)) = steps.last() {
        lines.push(model.verdict(last, property));
    }
    lines.iter().map(Line::to_string).collect()
}
