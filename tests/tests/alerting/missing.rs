//! `BoltwatchAgentMissing` live, in its documented case: a node reported
//! in the last hour, then the collector Prometheus scrapes runs on a store
//! that does not know it (here: restarted on the same address with a new
//! data directory), and the node's agent has not connected to it. Its own
//! stack (webhook, Alertmanager, Prometheus and a collector on loopback),
//! so restarting the collector disturbs no other scenario. The agent runs
//! on loopback: nothing here needs a link.
//!
//! Asserted on what reaches the webhook: the alert pages (critical, the
//! pager's receiver), with the scraped cluster; once the agent connects to
//! the new collector, it resolves.

use std::path::Path;

use boltwatch_tests::procs::{agent, free_tcp_port, free_udp_port, Collector, CollectorOptions};

use crate::stack::{start_alertmanager, start_prometheus, Webhook, PAGER, WAIT};

const NODE: &str = "lonely";

fn collector(dir: &Path, data: &str, ports: (u16, u16)) -> Collector {
    let opts = CollectorOptions {
        ports: Some(ports),
        ..Default::default()
    };
    Collector::launch(dir, &dir.join(data), &opts)
}

fn start_agent(dir: &Path, grpc: u16) -> boltwatch_tests::procs::Proc {
    let args = [
        "--collector".to_string(),
        format!("http://127.0.0.1:{grpc}"),
        "--listen".into(),
        format!("127.0.0.1:{}", free_udp_port()),
    ];
    agent(dir, NODE, &args)
}

pub fn agent_missing_pages_on_a_store_without_the_node(dir: &Path) {
    let ports = (free_tcp_port(), free_tcp_port());
    let hook = Webhook::start();
    let mut c1 = collector(dir, "data-old", ports);
    let (_am, am_port) = start_alertmanager(dir, hook.port);
    let prom = start_prometheus(dir, &c1.http.to_string(), am_port);
    let mut a = start_agent(dir, ports.0);
    let up = format!("boltwatch_agent_up{{node=\"{NODE}\"}} == 1");
    boltwatch_tests::procs::wait_for("Prometheus holding the agent up", WAIT, || {
        !prom.values(&up).is_empty()
    });
    // The collector moves to a new store; the agent stays away (stopped
    // first, so the old collector never reports it down).
    c1.proc.terminate();
    a.kill9();
    let c2 = collector(dir, "data-new", ports);
    let known = format!("boltwatch_agent_up{{node=\"{NODE}\"}}");
    assert!(
        boltwatch_tests::procs::sample(&c2.metrics(), "boltwatch_agent_up", &[("node", NODE)])
            .is_none(),
        "the new store knows {NODE}: {known} is on its /metrics"
    );
    let paged = |x: &crate::stack::Delivered| {
        x.is("firing", "BoltwatchAgentMissing", NODE) && x.receiver == PAGER
    };
    hook.wait("BoltwatchAgentMissing paging for the node", &prom, paged);
    // The agent connects to the new collector: the alert resolves.
    let _a = start_agent(dir, ports.0);
    hook.wait("BoltwatchAgentMissing resolved", &prom, |x| {
        x.is("resolved", "BoltwatchAgentMissing", NODE)
    });
    let down = hook
        .all()
        .into_iter()
        .filter(|x| x.is("firing", "BoltwatchAgentDown", NODE))
        .count();
    assert_eq!(down, 0, "AgentDown is not this case: {:#?}", hook.all());
    drop(c2);
}
