//! The soak report: per directed link and overall, from stored records, and
//! the SLO verdict. Pure: [`Builder::add`] takes decoded records one by one
//! (the loader streams them from the store), [`Builder::finish`] computes
//! the [`Report`]; nothing here reads a clock or does I/O.
//!
//! Definitions (docs/soaks-and-reports.md, "Run a soak", repeats them):
//! - A directed link `a -> b` is what `a` measured towards `b`: RTT windows
//!   recorded by `a` with peer `b`, and bandwidth tests moving data from `a`
//!   to `b` (an upload by `a`, or a download by `b`).
//! - Percentiles come from the merged schema-3 histograms
//!   ([`super::summary::LinkStats`]), so they are exact to one bucket.
//! - A throttle episode runs from the first reading that says throttled to
//!   the first that does not (or the range's end). A test or an RTT window is
//!   "during throttling" when either end of its link is throttled at its
//!   start.
//! - Completeness counts RTT windows: expected `(to - from) / window` per
//!   link (the link's most common window length), stored, and the gaps
//!   (runs of missing windows); plus sequence holes per agent boot and the
//!   agents' own spool drops. A window belongs to the range by its start
//!   (its record is stamped when it closes, after the range for the last).
//! - UAS, ES and SES, availability, error budget, the worst quarter hour,
//!   time above threshold and the fleet view: as docs/soaks-and-reports.md
//!   defines them ([`Availability`] repeats the classes).
//!
//! This file holds the report's shape (and the unit helpers); the work is
//! one concern per module, imports going one way (the builder and the
//! finisher use the concern modules, never the other way):
//! - `build`: [`Builder`] and [`Scope`], each record into its accumulator;
//! - `finish`: [`Builder::finish`], the report one step per part;
//! - `rtt`, `bandwidth`, `thermal`, `outages`, `coverage`: each kind of
//!   record, accumulated and summed up (RTT windows; TCP tests by the
//!   direction of their data; temperatures and throttle episodes; outages
//!   clipped to the range, interruptions and service availability; RTT
//!   windows expected and stored, sequence holes and drops);
//! - `correlation`, `headline`, [`verdict`]: what is read off the parts
//!   (throttled against normal, the seed's table, PASS/FAIL);
//! - `chart`: the HTML report's series, downsampled; `dist`: its heatmap
//!   and CDF;
//! - `acceptance`: the acceptance figures one step per concern:
//!   `availability` (each window's class, tallies, availability, budget,
//!   MTBF/MTTR), `above` (time above the thresholds), `hourly` (the
//!   per-hour table), `quarter` (the worst quarter hour and its events),
//!   `fleet` (the ranking and the time every link was good);
//! - `facts`: what the acceptance parts read (counters, Hellos, agent
//!   stats, restarts, link events), handed to `changepoint` and `shifts`
//!   (level changes of each link and the event beside each), `counters`
//!   (growth), `inventory` (ends side by side) and `overhead` (the soak's
//!   own cost).

mod above;
mod acceptance;
mod availability;
mod bandwidth;
mod bins;
mod build;
mod changepoint;
mod chart;
mod correlation;
pub mod counters;
mod coverage;
mod dist;
mod facts;
mod finish;
mod fleet;
mod headline;
mod hourly;
pub mod inventory;
mod outages;
pub mod overhead;
mod quarter;
pub mod rdma;
mod rtt;
pub mod shifts;
mod thermal;
pub mod verdict;
pub mod worst_link;

use serde::Serialize;

pub use build::{Builder, Scope};

use crate::soak::Mark;

// One RTT window as the report keeps it: what a per-minute rollup keeps of
// each window, too.
use boltwatch_store::Window as Win;

