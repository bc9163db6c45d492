//! Detection-latency bench: how long from `ip link set down` until the
//! carrier-down link event is stored at the collector (visible in its API),
//! over N flaps on a two-node test bed, next to the usual BFD setting of
//! 3 x 50 ms. Run by `bench/link-detect.sh` as root.
//!
//! Usage: `bw-link-detect [--urgent] [FLAPS]` (default 20 flaps; `--urgent`
//! builds the bed with urgent link events, see `BedOptions`). Prints one line per flap
//! and a summary; exits non-zero if a drop was never seen.
//!
//! "Stored" is measured by polling the collector's API every 2 ms, so it
//! includes up to 2 ms of polling slack; "agent" is the event's own
//! timestamp, when the agent learnt of the drop.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use boltwatch_tests::cluster::{node_name, now_unix_ns, AgentOptions, Cluster};
use boltwatch_tests::BedOptions;

/// BFD's common 50 ms interval with detect multiplier 3.
const BFD_MS: f64 = 150.0;

fn down_event_time(c: &Cluster, node: usize, iface: &str, since: u64) -> Option<u64> {
    let path = format!(
        "/api/v1/records?node={}&kind=link_event&since={since}&limit=1000",
        node_name(node)
    );
    let (code, body) = boltwatch_tests::procs::http_get(&c.collector.url(&path)).ok()?;
    if code != 200 {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    v["records"].as_array()?.iter().find_map(|r| {
        let p = &r["payload"];
        (p["interface"] == iface
            && p["carrier"] == false
            && p["source"] != "LINK_EVENT_SOURCE_STARTUP")
            .then(|| r["unix_ns"].as_u64())
            .flatten()
    })
}

fn stats(v: &mut [f64]) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    (median, v[n - 1])
}

fn main() -> anyhow::Result<()> {
    let (flaps, urgent) = parse_args()?;
    let opts = AgentOptions {
        bed: BedOptions {
            urgent_link_events: urgent,
        },
        ..Default::default()
    };
    println!(
        "link events: {}",
        if urgent {
            "urgent (veth ends with distinct ifindexes)"
        } else {
            "batched by linkwatch, as for thunderbolt-net (veth ends share an ifindex)"
        }
    );
    let c = Cluster::start(2, &opts);
    let ifaces = [
        c.bed.link_if(0, 1)?.to_owned(),
        c.bed.link_if(1, 0)?.to_owned(),
    ];
    let begin = now_unix_ns();
    // Per flap: (down command start, up command end).
    let mut injected: Vec<(u64, u64)> = Vec::new();
    let mut latency = Latency::default();
    for k in 0..flaps {
        injected.push(flap(&c, &ifaces, k, &mut latency)?);
    }
    // Let the last outages end and reach the collector.
    std::thread::sleep(Duration::from_secs(3));
    println!();
    println!("detection latency over {flaps} flaps, `ip link set down` -> event:");
    latency.print();
    println!();
    println!("outages recorded (ledger), compared with the injected drops:");
    for n in 0..2 {
        print_outages(&c, n, begin, &injected);
    }
    Ok(())
}

/// `[--urgent] [FLAPS]`: the number of flaps (20 by default) and whether
/// the bed has urgent link events.
fn parse_args() -> anyhow::Result<(usize, bool)> {
    let mut flaps = 20usize;
    let mut urgent = false;
    for a in std::env::args().skip(1) {
        if a == "--urgent" {
            urgent = true;
        } else {
            flaps = a
                .parse()
                .context("usage: bw-link-detect [--urgent] [FLAPS]")?;
        }
    }
    Ok((flaps, urgent))
}

/// Per node, ms from the down command to the drop, one per flap.
#[derive(Default)]
struct Latency {
    /// Until the collector's API shows the event.
    stored: [Vec<f64>; 2],
    /// Until the event's own timestamp.
    agent: [Vec<f64>; 2],
}

impl Latency {
    /// Median and max per node, next to BFD's.
    fn print(&mut self) {
        for n in 0..2 {
            let (sm, sx) = stats(&mut self.stored[n]);
            let (am, ax) = stats(&mut self.agent[n]);
            let who = if n == 0 {
                "side taken down"
            } else {
                "peer side"
            };
            println!(
                "  {} ({who}): stored at collector median {sm:.1} ms, max {sx:.1} ms; \
                 agent timestamp median {am:.1} ms, max {ax:.1} ms",
                node_name(n)
            );
            println!(
                "    vs BFD 3 x 50 ms = {BFD_MS:.0} ms: median is {:.1}x faster, max is {:.1}x faster",
                BFD_MS / sm,
                BFD_MS / sx
            );
        }
    }
}

