//! The verdict: what the snapshots before and after the load say about
//! overselling, duplicate orders, accepted orders that went missing, the
//! stock's balance and each order's final status.
//!
//! With the order lifecycle a unit is *held* by a pending or paid order;
//! a cancelled or expired order gave its unit back, and another user may
//! have bought it since. So the balance is "stock + held units" (the same
//! before and after the load), and overselling is holding more units than
//! there were, not having more orders than the stock.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use super::fire::Accepted;
use super::follow_up::{Answer, FollowUp};
use super::mix::Action;
use super::source::Snapshot;
use crate::db::OrderStatus;

/// How many missing order ids (and wrongly ended orders) the report lists by name.
const MISSING_LISTED: usize = 10;

/// The counts of the check, and the violations in words; the load's report
/// carries it whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// Orders of the voucher after the load.
    pub orders: u64,
    /// Orders the load added.
    pub new_orders: u64,
    /// The voucher's stock before the load.
    pub initial_stock: i64,
    /// The voucher's stock after the load (and the drain).
    pub remaining_stock: i64,
    /// Sold beyond the stock: units held (pending or paid orders) above the
    /// units there were, or the stock's depth below zero, whichever is larger.
    pub oversold: u64,
    /// Orders holding a unit (pending or paid) after the load.
    pub holding: i64,
    /// Users holding more than one order of the voucher.
    pub duplicate_users: u64,
    /// Orders beyond the first of each such user.
    pub duplicate_orders: u64,
    /// `201` answers whose order is not in the database.
    pub missing: u64,
    /// The first few of those order ids.
    pub missing_order_ids: Vec<String>,
    /// `(initial stock + units held before) − (remaining stock + units held
    /// after)`: units that left without an order holding them (positive) or
    /// held units that took no stock (negative). Not zero is a violation.
    pub stock_drift: i64,
    /// The load's orders whose final status is not what the load's
    /// follow-up implies (see `expected`).
    pub wrong_status: u64,
    /// The first few of those, in words.
    pub wrong_status_orders: Vec<String>,
    /// One sentence per violated rule; empty when the run was clean.
    pub violations: Vec<String>,
}

/// The final statuses an order may have after `follow_up`: `expiry_awaited`
/// says the load waited for left orders to expire (`--expect-expiry-within`).
///
/// A `200` to pay or cancel decides the order. A `409` says it was no longer
/// pending, and only the payment timeout ends an order besides its buyer.
/// Any other answer leaves it open whether the request took effect.
pub(crate) fn expected(follow_up: &FollowUp, expiry_awaited: bool) -> &'static [OrderStatus] {
    use OrderStatus::{Cancelled, Expired, Paid, Pending};
    match (follow_up.action, follow_up.answer, expiry_awaited) {
        (Action::Pay, Some(Answer::Status(200)), _) => &[Paid],
        (Action::Cancel, Some(Answer::Status(200)), _) => &[Cancelled],
        (Action::Pay | Action::Cancel, Some(Answer::Status(409)), _) => &[Expired],
        (Action::Leave, _, true) => &[Expired],
        (Action::Leave, _, false) => &[Pending, Expired],
        (Action::Pay, _, true) => &[Paid, Expired],
        (Action::Pay, _, false) => &[Paid, Pending, Expired],
        (Action::Cancel, _, true) => &[Cancelled, Expired],
        (Action::Cancel, _, false) => &[Cancelled, Pending, Expired],
    }
}

