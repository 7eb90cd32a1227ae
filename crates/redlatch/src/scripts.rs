//! The Lua scripts, loaded from `scripts/*.lua`.
//!
//! They run by EVALSHA; `redis::Script` falls back to loading the script when
//! the server answers NOSCRIPT (after a restart or `SCRIPT FLUSH`).

use std::sync::LazyLock;

use redis::Script;

macro_rules! script {
    ($name:ident, $file:literal) => {
        pub(crate) static $name: LazyLock<Script> =
            LazyLock::new(|| Script::new(include_str!(concat!("../scripts/", $file))));
    };
}

script!(ACQUIRE, "acquire.lua");
script!(REENTER, "reenter.lua");
script!(RELEASE, "release.lua");
script!(RENEW, "renew.lua");
script!(FORCE_UNLOCK, "force_unlock.lua");
script!(STATUS, "status.lua");
script!(RAISE_TOKEN, "raise_token.lua");
