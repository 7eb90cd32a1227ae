//! The verdict: what the snapshots before and after the load say about
//! overselling, duplicate orders and accepted orders that went missing.

use std::collections::{HashMap, HashSet};

use super::fire::Accepted;
use super::source::Snapshot;

/// How many missing order ids the report lists by name.
const MISSING_LISTED: usize = 10;

/// The counts of the check, and the violations in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Verdict {
    /// Orders of the voucher after the load.
    pub orders: u64,
    /// Orders the load added.
    pub new_orders: u64,
    pub initial_stock: i64,
    pub remaining_stock: i64,
    /// Sold beyond the stock: new orders above the initial stock, or the
    /// stock's depth below zero, whichever is larger.
    pub oversold: u64,
    /// Users holding more than one order of the voucher.
    pub duplicate_users: u64,
    /// Orders beyond the first of each such user.
    pub duplicate_orders: u64,
    /// `201` answers whose order is not in the database.
    pub missing: u64,
    /// The first few of those order ids.
    pub missing_order_ids: Vec<String>,
    /// `initial − new orders − remaining`: stock that moved without an order
    /// (positive) or orders that took no stock (negative). Reported, not judged.
    pub stock_drift: i64,
    /// One sentence per violated rule; empty when the run was clean.
    pub violations: Vec<String>,
}

/// Compares the snapshots taken before and after the load with the orders
/// the service accepted.
pub(crate) fn judge(
    before: &Snapshot,
    after: &Snapshot,
    accepted: &[Accepted],
    accepted_without_id: u64,
) -> Verdict {
    let orders = after.orders.len() as u64;
    let new_orders = orders.saturating_sub(before.orders.len() as u64);
    let initial_stock = before.stock;
    let remaining_stock = after.stock;

    let beyond_stock = i64::try_from(new_orders)
        .unwrap_or(i64::MAX)
        .saturating_sub(initial_stock.max(0));
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

    let stock_drift = initial_stock
        .saturating_sub(i64::try_from(new_orders).unwrap_or(i64::MAX))
        .saturating_sub(remaining_stock);

    let mut violations = Vec::new();
    if oversold > 0 {
        violations.push(format!(
            "oversold by {oversold}: {new_orders} new orders for a stock of {initial_stock}, {remaining_stock} left"
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
        duplicate_users,
        duplicate_orders,
        missing,
        missing_order_ids: missing_ids
            .iter()
            .take(MISSING_LISTED)
            .map(|order| format!("{} (user {})", order.order_id, order.user))
            .collect(),
        stock_drift,
        violations,
    }
}

#[cfg(test)]
mod tests {
    use super::super::source::OrderRow;
    use super::*;

    fn order(order_id: u64, user: u64) -> OrderRow {
        OrderRow {
            order_id: order_id.to_string(),
            user: user.to_string(),
        }
    }

    fn accepted(order_id: u64, user: u64) -> Accepted {
        Accepted {
            user,
            order_id: order_id.to_string(),
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
        let verdict = judge(&fresh(2), &after, &[accepted(1, 1), accepted(2, 2)], 0);
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
        let verdict = judge(&fresh(2), &after, &[], 0);
        assert_eq!(verdict.oversold, 1);
        assert_eq!(verdict.violations.len(), 1);
    }

    #[test]
    fn a_negative_stock_is_oversold_even_when_orders_match() {
        let after = Snapshot {
            stock: -3,
            orders: vec![order(1, 1)],
        };
        assert_eq!(judge(&fresh(1), &after, &[], 0).oversold, 3);
    }

    #[test]
    fn a_user_with_two_orders_is_a_duplicate() {
        let after = Snapshot {
            stock: 7,
            orders: vec![order(1, 5), order(2, 5), order(3, 5), order(4, 6)],
        };
        let verdict = judge(&fresh(10), &after, &[], 0);
        assert_eq!(verdict.duplicate_users, 1);
        assert_eq!(verdict.duplicate_orders, 2);
        assert_eq!(verdict.oversold, 0);
    }

    #[test]
    fn an_accepted_order_absent_from_the_database_is_missing() {
        let after = Snapshot {
            stock: 1,
            orders: vec![order(1, 1)],
        };
        let verdict = judge(&fresh(3), &after, &[accepted(1, 1), accepted(9, 2)], 0);
        assert_eq!(verdict.missing, 1);
        assert_eq!(verdict.missing_order_ids, vec!["9 (user 2)".to_owned()]);
        assert_eq!(verdict.stock_drift, 1, "a stock unit left without an order");
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
        let verdict = judge(&before, &after, &[accepted(2, 2)], 0);
        assert_eq!(verdict.new_orders, 1);
        assert_eq!(verdict.oversold, 0);
    }
}
