//! Running the checker: breadth-first up to a depth bound, so that a
//! counter-example is one of the shortest, and the bound keeps CI short.
//!
//! The default bounds keep `cargo test -p redlatch-protocol-model` near a
//! minute on two cores; `REDLATCH_MODEL_LONG=1` selects the long bounds
//! (`docs/PROTOCOL-MODEL.md` gives both run times).

use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::time::{Duration, Instant};

use stateright::{Checker, Expectation, Model, Path, Property};

use crate::timeline::{Line, Narrated, timeline};

/// The environment variable that selects the long bounds.
pub const LONG_MODE: &str = "REDLATCH_MODEL_LONG";

/// A depth bound for CI and one for the long mode.
#[derive(Clone, Copy, Debug)]
pub struct Bound {
    /// Steps per path in CI.
    pub default: usize,
    /// Steps per path with `REDLATCH_MODEL_LONG` set.
    pub long: usize,
}

impl Bound {
    /// The depth in force.
    pub fn depth(self) -> usize {
        if std::env::var_os(LONG_MODE).is_some_and(|value| value != "0") {
            self.long
        } else {
            self.default
        }
    }
}

/// What one run of the checker found.
#[derive(Debug)]
pub struct Checked<M: Model> {
    /// The model checked.
    pub model: M,
    /// Property name → the path that breaks it (always) or never reaches it (eventually).
    pub discoveries: HashMap<&'static str, Path<M::State, M::Action>>,
    /// States generated.
    pub states: usize,
    /// Distinct states.
    pub unique_states: usize,
    /// The depth reached.
    pub depth: usize,
    /// How long the run took.
    pub elapsed: Duration,
}

impl<M> Checked<M>
where
    M: Narrated,
    M::State: Clone + PartialEq,
    M::Action: Clone + PartialEq,
{
    /// The counter-example to `property` as a timeline, if one was found.
    pub fn counter_example(&self, property: &str) -> Option<Vec<String>> {
        let path = self.discoveries.get(property)?.clone();
        Some(timeline(&self.model, path, property))
    }

    /// One line on the run's size, for the test output.
    pub fn summary(&self) -> String {
        format!(
            "{} states ({} distinct), depth {}, {:.1} s",
            self.states,
            self.unique_states,
            self.depth,
            self.elapsed.as_secs_f64()
        )
    }
}

/// Checks every property of `model` up to `depth` steps on `threads` threads.
pub fn check<M>(model: M, depth: usize, threads: usize) -> Checked<M>
where
    M: Model + Clone + Send + Sync + 'static,
    M::State: Clone + Debug + Hash + PartialEq + Send + Sync + 'static,
    M::Action: Clone + Debug + PartialEq + Send + Sync + 'static,
{
    let start = Instant::now();
    let checker = model
        .clone()
        .checker()
        .threads(threads)
        .target_max_depth(depth)
        .spawn_bfs()
        .join();
    Checked {
        model,
        discoveries: checker.discoveries(),
        states: checker.state_count(),
        unique_states: checker.unique_state_count(),
        depth: checker.max_depth(),
        elapsed: start.elapsed(),
    }
}

/// Looks for a counter-example to one property alone: the search stops at
/// the first (shortest) one instead of also checking the others to the bound.
pub fn find<M>(model: M, property: &'static str, depth: usize) -> Checked<Focus<M>>
where
    M: Model + Clone + Send + Sync + 'static,
    M::State: Clone + Debug + Hash + PartialEq + Send + Sync + 'static,
    M::Action: Clone + Debug + PartialEq + Send + Sync + 'static,
{
    let inner = model.properties().into_iter().find(|p| p.name == property);
    let Some(inner) = inner else {
        panic!("the model has no property named {property:?}");
    };
    let focus = Focus {
        model,
        property,
        expectation: inner.expectation,
        condition: inner.condition,
    };
    // One thread: breadth-first order is then exact, the path the shortest.
    check(focus, depth, 1)
}

/// A model with one of its properties only.
pub struct Focus<M: Model> {
    /// The model.
    pub model: M,
    /// The property kept.
    pub property: &'static str,
    expectation: Expectation,
    condition: fn(&M, &M::State) -> bool,
}

impl<M: Model + Clone> Clone for Focus<M> {
    fn clone(&self) -> Self {
        Focus {
            model: self.model.clone(),
            property: self.property,
            expectation: self.expectation.clone(),
            condition: self.condition,
        }
    }
}

impl<M: Model + Debug> Debug for Focus<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Focus")
            .field("model", &self.model)
            .field("property", &self.property)
            .finish()
    }
}

impl<M: Model> Model for Focus<M> {
    type State = M::State;
    type Action = M::Action;

    fn init_states(&self) -> Vec<Self::State> {
        self.model.init_states()
    }

    fn actions(&self, state: &Self::State, actions: &mut Vec<Self::Action>) {
        self.model.actions(state, actions);
    }

    fn next_state(&self, last: &Self::State, action: Self::Action) -> Option<Self::State> {
        self.model.next_state(last, action)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let condition = |focus: &Focus<M>, state: &M::State| (focus.condition)(&focus.model, state);
        vec![match self.expectation {
            Expectation::Always => Property::always(self.property, condition),
            Expectation::Eventually => Property::eventually(self.property, condition),
            Expectation::Sometimes => Property::sometimes(self.property, condition),
        }]
    }

    fn within_boundary(&self, state: &Self::State) -> bool {
        self.model.within_boundary(state)
    }
}

impl<M: Narrated> Narrated for Focus<M> {
    fn narrate(&self, before: &M::State, action: &M::Action, after: &M::State) -> Vec<Line> {
        self.model.narrate(before, action, after)
    }

    fn verdict(&self, last: &M::State, property: &str) -> Line {
        self.model.verdict(last, property)
    }
}
