//! Bearer tokens: an agent without one, or with another node's, is refused
//! and counted; one with its own is stored.

use std::path::Path;
use std::time::Duration;

use boltwatch_tests::procs::{
    agent, free_udp_port, sample, wait_for, Collector, CollectorOptions, Proc,
};

use crate::support::{agent_args, agent_up, all_boots};

#[test]
fn tokens_are_required_and_bound_to_their_node() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(
        &tokens,
        "# node token\na aaaaaaaaaaaaaaaaaaaaaaaa\nb bbbbbbbbbbbbbbbbbbbbbbbb\n",
    )
    .unwrap();
    let good = dir.path().join("a.token");
    std::fs::write(&good, "aaaaaaaaaaaaaaaaaaaaaaaa\n").unwrap();
    let wrong = dir.path().join("b.token");
    std::fs::write(&wrong, "bbbbbbbbbbbbbbbbbbbbbbbb\n").unwrap();
    let c = Collector::launch(
        dir.path(),
        &dir.path().join("data"),
        &CollectorOptions {
            flags: vec!["--auth-tokens".into(), tokens.display().to_string()],
            ..Default::default()
        },
    );
    let url = c.grpc_url();
    let port = |_| free_udp_port();
    let with = |node: &str, token: Option<&Path>| -> Proc {
        let mut args = agent_args(&url, port(()), &[], "100ms");
        if let Some(t) = token {
            args.extend(["--token-file".into(), t.display().to_string()]);
        }
        agent(dir.path(), node, &args)
    };
    let _none = with("n", None);
    let _wrong = with("x", Some(&wrong));
    wait_for("refusals counted", Duration::from_secs(60), || {
        let m = c.metrics();
        sample(
            &m,
            "boltwatch_ingest_errors_total",
            &[("kind", "unauthenticated")],
        )
        .unwrap_or(0.0)
            >= 1.0
            && sample(
                &m,
                "boltwatch_ingest_errors_total",
                &[("kind", "permission_denied")],
            )
            .unwrap_or(0.0)
                >= 1.0
    });
    let _good = with("a", Some(&good));
    wait_for("a accepted", Duration::from_secs(60), || agent_up(&c, "a"));
    let nodes: Vec<String> = all_boots(&c).into_iter().map(|b| b.node).collect();
    assert!(nodes.iter().all(|n| n == "a"), "stored: {nodes:?}");
}
