//! Peers behind one bridge: each follows the member port it sits behind
//! ([`OutageInput::Port`]), so a pulled cable is a carrier outage, at the
//! kernel's time, of exactly the peers behind that port, naming the port.

use super::*;
use boltwatch_proto::v1::LinkEventSource;

const MS: u64 = 1_000_000;
const T0: u64 = 1_700_000_000_000_000_000;

fn change(interface: &str, carrier: bool, at: u64) -> OutageInput {
    OutageInput::Link(LinkChange {
        interface: interface.into(),
        at_unix_ns: at,
        carrier,
        carrier_changed: true,
        missed_flaps: 0,
        source: LinkEventSource::KernelEvent,
    })
}

fn port(peer: usize, port: &str) -> OutageInput {
    OutageInput::Port(PeerPort {
        peer,
        port: port.into(),
    })
}

fn bridge_pair() -> OutageTrackers {
    let ids = OutageIds::new();
    OutageTrackers::new(vec![
        OutageTracker::new("b", "bridge0", 3, ids.clone()),
        OutageTracker::new("c", "bridge0", 3, ids),
    ])
}

#[test]
fn a_member_losing_carrier_is_an_outage_of_the_peer_behind_it_only() {
    let mut all = bridge_pair();
    // Before the ports are known a member's change concerns nobody.
    assert!(all.apply(change("en2", false, T0), T0).is_empty());
    assert!(all.apply(change("en2", true, T0 + MS), T0).is_empty());
    assert!(all.apply(port(0, "en2"), T0).is_empty());
    assert!(all.apply(port(1, "en3"), T0).is_empty());
    let down = T0 + 10 * MS;
    let out = all.apply(change("en2", false, down), down);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(
        (out[0].peer.as_str(), out[0].interface.as_str()),
        ("b", "en2")
    );
    assert_eq!(out[0].start_unix_ns, down, "stamped with the event");
    assert_eq!(
        OutageCause::try_from(out[0].cause),
        Ok(OutageCause::Carrier)
    );
    // c's probes go on being answered: nothing for c.
    let reply = OutageInput::Probe {
        peer: 1,
        event: crate::stamp::ProbeEvent::Reply {
            seq: 1,
            sent_unix_ns: down + MS,
            received_unix_ns: down + 2 * MS,
            rtt_ns: MS,
            late: false,
        },
    };
    assert!(all.apply(reply, down + 2 * MS).is_empty());
    // The cable back and b answering again ends b's outage, naming en2.
    assert!(all
        .apply(change("en2", true, down + 500 * MS), down)
        .is_empty());
    let reply = OutageInput::Probe {
        peer: 0,
        event: crate::stamp::ProbeEvent::Reply {
            seq: 1,
            sent_unix_ns: down + 600 * MS,
            received_unix_ns: down + 601 * MS,
            rtt_ns: MS,
            late: false,
        },
    };
    let out = all.apply(reply, down + 601 * MS);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].interface, "en2");
    assert_eq!(out[0].end_unix_ns, Some(down + 601 * MS));
}

#[test]
fn the_bridge_itself_going_down_still_concerns_every_peer() {
    let mut all = bridge_pair();
    all.apply(port(0, "en2"), T0);
    let out = all.apply(change("bridge0", false, T0), T0);
    let peers: Vec<&str> = out.iter().map(|o| o.peer.as_str()).collect();
    assert_eq!(peers, vec!["b", "c"]);
    assert_eq!(out[0].interface, "en2", "b's records name its port");
    assert_eq!(out[1].interface, "bridge0", "c's port is not known");
    assert!(all.apply(port(9, "en4"), T0).is_empty(), "unknown peer");
}
