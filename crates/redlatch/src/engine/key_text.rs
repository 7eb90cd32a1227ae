//! A hold's key, kept inline when it is short: a client may hold many
//! thousands of locks, and a key of its own in an `Arc<str>` costs a
//! pointer of 16 bytes plus an allocation of 16 bytes of counts and the
//! text rounded up to 8 (32 bytes for a key of 9 to 16 bytes). Most lock
//! keys are short (`order:7`, `bench:held:99999`): up to [`INLINE`] bytes
//! live in the hold itself, in 24 bytes. A longer key is shared as given.

use std::sync::Arc;

/// The longest key kept inline.
pub(crate) const INLINE: usize = 22;

/// A key's text: inline when short, else shared.
#[derive(Clone)]
pub(crate) enum KeyText {
    Inline { len: u8, bytes: [u8; INLINE] },
    Shared(Arc<str>),
}

impl KeyText {
    /// The key `key`: copied inline when it fits, kept shared otherwise.
    pub(crate) fn new(key: Arc<str>) -> KeyText {
        match u8::try_from(key.len()) {
            Ok(len) if key.len() <= INLINE => {
                let mut bytes = [0; INLINE];
                bytes[..key.len()].copy_from_slice(key.as_bytes());
                KeyText::Inline { len, bytes }
            }
            _ => KeyText::Shared(key),
        }
    }

    /// The text.
    pub(crate) fn as_str(&self) -> &str {
        match self {
            // Copied from a `str` whole: always UTF-8, the check never fails.
            KeyText::Inline { len, bytes } => {
                std::str::from_utf8(bytes.get(..usize::from(*len)).unwrap_or_default())
                    .unwrap_or_default()
            }
            KeyText::Shared(key) => key,
        }
    }

    /// The text as a shared string, for a call that keeps it: the shared
    /// one, or a copy of the inline one.
    pub(crate) fn to_arc(&self) -> Arc<str> {
        match self {
            KeyText::Inline { .. } => Arc::from(self.as_str()),
            KeyText::Shared(key) => key.clone(),
        }
    }
}

impl std::ops::Deref for KeyText {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl std::fmt::Display for KeyText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Debug for KeyText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_reads_back_the_same_inline_or_shared() {
        let keys = [
            String::new(),
            "order:7".to_owned(),
            "é".repeat(INLINE / 2),
            "x".repeat(INLINE),
            "x".repeat(INLINE + 1),
            "ключ:".repeat(40),
        ];
        for key in keys {
            let shared: Arc<str> = Arc::from(key.as_str());
            let text = KeyText::new(shared.clone());
            assert_eq!(text.as_str(), key);
            assert_eq!(&*text.to_arc(), key);
            assert_eq!(
                matches!(text, KeyText::Inline { .. }),
                key.len() <= INLINE,
                "{key}"
            );
            if let KeyText::Shared(kept) = &text {
                assert!(
                    Arc::ptr_eq(kept, &shared),
                    "a long key is shared, not copied"
                );
            }
        }
    }

    /// Every held lock has one: an `Arc<str>` took 16 here and 32 of heap
    /// for a key of 9 to 16 bytes.
    #[test]
    fn a_key_takes_24_bytes() {
        assert_eq!(std::mem::size_of::<KeyText>(), 24);
    }
}
