//! Where a client's holder record lives and how its fields are named
//! (docs/REDIS-DATA.md, "Holder records"), and what an owner field is:
//! key layout, below the engine that writes the record and the status that
//! reads it.

/// The record's key for the client whose id is `client_id`.
#[cfg(feature = "holder-records")]
pub(crate) fn record_key(prefix: &str, client_id: &str) -> String {
    format!("{prefix}redlatch_holder:{{{client_id}}}")
}

/// The record's field for one hold: `h:`, then the owner without the
/// client id the record's key already carries, its length first so that no
/// two (owner, key) pairs share a field, then the lock's key. Short, as it
/// is kept once per long hold.
#[cfg(feature = "holder-records")]
pub(crate) fn hold_field(key: &str, owner: &str) -> String {
    let own = if looks_like_owner(owner) {
        &owner[37..]
    } else {
        owner
    };
    format!("h:{}:{own}{key}", own.len())
}

/// The client id an owner field starts with, where it has one.
#[cfg(feature = "holder-records")]
pub(crate) fn client_id(owner: &str) -> Option<&str> {
    looks_like_owner(owner).then(|| &owner[..36])
}

/// True when a hash field looks like a lock owner: `<uuid>:<owner>`, as
/// redlatch and Redisson write them.
pub(crate) fn looks_like_owner(field: &str) -> bool {
    field.len() > 37 && field.as_bytes()[36] == b':' && uuid::Uuid::try_parse(&field[..36]).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_fields_are_recognised() {
        assert!(looks_like_owner("3f0e6c1a-8a52-4cf1-9e0b-4c1b9d7a2e11:57"));
        assert!(looks_like_owner("3f0e6c1a-8a52-4cf1-9e0b-4c1b9d7a2e11:#3"));
        assert!(!looks_like_owner("3f0e6c1a-8a52-4cf1-9e0b-4c1b9d7a2e11:"));
        assert!(!looks_like_owner("name"));
        assert!(!looks_like_owner("not-a-uuid-at-all-but-36-chars-long!:1"));
    }

    #[test]
    #[cfg(feature = "holder-records")]
    fn hold_fields_never_collide() {
        assert_ne!(hold_field("ab", "c"), hold_field("b", "ca"));
    }
}
