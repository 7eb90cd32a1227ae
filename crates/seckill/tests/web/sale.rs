//! The page from creating a voucher to the end of its orders: the form
//! (refused without the admin token, then for want of a title, each with the
//! service's reason, then a voucher), buying, paying,
//! paying again (409), someone else's order (403), cancelling, and the live
//! figures following all of it.

use super::shop::TestResult;
use super::webdriver::Session;
use super::{PATIENCE, ensure, grab_as};

const TEA: &str = "Tea for two";

/// The admin token of the instance the form is tried on.
pub const ADMIN_TOKEN: &str = "page-test-token";

pub async fn create_buy_pay_cancel(session: &Session, page: &str) -> TestResult {
    session.goto(page).await?;
    session
        .wait_for_text("#empty", PATIENCE, |text| text == "no vouchers yet")
        .await?;

    // No admin token: 401, with the service's reason.
    click(session, "#create").await?;
    session
        .wait_for_text("#create-result", PATIENCE, |text| {
            text.starts_with("unauthorized: ")
        })
        .await?;

    // The token goes through; no title: the service refuses and the page says why.
    type_into(session, "#admin-token", ADMIN_TOKEN).await?;
    click(session, "#create").await?;
    session
        .wait_for_text("#create-result", PATIENCE, |text| {
            text.contains("title must not be empty")
        })
        .await?;

    // The window defaults to now .. +1 h, so the voucher is on sale at once.
    type_into(session, "#new-title", TEA).await?;
    type_into(session, "#new-stock", "2").await?;
    click(session, "#create").await?;
    let created = session
        .wait_for_text("#create-result", PATIENCE, |text| {
            text.starts_with("created voucher ")
        })
        .await?;
    let voucher = digits_after(&created, "created voucher ")?;
    // A new voucher is the one the live figures follow.
    session
        .wait_for_text("#live-voucher", PATIENCE, |text| text.contains(TEA))
        .await?;
    wait_for(session, "#live-stock", "2").await?;
    wait_for(session, "#live-orders", "0").await?;
    // Its row comes with the next answer of GET /vouchers.
    session
        .wait_for_text("#vouchers", PATIENCE, |text| text.contains(TEA))
        .await?;
    wait_for(session, &format!("#stock-{voucher}"), "2").await?;

    let first = buy(session, &voucher, "7").await?;
    wait_for(session, &format!("#status-{first}"), "pending").await?;
    wait_for(session, "#live-stock", "1").await?;
    wait_for(session, "#live-orders", "1").await?;
    wait_for(session, "#live-mine", "pending 1").await?;
    // The buy is in the last few seconds' request rate.
    session
        .wait_for_text("#live-rate", PATIENCE, |text| {
            leading_number(text).is_some_and(|rate| rate > 0.0)
        })
        .await?;

    click(session, &format!("#pay-{first}")).await?;
    wait_for(session, &format!("#status-{first}"), "paid").await?;
    wait_for(session, &format!("#answer-{first}"), "paid").await?;
    wait_for(session, "#live-mine", "paid 1").await?;
    // Paying twice: 409 not_pending, shown with the service's message.
    click(session, &format!("#pay-{first}")).await?;
    session
        .wait_for_text(&format!("#answer-{first}"), PATIENCE, |text| {
            text == "not_pending: the order is paid"
        })
        .await?;

    let second = buy(session, &voucher, "8").await?;
    wait_for(session, &format!("#status-{second}"), "pending").await?;
    wait_for(session, "#live-stock", "0").await?;
    // User 8 (in the user-id box now) cannot cancel user 7's order: 403.
    click(session, &format!("#cancel-{first}")).await?;
    session
        .wait_for_text(&format!("#answer-{first}"), PATIENCE, |text| {
            text.starts_with("forbidden")
        })
        .await?;
    let status = session.text(&format!("#status-{first}")).await?;
    ensure(status == "paid", || {
        format!("a refused cancel leaves the order paid, the page shows {status:?}")
    })?;

    // Cancelling puts the unit back on sale; the order still counts as placed.
    click(session, &format!("#cancel-{second}")).await?;
    wait_for(session, &format!("#status-{second}"), "cancelled").await?;
    wait_for(session, "#live-stock", "1").await?;
    wait_for(session, &format!("#stock-{voucher}"), "1").await?;
    wait_for(session, "#live-orders", "2").await?;
    session
        .wait_for_text("#live-mine", PATIENCE, |text| {
            text.contains("paid 1") && text.contains("cancelled 1")
        })
        .await?;
    session
        .wait_for_text("#live-ended", PATIENCE, |text| {
            text.contains("paid") && text.contains("cancelled")
        })
        .await?;

    // A refusal shows among the errors by reason.
    let again = grab_as(session, &voucher, "7").await?;
    ensure(again.contains("already ordered"), || {
        format!("user 7 again should be refused, the page says {again:?}")
    })?;
    session
        .wait_for_text("#live-errors", PATIENCE, |text| {
            text.contains("already_ordered")
        })
        .await?;
    Ok(())
}

