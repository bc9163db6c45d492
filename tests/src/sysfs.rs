//! Fixture sysfs trees for agents: a temporary directory laid out like
//! `/sys` (`class/net/<if>/...`, `class/thermal/thermal_zone<n>/...`) that
//! an agent is pointed at with `sysfs_root`. Tests change values between
//! reads to drive pollers without touching the host.

use std::path::{Path, PathBuf};

use crate::cmd::BedError;

/// What a fixture interface reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetIf {
    /// `carrier` (written only while admin up, as the kernel does).
    pub carrier: bool,
    /// Bit 0 of `flags`.
    pub admin_up: bool,
    /// `operstate`.
    pub oper_state: String,
    /// `carrier_up_count`.
    pub carrier_up_count: u64,
    /// `carrier_down_count`.
    pub carrier_down_count: u64,
    /// `mtu`.
    pub mtu: u32,
    /// `speed` in Mb/s; `None` leaves the file out (veth, thunderbolt-net).
    pub speed_mbps: Option<u64>,
}

impl Default for NetIf {
    fn default() -> NetIf {
        NetIf {
            carrier: true,
            admin_up: true,
            oper_state: "up".into(),
            carrier_up_count: 1,
            carrier_down_count: 0,
            mtu: 9000,
            speed_mbps: None,
        }
    }
}

/// A temporary sysfs root; removed on drop.
#[derive(Debug)]
pub struct SysfsFixture {
    dir: tempfile::TempDir,
}

impl SysfsFixture {
    /// An empty tree with `class/net` present.
    pub fn new() -> Result<SysfsFixture, BedError> {
        let dir = tempfile::tempdir().map_err(|source| BedError::Io {
            context: "creating a fixture sysfs root".into(),
            source,
        })?;
        let f = SysfsFixture { dir };
        f.mkdir(&f.root().join("class/net"))?;
        Ok(f)
    }

    /// The directory to pass as `sysfs_root`.
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// Path of a file below the root.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }

    fn mkdir(&self, p: &Path) -> Result<(), BedError> {
        std::fs::create_dir_all(p).map_err(|source| BedError::Io {
            context: format!("creating {}", p.display()),
            source,
        })
    }

    /// Writes `value` (plus a newline, as the kernel does) to `rel`,
    /// creating parent directories.
    pub fn write(&self, rel: &str, value: &str) -> Result<(), BedError> {
        let p = self.path(rel);
        if let Some(parent) = p.parent() {
            self.mkdir(parent)?;
        }
        std::fs::write(&p, format!("{value}\n")).map_err(|source| BedError::Io {
            context: format!("writing {}", p.display()),
            source,
        })
    }

    /// Creates or updates `class/net/<name>`.
    pub fn set_netif(&self, name: &str, s: &NetIf) -> Result<(), BedError> {
        let d = format!("class/net/{name}");
        let flags = if s.admin_up { 0x1003 } else { 0x1002 };
        self.write(&format!("{d}/flags"), &format!("{flags:#x}"))?;
        let carrier = self.path(&format!("{d}/carrier"));
        if s.admin_up {
            self.write(&format!("{d}/carrier"), if s.carrier { "1" } else { "0" })?;
        } else {
            // The kernel answers EINVAL; a missing file is the nearest thing.
            let _ = std::fs::remove_file(carrier);
        }
        self.write(&format!("{d}/operstate"), &s.oper_state)?;
        self.write(
            &format!("{d}/carrier_up_count"),
            &s.carrier_up_count.to_string(),
        )?;
        self.write(
            &format!("{d}/carrier_down_count"),
            &s.carrier_down_count.to_string(),
        )?;
        self.write(
            &format!("{d}/carrier_changes"),
            &(s.carrier_up_count + s.carrier_down_count).to_string(),
        )?;
        self.write(&format!("{d}/mtu"), &s.mtu.to_string())?;
        // The counters the agent samples; present on every real interface.
        for stat in boltwatch_agent::counters::SYSFS_STATISTICS {
            let p = format!("{d}/statistics/{stat}");
            if !self.path(&p).exists() {
                self.write(&p, "0")?;
            }
        }
        match s.speed_mbps {
            Some(v) => self.write(&format!("{d}/speed"), &v.to_string())?,
            None => {
                let _ = std::fs::remove_file(self.path(&format!("{d}/speed")));
            }
        }
        Ok(())
    }

