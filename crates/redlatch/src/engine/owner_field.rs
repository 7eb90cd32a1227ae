//! A hold's owner field, kept as numbers where it can be: an anonymous
//! owner is `<client-id>:#<n>@<task>` (`<task>` a tokio task's id, or
//! `t<k>` for a thread: its deadlock party, `crate::deadlock::party_of`),
//! and a client may hold many thousands of locks, each of which kept that
//! text (about 60 bytes of heap) for its whole life. A hold of the
//! client's own anonymous owner keeps `n` and the tail; the client's prefix
//! is given by whoever writes the text (the client, its watchdog, its
//! watch, its holder record: they all know it), so that no hold keeps a
//! pointer to it. The text is written when a renewal, a release or the
//! holder record sends it, and kept only once a caller asks to see it
//! (`Guard::owner`).

use std::io::Write;
use std::sync::{Arc, OnceLock};

/// `<client-id>:#`: what every anonymous owner of one client starts with.
#[derive(Debug, Default)]
pub(crate) struct OwnerPrefix(String);

/// The prefix of no client: what a hold made without one is written with
/// (its owner is never numbered, so no prefix is ever written).
static NO_PREFIX: OwnerPrefix = OwnerPrefix(String::new());

impl OwnerPrefix {
    /// The prefix of the anonymous owners of the client `id`.
    pub(crate) fn of(id: impl std::fmt::Display) -> Arc<OwnerPrefix> {
        Arc::new(OwnerPrefix(format!("{id}:#")))
    }

    /// The prefix of no client ([`NO_PREFIX`]).
    pub(crate) fn none() -> &'static OwnerPrefix {
        &NO_PREFIX
    }
}

/// One hold's owner field, exactly as sent to Redis.
pub(crate) struct OwnerField {
    /// The text: given (a named owner's field, a permit id, any owner not
    /// of the client's prefix), or written once shown. Boxed (one word).
    /// Unset: the client's anonymous owner `seq` with `tail`.
    text: OnceLock<Box<Arc<str>>>,
    seq: u64,
    tail: Tail,
}

/// What follows an anonymous owner's number, packed in one word: 0 none
/// (`<client-id>:#<n>`), a task id `@<id>` (tokio's ids are below 2^63),
/// or [`THREAD`] and `k` for `@t<k>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tail(u64);

/// The bit of a [`Tail`] that marks a thread's number.
const THREAD: u64 = 1 << 63;

impl Tail {
    /// No tail.
    pub(crate) const NONE: Tail = Tail(0);

    /// The tail of `text` (what follows the number), if it is one this
    /// packs and writes back byte for byte.
    fn parse(text: &str) -> Option<Tail> {
        if text.is_empty() {
            return Some(Tail::NONE);
        }
        let rest = text.strip_prefix('@')?;
        let (digits, thread) = match rest.strip_prefix('t') {
            Some(digits) => (digits, true),
            None => (rest, false),
        };
        let value = canonical_number(digits)?;
        match thread {
            true if value < THREAD => Some(Tail(THREAD | value)),
            false if value > 0 && value < THREAD => Some(Tail(value)),
            _ => None,
        }
    }

    /// The tail of an owner made now (`crate::deadlock::anonymous_suffix`).
    pub(crate) fn of(tail: crate::deadlock::Suffix) -> Tail {
        match tail {
            crate::deadlock::Suffix::Task(id) if id > 0 && id < THREAD => Tail(id),
            crate::deadlock::Suffix::Thread(k) => Tail(THREAD | u64::from(k)),
            crate::deadlock::Suffix::Task(_) => Tail::NONE,
        }
    }
}

impl std::fmt::Display for Tail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            0 => Ok(()),
            value if value & THREAD != 0 => write!(f, "@t{}", value & !THREAD),
            value => write!(f, "@{value}"),
        }
    }
}

/// `<n><tail>` (what follows a client's prefix) as its numbers, when
/// written as the client writes them.
fn numbers_of(numbered: &str) -> Option<(u64, Tail)> {
    let end = numbered.find('@').unwrap_or(numbered.len());
    let seq = canonical_number(&numbered[..end])?;
    let tail = Tail::parse(&numbered[end..])?;
    Some((seq, tail))
}

/// `digits` as a number when written the way a number is written (no sign,
/// no leading zero but `0` itself).
fn canonical_number(digits: &str) -> Option<u64> {
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    digits.parse::<u64>().ok().filter(|_| canonical)
}

impl OwnerField {
    /// The field `owner`, kept as numbers when it is `prefix` followed by
    /// the decimal writing of one and a tail (as the client writes
    /// anonymous owners): written again with `prefix`, it is the same text,
    /// byte for byte.
    pub(crate) fn new(owner: Arc<str>, prefix: Option<&OwnerPrefix>) -> OwnerField {
        let number = prefix.and_then(|prefix| numbers_of(owner.strip_prefix(prefix.0.as_str())?));
        match number {
            Some((seq, tail)) if !prefix.is_some_and(|prefix| prefix.0.is_empty()) => OwnerField {
                text: OnceLock::new(),
                seq,
                tail,
            },
            _ => OwnerField {
                text: OnceLock::from(Box::new(owner)),
                seq: 0,
                tail: Tail::NONE,
            },
        }
    }

