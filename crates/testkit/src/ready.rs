//! Telling whether a freshly spawned server is up, and explaining why not.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use crate::server_settings::{Auth, LOG_FILE, STDIO_FILE};

/// Outcome of one readiness probe.
#[derive(Debug)]
pub(crate) enum Probe {
    /// Our server answered `PING` with `PONG` (after a successful `AUTH`, if
    /// needed).
    Ready,
    /// Not listening yet, still loading, or another process's server is on
    /// the port.
    NotYet,
    /// The server answered with an error that waiting will not fix
    /// (e.g. `WRONGPASS`), if it is ours.
    Rejected(String),
}

/// Give up on a reply larger than this (`INFO server` is about 1 KiB).
const MAX_REPLY: usize = 64 * 1024;

/// Connect to `addr`, log in if needed, `PING`, and check with `INFO server`
/// that the answer comes from process `pid`: another test process may have
/// raced us to the port, and its server must not pass for ours.
///
/// Speaks raw RESP so the check does not depend on a client library's
/// connection handshake.
pub(crate) fn probe(addr: SocketAddr, auth: Option<Auth<'_>>, pid: u32) -> Probe {
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(250)) else {
        return Probe::NotYet;
    };
    let timeout = Some(Duration::from_secs(1));
    if stream.set_read_timeout(timeout).is_err() || stream.set_write_timeout(timeout).is_err() {
        return Probe::NotYet;
    }

    let mut request = Vec::new();
    if let Some(auth) = auth {
        encode(&mut request, &["AUTH", auth.user, auth.password]);
    }
    encode(&mut request, &["PING"]);
    encode(&mut request, &["INFO", "server"]);
    if stream.write_all(&request).is_err() {
        return Probe::NotYet;
    }

    let mut reply = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return Probe::NotYet,
            Ok(n) => reply.extend_from_slice(&chunk[..n]),
        }
        if let Some(outcome) = judge(&reply, auth.is_some(), pid) {
            return outcome;
        }
        if reply.len() > MAX_REPLY {
            return Probe::NotYet;
        }
    }
}

/// Judge the replies received so far; `None` means "incomplete, read more".
fn judge(reply: &[u8], with_auth: bool, pid: u32) -> Option<Probe> {
    let mut pos = 0;
    if with_auth {
        let line = take_line(reply, &mut pos)?;
        if line != b"+OK" {
            return Some(classify(line));
        }
    }
    let line = take_line(reply, &mut pos)?;
    if line != b"+PONG" {
        return Some(classify(line));
    }
    let line = take_line(reply, &mut pos)?;
    let Some(len) = line
        .strip_prefix(b"$")
        .and_then(|n| std::str::from_utf8(n).ok())
        .and_then(|n| n.parse::<usize>().ok())
    else {
        return Some(classify(line));
    };
    let info = reply.get(pos..pos + len)?;
    let ours = format!("process_id:{pid}\r\n");
    let is_ours = info.windows(ours.len()).any(|w| w == ours.as_bytes());
    Some(if is_ours { Probe::Ready } else { Probe::NotYet })
}

/// The next complete `\r\n`-terminated line at `*pos`, without its ending.
fn take_line<'a>(buf: &'a [u8], pos: &mut usize) -> Option<&'a [u8]> {
    let rest = &buf[*pos..];
    let end = rest.windows(2).position(|w| w == b"\r\n")?;
    *pos += end + 2;
    Some(&rest[..end])
}

fn classify(line: &[u8]) -> Probe {
    match line.strip_prefix(b"-") {
        Some(err) if err.starts_with(b"LOADING") => Probe::NotYet,
        Some(err) => Probe::Rejected(String::from_utf8_lossy(err).into_owned()),
        None => Probe::NotYet,
    }
}

/// Append `args` to `out` as a RESP array of bulk strings.
fn encode(out: &mut Vec<u8>, args: &[&str]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
}

/// The last lines of the server's log and of its stdout/stderr, to append to
/// an error message.
pub(crate) fn log_tail(dir: &Path) -> String {
    const LINES: usize = 20;
    let mut out = String::new();
    for name in [LOG_FILE, STDIO_FILE] {
        let path = dir.join(name);
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes);
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        if lines.is_empty() {
            continue;
        }
        out.push_str(&format!("\n--- last lines of {} ---\n", path.display()));
        out.push_str(&lines[lines.len().saturating_sub(LINES)..].join("\n"));
    }
    if out.is_empty() {
        out = format!("\n(no output from redis-server in {})", dir.display());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_writes_resp_arrays() {
        let mut out = Vec::new();
        encode(&mut out, &["AUTH", "u", "pässword"]);
        assert_eq!(
            out,
            b"*3\r\n$4\r\nAUTH\r\n$1\r\nu\r\n$9\r\np\xc3\xa4ssword\r\n"
        );
    }

    #[test]
    fn probe_of_a_closed_port_is_not_yet() {
        // Bind then drop to get a port nobody listens on.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        assert!(matches!(probe(addr, None, 1), Probe::NotYet));
    }

    #[test]
    fn judge_accepts_only_our_pid() {
        let info = "# Server\r\nredis_version:7.0.15\r\nprocess_id:42\r\n";
        let reply = format!("+OK\r\n+PONG\r\n${}\r\n{info}\r\n", info.len());
        assert!(matches!(
            judge(reply.as_bytes(), true, 42),
            Some(Probe::Ready)
        ));
        assert!(matches!(
            judge(reply.as_bytes(), true, 4),
            Some(Probe::NotYet)
        ));
        // Cut anywhere before the end of the bulk string: read more.
        let cut = reply.len() - 3;
        assert!(judge(&reply.as_bytes()[..cut], true, 42).is_none());
    }

    #[test]
    fn judge_reports_errors_but_waits_for_loading() {
        let wrongpass = b"-WRONGPASS invalid username-password pair\r\n-NOAUTH x\r\n";
        match judge(wrongpass, true, 1) {
            Some(Probe::Rejected(msg)) => assert!(msg.starts_with("WRONGPASS")),
            other => panic!("expected a rejection, got {other:?}"),
        }
        let loading = b"-LOADING Redis is loading the dataset in memory\r\n";
        assert!(matches!(judge(loading, false, 1), Some(Probe::NotYet)));
    }

    #[test]
    fn log_tail_keeps_the_last_lines() {
        let dir = tempfile::tempdir().unwrap();
        let log: String = (0..30).map(|i| format!("line {i}\n")).collect();
        std::fs::write(dir.path().join(LOG_FILE), log).unwrap();
        let tail = log_tail(dir.path());
        assert!(tail.contains("line 29"));
        assert!(tail.contains("line 10"));
        assert!(!tail.contains("line 9\n"));
    }
}