/// Flap `k` (from 0): node 0's link down until both nodes stored the drop
/// (3 s at most), held past linkwatch's batching, then up again. Adds the
/// flap's latencies and prints its line; returns (down command start, up
/// command end). A drop never stored ends the bench, the link up again.
fn flap(
    c: &Cluster,
    ifaces: &[String; 2],
    k: usize,
    latency: &mut Latency,
) -> anyhow::Result<(u64, u64)> {
    let t0 = now_unix_ns();
    c.bed.set_link(0, &ifaces[0], false)?;
    let seen = wait_for_drops(c, ifaces, t0);
    let ms = |t: u64| (t as f64 - t0 as f64) / 1e6;
    let mut line = format!("flap {:2}:", k + 1);
    for (n, seen) in seen.into_iter().enumerate() {
        let Some((s, a)) = seen else {
            c.bed.set_link(0, &ifaces[0], true)?;
            bail!("flap {}: node {n} never stored the drop", k + 1);
        };
        latency.stored[n].push(ms(s));
        latency.agent[n].push(ms(a));
        line += &format!(
            "  {} ({}) stored {:6.1} ms, agent {:6.1} ms",
            node_name(n),
            if n == 0 { "admin down" } else { "peer" },
            ms(s),
            ms(a)
        );
    }
    println!("{line}");
    // Hold each state past the kernel's one-second linkwatch batching.
    std::thread::sleep(Duration::from_millis(
        1250u64.saturating_sub((now_unix_ns() - t0) / 1_000_000),
    ));
    c.bed.set_link(0, &ifaces[0], true)?;
    let up = now_unix_ns();
    std::thread::sleep(Duration::from_millis(1250));
    Ok((t0, up))
}

/// Per node, (when it was seen stored, the event's own time) of the first
/// carrier-down event since `t0`, polling every 2 ms for 3 s at most.
fn wait_for_drops(c: &Cluster, ifaces: &[String; 2], t0: u64) -> [Option<(u64, u64)>; 2] {
    let mut seen: [Option<(u64, u64)>; 2] = [None, None];
    let deadline = Instant::now() + Duration::from_secs(3);
    while seen.iter().any(Option::is_none) && Instant::now() < deadline {
        for n in 0..2 {
            if seen[n].is_none() {
                if let Some(at) = down_event_time(c, n, &ifaces[n], t0) {
                    seen[n] = Some((now_unix_ns(), at));
                }
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    seen
}

/// Node `n`'s outages since `begin` by cause, how much longer than the
/// injected drop each matching one was, and each probe-loss outage.
fn print_outages(c: &Cluster, n: usize, begin: u64, injected: &[(u64, u64)]) {
    let outages = c.outages(n, begin);
    let mut causes: std::collections::BTreeMap<String, usize> = Default::default();
    for o in &outages {
        *causes
            .entry(o["cause"].as_str().unwrap_or("?").to_owned())
            .or_default() += 1;
    }
    let excess_ms = excess_ms(&outages, injected);
    let (med, max) = if excess_ms.is_empty() {
        (f64::NAN, f64::NAN)
    } else {
        stats(&mut excess_ms.clone())
    };
    println!(
        "  {}: {} outages {causes:?}; {} matched a drop; recorded minus injected \
         duration median {med:.1} ms, max {max:.1} ms",
        node_name(n),
        outages.len(),
        excess_ms.len()
    );
    for o in outages.iter().filter(|o| o["cause"] == "probe_loss") {
        let s = o["start_unix_ns"].as_u64().unwrap_or(0);
        let after_up = injected
            .iter()
            .map(|(_, up)| (s as f64 - *up as f64) / 1e6)
            .min_by(|a, b| a.abs().total_cmp(&b.abs()))
            .unwrap_or(f64::NAN);
        println!(
            "    probe-loss outage of {:.1} ms starting {after_up:.1} ms after the nearest up",
            o["duration_ns"].as_u64().unwrap_or(0) as f64 / 1e6
        );
    }
}

/// For each injected drop with a recorded outage starting within it (not
/// probe loss), how much longer the outage was than the drop, ms.
fn excess_ms(outages: &[serde_json::Value], injected: &[(u64, u64)]) -> Vec<f64> {
    let mut excess_ms: Vec<f64> = Vec::new();
    for (down, up) in injected {
        let hit = outages.iter().find(|o| {
            let s = o["start_unix_ns"].as_u64().unwrap_or(0);
            s + 5_000_000 >= *down && s <= *up && o["cause"] != "probe_loss"
        });
        if let Some(e) =
            hit.and_then(|o| Some(o["end_unix_ns"].as_u64()? - o["start_unix_ns"].as_u64()?))
        {
            excess_ms.push((e as f64 - (up - down) as f64) / 1e6);
        }
    }
    excess_ms
}
