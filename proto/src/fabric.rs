//! The fabric checks' names: one list, read by the agent (which runs the
//! checks) and the collector (which exports only the names it knows, so a
//! stranger's invented names cannot grow `/metrics`). docs/fabric.md says
//! what each measures and what to do when it fails.

/// A check of a setting or state known to take a Thunderbolt cluster down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Check {
    /// macOS: `pmset` `sleep` is 0 (Thunderbolt has no wake-on-LAN, so an
    /// idle-sleeping node is dark until someone wakes it).
    SleepDisabled,
    /// macOS: `pmset` `autorestart` is 1 (back on after a power failure).
    AutorestartEnabled,
    /// macOS: `pmset` `womp` is 1 (a management Ethernet can wake it).
    WakeOnNetworkEnabled,
    /// A bridge has at most one member with carrier: a bridge across two
    /// cabled ports forwards like a hub, and a ring of them storms forever.
    BridgeSinglePort,
    /// The default route does not leave through this cluster link.
    NoDefaultRoute,
    /// macOS: no DHCP lease on this cluster link (a lease adds a default
    /// route through the cable).
    NoDhcpLease,
    /// macOS: uptime is short of the reported 49.7-day TCP clock limit by
    /// more than the configured margin.
    UptimeUnderTcpLimit,
    /// RDMA is enabled and every RDMA device of a cluster link is active.
    RdmaReady,
    /// This RDMA device's port is active (`boltwatch_rdma_port_up`).
    RdmaPortActive,
}

impl Check {
    /// Every check, in the order `doctor` and the docs list them.
    pub const ALL: [Check; 9] = [
        Check::SleepDisabled,
        Check::AutorestartEnabled,
        Check::WakeOnNetworkEnabled,
        Check::BridgeSinglePort,
        Check::NoDefaultRoute,
        Check::NoDhcpLease,
        Check::UptimeUnderTcpLimit,
        Check::RdmaReady,
        Check::RdmaPortActive,
    ];

    /// The stable name: the `check` label and `FabricCheck.check`.
    pub fn name(self) -> &'static str {
        match self {
            Check::SleepDisabled => "sleep_disabled",
            Check::AutorestartEnabled => "autorestart_enabled",
            Check::WakeOnNetworkEnabled => "wake_on_network_enabled",
            Check::BridgeSinglePort => "bridge_single_port",
            Check::NoDefaultRoute => "no_default_route",
            Check::NoDhcpLease => "no_dhcp_lease",
            Check::UptimeUnderTcpLimit => "uptime_under_tcp_limit",
            Check::RdmaReady => "rdma_ready",
            Check::RdmaPortActive => "rdma_port_active",
        }
    }

    /// The check named `name`, if this build knows it.
    pub fn named(name: &str) -> Option<Check> {
        Check::ALL.into_iter().find(|c| c.name() == name)
    }
}

/// The reported uptime after which macOS's TCP clock stops (new TCP
/// connections fail, ping still works): 2^32 ms, 49 days 17 h.
pub const TCP_CLOCK_LIMIT_SECS: u64 = (1u64 << 32) / 1000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_name_their_check() {
        for c in Check::ALL {
            assert_eq!(Check::named(c.name()), Some(c));
        }
        let mut names: Vec<_> = Check::ALL.iter().map(|c| c.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Check::ALL.len());
        assert_eq!(Check::named("sleep"), None);
    }

    #[test]
    fn the_tcp_clock_limit_is_49_days_17_hours() {
        assert_eq!(TCP_CLOCK_LIMIT_SECS / 86_400, 49);
        assert_eq!(TCP_CLOCK_LIMIT_SECS % 86_400 / 3600, 17);
    }
}
