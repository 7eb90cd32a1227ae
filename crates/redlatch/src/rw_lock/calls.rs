//! The read-write lock's scripts: read or write acquire (a writer may claim
//! its place), release either side, re-enter a read, withdraw a claim.

use std::time::Duration;

use crate::lease_clock::LeaseInstant;

use crate::base::request::Request;
use crate::error::{Error, Result};
use crate::rw_lock::keys::{RwKeys, read_timeout_prefix, write_field};
use crate::scripts::acquired::{Acquired, unexpected};
use crate::scripts::released::{Released, released};
use crate::transport::Connection;

/// Which side of the lock an acquire asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    Read,
    Write,
}

/// What one acquire attempt found.
#[derive(Debug, Clone, Copy)]
pub(crate) enum RwReply {
    Acquired(Acquired),
    /// Blocked: worth trying again after `wait_ms` (-1: the holder has no expiry).
    Blocked {
        wait_ms: i64,
    },
}

/// One call of the read or write acquire script.
pub(crate) struct Acquire<'a> {
    pub(crate) keys: &'a RwKeys,
    pub(crate) side: Side,
    /// The owner's read field, `<client-id>:<owner>`; the write field adds `:write`.
    pub(crate) reader: &'a str,
    pub(crate) lease_ms: u64,
    /// The writer's claim lease; 0 claims nothing.
    pub(crate) claim_ms: u64,
}

impl Acquire<'_> {
    /// Runs the script once; `reenter_only` never takes a first hold.
    pub(crate) async fn run(
        &self,
        conn: &mut Connection,
        sent_at: LeaseInstant,
        reenter_only: bool,
        limit: Duration,
    ) -> Result<RwReply> {
        let reenter_flag = if reenter_only { "1" } else { "0" };
        let call = match self.side {
            Side::Read => {
                let mut call = crate::rw_lock::scripts::RW_READ_ACQUIRE.call(conn);
                call.key(&self.keys.key)
                    .key(&self.keys.token)
                    .key(&self.keys.writers)
                    .arg(self.lease_ms)
                    .arg(self.reader)
                    .arg(write_field(self.reader))
                    .arg(read_timeout_prefix(&self.keys.key, self.reader))
                    .arg(reenter_flag);
                call
            }
            Side::Write => {
                let mut call = crate::rw_lock::scripts::RW_WRITE_ACQUIRE.call(conn);
                call.key(&self.keys.key)
                    .key(&self.keys.token)
                    .key(&self.keys.writers)
                    .arg(self.lease_ms)
                    .arg(write_field(self.reader))
                    .arg(self.claim_ms)
                    .arg(reenter_flag)
                    .arg(self.reader);
                call
            }
        };
        let reply: Vec<i64> = call.run(conn, "read-write acquire", limit).await?;
        if let Some(acquired) = Acquired::read(&reply, sent_at) {
            return Ok(RwReply::Acquired(acquired));
        }
        match reply.as_slice() {
            [0, wait_ms] => Ok(RwReply::Blocked { wait_ms: *wait_ms }),
            [-3, _] => Err(Error::NotHeld {
                name: self.keys.key.clone(),
            }),
            [-4, _] => Err(Error::WouldDeadlock {
                name: self.keys.key.clone(),
                reason: "this owner reads the lock and asked to write: release the read first (no upgrade)",
            }),
            other => Err(unexpected("read-write acquire", &self.keys.key, other)),
        }
    }
}

/// Withdraws a waiting writer's claim. One round trip, at most `limit`.
pub(crate) async fn writer_leave(
    conn: &mut Connection,
    keys: &RwKeys,
    field: &str,
    limit: Duration,
) -> Result<()> {
    let mut call = crate::rw_lock::scripts::RW_WRITER_LEAVE.call(conn);
    call.key(&keys.writers)
        .arg(&keys.channel)
        .arg(field)
        .arg(conn.publish_command());
    call.run::<i64>(conn, "writer leave", limit).await.map(drop)
}

/// Drops one read hold (`request.owner` is the read field). One round trip,
/// at most `limit`.
pub(crate) async fn read_release(
    conn: &mut Connection,
    keys: &RwKeys,
    request: &Request,
    limit: Duration,
) -> Result<Released> {
    let mut call = crate::rw_lock::scripts::RW_READ_RELEASE.call(conn);
    call.key(&keys.key)
        .arg(&keys.channel)
        .arg(&*request.owner)
        .arg(read_timeout_prefix(&keys.key, &request.owner))
        .arg(&keys.timeout_base)
        .arg(conn.publish_command());
    let reply: Vec<i64> = call.run(conn, "release", limit).await?;
    released(&request.keys.key, &reply)
}

/// Drops one write hold (`request.owner` is the write field). One round
/// trip, at most `limit`.
pub(crate) async fn write_release(
    conn: &mut Connection,
    keys: &RwKeys,
    request: &Request,
    limit: Duration,
) -> Result<Released> {
    let mut call = crate::rw_lock::scripts::RW_WRITE_RELEASE.call(conn);
    call.key(&keys.key)
        .arg(&keys.channel)
        .arg(request.lease_ms)
        .arg(&*request.owner)
        .arg(conn.publish_command());
    let reply: Vec<i64> = call.run(conn, "release", limit).await?;
    released(&request.keys.key, &reply)
}

/// Adds one read hold for an owner that reads already (`request.owner` is
/// the read field). One round trip, at most `limit`. False when it no
/// longer reads.
pub(crate) async fn read_reenter(
    conn: &mut Connection,
    keys: &RwKeys,
    request: &Request,
    limit: Duration,
) -> Result<bool> {
    let attempt = Acquire {
        keys,
        side: Side::Read,
        reader: &request.owner,
        lease_ms: request.lease_ms,
        claim_ms: 0,
    };
    match attempt.run(conn, LeaseInstant::now(), true, limit).await {
        Ok(RwReply::Acquired { .. }) => Ok(true),
        Err(Error::NotHeld { .. }) => Ok(false),
        Ok(RwReply::Blocked { .. }) => Err(Error::Protocol {
            op: "reenter",
            detail: "a read re-entry was told to wait".to_owned(),
        }),
        Err(other) => Err(other),
    }
}
