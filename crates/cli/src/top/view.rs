//! `top`'s live terminal view (ratatui): the table, a TTL bar per lock,
//! refreshed every interval; `q` or Ctrl-C leaves.

use std::time::Duration;

use ratatui::crossterm::event::{self, Event, KeyCode, KeyModifiers};
use ratatui::layout::Constraint;
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Cell, Row as TableRow, Table};

use super::sample::{Sampler, Snapshot};
use super::table::{millis, rate};
use crate::exit::{self, Failure};

/// Width of the TTL bar, in cells.
const BAR: usize = 12;

/// Runs the view until `q`, Esc or Ctrl-C.
pub async fn run(sampler: &mut Sampler, interval: Duration) -> Result<u8, Failure> {
    let mut terminal = ratatui::init();
    let outcome = refresh_loop(sampler, interval, &mut terminal).await;
    ratatui::restore();
    outcome
}

async fn refresh_loop(
    sampler: &mut Sampler,
    interval: Duration,
    terminal: &mut ratatui::DefaultTerminal,
) -> Result<u8, Failure> {
    let mut longest_ttl = 1;
    loop {
        let snapshot = sampler.sample().await?;
        longest_ttl = snapshot
            .locks
            .iter()
            .filter_map(|row| row.ttl_ms)
            .max()
            .unwrap_or(1)
            .max(longest_ttl);
        terminal
            .draw(|frame| {
                frame.render_widget(table(&snapshot, longest_ttl, interval), frame.area())
            })
            .map_err(|error| Failure::new(exit::SOFTWARE, format!("terminal: {error}")))?;
        // Wait for the next refresh, watching the keyboard meanwhile.
        let quit = tokio::task::block_in_place(|| wait_for_quit(interval))
            .map_err(|error| Failure::new(exit::SOFTWARE, format!("terminal: {error}")))?;
        if quit {
            return Ok(0);
        }
    }
}

/// Polls the keyboard for `interval`: true when the user asked to leave.
fn wait_for_quit(interval: Duration) -> std::io::Result<bool> {
    let until = std::time::Instant::now() + interval;
    loop {
        let left = until.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() || !event::poll(left)? {
            return Ok(false);
        }
        if let Event::Key(key) = event::read()? {
            let ctrl_c =
                key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL);
            if ctrl_c || matches!(key.code, KeyCode::Char('q') | KeyCode::Esc) {
                return Ok(true);
            }
        }
    }
}

fn table(snapshot: &Snapshot, longest_ttl: u64, interval: Duration) -> Table<'static> {
    let header = TableRow::new(
        [
            "name", "kind", "waiters", "ttl", "", "token", "acq/s", "wait", "holders",
        ]
        .map(Cell::from),
    )
    .style(Style::new().add_modifier(Modifier::BOLD));
    let rows = snapshot.locks.iter().map(|row| {
        TableRow::new(vec![
            Cell::from(row.name.clone()),
            Cell::from(row.kind),
            Cell::from(row.waiters.to_string()),
            Cell::from(millis(row.ttl_ms)),
            Cell::from(bar(row.ttl_ms, longest_ttl)),
            Cell::from(
                row.token
                    .map_or_else(|| "-".to_owned(), |token| token.to_string()),
            ),
            Cell::from(rate(row)),
            Cell::from(millis(Some(row.longest_wait_ms).filter(|&ms| ms > 0))),
            Cell::from(row.holders.join(", ")),
        ])
    });
    let title = format!(
        " redlatch top: {} locks held, refresh every {} (q to quit) ",
        snapshot.locks.len(),
        humantime::format_duration(interval)
    );
    Table::new(
        rows,
        [
            Constraint::Min(20),
            Constraint::Length(10),
            Constraint::Length(7),
            Constraint::Length(9),
            Constraint::Length(BAR as u16),
            Constraint::Length(8),
            Constraint::Length(7),
            Constraint::Length(9),
            Constraint::Min(20),
        ],
    )
    .header(header)
    .block(Block::bordered().title(Line::from(title)))
}

/// The lease left, as a bar scaled to the longest TTL seen.
fn bar(ttl_ms: Option<u64>, longest: u64) -> String {
    let Some(ttl) = ttl_ms else {
        return "·".repeat(BAR);
    };
    let filled = usize::try_from(ttl.saturating_mul(BAR as u64) / longest.max(1))
        .unwrap_or(BAR)
        .min(BAR);
    format!("{}{}", "█".repeat(filled), "░".repeat(BAR - filled))
}
