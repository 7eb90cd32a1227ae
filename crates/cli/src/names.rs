//! Names and owners as people see them, in text output and messages. Its
//! own file, below `output` and `locks`, which both print names.

/// Longest name or owner shown whole in human output and messages.
const SHOWN_MAX: usize = 200;

/// A name or owner as people see it: control characters escaped (a newline
/// in a name must not print a line of its own, such as a fake `held no`),
/// and a name longer than [`SHOWN_MAX`] characters cut in the middle with its
/// length (a 120 KB name must not make a 120 KB line). JSON output keeps the
/// name exact.
pub fn shown(text: &str) -> String {
    let escaped: String = text
        .chars()
        .flat_map(|c| {
            let escape = c.is_control();
            let (plain, escaped) = if escape {
                (None, Some(c.escape_default()))
            } else {
                (Some(c), None)
            };
            plain.into_iter().chain(escaped.into_iter().flatten())
        })
        .collect();
    let length = escaped.chars().count();
    if length <= SHOWN_MAX {
        return escaped;
    }
    let keep = SHOWN_MAX / 2;
    let head: String = escaped.chars().take(keep).collect();
    let tail: String = escaped.chars().skip(length - keep).collect();
    format!("{head}…{tail} ({} bytes)", text.len())
}

#[cfg(test)]
mod tests {
    use super::{SHOWN_MAX, shown};

    #[test]
    fn names_are_shown_on_one_line_and_shortened() {
        assert_eq!(shown("orders"), "orders");
        assert_eq!(
            shown("a\nheld     no\u{1b}[2J"),
            "a\\nheld     no\\u{1b}[2J"
        );
        let long = "x".repeat(120_000);
        let short = shown(&long);
        assert!(short.chars().count() < SHOWN_MAX + 20, "{short}");
        assert!(short.ends_with("(120000 bytes)"), "{short}");
    }
}
