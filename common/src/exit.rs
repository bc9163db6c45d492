//! Exit statuses both binaries share, and the one place a service manager
//! can change what a config error exits with.
//!
//! A config error exits [`EX_CONFIG`] (78, sysexits.h): nothing was started,
//! and systemd's `RestartPreventExitStatus=78` keeps the unit stopped instead
//! of restarting it into the same error. launchd has no such filter: with
//! `KeepAlive { SuccessfulExit = false }` it restarts on every non-zero exit,
//! so its plist sets `BOLTWATCH_CONFIG_ERROR_EXIT_STATUS=0` and a config error
//! then ends the job for good (crashes and runtime failures still exit
//! non-zero and are restarted).

/// EX_CONFIG from sysexits.h.
pub const EX_CONFIG: u8 = 78;

/// The environment variable that overrides the config-error exit status.
pub const CONFIG_ERROR_STATUS_VAR: &str = "BOLTWATCH_CONFIG_ERROR_EXIT_STATUS";

/// What a config error exits with, given the override variable's value
/// (`None` when unset). An unparsable override is ignored: the safe answer
/// is still "do not restart" under systemd, and the caller logs the value.
pub fn config_error_status(var: Option<&str>) -> u8 {
    var.and_then(|v| v.trim().parse::<u8>().ok())
        .unwrap_or(EX_CONFIG)
}

/// [`config_error_status`] of this process's environment.
pub fn config_error_status_from_env() -> u8 {
    config_error_status(std::env::var(CONFIG_ERROR_STATUS_VAR).ok().as_deref())
}

/// Reports a config error of `binary` on stderr and returns its exit
/// status: [`EX_CONFIG`] for `--check-config` (a check always says what
/// it found), otherwise [`config_error_status_from_env`], with a word on
/// what the service manager will do.
pub fn config_error(binary: &str, e: &dyn std::fmt::Display, checking: bool) -> u8 {
    if checking {
        eprintln!("{binary}: config error: {e}");
        return EX_CONFIG;
    }
    let status = config_error_status_from_env();
    eprintln!(
        "{binary}: config error: {e}; exiting with status {status}, the service stays stopped until the config is fixed"
    );
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_ex_config_and_override_is_taken() {
        assert_eq!(config_error_status(None), 78);
        assert_eq!(config_error_status(Some("0")), 0);
        assert_eq!(config_error_status(Some(" 0\n")), 0);
        assert_eq!(config_error_status(Some("nonsense")), 78);
        assert_eq!(config_error_status(Some("300")), 78);
    }
}
