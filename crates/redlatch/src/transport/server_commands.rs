//! The script-free commands a string lock can use, asked of the server the
//! first time a client needs them (a token lock's first call), not at
//! connect: `SET … IFEQ` (Valkey 8.1+, Redis 8.4+), `DELIFEQ` (Valkey
//! 9.0+), `DELEX … IFEQ` (Redis 8.4+), and whether scripts run at all
//! (Valkey 9.1 can be built or started without Lua).
//!
//! Each is asked by sending it, harmlessly: against a key that does not
//! exist, `SET … IFEQ` writes nothing, `DELIFEQ` and `DELEX` delete
//! nothing; `EVAL "return 1" 0` touches no key. An answer means available;
//! an unknown command or a syntax error means absent; a refusal (an ACL,
//! a renamed command) means denied.

use std::time::Duration;

use redis::Value;

use crate::transport::Connection;
use crate::transport::capabilities::Support;

/// The key every question names, after the client's key prefix (an ACL
/// that confines the client to its prefix allows it): never written, each
/// command being a no-op on a missing key.
const PROBE_KEY: &str = "redlatch_probe";

/// What the server answered about the string lock's commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServerCommands {
    /// `SET key value IFEQ old PX ms`: renewal without a script.
    pub(crate) set_ifeq: Support,
    /// `DELIFEQ key value`: release without a script.
    pub(crate) delifeq: Support,
    /// `DELEX key IFEQ value`: Redis's release without a script.
    pub(crate) delex_ifeq: Support,
    /// `EVAL`: the scripts' fallback, and the fenced acquire.
    pub(crate) scripting: Support,
}

impl ServerCommands {
    /// Asks the server, each question bounded by `limit` (unanswered
    /// counts as absent), naming a key under `prefix`.
    pub(crate) async fn probe(conn: &Connection, limit: Duration, prefix: &str) -> ServerCommands {
        let key = format!("{prefix}{PROBE_KEY}");
        let ask = |command: redis::Cmd| {
            let mut conn = conn.clone();
            async move {
                match tokio::time::timeout(limit, command.query_async::<Value>(&mut conn)).await {
                    Ok(Ok(Value::ServerError(error))) => judge(Err(error.into())),
                    Ok(answer) => judge(answer),
                    Err(_) => Support::Absent,
                }
            }
        };
        let mut set = redis::cmd("SET");
        set.arg(&key)
            .arg("0")
            .arg("IFEQ")
            .arg("0")
            .arg("PX")
            .arg(1);
        let mut delifeq = redis::cmd("DELIFEQ");
        delifeq.arg(&key).arg("0");
        let mut delex = redis::cmd("DELEX");
        delex.arg(&key).arg("IFEQ").arg("0");
        let mut eval = redis::cmd("EVAL");
        eval.arg("return 1").arg(0);
        let (set_ifeq, delifeq, delex_ifeq, scripting) =
            tokio::join!(ask(set), ask(delifeq), ask(delex), ask(eval));
        ServerCommands {
            set_ifeq,
            delifeq,
            delex_ifeq,
            scripting,
        }
    }

    /// One line for logs.
    pub(crate) fn summary(&self) -> String {
        format!(
            "SET IFEQ {}, DELIFEQ {}, DELEX IFEQ {}, scripting {}",
            self.set_ifeq, self.delifeq, self.delex_ifeq, self.scripting
        )
    }
}

/// What one question's answer says of its command.
fn judge(answer: redis::RedisResult<Value>) -> Support {
    let error = match answer {
        Ok(_) => return Support::Available,
        Err(error) => error,
    };
    let text = error.to_string().to_ascii_lowercase();
    match error.code() {
        Some("NOPERM") => Support::Denied(error.to_string()),
        // The command, or the option, is not there: an older server, or
        // scripting built out (`unknown command`, `ERR syntax error`).
        _ if text.contains("unknown command")
            || text.contains("syntax error")
            || text.contains("unknown subcommand") =>
        {
            Support::Absent
        }
        // A server with scripting turned off answers in its own words.
        _ if text.contains("script") || text.contains("lua") => Support::Absent,
        // Answered, but refused: renamed, disabled, a proxy's refusal.
        Some(_) => Support::Denied(error.to_string()),
        // No answer (a broken connection): not known to be there.
        None => Support::Absent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_error(line: &str) -> redis::RedisResult<Value> {
        match redis::parse_redis_value(format!("-{line}\r\n").as_bytes()) {
            Ok(Value::ServerError(error)) => Err(error.into()),
            other => panic!("not a server error: {other:?}"),
        }
    }

    #[test]
    fn answers_are_judged_available_absent_or_denied() {
        assert_eq!(judge(Ok(Value::Nil)), Support::Available);
        assert_eq!(judge(Ok(Value::Int(0))), Support::Available);
        assert_eq!(judge(server_error("ERR syntax error")), Support::Absent);
        assert_eq!(
            judge(server_error(
                "ERR unknown command 'DELIFEQ', with args beginning with: "
            )),
            Support::Absent
        );
        assert!(matches!(
            judge(server_error(
                "NOPERM User x has no permissions to run the 'delifeq' command"
            )),
            Support::Denied(_)
        ));
    }
}