/// Compares the snapshots taken before and after the load with the orders
/// the service accepted and what the load did with them.
pub(crate) fn judge(
    before: &Snapshot,
    after: &Snapshot,
    accepted: &[Accepted],
    accepted_without_id: u64,
    expiry_awaited: bool,
) -> Verdict {
    let orders = after.orders.len() as u64;
    let new_orders = orders.saturating_sub(before.orders.len() as u64);
    let initial_stock = before.stock;
    let remaining_stock = after.stock;
    let units = initial_stock.saturating_add(before.holding());
    let holding = after.holding();

    let beyond_stock = holding.saturating_sub(units.max(0));
    let below_zero = remaining_stock.saturating_neg();
    let oversold = u64::try_from(beyond_stock.max(below_zero).max(0)).unwrap_or(0);

    let mut per_user: HashMap<&str, u64> = HashMap::new();
    for order in &after.orders {
        *per_user.entry(order.user.as_str()).or_default() += 1;
    }
    let duplicate_users = per_user.values().filter(|&&n| n > 1).count() as u64;
    let duplicate_orders = per_user.values().map(|n| n.saturating_sub(1)).sum();

    let stored: HashSet<&str> = after
        .orders
        .iter()
        .map(|order| order.order_id.as_str())
        .collect();
    let missing_ids: Vec<&Accepted> = accepted
        .iter()
        .filter(|order| !stored.contains(order.order_id.as_str()))
        .collect();
    let missing = missing_ids.len() as u64;

    let stock_drift = units
        .saturating_sub(remaining_stock)
        .saturating_sub(holding);

    let final_status: HashMap<&str, Option<OrderStatus>> = after
        .orders
        .iter()
        .map(|order| (order.order_id.as_str(), order.status))
        .collect();
    let mut wrong = Vec::new();
    for order in accepted {
        // Missing orders are counted as missing; an unread status is no verdict.
        let Some(Some(status)) = final_status.get(order.order_id.as_str()) else {
            continue;
        };
        let allowed = expected(&order.follow_up, expiry_awaited);
        if !allowed.contains(status) {
            let did = match order.follow_up.answer {
                Some(answer) => format!(
                    "{} answered {}",
                    order.follow_up.action.name(),
                    answer.key()
                ),
                None => "left to expire".to_owned(),
            };
            wrong.push(format!(
                "order {} (user {}): {did}, ended {status}",
                order.order_id, order.user
            ));
        }
    }
    let wrong_status = wrong.len() as u64;

    let mut violations = Vec::new();
    if oversold > 0 {
        violations.push(format!(
            "oversold by {oversold}: {holding} units held by pending or paid orders of {units} there were, {remaining_stock} left in stock"
        ));
    }
    if duplicate_users > 0 {
        violations.push(format!(
            "{duplicate_users} users hold more than one order ({duplicate_orders} extra orders)"
        ));
    }
    if missing > 0 {
        violations.push(format!(
            "{missing} orders were answered 201 but are not in the database"
        ));
    }
    if stock_drift != 0 {
        violations.push(format!(
            "stock not conserved: {units} units before (stock {initial_stock} + held), {remaining_stock} in stock + {holding} held after (drift {stock_drift})"
        ));
    }
    if wrong_status > 0 {
        let awaited = if expiry_awaited {
            " (after waiting for expiry)"
        } else {
            ""
        };
        violations.push(format!(
            "{wrong_status} orders ended in a status the load's pay/cancel answers rule out{awaited}"
        ));
    }
    if accepted_without_id > 0 {
        violations.push(format!(
            "{accepted_without_id} answers were 201 without a readable order_id"
        ));
    }

    Verdict {
        orders,
        new_orders,
        initial_stock,
        remaining_stock,
        oversold,
        holding,
        duplicate_users,
        duplicate_orders,
        missing,
        missing_order_ids: missing_ids
            .iter()
            .take(MISSING_LISTED)
            .map(|order| format!("{} (user {})", order.order_id, order.user))
            .collect(),
        stock_drift,
        wrong_status,
        wrong_status_orders: wrong.into_iter().take(MISSING_LISTED).collect(),
        violations,
    }
}

#[cfg(test)]
mod tests {
    use super::super::source::OrderRow;
    use super::*;
    use OrderStatus::{Cancelled, Expired, Paid, Pending};

    fn order(order_id: u64, user: u64) -> OrderRow {
        ended(order_id, user, Pending)
    }

    fn ended(order_id: u64, user: u64, status: OrderStatus) -> OrderRow {
        OrderRow {
            order_id: order_id.to_string(),
            user: user.to_string(),
            status: Some(status),
        }
    }

    fn accepted(order_id: u64, user: u64) -> Accepted {
        Accepted {
            user,
            order_id: order_id.to_string(),
            follow_up: FollowUp::left(),
        }
    }

    fn answered(order_id: u64, user: u64, action: Action, status: u16) -> Accepted {
        Accepted {
            user,
            order_id: order_id.to_string(),
            follow_up: FollowUp {
                action,
                answer: Some(Answer::Status(status)),
                latency: None,
            },
        }
    }

