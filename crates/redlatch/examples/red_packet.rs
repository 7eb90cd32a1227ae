//! Seed 000's red-packet guard: a user may draw a red packet once, however
//! many times (and from however many servers) the button is pressed.
//!
//! The seed takes a per-user lock with `try_lock` and refuses the draw when
//! the lock is taken. That stops *simultaneous* presses, but not a second
//! press after the first draw finished and released the lock. The complete
//! pattern, shown here: under the per-user lock, check a durable "already
//! drawn" record, then draw and write the record, with the fencing token.
//!
//! ```text
//! cargo run -p redlatch --example red_packet
//! ```
//! It starts a throwaway redis-server (testkit), then lets 3 clients (think:
//! 3 app servers) press "draw" for user 42, 5 times each, all at once, and
//! again a second later. Exactly one draw succeeds.

use std::time::Duration;

use redis::AsyncCommands;
use redlatch::Client;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What a press of the button gave.
#[derive(Debug, PartialEq, Eq)]
enum Draw {
    Drawn { amount: u32, token: u64 },
    AlreadyDrawn,
    Busy,
}

/// One press: the seed's `drawRedPacket(userId)`, done right.
async fn draw_red_packet(
    client: &Client,
    data: &mut redis::aio::MultiplexedConnection,
    user_id: u64,
) -> Result<Draw, BoxError> {
    let lock = client.lock(format!("draw.redpacket.userid:{user_id}"));
    // Another press of the same user is in progress: refuse, as the seed does.
    let Some(guard) = lock.try_acquire().await? else {
        return Ok(Draw::Busy);
    };
    let record = format!("redpacket:drawn:{user_id}");
    let drawn: bool = data.exists(&record).await?;
    let outcome = if drawn {
        Draw::AlreadyDrawn
    } else {
        let amount = 100 + (user_id as u32 * 7) % 900; // cents, "random" enough for a demo
        // The token goes with the write: a resource that keeps the highest
        // token can refuse a holder that stalled past its lease.
        let () = data
            .set(&record, format!("{amount} cents, token {}", guard.token()))
            .await?;
        Draw::Drawn {
            amount,
            token: guard.token(),
        }
    };
    guard.release().await?;
    Ok(outcome)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let server = testkit::RedisServer::start()?;
    println!("redis-server on {}", server.url());
    let mut servers = Vec::new();
    for _ in 0..3 {
        servers.push(Client::connect(&server.url()).await?);
    }
    for wave in 1..=2 {
        let mut presses = Vec::new();
        for (index, client) in servers.iter().enumerate() {
            for press in 0..5 {
                let client = client.clone();
                let mut data = server.client().get_multiplexed_async_connection().await?;
                presses.push(tokio::spawn(async move {
                    let outcome = draw_red_packet(&client, &mut data, 42).await;
                    (index + 1, press + 1, outcome)
                }));
            }
        }
        println!("\nwave {wave}: 3 servers x 5 presses for user 42, all at once");
        let mut drawn = 0;
        for press in presses {
            let (server_no, press_no, outcome) = press.await?;
            let outcome = outcome?;
            if matches!(outcome, Draw::Drawn { .. }) {
                drawn += 1;
            }
            println!("  server {server_no} press {press_no}: {outcome:?}");
        }
        println!("  draws that paid out: {drawn}");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let mut data = server.client().get_multiplexed_async_connection().await?;
    let record: String = data.get("redpacket:drawn:42").await?;
    println!("\nrecord for user 42: {record}");
    Ok(())
}
