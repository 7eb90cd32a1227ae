//! One script and one request of it: sent as a function of redlatch's
//! library (FCALL) where the server has the library, by EVALSHA otherwise,
//! and loaded again when the server lost it.

use redis::{Cmd, FromRedisValue, RedisError, RedisResult, Script, ToRedisArgs};
use tracing::warn;

use crate::scripts::arg_list::ArgList;
use crate::scripts::library;
use crate::transport::Connection;

/// One Lua script: its source (shared parts in front), its EVALSHA form and
/// its name in redlatch's function library.
pub(crate) struct Lua {
    /// The file's name without `.lua`, `_resendable` added for the
    /// re-send-safe form: the function's name after the library's prefix.
    pub(crate) name: String,
    pub(crate) source: String,
    /// Redis function flags of the function (`allow-oom` for scripts that
    /// only give back or extend).
    pub(crate) flags: &'static [&'static str],
    script: Script,
}

impl Lua {
    pub(crate) fn new(name: String, source: String, flags: &'static [&'static str]) -> Lua {
        Lua {
            script: Script::new(&source),
            name,
            source,
            flags,
        }
    }

    /// The SHA-1 of the source, as EVALSHA names it.
    pub(crate) fn hash(&self) -> &str {
        self.script.get_hash()
    }

    /// A request with `key` as its first key.
    pub(crate) fn key<T: ToRedisArgs>(&'static self, key: T) -> Invocation {
        let mut invocation = self.prepare_invoke();
        invocation.key(key);
        invocation
    }

    /// A request with no keys or arguments yet.
    pub(crate) fn prepare_invoke(&'static self) -> Invocation {
        Invocation {
            lua: self,
            keys: ArgList::default(),
            args: ArgList::default(),
        }
    }
}

/// One request of a [`Lua`] script: its keys and arguments.
pub(crate) struct Invocation {
    lua: &'static Lua,
    keys: ArgList,
    args: ArgList,
}

impl Invocation {
    /// Adds a key.
    pub(crate) fn key<T: ToRedisArgs>(&mut self, key: T) -> &mut Invocation {
        key.write_redis_args(&mut self.keys);
        self
    }

    /// Adds an argument.
    pub(crate) fn arg<T: ToRedisArgs>(&mut self, arg: T) -> &mut Invocation {
        arg.write_redis_args(&mut self.args);
        self
    }

    /// The command that runs the request on `conn`: FCALL where the server
    /// has redlatch's function library, EVALSHA otherwise (for a pipeline;
    /// see [`Invocation::load_missing`]).
    pub(crate) fn command(&self, conn: &Connection) -> Cmd {
        let mut cmd = if conn.script_routes().functions() {
            let mut cmd = redis::cmd("FCALL");
            cmd.arg(library::function_name(&self.lua.name));
            cmd
        } else {
            let mut cmd = redis::cmd("EVALSHA");
            cmd.arg(self.lua.hash());
            cmd
        };
        cmd.arg(self.keys.len());
        for value in self.keys.iter().chain(self.args.iter()) {
            cmd.arg(value);
        }
        cmd
    }

    /// Runs the request: by FCALL, loading the library again if the server
    /// lost it (a restart without persistence, a `FUNCTION FLUSH`, a new
    /// cluster node), and by EVALSHA where functions cannot be used, loading
    /// the script on NOSCRIPT. A server that refuses functions from now on
    /// (an ACL changed, a proxy) turns this client to EVALSHA for good.
    pub(crate) async fn invoke_async<T: FromRedisValue>(
        &self,
        conn: &mut Connection,
    ) -> RedisResult<T> {
        if conn.script_routes().functions() {
            match self.command(conn).query_async(conn).await {
                Err(error) if library::lost(&error) => {
                    // Loaded again, unless the server refused the library
                    // (then EVALSHA, below).
                    if self.load_missing(conn, &error).await? && conn.script_routes().functions() {
                        match self.command(conn).query_async(conn).await {
                            // Still missing: the library lacks this script.
                            Err(error) if library::lost(&error) => {}
                            done => return done,
                        }
                    }
                }
                Err(error) if library::refused(&error) => {
                    stop_using_functions(conn, &error);
                }
                done => return done,
            }
        }
        let mut invocation = self.lua.script.prepare_invoke();
        for key in self.keys.iter() {
            invocation.key(key);
        }
        for arg in self.args.iter() {
            invocation.arg(arg);
        }
        invocation.invoke_async(conn).await
    }

    /// After `error` from a request sent with [`Invocation::command`]: when
    /// the server lost the script (NOSCRIPT) or the library, loads it and
    /// says true (send the request again, its command built anew); false for
    /// any other error. A server that refuses to load the library turns the
    /// client to EVALSHA (true: build the command again).
    pub(crate) async fn load_missing(
        &self,
        conn: &mut Connection,
        error: &RedisError,
    ) -> RedisResult<bool> {
        if error.code() == Some("NOSCRIPT") {
            self.lua.script.load_async(conn).await?;
            return Ok(true);
        }
        if library::lost(error) || library::refused(error) {
            match library::load(conn).await {
                Ok(()) => {}
                Err(error) if library::refused(&error) => stop_using_functions(conn, &error),
                Err(error) => return Err(error),
            }
            return Ok(true);
        }
        Ok(false)
    }
}

fn stop_using_functions(conn: &Connection, error: &RedisError) {
    if conn.script_routes().set_functions(false) {
        warn!(%error, "redlatch: the server refused redlatch's function library; scripts run by EVALSHA from now on");
    }
}
