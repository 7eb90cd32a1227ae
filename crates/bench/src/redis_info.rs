//! Figures read from the server under test with INFO: its CPU time and memory.

use redis::aio::MultiplexedConnection;

use crate::contender::no_timeout;

/// A harness connection to `url` (no response timeout).
pub async fn connect(url: &str) -> Result<MultiplexedConnection, String> {
    redis::Client::open(url)
        .map_err(|error| format!("redis URL: {error}"))?
        .get_multiplexed_async_connection_with_config(&no_timeout())
        .await
        .map_err(|error| format!("connect: {error}"))
}

/// CPU seconds redis-server has used (user + system), from INFO cpu.
pub async fn used_cpu(conn: &mut MultiplexedConnection) -> Result<f64, String> {
    let info = info(conn, "cpu").await?;
    let field = |name: &str| -> Result<f64, String> {
        info.lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|value| value.trim().parse().ok())
            .ok_or_else(|| format!("INFO cpu has no {name}"))
    };
    Ok(field("used_cpu_user:")? + field("used_cpu_sys:")?)
}

/// What the server did, read from INFO: CPU, commands, reads of client
/// input (how often it woke to read a request) and the time spent inside
/// commands. Differences of two readings give a window's work.
#[derive(Debug, Clone, Copy, Default)]
pub struct Work {
    /// CPU seconds (user + system).
    pub cpu: f64,
    /// `total_commands_processed`.
    pub commands: f64,
    /// `total_reads_processed`: reads of client connections (0 where the
    /// server does not report it).
    pub reads: f64,
    /// Microseconds inside commands: the sum of commandstats' `usec`.
    pub command_usec: f64,
}

impl std::ops::Sub for Work {
    type Output = Work;
    fn sub(self, before: Work) -> Work {
        Work {
            cpu: self.cpu - before.cpu,
            commands: self.commands - before.commands,
            reads: self.reads - before.reads,
            command_usec: self.command_usec - before.command_usec,
        }
    }
}

/// The server's work so far (one INFO call for all sections).
pub async fn work(conn: &mut MultiplexedConnection) -> Result<Work, String> {
    let text = info(conn, "everything").await?;
    let field = |name: &str| -> Option<f64> {
        text.lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|value| value.trim().parse().ok())
    };
    let cpu = field("used_cpu_user:").ok_or("INFO has no used_cpu_user")?
        + field("used_cpu_sys:").ok_or("INFO has no used_cpu_sys")?;
    let command_usec = text
        .lines()
        .filter(|line| line.starts_with("cmdstat_"))
        .filter_map(|line| {
            line.split(',')
                .find_map(|pair| pair.strip_prefix("usec="))
                .and_then(|value| value.parse::<f64>().ok())
        })
        .sum();
    Ok(Work {
        cpu,
        commands: field("total_commands_processed:").unwrap_or(0.0),
        reads: field("total_reads_processed:").unwrap_or(0.0),
        command_usec,
    })
}

/// Bytes redis-server has allocated, `used_memory` of INFO memory.
pub async fn used_memory(conn: &mut MultiplexedConnection) -> Result<i64, String> {
    info(conn, "memory")
        .await?
        .lines()
        .find_map(|line| line.strip_prefix("used_memory:"))
        .and_then(|value| value.trim().parse().ok())
        .ok_or_else(|| "INFO memory has no used_memory".to_owned())
}

async fn info(conn: &mut MultiplexedConnection, section: &str) -> Result<String, String> {
    redis::cmd("INFO")
        .arg(section)
        .query_async(conn)
        .await
        .map_err(|error| format!("INFO {section}: {error}"))
}

/// One line of INFO commandstats: calls and CPU time of one command.
#[derive(Debug, Clone)]
pub struct CommandStat {
    /// The command, e.g. `fcall` or `evalsha`.
    pub name: String,
    pub calls: u64,
    /// Microseconds the server spent in it, scripts' own calls included.
    pub usec: u64,
}

/// INFO commandstats, busiest command first (by `usec`).
pub async fn command_stats(conn: &mut MultiplexedConnection) -> Result<Vec<CommandStat>, String> {
    let text = info(conn, "commandstats").await?;
    let mut stats: Vec<CommandStat> = text
        .lines()
        .filter_map(|line| {
            let (name, fields) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let field = |key: &str| -> Option<u64> {
                fields
                    .split(',')
                    .find_map(|pair| pair.strip_prefix(key)?.strip_prefix('='))?
                    .parse()
                    .ok()
            };
            Some(CommandStat {
                name: name.to_owned(),
                calls: field("calls")?,
                usec: field("usec")?,
            })
        })
        .collect();
    stats.sort_by_key(|stat| std::cmp::Reverse(stat.usec));
    Ok(stats)
}

/// CONFIG RESETSTAT: zeroes commandstats (not INFO cpu, which is the process's).
pub async fn reset_stats(conn: &mut MultiplexedConnection) -> Result<(), String> {
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async::<()>(conn)
        .await
        .map_err(|error| format!("CONFIG RESETSTAT: {error}"))
}

/// CPU seconds this process has used (user + system, every thread).
pub fn own_cpu() -> f64 {
    // SAFETY: getrusage writes into the zeroed struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}
