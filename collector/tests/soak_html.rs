//! The soak's HTML report in a real browser: a simulated soak (real gRPC
//! ingest), the soak and its marks made with the real `soak` commands while
//! the collector runs, the page written by `report --format html`, then
//! opened in Debian's headless Chromium: the screenshot must not be blank,
//! every chart must hold the points it declares, and the console must show
//! no errors. Chromium missing is a failure (`.ci/test` installs it).

mod cli;
mod common;
mod sim;

use std::path::Path;
use std::process::{Command, Output};

use cli::collector_cli_ok;
use common::Collector;
use sim::{Scenario, S};

const CHROMIUM: &str = "/usr/bin/chromium";
/// 2026-11-30T00:00:00Z.
const T0: u64 = 1_795_996_800 * S;

fn collector(dir: &Path, args: &[&str]) -> String {
    collector_cli_ok(args, dir)
}

fn chromium(profile: &Path, args: &[&str], page: &Path) -> Output {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: apt-get install -y chromium (.ci/test does)"
    );
    Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap()
}

/// Points listed in the `points` attribute of every polyline of `svg`.
fn points(svg: &str) -> usize {
    svg.split("<polyline")
        .skip(1)
        .map(|p| {
            let list = p
                .split("points=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap();
            list.split_whitespace().count()
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn html_report_renders_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let c = Collector::start_with(dir.path(), |cfg| cfg.max_records_per_second = 10_000_000).await;
    let mut sc = Scenario::standard(3, T0, 3 * 3600 * S);
    sc.keep_samples = false;
    sim::run(&sc, c.grpc, 4000).await;

    // The soak commands on the store the running collector writes.
    let (from, to) = ((T0 / S).to_string(), ((T0 + sc.duration) / S).to_string());
    let nodes = sc.nodes.join(",");
    collector(
        dir.path(),
        &[
            "soak", "start", "sim", "--from", &from, "--to", &to, "--nodes", &nodes, "--label",
            "rack=2",
        ],
    );
    for (at, until, text) in &sc.marks {
        let at = (at / S).to_string();
        let mut args = vec!["soak", "mark", "sim", text.as_str(), "--at", at.as_str()];
        let until = until.map(|u| (u / S).to_string());
        if let Some(u) = &until {
            args.extend(["--until", u.as_str()]);
        }
        collector(dir.path(), &args);
    }
    let list = collector(dir.path(), &["soak", "list"]);
    assert!(
        list.contains("sim") && list.contains("2026-11-30T00:00:00Z"),
        "{list}"
    );
    let show = collector(dir.path(), &["soak", "show", "sim"]);
    assert!(
        show.contains("soak sim: ended, ran 2026-11-30T00:00:00Z .. ")
            && show.contains("(03:00:00)")
            && show.contains("\nverdict: FAIL"),
        "{show}"
    );
    assert!(show.contains("xcode incremental build"), "{show}");

    let page = dir.path().join("report.html");
    collector(
        dir.path(),
        &[
            "report",
            "--soak",
            "sim",
            "--format",
            "html",
            "--out",
            page.to_str().unwrap(),
        ],
    );
    c.stop().await;
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "the page fetches nothing"
    );

    // Every chart holds its points, in the DOM the browser built.
    let profile = tempfile::tempdir().unwrap();
    let dom = chromium(profile.path(), &["--dump-dom"], &page);
    assert!(
        dom.status.success(),
        "{}",
        String::from_utf8_lossy(&dom.stderr)
    );
    let dom = String::from_utf8(dom.stdout).unwrap();
    check_page(&dom, sc.nodes.len() * (sc.nodes.len() - 1), &sc.marks);

    // The screenshot is not blank, and the console is clean.
    let shot = dir.path().join("report.png");
    let run = chromium(
        profile.path(),
        &[
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1100,1500",
            &format!("--screenshot={}", shot.display()),
        ],
        &page,
    );
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let log = String::from_utf8_lossy(&run.stderr);
    for bad in ["Uncaught", ":CONSOLE(", "console error"] {
        assert!(!log.contains(bad), "console: {log}");
    }
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let px = info.color_type.samples();
    let pixels = &buf[..info.buffer_size()];
    let (mut ink, mut colour) = (0usize, 0usize);
    for p in pixels.chunks(px) {
        let (r, g, b) = (p[0] as i32, p[1] as i32, p[2] as i32);
        if r.min(g).min(b) < 235 {
            ink += 1;
        }
        if (r - g).abs().max((g - b).abs()).max((r - b).abs()) > 60 {
            colour += 1;
        }
    }
    let total = pixels.len() / px;
    eprintln!(
        "screenshot {}x{}: {ink} inked, {colour} coloured of {total} pixels",
        info.width, info.height
    );
    assert!(
        ink * 100 > total * 2,
        "page looks blank: {ink} of {total} pixels inked"
    );
    assert!(
        colour * 1000 > total,
        "no chart colour: {colour} of {total} pixels"
    );
    if let Ok(keep) = std::env::var("BOLTWATCH_KEEP_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }
}

/// The page as the browser built it (`dom`) for `links` directed links and
/// `marks`: every chart and its points, the marks, the SLO lines, the
/// ticks, the summary and the tables.
fn check_page(dom: &str, links: usize, marks: &[(u64, Option<u64>, String)]) {
    let charts: Vec<&str> = dom
        .split("<svg class=\"chart")
        .skip(1)
        .map(|s| s.split("</svg>").next().unwrap())
        .collect();
    assert_eq!(
        charts.len(),
        4 * links,
        "an RTT, a bandwidth, a heatmap and a CDF chart per link"
    );
    for kind in ["rtt", "bandwidth", "heatmap", "cdf"] {
        let n = charts
            .iter()
            .filter(|s| s.starts_with(&format!(" {kind}\"")))
            .count();
        assert_eq!(n, links, "{kind} charts");
    }
    for svg in &charts {
        let declared: usize = svg
            .split("data-points=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(declared > 10, "{declared} points");
        // Lines list their points; the heatmap draws one rect per cell.
        let cells = svg.matches("<rect class=\"cell ").count();
        assert_eq!(points(svg) + cells, declared);
    }
    // Marks are labelled spans on both time charts of every link.
    assert_eq!(
        dom.matches("class=\"mark\"").count(),
        2 * marks.len() * links
    );
    for (_, _, text) in marks {
        assert!(dom.contains(&format!(">{text}</text>")), "{text} labelled");
    }
    assert!(dom.contains("class=\"throttle\"") && dom.contains("class=\"outage\""));
    // SLO lines, time ticks on round hours, and the reader's summary
    // first; every section a real table (no Markdown in a <pre>).
    assert!(dom.contains("class=\"slo\"") && dom.contains(">SLO p99 "));
    assert!(dom.contains(">01:00</text>") && dom.contains(">02:00</text>"));
    let summary = dom
        .find("class=\"summary FAIL\"")
        .expect("the summary paragraph");
    assert!(summary < dom.find("<table").unwrap());
    assert!(!dom.contains("<pre>"));
    assert!(
        dom.matches("<table").count() >= 8,
        "the report's sections as tables"
    );
    assert!(dom.contains("section.link{break-before:page}"));
}
