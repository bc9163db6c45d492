//! `boltwatch-agent bandwidth` and `bandwidth-server`: the command-line
//! front of [`boltwatch_agent::bandwidth`] (iperf3-compatible tests).

use anyhow::Context;
use boltwatch_agent::bandwidth::{
    self, iperf3::Mode, ClientObserver, ClientOptions, IntervalReport,
};
use boltwatch_proto::v1::{BandwidthResult, Direction, Protocol};
use clap::Args;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Flags of `boltwatch-agent bandwidth`, modelled on iperf3's.
#[derive(Args, Debug)]
pub struct BandwidthArgs {
    /// Server to test against; the port defaults to iperf3's 5201.
    #[arg(long = "iperf3", value_name = "HOST[:PORT]")]
    server: String,
    /// Parallel streams (per direction).
    #[arg(short = 'P', long = "parallel", default_value_t = 4)]
    parallel: u32,
    /// Test length in seconds.
    #[arg(short = 't', long = "time", default_value_t = 10)]
    time: u64,
    /// Server sends, this host receives.
    #[arg(short = 'R', long = "reverse")]
    reverse: bool,
    /// Both directions at once.
    #[arg(long, conflicts_with = "reverse")]
    bidir: bool,
    /// UDP instead of TCP (needs -b).
    #[arg(short = 'u', long)]
    udp: bool,
    /// UDP target rate per stream, bits/s with K/M/G suffixes (e.g. 500M).
    #[arg(short = 'b', long = "bitrate", value_parser = parse_rate)]
    bitrate: Option<u64>,
    /// Write or datagram size in bytes (K/M suffixes).
    #[arg(short = 'l', long = "length", value_parser = parse_size)]
    length: Option<usize>,
    /// Socket buffer size in bytes (K/M suffixes).
    #[arg(short = 'w', long = "window", value_parser = parse_size)]
    window: Option<usize>,
    /// Reporting interval in seconds.
    #[arg(short = 'i', long = "interval", default_value_t = 1.0)]
    interval: f64,
    /// Print the results as JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// Flags of `boltwatch-agent bandwidth-server`.
#[derive(Args, Debug)]
pub struct BandwidthServerArgs {
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0:5202")]
    listen: String,
    /// Also serve clients in this network (CIDR, repeatable); loopback is
    /// always served, everyone else refused with ACCESS_DENIED.
    #[arg(long, value_name = "CIDR")]
    allow: Vec<ipnet::IpNet>,
}

fn parse_suffixed(s: &str, k: f64) -> Result<f64, String> {
    let s = s.trim();
    let (num, mult) = match s.chars().last() {
        Some('k' | 'K') => (&s[..s.len() - 1], k),
        Some('m' | 'M') => (&s[..s.len() - 1], k * k),
        Some('g' | 'G') => (&s[..s.len() - 1], k * k * k),
        _ => (s, 1.0),
    };
    let v: f64 = num.parse().map_err(|_| format!("not a number: {s}"))?;
    if !(v.is_finite() && v >= 0.0) {
        return Err(format!("out of range: {s}"));
    }
    Ok(v * mult)
}

/// Rates use decimal prefixes, like iperf3's -b.
fn parse_rate(s: &str) -> Result<u64, String> {
    parse_suffixed(s, 1000.0).map(|v| v as u64)
}

/// Sizes use binary prefixes, like iperf3's -l and -w.
fn parse_size(s: &str) -> Result<usize, String> {
    parse_suffixed(s, 1024.0).map(|v| v as usize)
}

fn dir_name(d: Direction) -> &'static str {
    match d {
        Direction::Upload => "send",
        Direction::Download => "recv",
        Direction::Unspecified => "?",
    }
}