/// Grabs `voucher` as `user`; the order id the page shows.
async fn buy(session: &Session, voucher: &str, user: &str) -> TestResult<String> {
    let said = grab_as(session, voucher, user).await?;
    digits_after(&said, "ordered: order id ")
}

async fn click(session: &Session, css: &str) -> TestResult {
    let element = session.find(css).await?;
    session.click(&element).await
}

async fn type_into(session: &Session, css: &str, text: &str) -> TestResult {
    let element = session.find(css).await?;
    session.clear(&element).await?;
    session.type_text(&element, text).await
}

async fn wait_for(session: &Session, css: &str, wanted: &str) -> TestResult {
    session
        .wait_for_text(css, PATIENCE, |text| text == wanted)
        .await
        .map(drop)
}

/// The id in `text` after `prefix`, or an error quoting the text.
fn digits_after(text: &str, prefix: &str) -> TestResult<String> {
    let id = text.strip_prefix(prefix).unwrap_or_default();
    ensure(
        !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()),
        || format!("expected {prefix:?} and an id, the page says {text:?}"),
    )?;
    Ok(id.to_owned())
}

/// `2.4` from `"2.4 req/s · 0.0 refused/s"`.
fn leading_number(text: &str) -> Option<f64> {
    text.split_whitespace().next()?.parse().ok()
}

/// Under `reserve` an order is answered 202 before it is written: the page
/// says "accepted", then finds the order with GET /orders/{id} once the
/// consumer has written it, and it can be paid like any other.
pub async fn reserve_order_is_followed(session: &Session, page: &str, voucher: &str) -> TestResult {
    session.goto(page).await?;
    // The table starts empty: wait for the row before reading its cells.
    session
        .wait_for_text("#vouchers", PATIENCE, |text| !text.is_empty())
        .await?;
    wait_for(session, &format!("#stock-{voucher}"), "1").await?;
    let said = grab_as(session, voucher, "7").await?;
    let order = digits_after(&said, "accepted: order id ")?;
    // "accepted" until the consumer writes the order, then what it says.
    wait_for(session, &format!("#status-{order}"), "pending").await?;
    wait_for(session, "#live-orders", "1").await?;
    click(session, &format!("#pay-{order}")).await?;
    wait_for(session, &format!("#status-{order}"), "paid").await
}

/// A JWT for `user`, as a `--auth jwt --jwt-secret secret` shop takes it.
pub fn token_for(secret: &str, user: u64) -> TestResult<String> {
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs()
        + 3600;
    let claims = serde_json::json!({ "sub": user.to_string(), "exp": exp });
    let key = jsonwebtoken::EncodingKey::from_secret(secret.as_bytes());
    Ok(jsonwebtoken::encode(
        &jsonwebtoken::Header::default(),
        &claims,
        &key,
    )?)
}

/// On a shop run with `--auth jwt`: a grab without the sign-in token is
/// refused (the page's X-User-Id is not trusted), one with it buys, and the
/// order is paid as the token's user.
pub async fn signed_in_user_buys_and_pays(
    session: &Session,
    page: &str,
    voucher: &str,
    token: &str,
) -> TestResult {
    session.goto(page).await?;
    session
        .wait_for_text("#vouchers", PATIENCE, |text| text.contains("slice"))
        .await?;
    let refused = grab_as(session, voucher, "42").await?;
    ensure(refused.contains("unauthorized"), || {
        format!("without a token the grab must be refused, the page says {refused:?}")
    })?;
    type_into(session, "#user-token", token).await?;
    let order = buy(session, voucher, "42").await?;
    wait_for(session, &format!("#status-{order}"), "pending").await?;
    click(session, &format!("#pay-{order}")).await?;
    wait_for(session, &format!("#status-{order}"), "paid").await?;
    Ok(())
}
