use super::*;
use crate::report::soak::{Builder, Chart, Heatmap, Scope};
use crate::soak::Mark as SoakMark;

const S: u64 = 1_000_000_000;

fn report(to: u64) -> Report {
    Builder::new(Scope {
        name: "x".into(),
        from_unix_ns: 0,
        to_unix_ns: to,
        nodes: vec![],
        slo: Default::default(),
        marks: vec![],
    })
    .finish()
}

fn chart() -> Chart {
    Chart {
        node: "<a>".into(),
        peer: "b".into(),
        p50: vec![(10 * S, 0.08), (20 * S, 0.09)],
        p99: vec![(10 * S, 0.1), (20 * S, 0.2)],
        bandwidth: vec![(50 * S, 70.0)],
        temperature: vec![(0, 40.0), (90 * S, 42.0)],
        throttled: vec![(60 * S, 80 * S)],
        outages: vec![(30 * S, 35 * S)],
        heatmap: Heatmap {
            first_unix_ns: 0,
            bin_ns: 900 * S,
            edges_ms: vec![0.1, 0.178, 0.316],
            counts: vec![vec![3, 1]],
        },
        cdf: vec![(0.05, 0.01), (0.08, 0.5), (0.2, 1.0)],
    }
}

#[test]
fn page_is_self_contained_and_escapes() {
    let mut r = report(100 * S);
    r.charts.push(chart());
    r.marks.push(SoakMark {
        text: "<b>build</b>".into(),
        at_unix_ns: 40 * S,
        until_unix_ns: Some(70 * S),
    });
    let p = page(&r);
    assert!(p.contains("&lt;a&gt;") && !p.contains("<a>") && !p.contains("<b>"));
    assert!(!p.contains("http://") && !p.contains("https://") && !p.contains("<script"));
    assert!(p.contains(r#"class="chart rtt" data-points="4""#), "{p}");
    assert!(p.contains(r#"class="chart bandwidth" data-points="3""#));
    assert!(p.contains(r#"class="chart heatmap" data-points="2""#));
    assert!(p.contains(r#"class="chart cdf" data-points="3""#));
    assert!(p.find("id=\"verdict\"").unwrap() < p.find("<svg").unwrap());
    // The SLO's p99 line on the RTT chart and the CDF; marks labelled.
    assert_eq!(p.matches("SLO p99").count(), 2, "{p}");
    assert!(p.contains("&lt;b&gt;build&lt;/b&gt;</text>"), "{p}");
    // One link per printed page.
    assert!(p.contains("section.link{break-before:page}"));
}

#[test]
fn every_section_is_a_real_table_and_the_summary_leads() {
    let r = report(3600 * S);
    let p = page(&r);
    assert!(!p.contains("<pre>"));
    let sections = render::sections(&r);
    assert_eq!(p.matches("<table").count(), sections.len());
    for s in &sections {
        assert!(
            p.contains(&format!("<h2>{}</h2><table", esc(&s.title))),
            "{}",
            s.title
        );
    }
    let summary = p.find("class=\"summary FAIL\"").unwrap();
    assert!(summary < p.find("<table").unwrap());
    // A comparison's section sits right after the verdict.
    let extra = Section {
        title: "compared".into(),
        header: vec!["figure"],
        rows: vec![vec!["x".into()]],
    };
    let p = page_with(&r, vec![extra]);
    let (v, c) = (
        p.find("id=\"verdict\"").unwrap(),
        p.find("<h2>compared</h2>").unwrap(),
    );
    assert!(v < c && c < p.find("class=\"empty\"").unwrap(), "{p}");
}

#[test]
fn empty_series_give_a_sentence_not_an_empty_axis() {
    let mut r = report(100 * S);
    r.charts.push(Chart {
        node: "a".into(),
        peer: "b".into(),
        p50: vec![(10 * S, 0.08)],
        p99: vec![(10 * S, 0.1)],
        bandwidth: vec![(50 * S, 70.0)],
        ..Chart::default()
    });
    r.charts.push(Chart {
        node: "b".into(),
        peer: "a".into(),
        ..Chart::default()
    });
    let p = page(&r);
    assert!(p.contains("No temperature was reported by a."), "{p}");
    assert!(!p.contains("class=\"right"), "no temperature axis: {p}");
    assert!(p.contains("No probe was answered on this link"));
    assert!(p.contains("no bandwidth chart"));
    assert_eq!(p.matches("<svg").count(), 2, "{p}");
}

#[test]
fn each_link_has_its_hourly_table_under_its_charts() {
    let mut r = report(100 * S);
    r.charts.push(chart());
    r.links.push(crate::report::soak::Link {
        node: "<a>".into(),
        peer: "b".into(),
        hourly: vec![crate::report::soak::Hour {
            probes: 1234,
            uas_seconds: 7.0,
            ..Default::default()
        }],
        ..Default::default()
    });
    let p = page(&r);
    let link = p.find("<section class=\"link\">").unwrap();
    let hourly = p
        .find("<h2>per hour, &lt;a&gt; -&gt; b</h2>")
        .expect("the link's hours");
    let detail = p.find("<section class=\"detail\">").unwrap();
    assert!(link < hourly && hourly < detail);
    assert!(
        p[hourly..detail].contains("<td>1234</td>") && p[hourly..detail].contains("<td>7</td>")
    );
}
