//! The fair lock's guards: they renew and re-enter as the reentrant lock's
//! (one hash field per owner); the release wakes the first waiter in line.

use std::sync::Arc;

use crate::base::family::{Boxed, LOCK_RENEWAL, LockFamily, on_connection, reenter_hash_field};
use crate::base::request::Request;
use crate::engine::context::Core;
use crate::engine::hold_kind::HoldKind;
use crate::error::Result;
use crate::fair_lock::keys::FairKeys;
use crate::scripts::released::Released;

/// The guards of one fair lock.
#[derive(Debug)]
pub(crate) struct FairFamily(pub(crate) Arc<FairKeys>);

impl LockFamily for FairFamily {
    fn renewal(&self) -> HoldKind {
        HoldKind::Batched(&LOCK_RENEWAL)
    }

    fn release(&self, core: Arc<Core>, request: Request) -> Boxed<Result<Released>> {
        let keys = self.0.clone();
        on_connection(core, move |mut conn, limit| async move {
            crate::fair_lock::calls::release(&mut conn, &keys, &request, limit).await
        })
    }

    fn reenter(&self, core: Arc<Core>, request: Request) -> Boxed<Result<bool>> {
        reenter_hash_field(core, request)
    }
}