    /// Makes `class/net/<netif>` a Thunderbolt networking port, as the
    /// kernel lays it out: its `device` is service `0-1.0` of XDomain
    /// `0-1` (bound to `thunderbolt-net`), which negotiated `lanes` lanes
    /// of `lane_speed` ("20.0 Gb/s") each way with a host named `peer`,
    /// under a TB4 (`generation` 4) host router `0-0`.
    pub fn set_thunderbolt(
        &self,
        netif: &str,
        lanes: u32,
        lane_speed: &str,
        peer: &str,
    ) -> Result<(), BedError> {
        let link = |target: &str, at: &str| {
            let at = self.path(at);
            let _ = std::fs::remove_file(&at);
            std::os::unix::fs::symlink(target, &at).map_err(|source| BedError::Io {
                context: format!("linking {} -> {target}", at.display()),
                source,
            })
        };
        let xd = "bus/thunderbolt/devices/0-1";
        let service = "bus/thunderbolt/devices/0-1/0-1.0";
        let driver = "bus/thunderbolt/drivers/thunderbolt-net";
        for dir in [service, driver, &format!("class/net/{netif}")] {
            std::fs::create_dir_all(self.path(dir)).map_err(|source| BedError::Io {
                context: format!("creating {dir}"),
                source,
            })?;
        }
        link(
            "../../../drivers/thunderbolt-net",
            &format!("{service}/driver"),
        )?;
        link(
            "../../../bus/thunderbolt/devices/0-1/0-1.0",
            &format!("class/net/{netif}/device"),
        )?;
        self.write("bus/thunderbolt/devices/0-0/generation", "4")?;
        self.write(&format!("{xd}/device_name"), peer)?;
        for dir in ["rx", "tx"] {
            self.write(&format!("{xd}/{dir}_lanes"), &lanes.to_string())?;
            self.write(&format!("{xd}/{dir}_speed"), lane_speed)?;
        }
        Ok(())
    }

    /// Makes `member` a port of `bridge`: `<bridge>/brif/<member>` and the
    /// `<member>/master` symlink, as the kernel lays them out.
    pub fn add_bridge_member(&self, bridge: &str, member: &str) -> Result<(), BedError> {
        self.mkdir(&self.path(&format!("class/net/{bridge}/brif/{member}")))?;
        let master = self.path(&format!("class/net/{member}/master"));
        self.mkdir(&self.path(&format!("class/net/{member}")))?;
        let _ = std::fs::remove_file(&master);
        std::os::unix::fs::symlink(format!("../{bridge}"), &master).map_err(|source| BedError::Io {
            context: format!("linking {}", master.display()),
            source,
        })
    }

    /// Writes `class/thermal/thermal_zone<n>/{type,temp}` (millidegrees).
    pub fn set_thermal_zone(&self, n: u32, kind: &str, milli_celsius: i64) -> Result<(), BedError> {
        let d = format!("class/thermal/thermal_zone{n}");
        self.write(&format!("{d}/type"), kind)?;
        self.write(&format!("{d}/temp"), &milli_celsius.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_kernel_shaped_tree() {
        let f = SysfsFixture::new().unwrap();
        f.set_netif("tb0", &NetIf::default()).unwrap();
        let read = |rel: &str| std::fs::read_to_string(f.path(rel)).unwrap();
        assert_eq!(read("class/net/tb0/flags"), "0x1003\n");
        assert_eq!(read("class/net/tb0/carrier"), "1\n");
        f.set_netif(
            "tb0",
            &NetIf {
                admin_up: false,
                carrier: false,
                carrier_down_count: 1,
                ..NetIf::default()
            },
        )
        .unwrap();
        assert!(!f.path("class/net/tb0/carrier").exists());
        assert_eq!(read("class/net/tb0/carrier_changes"), "2\n");
        f.add_bridge_member("br0", "tb0").unwrap();
        assert!(f.path("class/net/br0/brif/tb0").is_dir());
        let master = std::fs::read_link(f.path("class/net/tb0/master")).unwrap();
        assert_eq!(master, PathBuf::from("../br0"));
        f.set_thermal_zone(0, "x86_pkg_temp", 45000).unwrap();
        assert_eq!(read("class/thermal/thermal_zone0/temp"), "45000\n");
    }
}
