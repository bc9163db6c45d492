//! The macOS discovery parsers (pure; run on every OS) against real
//! captures: `system_profiler SPThunderboltDataType -json` from public
//! repositories (`fixtures/macos/system_profiler/README.md` cites each and
//! marks the derived ones), `networksetup`/`ifconfig` text, and `ioreg`'s
//! Thunderbolt lane adapters (derived; `fixtures/macos/ioreg/README.md`).

use std::fs;
use std::path::{Path, PathBuf};

use boltwatch_agent::discovery::ioreg::{parse_ioreg_ports, receptacle_links, IoregPort};
use boltwatch_agent::discovery::kind;
use boltwatch_agent::discovery::parse::{
    parse_bridge_members, parse_hardware_ports, parse_system_profiler_thunderbolt, TbPeer,
    TbReceptacle,
};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

#[test]
fn networksetup_hardware_ports_fixture() {
    let text =
        fs::read_to_string(fixtures().join("macos/networksetup_listallhardwareports.txt")).unwrap();
    let ports = parse_hardware_ports(&text);
    let devices: Vec<&str> = ports.iter().map(|p| p.device.as_str()).collect();
    assert_eq!(devices, ["en0", "bridge0", "en1", "en2", "en3", "en4"]);
    let kinds: Vec<&str> = ports.iter().map(|p| p.kind()).collect();
    assert_eq!(
        kinds,
        [
            kind::ETHERNET,
            kind::BRIDGE,
            kind::WIFI,
            kind::THUNDERBOLT,
            kind::THUNDERBOLT,
            kind::THUNDERBOLT
        ]
    );
    let numbers: Vec<Option<u32>> = ports.iter().map(|p| p.thunderbolt_number()).collect();
    assert_eq!(numbers, [None, None, None, Some(1), Some(2), Some(3)]);
    assert_eq!(ports[3].mac.as_deref(), Some("36:a1:5c:00:00:01"));
}

#[test]
fn ifconfig_bridge_members_fixture() {
    let text = fs::read_to_string(fixtures().join("macos/ifconfig_bridge0.txt")).unwrap();
    assert_eq!(parse_bridge_members(&text), ["en2", "en3", "en4"]);
}

fn profiler(name: &str) -> Vec<TbReceptacle> {
    let path = fixtures().join("macos/system_profiler").join(name);
    parse_system_profiler_thunderbolt(&fs::read_to_string(&path).unwrap()).unwrap()
}

fn connected(r: &[TbReceptacle]) -> Vec<&TbReceptacle> {
    r.iter().filter(|x| x.connected).collect()
}

/// Real TB5 pair (omlx-plus): each side sees the other by domain UUID and
/// model identifier; the Studio's drive beside it is a device, not a peer.
#[test]
fn tb5_mac_pair_from_real_captures() {
    let book = profiler("omlx_tb5_macbook_m5max.json");
    let studio = profiler("omlx_tb5_studio_m3ultra.json");
    assert_eq!((book.len(), studio.len()), (3, 6));

    let b = connected(&book);
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].receptacle_id, Some(1));
    assert_eq!(b[0].current_speed_bits_per_second, 80_000_000_000);
    assert_eq!(b[0].generation(), "5");
    assert_eq!(b[0].peers.len(), 1);
    let studio_peer = &b[0].peers[0];
    assert_eq!(studio_peer.mac_model(), Some("Mac15,14"));
    assert_eq!(studio_peer.name, "Mac Studio");
    assert!(studio_peer.via.is_empty());

    let s: Vec<_> = studio.iter().filter(|x| !x.peers.is_empty()).collect();
    assert_eq!(s.len(), 1, "the Envoy Ultra drive is no peer");
    assert_eq!(s[0].receptacle_id, Some(2));
    assert_eq!(s[0].peers[0].mac_model(), Some("Mac17,7"));
    // The edge: each side's peer domain is the other side's bus domain.
    assert_eq!(s[0].peers[0].domain_uuid, b[0].domain_uuid.clone().unwrap());
    assert_eq!(Some(studio_peer.domain_uuid.clone()), s[0].domain_uuid);
    // The cable, as each end's Hello names it: the far end's UUID is the
    // other side's own.
    assert_eq!(b[0].direct_peer(), Some(studio_peer));
    assert_eq!(
        s[0].direct_peer().map(|p| &p.domain_uuid),
        b[0].domain_uuid.as_ref()
    );

    let drive = studio.iter().find(|x| x.receptacle_id == Some(4)).unwrap();
    assert!(drive.connected && drive.peers.is_empty());
    assert_eq!(drive.devices.len(), 1);
    assert_eq!(drive.devices[0].name, "Envoy Ultra");
    assert_eq!(drive.devices[0].mode.as_deref(), Some("usb_four_v2"));
    assert_eq!(drive.devices[0].upstream_bits_per_second, 80_000_000_000);

    let idle = book.iter().find(|x| x.receptacle_id == Some(3)).unwrap();
    assert!(!idle.connected);
    assert_eq!(idle.current_speed_bits_per_second, 0);
    assert_eq!(idle.max_speed_bits_per_second, 120_000_000_000);
}