/// RTT figures of a set of probe windows.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Rtt {
    /// Probe windows merged.
    pub windows: u64,
    /// Probes sent.
    pub probes: u64,
    /// Probes answered.
    pub received: u64,
    /// Probes lost.
    pub lost: u64,
    /// Lost over sent, percent.
    pub loss_percent: f64,
    /// Exact mean, ms.
    pub mean_ms: Option<f64>,
    /// Median, ms (one histogram bucket).
    pub p50_ms: Option<f64>,
    /// 99th percentile, ms (one histogram bucket).
    pub p99_ms: Option<f64>,
    /// Exact largest, ms.
    pub worst_ms: Option<f64>,
    /// 90th percentile, ms (one histogram bucket).
    pub p90_ms: Option<f64>,
    /// 99.9th percentile, ms (one histogram bucket).
    pub p999_ms: Option<f64>,
}

/// Bandwidth tests of a direction.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Bandwidth {
    /// Tests run.
    pub tests: u64,
    /// Tests that failed (no throughput).
    pub failed: u64,
    /// Mean of successful tests, Gbps.
    pub mean_gbps: Option<f64>,
    /// Lowest successful test, Gbps.
    pub worst_gbps: Option<f64>,
    /// Highest, Gbps.
    pub best_gbps: Option<f64>,
}

/// One outage, clipped to the range.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutageItem {
    /// Node that recorded it.
    pub node: String,
    /// Peer it concerns.
    pub peer: String,
    /// `carrier`, `probe_loss`, `both`, `sleep` or `service`.
    pub cause: String,
    /// Service, for service outages.
    pub service: Option<String>,
    /// Start (clipped), unix ns.
    pub start_unix_ns: u64,
    /// End (clipped; the range end while still open), unix ns.
    pub end_unix_ns: u64,
    /// Still open at the range end.
    pub open: bool,
    /// Length inside the range, s.
    pub seconds: f64,
}

/// Link interruptions.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Interruptions {
    /// How many.
    pub count: u64,
    /// Total down time, s.
    pub total_down_seconds: f64,
    /// Longest, s.
    pub longest_seconds: f64,
    /// Each one.
    pub outages: Vec<OutageItem>,
}

/// RTT-window completeness of one link.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Coverage {
    /// Window length used, ns.
    pub window_ns: u64,
    /// Windows the schedule implies.
    pub expected: u64,
    /// Windows stored.
    pub stored: u64,
    /// Runs of missing windows.
    pub gaps: Vec<Gap>,
}

/// A run of missing RTT windows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Gap {
    /// First missing window's start, unix ns.
    pub start_unix_ns: u64,
    /// End of the last missing window, unix ns.
    pub end_unix_ns: u64,
    /// Windows missing.
    pub missing: u64,
}

/// One directed link (or `*` -> `*` overall).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Link {
    /// Measuring node.
    pub node: String,
    /// Measured peer.
    pub peer: String,
    /// Windows no bandwidth test overlapped.
    pub rtt_rest: Rtt,
    /// Windows a bandwidth test overlapped.
    pub rtt_load: Rtt,
    /// Both.
    pub rtt: Rtt,
    /// TCP tests moving data node -> peer.
    pub bandwidth: Bandwidth,
    /// Link outages (carrier, probe loss).
    pub interruptions: Interruptions,
    /// RTT-window coverage.
    pub coverage: Coverage,
    /// Unavailable and errored seconds, availability, error budget.
    pub availability: Availability,
    /// Time beyond the RTT and bandwidth thresholds.
    pub above_threshold: Above,
    /// One row per UTC hour of the range.
    pub hourly: Vec<Hour>,
    /// The worst UTC-aligned quarter hour (None: no windows).
    pub worst_quarter: Option<Quarter>,
}

/// One checked service.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Service {
    /// Checking node.
    pub node: String,
    /// Peer whose service it is.
    pub peer: String,
    /// Service name.
    pub service: String,
    /// Checks.
    pub checks: u64,
    /// Checks that connected.
    pub up: u64,
    /// up / checks, percent.
    pub availability_percent: Option<f64>,
    /// Service outages and their time.
    pub outages: Interruptions,
}

/// One sensor of a node.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Sensor {
    /// Sensor name.
    pub sensor: String,
    /// Readings.
    pub readings: u64,
    /// Mean, C.
    pub mean_celsius: f64,
    /// Highest, C.
    pub worst_celsius: f64,
}

