//! The shared resource the holders write: a counter each critical section
//! reads and writes `read + 1`, as in the safety lab. Fenced, it remembers
//! the highest token it accepted and refuses lower ones in the same atomic
//! step as the write.

/// What the store answered a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Written {
    /// Accepted, and the store held what the writer read.
    Accepted,
    /// Accepted over a value the writer did not read: an update is lost.
    LostUpdate {
        /// What the store held.
        found: i8,
    },
    /// Refused: the token is below one the store accepted.
    Refused,
}

/// The store's state and what the properties watch.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Store {
    /// The counter.
    pub value: i8,
    /// The highest fencing token accepted.
    pub highest_token: u32,
    /// The latest fresh acquisition whose holder wrote (the model's own count).
    pub latest_grant: u8,
    /// An accepted write overwrote a value its writer had not read.
    pub lost_update: bool,
    /// A write was accepted from a holder whose lock another took since.
    pub stale_accepted: bool,
    /// A write of an older acquisition was accepted after one of a newer.
    pub older_accepted: bool,
}

impl Store {
    /// A write of `read + 1` by the holder of fresh acquisition `grant`
    /// with `token`, when `newest_grant` acquisitions happened so far;
    /// `fenced` stores refuse tokens below the highest.
    pub fn write(
        &mut self,
        read: i8,
        token: u32,
        grant: u8,
        newest_grant: u8,
        fenced: bool,
    ) -> Written {
        if fenced && token < self.highest_token {
            return Written::Refused;
        }
        let found = self.value;
        if grant < self.latest_grant {
            self.older_accepted = true;
        }
        if grant < newest_grant {
            self.stale_accepted = true;
        }
        self.latest_grant = self.latest_grant.max(grant);
        self.highest_token = self.highest_token.max(token);
        self.value = read + 1;
        if found == read {
            Written::Accepted
        } else {
            self.lost_update = true;
            Written::LostUpdate { found }
        }
    }

    /// The store's words for a write, as the lab prints them.
    pub fn describe(read: i8, token: u32, written: Written) -> String {
        let new = read + 1;
        match written {
            Written::Accepted => format!("wrote {new}"),
            Written::LostUpdate { found } => format!(
                "wrote {new} (read {read}, but the store held {found}): the update that made {found} is lost"
            ),
            Written::Refused => {
                format!("write of {new} REJECTED: token {token} is below one the store accepted")
            }
        }
    }
}
