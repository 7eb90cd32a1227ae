//! The CLI README against `--help`: every subcommand, every long option
//! and every recipe and fault of `check` that `--help` lists is in the
//! README, with the right counts (and the top README counts a full
//! `check` run's cells right). Everything is read from `--help` when the
//! test runs, so options added later are held to the README too.

use std::process::Command;

use crate::harness::BIN;

fn readme() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md");
    std::fs::read_to_string(path).expect("crates/cli/README.md")
}

/// `redlatch ARGS --help`, as printed.
fn help(args: &[&str]) -> String {
    let output = Command::new(BIN)
        .args(args)
        .arg("--help")
        .env_remove("REDIS_URL")
        .output()
        .expect("run redlatch --help");
    assert!(output.status.success(), "{args:?} --help: {output:?}");
    String::from_utf8(output.stdout).expect("UTF-8 help")
}

/// The subcommands `redlatch --help` lists (not `help` itself).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|line| *line != "Commands:")
        .skip(1)
        .take_while(|line| !line.trim().is_empty())
        // A name sits at two spaces; a wrapped description deeper.
        .filter(|line| line.starts_with("  ") && !line.starts_with("   "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

/// The long options a help text lists (`--help` and `--version` aside).
fn long_options(help: &str) -> Vec<String> {
    let mut options = Vec::new();
    for line in help.lines() {
        let text = line.trim_start();
        // Options sit at 2 or 6 spaces; their descriptions at 10.
        if line.len() - text.len() >= 10 {
            continue;
        }
        let text = match text.strip_prefix('-') {
            Some(rest) if rest.chars().nth(1) == Some(',') => rest[2..].trim_start(),
            _ => text,
        };
        let Some(name) = text.strip_prefix("--") else {
            continue;
        };
        let name: String = name
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        if !name.is_empty() && name != "help" && name != "version" && !options.contains(&name) {
            options.push(name);
        }
    }
    options
}

/// The values `--help` lists for `option` ("Possible values:").
fn possible_values(help: &str, option: &str) -> Vec<String> {
    let mut lines = help
        .lines()
        .skip_while(|line| !line.trim_start().starts_with(&format!("--{option} ")));
    assert!(lines.next().is_some(), "no --{option} in {help}");
    lines
        .skip_while(|line| line.trim() != "Possible values:")
        .skip(1)
        .take_while(|line| !line.trim().is_empty())
        .filter_map(|line| line.trim_start().strip_prefix("- "))
        .filter_map(|value| value.split(':').next())
        .map(str::to_owned)
        .collect()
}

/// Whether `text` has `--option` as a whole word.
fn mentions_option(text: &str, option: &str) -> bool {
    let needle = format!("--{option}");
    text.match_indices(&needle).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + needle.len()..].chars().next();
        !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
            && !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
    })
}

/// The README's synopsis: the first code block after `## Usage`.
fn usage_block(readme: &str) -> String {
    let usage = &readme[readme.find("## Usage").expect("a Usage section")..];
    usage
        .split("```")
        .nth(1)
        .expect("a code block under Usage")
        .to_owned()
}

/// The number written right after `label` in the README, as in `Recipes (9)`.
fn count_after(readme: &str, label: &str) -> usize {
    let at = readme
        .find(label)
        .unwrap_or_else(|| panic!("the README says no {label:?}"));
    readme[at + label.len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap_or_else(|_| panic!("no number after {label:?}"))
}

#[test]
fn every_subcommand_and_long_option_in_help_is_in_the_readme() {
    let readme = readme();
    let usage = usage_block(&readme);
    let top = help(&[]);
    let commands = subcommands(&top);
    assert!(
        commands.len() >= 6,
        "found only {commands:?} in --help: {top}"
    );
    let mut missing = Vec::new();
    let mut options = long_options(&top);
    for command in &commands {
        // The synopsis gives each subcommand a line of its own.
        if !usage
            .lines()
            .any(|line| line.split_whitespace().next() == Some(command.as_str()))
        {
            missing.push(format!("subcommand {command} in the Usage block"));
        }
        for option in long_options(&help(&[command])) {
            if !options.contains(&option) {
                options.push(option);
            }
        }
    }
    for option in &options {
        if !mentions_option(&readme, option) {
            missing.push(format!("--{option}"));
        }
    }
    assert!(
        missing.is_empty(),
        "in --help but not in crates/cli/README.md: {missing:?}"
    );
    // And the synopsis names no option that does not exist.
    let stale: Vec<&str> = usage
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter_map(|word| word.strip_prefix("--"))
        .filter(|option| !option.is_empty() && !options.iter().any(|known| known == option))
        .collect();
    assert!(
        stale.is_empty(),
        "the README's Usage block names options --help does not know: {stale:?}"
    );
}

#[test]
fn the_readme_names_every_recipe_and_fault_of_check_with_the_right_counts() {
    let readme = readme();
    let check = help(&["check"]);
    let recipes = possible_values(&check, "recipe");
    let faults = possible_values(&check, "fault");
    assert!(recipes.len() >= 5 && faults.len() >= 5, "{check}");
    let missing: Vec<&String> = recipes
        .iter()
        .chain(&faults)
        .filter(|name| !readme.contains(&format!("`{name}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "`check` has these, the README does not name them: {missing:?}"
    );
    assert_eq!(
        count_after(&readme, "Recipes ("),
        recipes.len(),
        "recipes: {recipes:?}"
    );
    assert_eq!(
        count_after(&readme, "Faults ("),
        faults.len(),
        "faults: {faults:?}"
    );
    // A full run is every recipe under every fault: "R × F = N cells".
    let cells = recipes.len() * faults.len();
    let claim = format!("{} × {} = {cells} cells", recipes.len(), faults.len());
    assert!(
        readme.contains(&claim),
        "the README must say a full run is {claim:?}"
    );
    // And no README counts them otherwise where it speaks of every recipe
    // under every fault.
    let top = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");
    let top = std::fs::read_to_string(top).expect("README.md");
    for (name, text) in [("crates/cli/README.md", &readme), ("README.md", &top)] {
        for line in text
            .lines()
            .filter(|line| line.contains("every recipe") && line.contains("every fault"))
        {
            for (at, _) in line.match_indices(" cells") {
                let digits: String = line[..at]
                    .chars()
                    .rev()
                    .take_while(char::is_ascii_digit)
                    .collect();
                let number: String = digits.chars().rev().collect();
                if let Ok(number) = number.parse::<usize>() {
                    assert_eq!(
                        number, cells,
                        "{name} counts {number} cells where a full run has {claim:?}: {line}"
                    );
                }
            }
        }
    }
}