/// A throttle episode.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Episode {
    /// Start, unix ns.
    pub start_unix_ns: u64,
    /// End, unix ns.
    pub end_unix_ns: u64,
}

/// Temperatures and throttling of a node.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Thermal {
    /// Node.
    pub node: String,
    /// The sensor with the highest reading (the table's "case temperature").
    pub sensor: Option<String>,
    /// Its mean, C.
    pub mean_celsius: Option<f64>,
    /// Its highest, C.
    pub worst_celsius: Option<f64>,
    /// Every sensor.
    pub sensors: Vec<Sensor>,
    /// Throttle episodes.
    pub throttle_episodes: u64,
    /// Time throttled, s.
    pub throttled_seconds: f64,
    /// Each episode.
    pub episodes: Vec<Episode>,
}

/// One side of the thermal correlation.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Side {
    /// Successful TCP tests.
    pub tests: u64,
    /// Their mean, Gbps.
    pub mean_gbps: Option<f64>,
    /// RTT windows.
    pub rtt_windows: u64,
    /// Exact mean RTT over their probes, ms.
    pub rtt_mean_ms: Option<f64>,
}

/// A bandwidth test with its thermal context.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TestPoint {
    /// Sending node.
    pub from: String,
    /// Receiving node.
    pub to: String,
    /// Start, unix ns.
    pub start_unix_ns: u64,
    /// Throughput, Gbps (None: failed).
    pub gbps: Option<f64>,
    /// Hottest sensor of the sending node at the start, C.
    pub celsius: Option<f64>,
    /// Either end throttled at the start.
    pub throttled: bool,
}

/// Bandwidth and RTT during throttling vs outside it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Correlation {
    /// During throttling.
    pub throttled: Side,
    /// Outside.
    pub normal: Side,
    /// throttled - normal mean bandwidth, Gbps.
    pub bandwidth_difference_gbps: Option<f64>,
    /// The same relative to normal, percent.
    pub bandwidth_difference_percent: Option<f64>,
    /// throttled - normal mean RTT, ms.
    pub rtt_difference_ms: Option<f64>,
    /// The report's sentence.
    pub sentence: String,
    /// Every test.
    pub tests: Vec<TestPoint>,
}

/// The report's own coverage.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Completeness {
    /// RTT windows expected over all links.
    pub expected_windows: u64,
    /// Stored.
    pub stored_windows: u64,
    /// stored / expected, percent.
    pub percent: Option<f64>,
    /// Gaps over all links.
    pub gaps: u64,
    /// Records in range (of the soak's nodes).
    pub records: u64,
    /// Sequence numbers missing inside each boot's stored range.
    pub sequence_holes: u64,
    /// Records the agents dropped (spool or queue full), growth in range.
    pub spool_drops: u64,
}

/// The seed's hand-made table, computed.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Headline {
    /// RTT mean, ms.
    pub rtt_mean_ms: Option<f64>,
    /// RTT worst, ms.
    pub rtt_worst_ms: Option<f64>,
    /// TCP bandwidth mean, Gbps.
    pub bandwidth_mean_gbps: Option<f64>,
    /// TCP bandwidth worst, Gbps.
    pub bandwidth_worst_gbps: Option<f64>,
    /// Link interruptions, all links.
    pub interruptions: u64,
    /// Link interruptions on the worst link.
    pub interruptions_worst_link: u64,
    /// The service the availability row is about (`ssh` when checked).
    pub service: String,
    /// Its mean availability over checkers and peers, percent.
    pub availability_mean_percent: Option<f64>,
    /// The lowest, percent.
    pub availability_worst_percent: Option<f64>,
    /// Mean of each node's hottest sensor, C.
    pub temperature_mean_celsius: Option<f64>,
    /// Highest reading of those, C.
    pub temperature_worst_celsius: Option<f64>,
}