/// Real TB5 pair (osaurus): a TB5 hub with nothing behind it and a TB3
/// enclosure beside the peers are devices; exactly one peer per side.
#[test]
fn hub_and_enclosure_beside_peers_are_not_peers() {
    for (file, other) in [
        ("osaurus_tb5_local_sabrent_hub.json", "SB-XTM5"),
        ("osaurus_tb5_peer_tb3_enclosure.json", "TBU405Pro"),
    ] {
        let r = profiler(file);
        let peers: Vec<&TbPeer> = r.iter().flat_map(|x| &x.peers).collect();
        assert_eq!(peers.len(), 1, "{file}");
        assert_eq!(peers[0].mac_model(), Some("Mac17,6"), "{file}");
        let port = r.iter().find(|x| x.receptacle_id == Some(3)).unwrap();
        assert!(port.peers.is_empty(), "{file}");
        assert_eq!(port.devices.len(), 1, "{file}");
        assert_eq!(port.devices[0].name, other);
    }
    let enclosure = &profiler("osaurus_tb5_peer_tb3_enclosure.json")[0];
    assert_eq!(enclosure.current_speed_bits_per_second, 40_000_000_000);
    assert_eq!(
        enclosure.devices[0].mode.as_deref(),
        Some("thunderbolt_three")
    );

    // The topology join: the peer capture's receptacle 2 is "Thunderbolt
    // 2" in networksetup (en6 in the same source's capture).
    let ports = parse_hardware_ports(
        &fs::read_to_string(
            fixtures().join("macos/system_profiler/osaurus_networksetup_listallhardwareports.txt"),
        )
        .unwrap(),
    );
    let with_peer = profiler("osaurus_tb5_local_sabrent_hub.json")
        .into_iter()
        .find(|x| !x.peers.is_empty())
        .unwrap();
    let port = ports
        .iter()
        .find(|p| p.thunderbolt_number() == with_peer.receptacle_id)
        .unwrap();
    assert_eq!(port.device, "en6");
    assert_eq!(port.kind(), kind::THUNDERBOLT);
}

/// Real TB4 dock, display and TB1 adapter (lsusb-macos): devices only.
#[test]
fn docks_displays_and_adapters_are_devices() {
    for (file, name, speed) in [
        (
            "lsusb-macos_tahoe_tb4_dock.json",
            "Thunderbolt 4 Docking Station (8-in-1)",
            40_000_000_000,
        ),
        (
            "lsusb-macos_tahoe_tb4_host_display.json",
            "UltraFine 4K",
            40_000_000_000,
        ),
        (
            "lsusb-macos_sequoia_intel_tb1_adapter.json",
            "Thunderbolt to Gigabit Ethernet Adapter",
            10_000_000_000,
        ),
    ] {
        let r = profiler(file);
        assert!(r.iter().all(|x| x.peers.is_empty()), "{file}");
        let c = connected(&r);
        assert_eq!(c.len(), 1, "{file}");
        assert_eq!(c[0].devices.len(), 1, "{file}");
        assert_eq!(c[0].devices[0].name, name);
        assert_eq!(c[0].current_speed_bits_per_second, speed, "{file}");
        assert_eq!(c[0].generation(), "", "{file}");
    }
    // The Intel bus carries two receptacles; the idle one has nothing.
    let intel = profiler("lsusb-macos_sequoia_intel_tb1_adapter.json");
    assert_eq!(intel.len(), 2);
    assert_eq!(intel[1].max_speed_bits_per_second, 20_000_000_000);
    assert!(intel[1].devices.is_empty());
}

