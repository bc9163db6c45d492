//! A bed shaped like three Mac minis on `bridge0`: node 0 bridges its two
//! cables (`br0` with member veths `tb1`, `tb2`), nodes 1 and 2 each have
//! their cable to it, all on one subnet.

use crate::TestBed;

/// The bridge's subnet: node 0 (on `br0`) is .1, node n is .(n+1).
pub fn addr(node: usize) -> String {
    format!("10.77.210.{}", node + 1)
}

/// Turns the 3-node mesh into node 0's bridge: `tb1` and `tb2` become
/// members of `br0`, which holds node 0's address; nodes 1 and 2 keep
/// their cable to node 0, readdressed into the bridge's subnet.
pub fn bridge_bed() -> TestBed {
    let bed = TestBed::new(3).unwrap_or_else(|e| panic!("cannot build the test bed: {e}"));
    let ip = |node: usize, args: &[&str]| {
        bed.run(node, "ip", args)
            .unwrap_or_else(|e| panic!("node {node}: ip {args:?}: {e}"))
    };
    ip(0, &["link", "add", "br0", "type", "bridge"]);
    for peer in [1, 2] {
        let member = bed.link_if(0, peer).unwrap().to_owned();
        ip(0, &["addr", "flush", "dev", &member]);
        ip(0, &["link", "set", &member, "master", "br0"]);
        let far = bed.link_if(peer, 0).unwrap().to_owned();
        ip(peer, &["addr", "flush", "dev", &far]);
        ip(
            peer,
            &["addr", "add", &format!("{}/24", addr(peer)), "dev", &far],
        );
    }
    ip(
        0,
        &["addr", "add", &format!("{}/24", addr(0)), "dev", "br0"],
    );
    ip(0, &["link", "set", "br0", "up"]);
    bed
}