/// Chart series of one directed link, downsampled with min and max kept.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Chart {
    /// Measuring node.
    pub node: String,
    /// Peer.
    pub peer: String,
    /// RTT p50 per window, ms.
    pub p50: Vec<(u64, f64)>,
    /// RTT p99 per window, ms.
    pub p99: Vec<(u64, f64)>,
    /// Bandwidth tests, Gbps.
    pub bandwidth: Vec<(u64, f64)>,
    /// The node's hottest sensor, C.
    pub temperature: Vec<(u64, f64)>,
    /// Throttle episodes of either end.
    pub throttled: Vec<(u64, u64)>,
    /// Link outages.
    pub outages: Vec<(u64, u64)>,
    /// RTT windows per time bin and p99 bucket.
    pub heatmap: Heatmap,
    /// Every probe's RTT, `(ms, share at or below)`.
    pub cdf: Vec<(f64, f64)>,
}

/// RTT windows counted per time bin and RTT bucket (by each window's p99).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Heatmap {
    /// The first bin's start (aligned to UTC), unix ns.
    pub first_unix_ns: u64,
    /// Bin length, ns.
    pub bin_ns: u64,
    /// Bucket edges, ms, ascending (one more than the buckets).
    pub edges_ms: Vec<f64>,
    /// Windows, `[bin][bucket]`.
    pub counts: Vec<Vec<u32>>,
}

/// The whole report.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Report {
    /// Soak name.
    pub soak: String,
    /// Range start, unix ns.
    pub from_unix_ns: u64,
    /// Range end, unix ns.
    pub to_unix_ns: u64,
    /// Range length, s.
    pub duration_seconds: f64,
    /// Nodes covered.
    pub nodes: Vec<String>,
    /// The seed's table.
    pub headline: Headline,
    /// All links together.
    pub overall: Link,
    /// Each directed link.
    pub links: Vec<Link>,
    /// Each service.
    pub services: Vec<Service>,
    /// Each node's temperatures and throttling.
    pub thermal: Vec<Thermal>,
    /// Thermal-bandwidth correlation.
    pub correlation: Correlation,
    /// Data completeness.
    pub completeness: Completeness,
    /// Workload marks.
    pub marks: Vec<Mark>,
    /// PASS/FAIL per SLO line.
    pub verdict: Verdict,
    /// Links and nodes worst-first, and the time every link was good.
    pub fleet: Fleet,
    /// Chart series (HTML only).
    #[serde(skip)]
    pub charts: Vec<Chart>,
    /// Changepoints of each link's RTT level and bandwidth.
    pub changepoints: Vec<shifts::Shift>,
    /// Error, drop and carrier counter growth per node and interface.
    pub counter_growth: Vec<counters::Growth>,
    /// What the agents reported of the hardware and software under test.
    pub inventory: inventory::Inventory,
    /// What the soak itself cost.
    pub overhead: overhead::Overhead,
    /// RDMA probing per link: its own transport, outside the RTT figures
    /// and the verdict; absent from the JSON when no link was probed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rdma: Vec<rdma::RdmaLink>,
}

/// A link's availability over the range, counted in RTT-window seconds
/// (`availability`): a window overlapping one of the link's outages is
/// unavailable (UAS); otherwise one that lost a probe is errored (ES), and
/// severely errored (SES, a subset of ES) when it lost at least 30 % of the
/// probes it sent.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Availability {
    /// Unavailable seconds.
    pub uas_seconds: f64,
    /// Errored seconds (outside outages).
    pub es_seconds: f64,
    /// Severely errored seconds (a subset of ES).
    pub ses_seconds: f64,
    /// 1 - UAS / range, percent.
    pub availability_percent: Option<f64>,
    /// UAS / ((1 - min/100) * range), percent; over 100 the budget is
    /// blown (None: a zero budget with UAS).
    pub budget_consumed_percent: Option<f64>,
    /// Outages (overlapping ones merged).
    pub outages: u64,
    /// The longest, s.
    pub longest_outage_seconds: f64,
    /// Mean time between failures: up time / outages, s.
    pub mtbf_seconds: Option<f64>,
    /// Mean time to repair: down time / outages, s.
    pub mttr_seconds: Option<f64>,
}

