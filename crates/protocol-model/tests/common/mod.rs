//! What the model's tests share: asserting that properties hold, and that
//! a counter-example is found and printed.

// Each test file uses a part of these helpers.
#![allow(dead_code)]

use std::fmt::Debug;

use redlatch_protocol_model::run::Checked;
use redlatch_protocol_model::timeline::Narrated;

/// Asserts that the checker found no counter-example to any of `properties`.
pub fn assert_hold<M>(checked: &Checked<M>, properties: &[&str])
where
    M: Narrated + Debug,
    M::State: Clone + PartialEq,
    M::Action: Clone + PartialEq,
{
    println!("{}", checked.summary());
    for property in properties {
        if let Some(timeline) = checked.counter_example(property) {
            panic!("BROKEN: {property}\n{}", timeline.join("\n"));
        }
        println!("holds: {property}");
    }
}

/// The counter-example found to `property`, printed; fails when none was found.
pub fn found<M>(checked: &Checked<M>, property: &str) -> String
where
    M: Narrated + Debug,
    M::State: Clone + PartialEq,
    M::Action: Clone + PartialEq,
{
    let timeline = checked.counter_example(property).unwrap_or_else(|| {
        panic!(
            "no counter-example to {property:?} within the bound ({})",
            checked.summary()
        )
    });
    println!("{} ({})", property, checked.summary());
    let text = timeline.join("\n");
    println!("{text}\n");
    text
}