fn result_json(r: &BandwidthResult) -> serde_json::Value {
    serde_json::json!({
        "peer": r.peer,
        "peer_address": r.peer_address,
        "interface": r.interface,
        "direction": dir_name(r.direction()),
        "protocol": if r.protocol() == Protocol::Udp { "udp" } else { "tcp" },
        "streams": r.streams,
        "start_unix_ns": r.start_unix_ns,
        "duration_ns": r.duration_ns,
        "bytes": r.bytes,
        "bits_per_second": r.bits_per_second,
        "retransmits": r.retransmits,
        "cpu_percent": r.cpu_percent,
        "udp_lost": r.udp_lost,
        "udp_packets": r.udp_packets,
        "udp_jitter_seconds": r.udp_jitter_seconds,
        "error": r.error,
        "intervals": r.intervals.iter().map(|iv| serde_json::json!({
            "offset_ns": iv.offset_ns,
            "duration_ns": iv.duration_ns,
            "bytes": iv.bytes,
            "bits_per_second": iv.bits_per_second,
            "retransmits": iv.retransmits,
        })).collect::<Vec<_>>(),
    })
}

/// Prints each interval as a text line, as iperf3 does, unless `quiet`
/// (JSON output prints the results only).
struct IntervalPrinter {
    quiet: bool,
}

impl ClientObserver for IntervalPrinter {
    fn interval(&mut self, r: &IntervalReport) {
        if self.quiet {
            return;
        }
        let iv = &r.interval;
        let start = iv.offset_ns as f64 / 1e9;
        let end = start + iv.duration_ns as f64 / 1e9;
        println!(
            "[{}] {:6.2}-{:6.2} s  {:10.3} MB  {:8.3} Gb/s  retr {}",
            dir_name(r.direction),
            start,
            end,
            iv.bytes as f64 / 1e6,
            iv.bits_per_second / 1e9,
            iv.retransmits
        );
    }
}

pub fn bandwidth_cmd(args: BandwidthArgs) -> anyhow::Result<()> {
    if args.udp && args.bitrate.is_none() {
        anyhow::bail!("--udp needs -b RATE (bits/s per stream)");
    }
    if !args.udp && args.bitrate.is_some() {
        anyhow::bail!("-b applies to --udp only");
    }
    if !(0.1..=60.0).contains(&args.interval) {
        anyhow::bail!("--interval must be within 0.1..=60 seconds");
    }
    let opts = ClientOptions {
        server: args.server.clone(),
        default_port: bandwidth::IPERF3_PORT,
        streams: args.parallel,
        duration: Duration::from_secs(args.time),
        mode: if args.bidir {
            Mode::Bidir
        } else if args.reverse {
            Mode::Download
        } else {
            Mode::Upload
        },
        udp_rate_bps: if args.udp { args.bitrate } else { None },
        block_size: args.length,
        window: args.window,
        interval: Duration::from_secs_f64(args.interval),
        peer: args.server.clone(),
        interface: String::new(),
    };
    let json = args.json;
    let results = bandwidth::run_client(opts, &mut IntervalPrinter { quiet: json })
        .with_context(|| format!("bandwidth test against {}", args.server))?;
    if json {
        let v: Vec<_> = results.iter().map(result_json).collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    for r in &results {
        let mut line = format!(
            "[{}] total {:.2} s  {:.3} MB  {:.3} Gb/s (receiver)  retr {}  cpu {:.1}%",
            dir_name(r.direction()),
            r.duration_ns as f64 / 1e9,
            r.bytes as f64 / 1e6,
            r.bits_per_second / 1e9,
            r.retransmits,
            r.cpu_percent
        );
        if r.protocol() == Protocol::Udp {
            let total = r.udp_lost + r.udp_packets;
            let pct = if total > 0 {
                100.0 * r.udp_lost as f64 / total as f64
            } else {
                0.0
            };
            line += &format!(
                "  lost {}/{} ({:.2}%)  jitter {:.3} ms",
                r.udp_lost,
                total,
                pct,
                r.udp_jitter_seconds * 1e3
            );
        }
        if !r.error.is_empty() {
            line += &format!("  error: {}", r.error);
        }
        println!("{line}");
    }
    Ok(())
}

pub fn bandwidth_server_cmd(args: BandwidthServerArgs) -> anyhow::Result<()> {
    let listener = std::net::TcpListener::bind(&args.listen)
        .with_context(|| format!("binding {}", args.listen))?;
    eprintln!("bandwidth server listening on {}", listener.local_addr()?);
    // Runs until killed: nothing cancels the token.
    let opts = bandwidth::ServerOptions {
        allow: args.allow,
        ..Default::default()
    };
    let handle = bandwidth::spawn_server(listener, CancellationToken::new(), opts)?;
    let _ = handle.join();
    Ok(())
}