/// Time beyond the SLO's thresholds.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Above {
    /// Seconds of RTT windows whose p99 exceeds `rtt_p99_ms`.
    pub rtt_p99_seconds: f64,
    /// Their share of the range, percent.
    pub rtt_p99_percent: Option<f64>,
    /// Bandwidth tests below `bandwidth_mean_min_gbps` (None: not set).
    pub bandwidth_tests: Option<u64>,
    /// Their seconds.
    pub bandwidth_seconds: Option<f64>,
    /// Their share of the range, percent.
    pub bandwidth_percent: Option<f64>,
}

/// One UTC hour of a link (clipped to the range).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Hour {
    /// Start (the hour's, or the range's), unix ns.
    pub start_unix_ns: u64,
    /// Probes sent.
    pub probes: u64,
    /// Probes lost.
    pub lost: u64,
    /// Lost over sent, percent.
    pub loss_percent: f64,
    /// Median, ms (one histogram bucket).
    pub p50_ms: Option<f64>,
    /// 99th percentile, ms (one histogram bucket).
    pub p99_ms: Option<f64>,
    /// Exact largest, ms.
    pub worst_ms: Option<f64>,
    /// Errored seconds.
    pub es_seconds: f64,
    /// Unavailable seconds.
    pub uas_seconds: f64,
}

/// A UTC-aligned quarter hour (:00, :15, :30, :45) and what happened in it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Quarter {
    /// Start, unix ns.
    pub start_unix_ns: u64,
    /// Unavailable seconds.
    pub uas_seconds: f64,
    /// Severely errored seconds.
    pub ses_seconds: f64,
    /// Errored seconds.
    pub es_seconds: f64,
    /// The highest window p99, ms.
    pub p99_ms: Option<f64>,
    /// Outages, marks, throttling and bandwidth tests overlapping it.
    pub events: Vec<String>,
}

/// One link or node in the fleet ranking.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Rank {
    /// `a -> b`, or a node's name.
    pub name: String,
    /// Unavailable seconds.
    pub uas_seconds: f64,
    /// Severely errored seconds.
    pub ses_seconds: f64,
    /// RTT p99, ms (a node: its links' highest).
    pub p99_ms: Option<f64>,
}

/// The fleet: links and nodes worst-first (most UAS, then SES, then the
/// highest p99), and how long every link was good at once.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Fleet {
    /// Links, worst first.
    pub links: Vec<Rank>,
    /// Nodes (the links from and to each), worst first.
    pub nodes: Vec<Rank>,
    /// Seconds in which every link had a window, available and with its
    /// p99 within `rtt_p99_ms`.
    pub all_good_seconds: f64,
    /// Their share of the range, percent.
    pub all_good_percent: Option<f64>,
}

/// One SLO line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Line {
    /// Stable key (also the `slo` label on `/metrics`).
    pub key: &'static str,
    /// What it is, for people.
    pub name: &'static str,
    /// Unit of measured and threshold.
    pub unit: &'static str,
    /// `<=` or `>=`.
    pub op: &'static str,
    /// Measured value (None: no data).
    pub measured: Option<f64>,
    /// Threshold (None: not set).
    pub threshold: Option<f64>,
    /// PASS (true), FAIL (false) or not judged (None).
    pub pass: Option<bool>,
}

/// The SLO verdict ([`verdict::judge`]): all lines and the overall result.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Verdict {
    /// Every line passed (lines without a threshold excluded).
    pub pass: bool,
    /// The lines, in the order of the issue.
    pub lines: Vec<Line>,
}

impl Line {
    /// `PASS`, `FAIL` or `n/a`.
    pub fn word(&self) -> &'static str {
        match self.pass {
            Some(true) => "PASS",
            Some(false) => "FAIL",
            None => "n/a",
        }
    }
}

impl Verdict {
    /// `PASS` or `FAIL`.
    pub fn word(&self) -> &'static str {
        if self.pass {
            "PASS"
        } else {
            "FAIL"
        }
    }
}

/// ns -> ms.
pub(crate) fn ms(ns: f64) -> f64 {
    ns / 1e6
}

/// ns -> s.
pub(crate) fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// The arithmetic mean (None of nothing).
fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

#[cfg(test)]
mod tests;
