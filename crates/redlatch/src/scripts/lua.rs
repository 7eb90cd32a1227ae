//! One script and one request of it: sent as a function of redlatch's
//! library (FCALL) where the server has the library, by EVALSHA otherwise,
//! and loaded again when the server lost it.

use std::sync::OnceLock;

use redis::{Cmd, FromRedisValue, RedisError, RedisResult, Script, ToRedisArgs};
use tracing::warn;

use crate::scripts::arg_list::ArgList;
use crate::scripts::library;
use crate::transport::Connection;
use crate::transport::script_routes::FunctionLibrary;

/// One Lua script: its source (shared parts in front), its EVALSHA form and
/// its name in redlatch's function library.
pub(crate) struct Lua {
    /// The file's name without `.lua`, `_resendable` added for the
    /// re-send-safe form: the function's name after the library's prefix.
    pub(crate) name: String,
    /// The shared parts (`scripts/lib/*.lua`): local functions only, which
    /// the function library defines once per load, not once per call.
    pub(crate) parts: &'static str,
    /// What runs on each call, after the parts.
    pub(crate) body: String,
    /// The whole script, as EVALSHA runs it: the parts, then the body.
    pub(crate) source: String,
    /// Redis function flags of the function (`allow-oom` for scripts that
    /// only give back or extend).
    pub(crate) flags: &'static [&'static str],
    script: Script,
    /// [`Lua::function_name`], made once.
    function: OnceLock<String>,
}

impl Lua {
    pub(crate) fn new(
        name: String,
        parts: &'static str,
        body: String,
        flags: &'static [&'static str],
    ) -> Lua {
        let source = format!("{parts}{body}");
        Lua {
            script: Script::new(&source),
            name,
            parts,
            body,
            source,
            flags,
            function: OnceLock::new(),
        }
    }

    /// The SHA-1 of the source, as EVALSHA names it.
    pub(crate) fn hash(&self) -> &str {
        self.script.get_hash()
    }

    /// The script's name in the function library `library`, as FCALL
    /// names it. Made once: a program has one library (every primitive's
    /// scripts, `crate::primitives`).
    pub(crate) fn function_name(&self, library: FunctionLibrary) -> &str {
        let name = self
            .function
            .get_or_init(|| format!("{}_{}", library.name, self.name));
        debug_assert!(name.starts_with(library.name), "one library per program");
        name
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
        let (command, script) = match conn.script_routes().function_library() {
            Some(library) => ("FCALL", self.lua.function_name(library)),
            None => ("EVALSHA", self.lua.hash()),
        };
        // Sized once: grown value by value, a batch's command reallocated
        // its buffers a dozen times on every call.
        let values = 3 + self.keys.len() + self.args.len();
        let bytes = 32 + script.len() + self.keys.bytes() + self.args.bytes();
        let mut cmd = Cmd::with_capacity(values, bytes);
        cmd.arg(command).arg(script).arg(self.keys.len());
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
