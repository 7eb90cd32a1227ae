//! The read-write lock's guards: a read hold renews with its own timeout
//! key and re-enters through the read script; the writer's hold is a lock
//! hash field like the reentrant lock's. Both releases wake every waiter.

use std::sync::Arc;

use crate::base::family::{Boxed, LOCK_RENEWAL, LockFamily, on_connection, reenter_hash_field};
use crate::base::request::Request;
use crate::engine::context::Core;
use crate::engine::hold_kind::{BatchRenewal, HoldKind};
use crate::error::Result;
use crate::rw_lock::keys::{RwKeys, read_timeout_prefix};
use crate::scripts::released::Released;

/// Renews read holds (`rw_read_renew.lua`), which also extends their
/// per-hold timeout keys: the lock key, the read field, the lease and the
/// timeout keys' prefix, per hold.
pub(crate) static READ_RENEWAL: BatchRenewal = BatchRenewal {
    name: "read",
    script: &crate::rw_lock::scripts::RW_READ_RENEW,
    add_hold: |invocation, key, owner, lease_ms| {
        invocation
            .key(key)
            .arg(owner)
            .arg(lease_ms)
            .arg(read_timeout_prefix(key, owner));
    },
    is_lock: true,
    native: None,
    string_value: false,
    keeps_lease: false,
};

/// The read holds of one read-write lock.
#[derive(Debug)]
pub(crate) struct ReadFamily(pub(crate) Arc<RwKeys>);

/// The write holds of one read-write lock.
#[derive(Debug)]
pub(crate) struct WriteFamily(pub(crate) Arc<RwKeys>);

impl LockFamily for ReadFamily {
    fn renewal(&self) -> HoldKind {
        HoldKind::Batched(&READ_RENEWAL)
    }

    fn release(&self, core: Arc<Core>, request: Request) -> Boxed<Result<Released>> {
        let keys = self.0.clone();
        on_connection(core, move |mut conn, limit| async move {
            crate::rw_lock::calls::read_release(&mut conn, &keys, &request, limit).await
        })
    }

    fn reenter(&self, core: Arc<Core>, request: Request) -> Boxed<Result<bool>> {
        let keys = self.0.clone();
        on_connection(core, move |mut conn, limit| async move {
            crate::rw_lock::calls::read_reenter(&mut conn, &keys, &request, limit).await
        })
    }
}

impl LockFamily for WriteFamily {
    fn renewal(&self) -> HoldKind {
        HoldKind::Batched(&LOCK_RENEWAL)
    }

    fn release(&self, core: Arc<Core>, request: Request) -> Boxed<Result<Released>> {
        let keys = self.0.clone();
        on_connection(core, move |mut conn, limit| async move {
            crate::rw_lock::calls::write_release(&mut conn, &keys, &request, limit).await
        })
    }

    fn reenter(&self, core: Arc<Core>, request: Request) -> Boxed<Result<bool>> {
        reenter_hash_field(core, request)
    }
}
