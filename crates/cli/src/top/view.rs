//! `top`'s live terminal view (ratatui): a status line, the table and a
//! footer saying how many rows are off screen. Scrolls with the arrows,
//! j/k, PgUp/PgDn and Home/End; `s` cycles the order, `/` filters by name
//! prefix; `q`, Esc or Ctrl-C leaves. Redis errors show as "disconnected,
//! retrying" above the last rows seen, until a refresh succeeds again.

use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};

use super::row::TopLock;
use super::sample::{Sampler, retried};
use super::table::{self, SortKey};
use crate::exit::{self, Failure};

/// Runs the view until `q`, Esc or Ctrl-C.
pub async fn run(sampler: &mut Sampler<'_>, interval: Duration) -> Result<u8, Failure> {
    let quiet = QuietStderr::new();
    let mut terminal = ratatui::init();
    let outcome = refresh_loop(sampler, interval, &mut terminal).await;
    ratatui::restore();
    drop(quiet);
    outcome
}

/// Silences stderr while the view is up when it is the view's terminal: a
/// log line (the client's "connection lost, reconnecting") would scroll the
/// screen under the view. The status line says what went wrong instead.
/// Redirected elsewhere (`2>top.log`), stderr is left alone.
struct QuietStderr {
    saved: Option<std::os::fd::OwnedFd>,
}

impl QuietStderr {
    fn new() -> QuietStderr {
        use std::io::IsTerminal;
        use std::os::fd::{AsRawFd, FromRawFd};
        if !std::io::stderr().is_terminal() {
            return QuietStderr { saved: None };
        }
        let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") else {
            return QuietStderr { saved: None };
        };
        // SAFETY: dup(2) and dup2(2) on descriptors this process owns; the
        // duplicate is owned by the OwnedFd from then on.
        let saved = unsafe {
            let saved = libc::dup(libc::STDERR_FILENO);
            if saved < 0 {
                return QuietStderr { saved: None };
            }
            if libc::dup2(null.as_raw_fd(), libc::STDERR_FILENO) < 0 {
                libc::close(saved);
                return QuietStderr { saved: None };
            }
            std::os::fd::OwnedFd::from_raw_fd(saved)
        };
        SAVED_STDERR.store(saved.as_raw_fd(), Ordering::SeqCst);
        // A panic's message must reach the terminal: stderr back first.
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let saved = SAVED_STDERR.load(Ordering::SeqCst);
            if saved >= 0 {
                // SAFETY: dup2(2) from the descriptor saved above, still open.
                unsafe { libc::dup2(saved, libc::STDERR_FILENO) };
            }
            previous(info);
        }));
        QuietStderr { saved: Some(saved) }
    }
}

/// The terminal's stderr while [`QuietStderr`] holds it, for the panic hook; -1 otherwise.
static SAVED_STDERR: AtomicI32 = AtomicI32::new(-1);

impl Drop for QuietStderr {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        if let Some(saved) = &self.saved {
            SAVED_STDERR.store(-1, Ordering::SeqCst);
            // SAFETY: dup2(2) back onto stderr from the descriptor saved above.
            unsafe { libc::dup2(saved.as_raw_fd(), libc::STDERR_FILENO) };
        }
    }
}

/// What the view shows between refreshes.
struct State {
    locks: Vec<TopLock>,
    /// Set while Redis cannot be read: why.
    error: Option<String>,
    /// Index of the first row shown.
    offset: usize,
    /// Rows shown at the last draw (a page).
    page: usize,
    filter: String,
    editing: bool,
    sort: SortKey,
    longest_ttl: Duration,
    interval: Duration,
}

/// What a key asks for.
enum Action {
    Quit,
    Redraw,
}

async fn refresh_loop(
    sampler: &mut Sampler<'_>,
    interval: Duration,
    terminal: &mut ratatui::DefaultTerminal,
) -> Result<u8, Failure> {
    let terminal_failure =
        |error: std::io::Error| Failure::new(exit::SOFTWARE, format!("terminal: {error}"));
    let mut state = State {
        locks: Vec::new(),
        error: None,
        offset: 0,
        page: 1,
        filter: String::new(),
        editing: false,
        sort: sampler.sort,
        longest_ttl: Duration::from_millis(1),
        interval,
    };
    let mut next_refresh = Instant::now();
    loop {
        if Instant::now() >= next_refresh {
            sampler.sort = state.sort;
            match sampler.sample().await {
                Ok(snapshot) => {
                    state.locks = snapshot.locks;
                    state.error = None;
                    if let Some(longest) = state.locks.iter().filter_map(|lock| lock.lock.ttl).max()
                    {
                        state.longest_ttl = state.longest_ttl.max(longest);
                    }
                }
                // The last rows stay on screen, under the news that they are old.
                Err(failure) if retried(&failure, false) => {
                    state.error = Some(
                        failure
                            .to_string()
                            .trim_start_matches("redlatch: ")
                            .to_owned(),
                    );
                }
                Err(failure) => return Err(failure),
            }
            next_refresh = Instant::now() + interval;
        }
        terminal
            .draw(|frame| draw(frame, &mut state))
            .map_err(terminal_failure)?;
        let key =
            tokio::task::block_in_place(|| next_key(next_refresh)).map_err(terminal_failure)?;
        if let Some(key) = key
            && let Action::Quit = handle(&mut state, key)
        {
            return Ok(0);
        }
    }
}

