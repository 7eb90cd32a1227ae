//! What happens to an order after it is placed.
//!
//! ```text
//!            pay (its buyer)
//!          ┌──────────────────▶ paid
//! pending ─┼─ cancel (its buyer) ▶ cancelled ─┐
//!          └─ payment timeout ──▶ expired ────┴▶ one unit back in stock
//! ```
//!
//! An order leaves `pending` exactly once: the change is a conditional
//! `UPDATE ... WHERE status = 'pending'`, and the unit goes back to the
//! database's stock in the same transaction, so a cancel racing a payment or
//! the expiry sweeper has one winner and the stock grows once.
//!
//! The Redis stock of the `reserve` strategy gets the unit back after the
//! commit, through a script that adds the order id to the voucher's
//! returned set and increments the stock only if the id was new
//! ([`redis_stock`]), so for that moment the order already shows
//! `cancelled` or `expired` while a `reserve` click may still find the
//! voucher sold out. The order row's `stock_back` records that this
//! happened; the sweeper finishes any order whose instance died between the
//! commit and the script. The user's place in the buyers set stays: one
//! order per user and voucher, whatever became of it (the database's UNIQUE
//! constraint says the same).

pub mod expiry;
pub mod redis_stock;
pub mod transition;

pub use transition::{End, TransitionError, end_order};
