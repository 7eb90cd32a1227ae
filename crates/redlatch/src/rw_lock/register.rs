//! A read-write hold made a guard: registered with the watchdog under its
//! side's family, and a write hold's downgrade, which registers a read hold.

use std::sync::Arc;

use crate::base::family::LockFamily;
use crate::base::guard::Guard;
use crate::engine::acquire::{Terms, lease_choice};
use crate::engine::attempt::attempt;
use crate::engine::context::Core;
use crate::engine::hold::LostReason;
use crate::error::{Error, Result};
use crate::rw_lock::attempt::RwCall;
use crate::rw_lock::calls::{RwReply, Side};
use crate::rw_lock::family::{ReadFamily, WriteFamily};
use crate::rw_lock::keys::RwKeys;
use crate::scripts::acquired::Acquired;

/// Registers the hold `call` took with the watchdog; returns its guard.
pub(crate) fn register(
    core: &Arc<Core>,
    call: &RwCall,
    terms: &Terms,
    acquired: Acquired,
) -> Guard {
    let family: Arc<dyn LockFamily> = match call.side {
        Side::Read => Arc::new(ReadFamily(call.keys.clone())),
        Side::Write => Arc::new(WriteFamily(call.keys.clone())),
    };
    let request = call.request();
    Guard::register(core, request.keys, family, request.owner, terms, acquired)
}

/// Takes a read hold for the owner of the write guard `writer` (allowed
/// while it writes), then releases the write hold: a downgrade.
pub(crate) async fn downgrade(writer: Guard) -> Result<Guard> {
    let hold = writer.hold().clone();
    // The write hold's keys, as its lock's were made (same key, name, counter).
    let keys = Arc::new(RwKeys::of_lock(&writer.keys()));
    let written = hold.owner.as_str(writer.core().owner_prefix());
    let reader = written
        .strip_suffix(":write")
        .map(Arc::<str>::from)
        .ok_or_else(|| Error::Protocol {
            op: "downgrade",
            detail: format!("write field without ':write': {written}"),
        })?;
    let core = writer.core().clone();
    let (lease_ms, renewed) = lease_choice(&core, None)?;
    let terms = Terms {
        owner: reader,
        named: hold.named_owner,
        lease_ms,
        renewed,
    };
    let call = RwCall {
        keys,
        side: Side::Read,
        reader: terms.owner.clone(),
        named: terms.named,
        lease_ms: terms.lease_ms,
        claim_ms: 0,
    };
    match attempt(&core, call.clone()).await? {
        RwReply::Acquired(acquired) => {
            let reading = register(&core, &call, &terms, acquired);
            // Should the write hold be gone already, dropping `reading` gives the read back.
            writer.release().await?;
            Ok(reading)
        }
        RwReply::Blocked { .. } => {
            // Only a writer that lost its lock is refused a read.
            hold.mark_lost(LostReason::Gone);
            Err(Error::NotHeld {
                name: writer.name().to_owned(),
            })
        }
    }
}