/// Waits for a key press until `until`; `None` when the time is up first.
fn next_key(until: Instant) -> std::io::Result<Option<KeyEvent>> {
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() || !event::poll(left)? {
            return Ok(None);
        }
        match event::read()? {
            Event::Key(key) if key.kind != KeyEventKind::Release => return Ok(Some(key)),
            // A resize redraws at once.
            Event::Resize(..) => return Ok(None),
            _ => {}
        }
    }
}

fn handle(state: &mut State, key: KeyEvent) -> Action {
    if key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL) {
        return Action::Quit;
    }
    if state.editing {
        match key.code {
            KeyCode::Enter => state.editing = false,
            KeyCode::Esc => {
                state.editing = false;
                state.filter.clear();
            }
            KeyCode::Backspace => {
                state.filter.pop();
            }
            KeyCode::Char(c) => state.filter.push(c),
            _ => {}
        }
        state.offset = 0;
        return Action::Redraw;
    }
    let page = state.page.max(1);
    match key.code {
        KeyCode::Char('q') | KeyCode::Esc => return Action::Quit,
        KeyCode::Up | KeyCode::Char('k') => state.offset = state.offset.saturating_sub(1),
        KeyCode::Down | KeyCode::Char('j') => state.offset = state.offset.saturating_add(1),
        KeyCode::PageUp => state.offset = state.offset.saturating_sub(page),
        KeyCode::PageDown | KeyCode::Char(' ') => state.offset = state.offset.saturating_add(page),
        KeyCode::Home | KeyCode::Char('g') => state.offset = 0,
        // Clamped to the last page when drawn.
        KeyCode::End | KeyCode::Char('G') => state.offset = usize::MAX,
        KeyCode::Char('s') => {
            state.sort = state.sort.next();
            table::sort(&mut state.locks, state.sort);
        }
        KeyCode::Char('/') => {
            state.editing = true;
            state.filter.clear();
            state.offset = 0;
        }
        _ => {}
    }
    Action::Redraw
}

fn draw(frame: &mut ratatui::Frame<'_>, state: &mut State) {
    let area = frame.area();
    let width = usize::from(area.width.saturating_sub(2));
    let height = usize::from(area.height.saturating_sub(2));
    let shown: Vec<TopLock> = state
        .locks
        .iter()
        .filter(|lock| lock.lock.name.starts_with(&state.filter))
        .cloned()
        .collect();
    // Laid out over every row, not the visible ones: columns keep still while scrolling.
    let layout = table::layout(&shown, Some(width), state.longest_ttl);
    // Status line, header and footer take three lines.
    let page = height.saturating_sub(3).max(1);
    state.page = page;
    state.offset = state.offset.min(shown.len().saturating_sub(page));
    let end = (state.offset + page).min(shown.len());

    let mut lines = vec![status_line(state, shown.len(), width)];
    lines.push(Line::styled(
        layout.header.clone(),
        Style::new().add_modifier(Modifier::BOLD),
    ));
    let stale = state.error.is_some();
    for row in &layout.rows[state.offset..end] {
        let style = if stale {
            Style::new().add_modifier(Modifier::DIM)
        } else {
            Style::new()
        };
        lines.push(Line::styled(row.clone(), style));
    }
    if shown.is_empty() {
        lines.push(Line::raw(if state.filter.is_empty() {
            "(no lock held)".to_owned()
        } else {
            format!("(no lock held whose name starts with {})", state.filter)
        }));
    }
    // The footer sits on the last line whatever the number of rows.
    while lines.len() + 1 < height {
        lines.push(Line::raw(""));
    }
    lines.push(footer(state, shown.len(), end, width));
    let block = Block::bordered().title(" redlatch top ");
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

fn status_line(state: &State, shown: usize, width: usize) -> Line<'static> {
    if let Some(error) = &state.error {
        let text = format!(
            "disconnected, retrying every {}: {error}",
            humantime::format_duration(state.interval)
        );
        return Line::from(Span::styled(
            table::shorten(&text, width),
            Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
        ));
    }
    let filter = if state.filter.is_empty() {
        String::new()
    } else {
        format!(" starting with {}", state.filter)
    };
    let text = format!(
        "{shown} locks held{filter}, sorted by {}, refresh every {}",
        state.sort.as_str(),
        humantime::format_duration(state.interval)
    );
    Line::raw(table::shorten(&text, width))
}

fn footer(state: &State, shown: usize, end: usize, width: usize) -> Line<'static> {
    if state.editing {
        let text = format!("filter: {}_  (Enter keeps it, Esc clears it)", state.filter);
        return Line::raw(table::shorten(&text, width));
    }
    let above = state.offset;
    let below = shown.saturating_sub(end);
    let mut parts = Vec::new();
    if above > 0 {
        parts.push(format!("{above} more above"));
    }
    if below > 0 {
        parts.push(format!("{below} more below"));
    }
    let position = parts.join(", ");
    let keys = "↑↓ jk PgUp PgDn Home End scroll · s sort · / filter · q quit";
    let text = if position.is_empty() {
        keys.to_owned()
    } else if position.chars().count() + 3 + keys.chars().count() <= width {
        format!("{position} · {keys}")
    } else {
        position
    };
    Line::styled(
        table::shorten(&text, width),
        Style::new().add_modifier(Modifier::REVERSED),
    )
}