    fn fresh(stock: i64) -> Snapshot {
        Snapshot {
            stock,
            orders: Vec::new(),
        }
    }

    #[test]
    fn a_clean_sell_out_has_no_violation() {
        let after = Snapshot {
            stock: 0,
            orders: vec![order(1, 1), order(2, 2)],
        };
        let verdict = judge(
            &fresh(2),
            &after,
            &[accepted(1, 1), accepted(2, 2)],
            0,
            false,
        );
        assert_eq!(verdict.oversold, 0);
        assert_eq!(verdict.duplicate_users, 0);
        assert_eq!(verdict.missing, 0);
        assert_eq!(verdict.stock_drift, 0);
        assert!(verdict.violations.is_empty(), "{:?}", verdict.violations);
    }

    #[test]
    fn more_orders_than_stock_is_oversold() {
        let after = Snapshot {
            stock: 0,
            orders: vec![order(1, 1), order(2, 2), order(3, 3)],
        };
        let verdict = judge(&fresh(2), &after, &[], 0, false);
        assert_eq!(verdict.oversold, 1);
        assert!(
            verdict.violations[0].starts_with("oversold by 1"),
            "{:?}",
            verdict.violations
        );
    }

    #[test]
    fn a_negative_stock_is_oversold_even_when_orders_match() {
        let after = Snapshot {
            stock: -3,
            orders: vec![order(1, 1)],
        };
        assert_eq!(judge(&fresh(1), &after, &[], 0, false).oversold, 3);
    }

    #[test]
    fn a_user_with_two_orders_is_a_duplicate() {
        let after = Snapshot {
            stock: 6,
            orders: vec![order(1, 5), order(2, 5), order(3, 5), order(4, 6)],
        };
        let verdict = judge(&fresh(10), &after, &[], 0, false);
        assert_eq!(verdict.duplicate_users, 1);
        assert_eq!(verdict.duplicate_orders, 2);
        assert_eq!(verdict.oversold, 0);
    }

    #[test]
    fn a_cancelled_order_still_makes_its_user_a_duplicate() {
        let after = Snapshot {
            stock: 0,
            orders: vec![ended(1, 5, Cancelled), order(2, 5)],
        };
        let verdict = judge(&fresh(1), &after, &[], 0, false);
        assert_eq!(verdict.duplicate_users, 1);
        assert_eq!((verdict.oversold, verdict.stock_drift), (0, 0));
    }

    #[test]
    fn an_accepted_order_absent_from_the_database_is_missing() {
        let after = Snapshot {
            stock: 1,
            orders: vec![order(1, 1)],
        };
        let verdict = judge(
            &fresh(3),
            &after,
            &[accepted(1, 1), accepted(9, 2)],
            0,
            false,
        );
        assert_eq!(verdict.missing, 1);
        assert_eq!(verdict.missing_order_ids, vec!["9 (user 2)".to_owned()]);
        assert_eq!(verdict.stock_drift, 1, "a stock unit left without an order");
        assert!(
            verdict
                .violations
                .iter()
                .any(|v| v.contains("answered 201 but are not in the database")),
            "{:?}",
            verdict.violations
        );
        assert!(
            verdict
                .violations
                .iter()
                .any(|v| v.starts_with("stock not conserved")),
            "{:?}",
            verdict.violations
        );
    }

    #[test]
    fn orders_from_before_the_load_do_not_count_as_new() {
        let before = Snapshot {
            stock: 1,
            orders: vec![order(1, 1)],
        };
        let after = Snapshot {
            stock: 0,
            orders: vec![order(1, 1), order(2, 2)],
        };
        let verdict = judge(&before, &after, &[accepted(2, 2)], 0, false);
        assert_eq!(verdict.new_orders, 1);
        assert_eq!(verdict.oversold, 0);
        assert_eq!(verdict.stock_drift, 0);
    }

    /// Stock 2: user 1 pays, user 2 cancels, user 3 buys the returned unit
    /// and leaves it to expire, user 4 buys it again and pays.
    fn lifecycle_run() -> (Snapshot, Vec<Accepted>) {
        let after = Snapshot {
            stock: 0,
            orders: vec![
                ended(1, 1, Paid),
                ended(2, 2, Cancelled),
                ended(3, 3, Expired),
                ended(4, 4, Paid),
            ],
        };
        let accepted = vec![
            answered(1, 1, Action::Pay, 200),
            answered(2, 2, Action::Cancel, 200),
            accepted(3, 3),
            answered(4, 4, Action::Pay, 200),
        ];
        (after, accepted)
    }

