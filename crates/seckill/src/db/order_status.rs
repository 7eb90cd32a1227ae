//! The four states of an order and how they are spelled in the database
//! and in answers.

use std::fmt;
use std::str::FromStr;

/// Where an order is in its life. Every order starts `Pending`; it then
/// ends exactly once, in one of the three others.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OrderStatus {
    /// Placed, waiting for payment; holds one unit of stock.
    Pending,
    /// Paid: the unit is sold.
    Paid,
    /// Cancelled by its buyer: the unit went back to the stock.
    Cancelled,
    /// Not paid within the payment timeout: the unit went back to the stock.
    Expired,
}

impl OrderStatus {
    /// Every status, in the order of the list above.
    pub const ALL: [OrderStatus; 4] = [
        OrderStatus::Pending,
        OrderStatus::Paid,
        OrderStatus::Cancelled,
        OrderStatus::Expired,
    ];

    /// The name in the `status` column and in JSON answers.
    pub fn as_str(self) -> &'static str {
        match self {
            OrderStatus::Pending => "pending",
            OrderStatus::Paid => "paid",
            OrderStatus::Cancelled => "cancelled",
            OrderStatus::Expired => "expired",
        }
    }

    /// Whether reaching this status gives the order's unit back.
    pub fn returns_stock(self) -> bool {
        matches!(self, OrderStatus::Cancelled | OrderStatus::Expired)
    }
}

impl fmt::Display for OrderStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `status` value that is none of the four (a row written by something
/// other than seckill).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown order status {0:?}")]
pub struct UnknownStatus(pub String);

impl FromStr for OrderStatus {
    type Err = UnknownStatus;

    fn from_str(text: &str) -> Result<OrderStatus, UnknownStatus> {
        OrderStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == text)
            .ok_or_else(|| UnknownStatus(text.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_back_and_unknown_ones_are_refused() {
        for status in OrderStatus::ALL {
            assert_eq!(status.as_str().parse::<OrderStatus>(), Ok(status));
        }
        assert_eq!(
            "refunded".parse::<OrderStatus>(),
            Err(UnknownStatus("refunded".to_owned()))
        );
        assert!(!OrderStatus::Paid.returns_stock());
        assert!(OrderStatus::Expired.returns_stock());
    }
}
