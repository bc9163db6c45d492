//! nftables loss injection: the ruleset text the bed loads and the parser
//! that reads the exact drop counter back from `nft -j`. Pure.
//!
//! This kernel has no netem, so loss is an nftables rule on the interface's
//! ingress hook: `numgen random mod 1000 < N counter drop`. It matches IPv4
//! and IPv6 only, so ARP keeps working and every drop is a lost datagram
//! the test can account for.

use serde_json::Value;

/// The table that holds the loss rule of `iface` (one table per interface,
/// so changing one interface's loss never resets another's counter).
pub fn table_name(iface: &str) -> String {
    let clean: String = iface
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("bwloss_{clean}")
}

/// The `nft -f` script that drops `per_mille`/1000 of the IP packets
/// arriving on `iface`.
pub fn loss_script(iface: &str, per_mille: u16) -> String {
    format!(
        "table netdev {table} {{\n  chain ingress {{\n    type filter hook ingress device \"{iface}\" priority 0; policy accept;\n    meta protocol {{ ip, ip6 }} numgen random mod 1000 < {per_mille} counter drop\n  }}\n}}\n",
        table = table_name(iface),
    )
}

/// The table that holds the UDP block rule of `iface`.
pub fn block_table_name(iface: &str) -> String {
    format!("bwblock_{}", &table_name(iface)["bwloss_".len()..])
}

/// The `nft -f` script that drops every UDP datagram to `port` arriving on
/// `iface` (a dead reflector behind a live carrier), with a counter.
pub fn block_udp_script(iface: &str, port: u16) -> String {
    format!(
        "table netdev {table} {{\n  chain ingress {{\n    type filter hook ingress device \"{iface}\" priority 0; policy accept;\n    meta protocol ip udp dport {port} counter drop\n  }}\n}}\n",
        table = block_table_name(iface),
    )
}

/// The table that holds the TCP reset rule of [`reset_tcp_script`].
pub fn reset_table_name(port: u16) -> String {
    format!("bwreset_{port}")
}

/// The `nft -f` script that answers every TCP segment the node sends to
/// `port` with a reset: its connections there break at their next send,
/// and new ones are refused while the table stands.
pub fn reset_tcp_script(port: u16) -> String {
    format!(
        "table inet {table} {{\n  chain output {{\n    type filter hook output priority 0; policy accept;\n    tcp dport {port} counter reject with tcp reset\n  }}\n}}\n",
        table = reset_table_name(port),
    )
}

/// The packets counted by the drop rule in `nft -j list table` output.
pub fn parse_drop_counter(json: &str) -> Result<u64, String> {
    let v: Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
    let items = v
        .get("nftables")
        .and_then(Value::as_array)
        .ok_or("no `nftables` array")?;
    for item in items {
        let Some(exprs) = item.pointer("/rule/expr").and_then(Value::as_array) else {
            continue;
        };
        let drops = exprs.iter().any(|e| e.get("drop").is_some());
        let counter = exprs.iter().find_map(|e| e.pointer("/counter/packets"));
        if let (true, Some(p)) = (drops, counter) {
            return p.as_u64().ok_or_else(|| format!("bad packet count {p}"));
        }
    }
    Err("no rule with a counter and a drop".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Trimmed from `nft -j list table netdev bwloss_tb1` (nftables 1.0.6).
    const LISTING: &str = r#"{"nftables": [{"metainfo": {"version": "1.0.6", "release_name": "Lester Gooch #5", "json_schema_version": 1}}, {"table": {"family": "netdev", "name": "bwloss_tb1", "handle": 1}}, {"chain": {"family": "netdev", "table": "bwloss_tb1", "name": "ingress", "handle": 1, "type": "filter", "hook": "ingress", "prio": 0, "policy": "accept", "dev": "tb1"}}, {"rule": {"family": "netdev", "table": "bwloss_tb1", "chain": "ingress", "handle": 3, "expr": [{"match": {"op": "==", "left": {"meta": {"key": "protocol"}}, "right": {"set": ["ip", "ip6"]}}}, {"match": {"op": "<", "left": {"numgen": {"mode": "random", "mod": 1000, "offset": 0}}, "right": 100}}, {"counter": {"packets": 17, "bytes": 1666}}, {"drop": null}]}}]}"#;

    #[test]
    fn reads_the_drop_counter() {
        assert_eq!(parse_drop_counter(LISTING), Ok(17));
    }

    #[test]
    fn rejects_listings_without_the_rule() {
        assert!(parse_drop_counter(r#"{"nftables": []}"#).is_err());
        assert!(parse_drop_counter("not json").is_err());
        let no_drop = LISTING.replace(r#", {"drop": null}"#, "");
        assert!(parse_drop_counter(&no_drop).is_err());
    }

    #[test]
    fn scripts_name_the_table_the_device_and_the_rule() {
        let cases = [
            (
                loss_script("tb-1", 100),
                [
                    "table netdev bwloss_tb_1",
                    "device \"tb-1\"",
                    "mod 1000 < 100 counter drop",
                ],
            ),
            (
                block_udp_script("tb0", 8620),
                [
                    "table netdev bwblock_tb0",
                    "device \"tb0\"",
                    "udp dport 8620 counter drop",
                ],
            ),
            (
                reset_tcp_script(9470),
                [
                    "table inet bwreset_9470",
                    "hook output",
                    "tcp dport 9470 counter reject with tcp reset",
                ],
            ),
        ];
        for (script, wants) in cases {
            for want in wants {
                assert!(script.contains(want), "{want} not in\n{script}");
            }
        }
    }
}
