//! `seckill demo --json`, the binary: the lesson of the table is real — the
//! teaching strategies do fail under 500 users × 3 simultaneous clicks over
//! two instances (each in its own way), and the redlatch lock and the Redis
//! reservation do not.

use seckill::demo::DemoRow;

type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn row<'a>(rows: &'a [DemoRow], strategy: &str) -> &'a DemoRow {
    rows.iter()
        .find(|row| row.strategy == strategy)
        .unwrap_or_else(|| panic!("no row for {strategy} in {rows:#?}"))
}

#[test]
fn demo_table_tells_the_lesson() -> TestResult {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_seckill"))
        .args(["demo", "--json"])
        .output()?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let rows: Vec<DemoRow> = serde_json::from_slice(&output.stdout).map_err(|error| {
        format!("stdout is not the demo's table ({error}):\n{stdout}\nstderr:\n{stderr}")
    })?;
    assert_eq!(
        output.status.code(),
        Some(0),
        "{rows:#?}\nstderr:\n{stderr}"
    );

    let names: Vec<&str> = rows.iter().map(|row| row.strategy.as_str()).collect();
    assert_eq!(
        names,
        [
            "naive",
            "optimistic-version",
            "optimistic-compare",
            "optimistic",
            "local-lock",
            "early-release",
            "redis-lock",
            "reserve"
        ]
    );

    let naive = row(&rows, "naive");
    assert!(naive.oversold > 0, "naive must oversell: {naive:#?}");

    let optimistic = row(&rows, "optimistic");
    assert_eq!(
        optimistic.oversold, 0,
        "optimistic never oversells: {optimistic:#?}"
    );

    // The optimistic locks never oversell nor duplicate, but refuse buyers
    // whose read another sale overtook while stock was left: every such
    // refusal is a 409 conflict, and the attempts mostly fail.
    for optimistic_lock in ["optimistic-version", "optimistic-compare"] {
        let row = row(&rows, optimistic_lock);
        assert_eq!(
            (row.oversold, row.duplicate_users, row.lost),
            (0, 0, 0),
            "{row:#?}"
        );
        assert!(
            row.conflicts > 0,
            "{optimistic_lock} must refuse buyers: {row:#?}"
        );
        assert_eq!(
            row.statuses.get("201").copied(),
            Some(row.orders),
            "{row:#?}"
        );
        assert_eq!(row.orders as i64 + row.remaining_stock, 100, "{row:#?}");
        assert!(row.success_percent() < 100.0, "{row:#?}");
    }

    // The redlatch lock released before the commit: the stock holds (its
    // decrement keeps `stock > 0`), one order per user does not.
    let early = row(&rows, "early-release");
    assert_eq!((early.oversold, early.lost), (0, 0), "{early:#?}");
    assert!(
        early.duplicate_users > 0,
        "a lock released before the commit must let a user's next click buy again: {early:#?}"
    );

    let local = row(&rows, "local-lock");
    assert_eq!(local.oversold, 0, "{local:#?}");
    assert!(
        local.duplicate_users > 0,
        "a lock inside one process must let duplicates through across two instances: {local:#?}"
    );

    for safe in ["redis-lock", "reserve"] {
        let row = row(&rows, safe);
        assert_eq!(
            (row.orders, row.oversold, row.duplicate_users, row.lost),
            (100, 0, 0, 0),
            "{safe} must sell exactly the stock, once per user, losing nothing: {row:#?}"
        );
        assert_eq!(row.remaining_stock, 0, "{row:#?}");
        assert_eq!(row.accepted, 100, "{row:#?}");
    }
    Ok(())
}
