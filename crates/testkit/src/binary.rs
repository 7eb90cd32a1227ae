//! Locating the `redis-server` executable.

use std::ffi::OsStr;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Where to look when neither `REDIS_SERVER` nor `PATH` has it (Debian and
/// Homebrew/source installs respectively).
const FALLBACKS: [&str; 2] = ["/usr/bin/redis-server", "/usr/local/bin/redis-server"];

const HINT: &str = "install Debian's `redis-server` package (sudo apt-get install -y redis-server) \
                    or set REDIS_SERVER";

/// Path of the `redis-server` executable the testkit starts.
///
/// Looked up, in order: the `REDIS_SERVER` environment variable (a path, or a
/// bare name searched on `PATH`), `redis-server` on `PATH`,
/// `/usr/bin/redis-server`, `/usr/local/bin/redis-server`.
///
/// # Errors
///
/// [`io::ErrorKind::NotFound`] with a message saying how to install it:
/// "redis-server not found: install Debian's `redis-server` package
/// (sudo apt-get install -y redis-server) or set REDIS_SERVER".
pub fn redis_server_path() -> io::Result<PathBuf> {
    let env = std::env::var_os("REDIS_SERVER");
    let path = std::env::var_os("PATH");
    find(env.as_deref(), path.as_deref(), &FALLBACKS.map(Path::new))
}

/// The lookup itself, with its inputs as parameters so it can be tested
/// without touching the process environment.
fn find(env: Option<&OsStr>, path_var: Option<&OsStr>, fallbacks: &[&Path]) -> io::Result<PathBuf> {
    if let Some(wanted) = env.filter(|v| !v.is_empty()) {
        let wanted = Path::new(wanted);
        // A bare name means "this name on PATH", like a shell would do.
        let found = if wanted.components().count() == 1 && !wanted.is_absolute() {
            search_path(wanted.as_os_str(), path_var)
        } else {
            Some(wanted.to_path_buf()).filter(|p| is_executable(p))
        };
        return found.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "redis-server not found: REDIS_SERVER={} is not an executable file; {HINT}",
                    wanted.display()
                ),
            )
        });
    }
    search_path(OsStr::new("redis-server"), path_var)
        .or_else(|| {
            fallbacks
                .iter()
                .find(|p| is_executable(p))
                .map(|p| p.to_path_buf())
        })
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("redis-server not found: {HINT}"),
            )
        })
}

fn search_path(name: &OsStr, path_var: Option<&OsStr>) -> Option<PathBuf> {
    std::env::split_paths(path_var?)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_binary(dir: &Path, name: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[test]
    fn env_var_path_wins_over_path_and_fallbacks() {
        let tmp = tempfile::tempdir().unwrap();
        let custom = fake_binary(tmp.path(), "my-redis");
        let on_path = tempfile::tempdir().unwrap();
        fake_binary(on_path.path(), "redis-server");
        let found = find(
            Some(custom.as_os_str()),
            Some(on_path.path().as_os_str()),
            &[],
        )
        .unwrap();
        assert_eq!(found, custom);
    }

    #[test]
    fn env_var_bare_name_is_searched_on_path() {
        let on_path = tempfile::tempdir().unwrap();
        let expected = fake_binary(on_path.path(), "redis-server-7");
        let found = find(
            Some(OsStr::new("redis-server-7")),
            Some(on_path.path().as_os_str()),
            &[],
        )
        .unwrap();
        assert_eq!(found, expected);
    }

    #[test]
    fn env_var_pointing_nowhere_is_not_found() {
        let err = find(Some(OsStr::new("/nonexistent/redis-server")), None, &[]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert!(
            err.to_string()
                .contains("REDIS_SERVER=/nonexistent/redis-server")
        );
        assert!(
            err.to_string()
                .contains("sudo apt-get install -y redis-server")
        );
    }

    #[test]
    fn path_is_searched_before_fallbacks() {
        let on_path = tempfile::tempdir().unwrap();
        let expected = fake_binary(on_path.path(), "redis-server");
        let fallback_dir = tempfile::tempdir().unwrap();
        let fallback = fake_binary(fallback_dir.path(), "redis-server");
        let found = find(None, Some(on_path.path().as_os_str()), &[&fallback]).unwrap();
        assert_eq!(found, expected);
    }

    #[test]
    fn fallback_used_when_path_has_nothing() {
        let empty = tempfile::tempdir().unwrap();
        let fallback_dir = tempfile::tempdir().unwrap();
        let fallback = fake_binary(fallback_dir.path(), "redis-server");
        let found = find(
            None,
            Some(empty.path().as_os_str()),
            &[Path::new("/nonexistent"), &fallback],
        )
        .unwrap();
        assert_eq!(found, fallback);
    }

    #[test]
    fn nothing_found_gives_the_install_hint() {
        let empty = tempfile::tempdir().unwrap();
        let err = find(
            None,
            Some(empty.path().as_os_str()),
            &[Path::new("/nonexistent")],
        )
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert_eq!(
            err.to_string(),
            "redis-server not found: install Debian's `redis-server` package \
             (sudo apt-get install -y redis-server) or set REDIS_SERVER"
        );
    }

    #[test]
    fn non_executable_files_are_skipped() {
        let on_path = tempfile::tempdir().unwrap();
        std::fs::write(on_path.path().join("redis-server"), "data").unwrap();
        let err = find(None, Some(on_path.path().as_os_str()), &[]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }
}
