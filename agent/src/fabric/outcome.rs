//! One fabric check's result, the record it is sent as, and the fix for
//! each check (one owner of the advice `doctor`, the logs and the docs
//! give).

use boltwatch_proto::fabric::Check;
use boltwatch_proto::v1::FabricCheck;

/// One check's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Which check.
    pub check: Check,
    /// The interface it is about, empty for the node.
    pub interface: String,
    /// The RDMA device, for [`Check::RdmaPortActive`].
    pub device: String,
    /// Passes.
    pub ok: bool,
    /// What was measured.
    pub detail: String,
}

impl Outcome {
    pub(super) fn node(check: Check, ok: bool, detail: String) -> Outcome {
        Outcome::on(check, "", ok, detail)
    }

    pub(super) fn on(check: Check, interface: &str, ok: bool, detail: String) -> Outcome {
        Outcome {
            check,
            interface: interface.to_string(),
            device: String::new(),
            ok,
            detail,
        }
    }

    /// The record sent for it.
    pub fn record(&self) -> FabricCheck {
        FabricCheck {
            check: self.check.name().to_string(),
            interface: self.interface.clone(),
            ok: self.ok,
            detail: self.detail.clone(),
            device: self.device.clone(),
        }
    }

    /// What to do when it fails: the command or setting that fixes it.
    pub fn advice(&self) -> &'static str {
        advice(self.check)
    }
}

/// What fixes a failing check. Exhaustive: a new check says its fix.
pub fn advice(check: Check) -> &'static str {
    match check {
        Check::SleepDisabled => "the node idle-sleeps and goes dark (no wake-on-LAN over Thunderbolt): sudo pmset -a sleep 0",
        Check::AutorestartEnabled => "the node stays off after a power failure: sudo pmset -a autorestart 1",
        Check::WakeOnNetworkEnabled => "a sleeping node cannot be woken over its Ethernet: sudo pmset -a womp 1",
        Check::BridgeSinglePort => "a bridge across several cabled Thunderbolt ports forwards like a hub and storms in a ring: disable Thunderbolt Bridge (System Settings > Network) and address each port",
        Check::NoDefaultRoute => "LAN traffic leaks onto the cable (or cluster traffic onto the LAN): give the Thunderbolt interface a static address with no router",
        Check::NoDhcpLease => "a DHCP lease on the cable adds a default route through it: configure the Thunderbolt interface manually (no DHCP)",
        Check::UptimeUnderTcpLimit => "past 49 days 17 hours of uptime new TCP connections fail while ping works: reboot the node in a maintenance window",
        Check::RdmaReady => "RDMA is off or a port's device is not active: run `rdma_ctl enable` from Recovery on both ends, use Thunderbolt 5 ports, disable Thunderbolt Bridge",
        Check::RdmaPortActive => "the port's RDMA device is not active: the other end needs RDMA enabled, and Thunderbolt 4 ports never become active",
    }
}
