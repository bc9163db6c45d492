//! The `bandwidth_*` keys and flags: parsed and checked here so the
//! schedule they describe is one the planner accepts
//! ([`crate::bandwidth::schedule::plan_config`]).

use std::net::SocketAddr;
use std::time::Duration;

use toml::Spanned;

use super::{flag_or_file, parse_duration, Config, ConfigError, Ctx, FLAGS};

pub(super) struct RawBandwidth {
    pub(super) enabled: Option<Spanned<bool>>,
    pub(super) listen: Option<Spanned<String>>,
    pub(super) interval: Option<Spanned<String>>,
    pub(super) duration: Option<Spanned<String>>,
    pub(super) streams: Option<Spanned<i64>>,
    pub(super) duty_cycle: Option<Spanned<f64>>,
    pub(super) peers: Option<Spanned<std::collections::BTreeMap<String, String>>>,
}

pub(super) struct FlagsBandwidth {
    pub(super) listen: Option<String>,
    pub(super) interval: Option<String>,
    pub(super) duration: Option<String>,
    pub(super) off: bool,
}

/// The `bandwidth_*` keys and flags; the schedule they make must be
/// feasible (checked with the planner's own rules).
pub(super) fn build(
    c: &mut Config,
    cx: &Ctx<'_>,
    raw: RawBandwidth,
    flags: FlagsBandwidth,
) -> Result<(), ConfigError> {
    let flag_err = |key: &str, message: String| ConfigError::Invalid {
        file: FLAGS.to_string(),
        line: 0,
        key: key.to_string(),
        message,
    };
    if let Some(v) = raw.enabled {
        c.bandwidth_enabled = *v.get_ref();
    }
    if flags.off {
        c.bandwidth_enabled = false;
    }
    if let Some(v) = raw.listen {
        c.bandwidth_listen = v.get_ref().parse().map_err(|e| {
            cx.invalid(
                "bandwidth_listen",
                v.span(),
                format!("`{}`: {e}", v.get_ref()),
            )
        })?;
    }
    if let Some(v) = flags.listen {
        c.bandwidth_listen = v
            .parse()
            .map_err(|e| flag_err("--bandwidth-listen", format!("`{v}`: {e}")))?;
    }
    for (key, raw, flag, into) in [
        (
            "bandwidth_interval",
            raw.interval,
            flags.interval,
            &mut c.bandwidth_interval,
        ),
        (
            "bandwidth_duration",
            raw.duration,
            flags.duration,
            &mut c.bandwidth_duration,
        ),
    ] {
        if let Some(v) = raw {
            *into = parse_duration(v.get_ref()).map_err(|m| cx.invalid(key, v.span(), m))?;
        }
        if let Some(v) = flag {
            *into = parse_duration(&v)
                .map_err(|m| flag_err(&format!("--{}", key.replace('_', "-")), m))?;
        }
    }
    let d = c.bandwidth_duration;
    if d < Duration::from_secs(1) || d > Duration::from_secs(3600) || d.subsec_nanos() != 0 {
        return Err(flag_or_file(
            cx,
            "bandwidth_duration",
            format!("{d:?}: must be whole seconds in 1s..1h"),
        ));
    }
    if let Some(v) = raw.streams {
        let n = *v.get_ref();
        if !(1..=128).contains(&n) {
            return Err(cx.invalid(
                "bandwidth_streams",
                v.span(),
                format!("{n} is outside 1..128"),
            ));
        }
        c.bandwidth_streams = n as u32;
    }
    if let Some(v) = raw.duty_cycle {
        c.bandwidth_duty_cycle = *v.get_ref();
    }
    if let Some(v) = raw.peers {
        let span = v.span();
        for (name, addr) in v.into_inner() {
            let a: SocketAddr = addr.parse().map_err(|e| {
                cx.invalid(
                    "bandwidth_peers",
                    span.clone(),
                    format!("`{name}`: `{addr}`: {e} (expected IP:PORT)"),
                )
            })?;
            if !c.peers.iter().any(|p| p.name == name) {
                return Err(cx.invalid(
                    "bandwidth_peers",
                    span.clone(),
                    format!("`{name}` is not one of the peers"),
                ));
            }
            c.bandwidth_peers.insert(name, a);
        }
    }
    crate::bandwidth::schedule::plan_config(
        c.bandwidth_interval,
        c.bandwidth_duration,
        c.bandwidth_duty_cycle,
    )
    .map_err(|e| {
        flag_or_file(
            cx,
            "bandwidth_interval",
            format!(
                "{e} (interval {:?}, duration {:?}, duty cycle {})",
                c.bandwidth_interval, c.bandwidth_duration, c.bandwidth_duty_cycle
            ),
        )
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::{Overrides, RawConfig};
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        let raw = RawConfig::from_toml("agent.toml", text)?;
        Config::build(
            Some(("agent.toml".into(), text.into(), raw)),
            Overrides::default(),
        )
    }

    #[test]
    fn bandwidth_keys_defaults_flags_and_peer_addresses() {
        let c = parse("peers = [\"b=10.0.0.2:862\", \"c=10.0.0.3:862\"]\n").unwrap();
        assert!(c.bandwidth_enabled);
        assert_eq!(c.bandwidth_listen, "0.0.0.0:5202".parse().unwrap());
        assert_eq!(c.bandwidth_interval, Duration::from_secs(300));
        assert_eq!(c.bandwidth_duration, Duration::from_secs(10));
        assert_eq!(c.bandwidth_streams, 4);
        assert_eq!(c.bandwidth_duty_cycle, 0.05);
        assert_eq!(
            c.bandwidth_addr(&c.peers[0]),
            "10.0.0.2:5202".parse().unwrap()
        );
        let text = "peers = [\"b=10.0.0.2:862\", \"c=10.0.0.3:862\"]\n\
                    bandwidth_listen = \"0.0.0.0:6000\"\nbandwidth_streams = 2\n\
                    bandwidth_duty_cycle = 0.5\n[bandwidth_peers]\nc = \"10.9.9.9:7000\"\n";
        let raw = RawConfig::from_toml("f", text).unwrap();
        let c = Config::build(
            Some(("f".into(), text.into(), raw)),
            Overrides {
                bandwidth_interval: Some("5s".into()),
                bandwidth_duration: Some("2s".into()),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(
            c.bandwidth_addr(&c.peers[0]),
            "10.0.0.2:6000".parse().unwrap()
        );
        assert_eq!(
            c.bandwidth_addr(&c.peers[1]),
            "10.9.9.9:7000".parse().unwrap()
        );
        assert_eq!(c.bandwidth_interval, Duration::from_secs(5));
        assert_eq!(c.bandwidth_duration, Duration::from_secs(2));
        assert_eq!((c.bandwidth_streams, c.bandwidth_duty_cycle), (2, 0.5));
        let off = Config::build(
            None,
            Overrides {
                no_bandwidth: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert!(!off.bandwidth_enabled);
    }

    #[test]
    fn infeasible_bandwidth_schedules_are_refused() {
        // 1 % of 10 minutes (6 s) cannot hold a 10 s test.
        let e = parse("bandwidth_duty_cycle = 0.01\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("bandwidth_interval"), "{e}");
        assert!(parse("bandwidth_duration = \"1500ms\"\n").is_err());
        assert!(parse("bandwidth_interval = \"10s\"\n").is_err());
        let e = parse("[bandwidth_peers]\nzz = \"10.0.0.9:5202\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("`zz` is not one of the peers"), "{e}");
        let e = parse("\nbandwidth_streams = 0\n").unwrap_err().to_string();
        assert!(
            e.starts_with("agent.toml:2: key `bandwidth_streams`"),
            "{e}"
        );
    }
}