    #[test]
    fn units_bought_again_after_a_cancel_and_an_expiry_are_not_oversold() {
        let (after, accepted) = lifecycle_run();
        let verdict = judge(&fresh(2), &after, &accepted, 0, true);
        assert_eq!(verdict.new_orders, 4, "more orders than the stock of 2");
        assert_eq!((verdict.holding, verdict.oversold), (2, 0));
        assert_eq!(verdict.stock_drift, 0);
        assert_eq!(verdict.wrong_status, 0);
        assert!(verdict.violations.is_empty(), "{:?}", verdict.violations);
    }

    #[test]
    fn a_paid_orders_unit_also_back_in_stock_breaks_the_balance() {
        let (mut after, accepted) = lifecycle_run();
        after.stock = 1;
        let verdict = judge(&fresh(2), &after, &accepted, 0, true);
        assert_eq!(verdict.stock_drift, -1);
        assert_eq!(verdict.oversold, 0);
        assert_eq!(verdict.violations.len(), 1, "{:?}", verdict.violations);
        assert!(verdict.violations[0].starts_with("stock not conserved"));
    }

    #[test]
    fn a_cancelled_unit_not_back_in_stock_breaks_the_balance() {
        let after = Snapshot {
            stock: 0,
            orders: vec![ended(1, 1, Paid), ended(2, 2, Cancelled)],
        };
        let accepted = [
            answered(1, 1, Action::Pay, 200),
            answered(2, 2, Action::Cancel, 200),
        ];
        let verdict = judge(&fresh(2), &after, &accepted, 0, false);
        assert_eq!(verdict.stock_drift, 1);
        assert!(!verdict.violations.is_empty());
    }

    #[test]
    fn holding_more_units_than_there_were_is_oversold() {
        let (mut after, accepted) = lifecycle_run();
        // The expired order was paid after all: three units held of two.
        after.orders[2].status = Some(Paid);
        after.stock = -1;
        let verdict = judge(&fresh(2), &after, &accepted, 0, true);
        assert_eq!(verdict.oversold, 1);
        assert_eq!(verdict.wrong_status, 1, "left to expire, ended paid");
    }

    #[test]
    fn an_order_ending_otherwise_than_its_answer_says_is_reported() {
        let (mut after, accepted) = lifecycle_run();
        // Paid with a 200, yet cancelled (and its unit back): a lost payment.
        after.orders[0].status = Some(Cancelled);
        after.stock = 1;
        let verdict = judge(&fresh(2), &after, &accepted, 0, true);
        assert_eq!(verdict.stock_drift, 0, "the balance alone would not see it");
        assert_eq!(verdict.wrong_status, 1);
        assert_eq!(
            verdict.wrong_status_orders,
            vec!["order 1 (user 1): pay answered 200, ended cancelled".to_owned()]
        );
        assert_eq!(verdict.violations.len(), 1, "{:?}", verdict.violations);
    }

    #[test]
    fn a_left_order_still_pending_is_wrong_only_when_expiry_was_awaited() {
        let (mut after, accepted) = lifecycle_run();
        after.orders[2].status = Some(Pending);
        // The left order still holds its unit, so the balance needs three.
        let before = fresh(3);
        assert_eq!(judge(&before, &after, &accepted, 0, false).wrong_status, 0);
        assert_eq!(judge(&before, &after, &accepted, 0, true).wrong_status, 1);
    }

    #[test]
    fn what_each_answer_allows() {
        let follow = |action, answer| FollowUp {
            action,
            answer,
            latency: None,
        };
        let conflict = follow(Action::Cancel, Some(Answer::Status(409)));
        assert_eq!(expected(&conflict, false), &[Expired]);
        let lost = follow(Action::Pay, Some(Answer::TransportError));
        assert_eq!(expected(&lost, true), &[Paid, Expired]);
        assert_eq!(expected(&lost, false), &[Paid, Pending, Expired]);
        assert_eq!(expected(&FollowUp::left(), true), &[Expired]);
    }
}