    /// Kept as numbers (not yet shown).
    #[cfg(test)]
    fn is_numbered(&self) -> bool {
        self.text.get().is_none()
    }

    /// The text, to send: the kept one, or written now with `prefix` (the
    /// client's, which the hold was made with) and not kept.
    pub(crate) fn text(&self, prefix: &OwnerPrefix) -> Arc<str> {
        match self.text.get() {
            Some(text) => Arc::clone(text),
            None => self.write(prefix),
        }
    }

    /// The text, kept from now on: for a caller that borrows it.
    pub(crate) fn as_str(&self, prefix: &OwnerPrefix) -> &str {
        self.text.get_or_init(|| Box::new(self.write(prefix)))
    }

    /// Whether the field is `other`, byte for byte (nothing kept, nothing
    /// written: a walk over every hold asks this of each).
    pub(crate) fn is(&self, other: &[u8], prefix: &OwnerPrefix) -> bool {
        match self.text.get() {
            Some(text) => text.as_bytes() == other,
            // The numbered form is canonical: `other` is the same text
            // exactly when it reads as the same numbers.
            None => std::str::from_utf8(other)
                .ok()
                .and_then(|other| other.strip_prefix(prefix.0.as_str()))
                .and_then(numbers_of)
                .is_some_and(|numbers| numbers == (self.seq, self.tail)),
        }
    }

    fn write(&self, prefix: &OwnerPrefix) -> Arc<str> {
        let (seq, tail) = (self.seq, self.tail);
        // On the stack first: one allocation, the `Arc`'s. A uuid's prefix
        // (38), a u64 (20 digits at most) and a tail (`@t` and 19 digits)
        // fit in 96 bytes.
        let mut buf = [0u8; 96];
        let mut cursor = std::io::Cursor::new(&mut buf[..]);
        let written = write!(cursor, "{}{seq}{tail}", prefix.0).is_ok();
        let len = usize::try_from(cursor.position()).unwrap_or(0);
        match std::str::from_utf8(&buf[..len]) {
            Ok(text) if written && len < buf.len() => Arc::from(text),
            _ => Arc::from(format!("{}{seq}{tail}", prefix.0)),
        }
    }
}

impl std::fmt::Debug for OwnerField {
    /// The text when kept; else the numbers, after the client's prefix
    /// (which the field does not keep): `…#<n><tail>`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.text.get() {
            Some(text) => std::fmt::Debug::fmt(&***text, f),
            None => write!(f, "\"…#{}{}\"", self.seq, self.tail),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "3f0e6c1a-8a52-4cf1-9e0b-4c1b9d7a2e11";

    #[test]
    fn an_anonymous_owner_is_kept_as_its_number_and_written_the_same() {
        let prefix = OwnerPrefix::of(ID);
        let tails = ["", "@1", "@42", "@9223372036854775807", "@t0", "@t17"];
        for (seq, tail) in [0, 7, 10, 123_456, u64::MAX]
            .into_iter()
            .flat_map(|seq| tails.map(|tail| (seq, tail)))
        {
            let text: Arc<str> = Arc::from(format!("{ID}:#{seq}{tail}"));
            let field = OwnerField::new(text.clone(), Some(&prefix));
            assert!(field.is_numbered(), "{text} kept as text");
            assert_eq!(field.text(&prefix), text);
            assert!(field.is(text.as_bytes(), &prefix));
            assert!(!field.is(format!("{ID}:#{seq}{tail}0").as_bytes(), &prefix));
            assert!(field.is_numbered(), "sending keeps nothing");
            assert_eq!(field.as_str(&prefix), &*text);
            assert!(field.is(text.as_bytes(), &prefix));
        }
    }

    #[test]
    fn any_other_owner_is_kept_as_given() {
        let prefix = OwnerPrefix::of(ID);
        let others = [
            format!("{ID}:worker"),
            format!("{ID}:#007"),
            format!("{ID}:#"),
            format!("{ID}:#1x"),
            format!("{ID}:#99999999999999999999999"),
            format!("{ID}:#1@"),
            format!("{ID}:#1@0"),
            format!("{ID}:#1@07"),
            format!("{ID}:#1@t"),
            format!("{ID}:#1@t07"),
            format!("{ID}:#1@9223372036854775808"),
            format!("{ID}:#1@2@3"),
            format!("{ID}:#1x@2"),
            "another-client:#1".to_owned(),
            "permit-id".to_owned(),
        ];
        for other in others {
            let text: Arc<str> = Arc::from(other);
            let field = OwnerField::new(text.clone(), Some(&prefix));
            assert!(!field.is_numbered(), "{text}");
            assert!(Arc::ptr_eq(&field.text(&prefix), &text));
            assert!(field.is(text.as_bytes(), &prefix));
            assert_eq!(field.as_str(&prefix), &*text);
        }
        let field = OwnerField::new(Arc::from(format!("{ID}:#1")), None);
        assert!(!field.is_numbered(), "no prefix: as given");
        let field = OwnerField::new(Arc::from("7"), Some(OwnerPrefix::none()));
        assert!(!field.is_numbered(), "the empty prefix: as given");
    }

    /// Every held lock has one: the text it replaces cost 16 bytes here
    /// and about 60 of heap; 40 while it kept the client's prefix.
    #[test]
    fn an_owner_field_takes_little_room() {
        assert!(std::mem::size_of::<OwnerField>() <= 32);
    }
}