/// Derived (see the fixture README): a Mac peer on a 40 Gb/s TB4 port.
#[test]
fn tb4_peer_at_40_gbps() {
    let r = profiler("derived_tb4_host_mac_peer.json");
    let c = connected(&r);
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].receptacle_id, Some(2));
    assert_eq!(c[0].current_speed_bits_per_second, 40_000_000_000);
    assert_eq!(c[0].generation(), "", "40 Gb/s does not tell TB4 from TB5");
    assert_eq!(c[0].peers.len(), 1);
    assert_eq!(c[0].peers[0].mac_model(), Some("Mac17,7"));
    assert!(c[0].devices.is_empty());
    assert!(r
        .iter()
        .filter(|x| !x.connected)
        .all(|x| x.max_speed_bits_per_second == 40_000_000_000));
}

/// Derived from exo's reduction of a production capture: the peer sits
/// behind a dock, one level down in `_items[]._items`.
#[test]
fn peer_behind_a_hub_is_found() {
    let r = profiler("derived_exo_hub_nested_peer.json");
    assert_eq!(r.len(), 1);
    assert!(r[0].connected, "no status key, but a device enumerated");
    assert_eq!(r[0].current_speed_bits_per_second, 80_000_000_000);
    assert_eq!(r[0].devices.len(), 1);
    assert_eq!(r[0].devices[0].name, "iVANKY Fusiondock Ultra");
    assert_eq!(r[0].peers.len(), 1);
    let peer = &r[0].peers[0];
    assert_eq!(peer.domain_uuid, "F74D8F9B-DCDF-40D4-A428-3A3674BCB3F4");
    assert_eq!(peer.via, ["iVANKY Fusiondock Ultra"]);
    assert_eq!(peer.mac_model(), None, "exo kept no device_name_key");
    assert_eq!(
        r[0].direct_peer(),
        None,
        "behind a dock: not this cable's end"
    );
}

fn ioreg(name: &str) -> Vec<IoregPort> {
    let path = fixtures().join("macos/ioreg").join(name);
    parse_ioreg_ports(&fs::read_to_string(&path).unwrap())
}

/// Derived from whatcable's transcriptions of real `--tb-debug` output
/// (see the fixture README): the host port's lanes and lane speed, and
/// adapters that are no receptacle of this host left out.
#[test]
fn lane_width_and_speed_from_ioreg() {
    let air = ioreg("derived_whatcable52_m3air_tb3.txt");
    assert_eq!(air.len(), 2);
    let links = receptacle_links(&air);
    assert_eq!(links.len(), 1, "the PCIe adapter has no socket");
    let link = links[0].1.link("en2");
    assert_eq!(
        (links[0].0.as_str(), link.rx_lanes, link.tx_lanes),
        ("1", 2, 2)
    );
    assert_eq!(link.rx_lane_bits_per_second, 10_000_000_000);
    assert_eq!(
        link.generation, "4",
        "supported mask 12: 20 Gb/s lanes at best"
    );

    let chain = ioreg("derived_whatcable52_m2pro_usb4_chain.txt");
    let links = receptacle_links(&chain);
    assert_eq!(
        links.len(),
        1,
        "the dock's upstream port is not this host's"
    );
    let usb4 = links[0].1.link("en1");
    assert_eq!((usb4.rx_lanes, usb4.tx_lanes), (2, 2));
    assert_eq!(usb4.bits_per_second(), 40_000_000_000);
    assert_eq!(usb4.generation, "", "no supported mask in this dump");

    let idle = receptacle_links(&ioreg("derived_whatcable_m5pro_idle.txt"));
    assert_eq!(idle[0].1.link("en1").bits_per_second(), 0);
}
