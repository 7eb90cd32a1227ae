//! Random settings files: the parser accepts what it can validate and
//! refuses the rest with a typed error naming the file; never a panic.

use proptest::prelude::*;
use redlatch::{Error, Settings};

use super::budget;

const FIELDS: [(&str, &str); 11] = [
    ("lock", "default_lease"),
    ("lock", "key_prefix"),
    ("lock", "wait_timeout"),
    ("lock", "handoff_grace"),
    ("retry", "attempts"),
    ("retry", "base_delay"),
    ("retry", "max_delay"),
    ("connection", "connect_timeout"),
    ("connection", "response_timeout"),
    ("connection", "nonsense"),
    ("elsewhere", "default_lease"),
];

/// A TOML value, well- or ill-suited to any of the fields.
fn values() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("\"10s\"".to_owned()),
        Just("\"1ms\"".to_owned()),
        Just("\"0s\"".to_owned()),
        Just("\"-1s\"".to_owned()),
        Just("\"31days\"".to_owned()),
        Just("\"1h 30m\"".to_owned()),
        Just("\"\"".to_owned()),
        Just("\"shop:\"".to_owned()),
        Just("true".to_owned()),
        Just("[1, 2]".to_owned()),
        Just("{ a = 1 }".to_owned()),
        any::<i64>().prop_map(|number| number.to_string()),
        any::<f64>().prop_map(|number| format!("{number:?}")),
        "\"[0-9]{1,25}(ns|us|ms|s|m|h|d|y|)\"",
        any::<String>().prop_map(|text| format!("{text:?}")),
    ]
}

/// A file: some fields in some sections, or any text at all.
fn files() -> impl Strategy<Value = String> {
    let structured = prop::collection::vec((0..FIELDS.len(), values()), 0..8).prop_map(|fields| {
        let mut text = String::new();
        for (index, value) in fields {
            let (section, field) = FIELDS[index];
            text.push_str(&format!("[{section}]\n{field} = {value}\n"));
        }
        text
    });
    prop_oneof![4 => structured, 1 => any::<String>()]
}

#[test]
fn random_settings_files_parse_or_fail_with_a_typed_error_naming_the_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("redlatch.toml");
    let mut runner = budget::runner(512);
    let outcome = runner.run(&files(), |text| {
        std::fs::write(&path, &text).expect("write the file");
        match Settings::load(&path) {
            Ok(settings) => prop_assert!(settings.validate().is_ok(), "{text:?}"),
            Err(Error::InvalidConfig(message)) => {
                prop_assert!(message.contains("redlatch.toml"), "{message}")
            }
            Err(Error::InvalidDuration { .. }) => {}
            Err(other) => prop_assert!(false, "untyped failure for {text:?}: {other}"),
        }
        Ok(())
    });
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
}
