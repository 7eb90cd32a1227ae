//! Whether a run kept what its recipe promises under its fault.

use serde::Serialize;

use super::checker::{Findings, Violation};
use super::recipes::info::Promise;

/// The verdict on one cell of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// No violation.
    Ok,
    /// Violations, none of them promised against: the recipe fails as documented.
    Expected,
    /// A violation the recipe promises against: a bug.
    Broken,
    /// The fault means nothing for this recipe (e.g. crash-between with one command).
    NotApplicable,
    /// The fault cannot be injected on this machine (e.g. no libfaketime).
    Unavailable,
    /// The run could not take place (a server or worker did not start).
    Error,
}

impl Status {
    /// The word shown in the table.
    pub fn word(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Expected => "expected",
            Status::Broken => "BROKEN",
            Status::NotApplicable => "n/a",
            Status::Unavailable => "unavailable",
            Status::Error => "error",
        }
    }
}

/// Whether `promise` forbids `violation`.
pub fn promised_against(promise: Promise, violation: Violation) -> bool {
    match violation {
        Violation::Overlap => promise.exclusive,
        Violation::LostUpdate => promise.no_lost_updates,
        Violation::StaleWrite => promise.no_stale_writes,
        Violation::Stuck => promise.live,
    }
}

/// The verdict on a run's findings.
pub fn judge(promise: Promise, findings: &Findings) -> Status {
    let violations = findings.violations();
    if violations.is_empty() {
        Status::Ok
    } else if violations
        .iter()
        .any(|&violation| promised_against(promise, violation))
    {
        Status::Broken
    } else {
        Status::Expected
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::checker::CounterExample;

    fn seen(violations: &[Violation]) -> Findings {
        Findings {
            counter_examples: violations
                .iter()
                .map(|&violation| CounterExample {
                    violation,
                    timeline: Vec::new(),
                    caption: String::new(),
                    picture: None,
                })
                .collect(),
            ..Findings::default()
        }
    }

    #[test]
    fn only_a_promised_violation_is_broken() {
        let live_only = Promise::LIVE;
        assert_eq!(judge(live_only, &seen(&[])), Status::Ok);
        assert_eq!(
            judge(live_only, &seen(&[Violation::Overlap])),
            Status::Expected
        );
        assert_eq!(judge(live_only, &seen(&[Violation::Stuck])), Status::Broken);
        assert_eq!(
            judge(Promise::EVERYTHING, &seen(&[Violation::LostUpdate])),
            Status::Broken
        );
        assert_eq!(
            judge(Promise::NOTHING, &seen(&[Violation::Stuck])),
            Status::Expected
        );
    }
}
