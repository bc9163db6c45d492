//! `doctor --rdma`: the RDMA probe's readiness, as the agent's RDMA role
//! surveys it ([`crate::rdma::survey`]), one row per check: the verbs
//! library, its devices, `rdma_ctl` (macOS), each port's state, GID index 1
//! against the paired interface's addresses, Thunderbolt Bridge off, and
//! the probe itself. A check that fails is a disagreement with what the
//! probe needs, so the exit status is 1 on a host without RDMA.

use std::path::Path;

use super::{Captures, Row, Verdict};
use crate::rdma::survey::{survey, Survey};

pub(super) fn rows(cap: &Captures, only: &[String]) -> Vec<Row> {
    let sysfs = Path::new("/sys");
    let links = if only.is_empty() {
        super::fabric::cluster_links(sysfs)
    } else {
        only.to_vec()
    };
    // Doctor has no peers: each link stands for the peer behind it.
    let peers: Vec<(String, String)> = links.iter().map(|l| (l.clone(), l.clone())).collect();
    let s = survey(&peers, sysfs);
    let _ = cap.save("rdma/survey.txt", format!("{s:#?}\n").as_bytes());
    let mut rows = vec![library(&s), devices(&s), rdma_ctl(&s)];
    rows.extend(ports(&s));
    rows.extend(gids(&s));
    rows.push(bridge(&s, &links));
    rows.push(probe(&s));
    rows
}

fn row(subject: &str, agent: String, os_tool: String, verdict: Verdict) -> Row {
    Row {
        source: "rdma",
        subject: subject.into(),
        agent,
        os_tool,
        verdict,
    }
}

fn library(s: &Survey) -> Row {
    let (file, opened) = &s.library;
    let (agent, verdict) = match opened {
        Ok(()) => ("loaded, every symbol".to_string(), Verdict::Agree),
        Err(e) => (
            e.clone(),
            Verdict::Disagree("macOS 26.2+ ships librdma.dylib; Linux needs rdma-core".into()),
        ),
    };
    row("library", agent, format!("dlopen {file}"), verdict)
}

fn devices(s: &Survey) -> Row {
    let listed = s.devices.join(", ");
    let (agent, verdict) = match (s.devices.is_empty(), &s.library.1) {
        (_, Err(_)) => (String::new(), Verdict::NotApplicable("no library".into())),
        (true, _) => (
            "none".into(),
            Verdict::Disagree("no RDMA device: needs Thunderbolt 5 and `rdma_ctl enable` (macOS), an RDMA NIC or rxe (Linux)".into()),
        ),
        (false, _) => (listed, Verdict::Agree),
    };
    row("devices", agent, "ibv_get_device_list".into(), verdict)
}

fn rdma_ctl(s: &Survey) -> Row {
    let enabled = s.inventory.as_ref().and_then(|r| r.enabled);
    let (agent, verdict) = match enabled {
        Some(true) => ("enabled".to_string(), Verdict::Agree),
        Some(false) => (
            "disabled".into(),
            Verdict::Disagree("run `rdma_ctl enable` from Recovery".into()),
        ),
        None if cfg!(target_os = "macos") => (
            "unknown".into(),
            Verdict::Unavailable("rdma_ctl not found or said neither word".into()),
        ),
        None => (
            String::new(),
            Verdict::NotApplicable("only macOS has rdma_ctl".into()),
        ),
    };
    row("rdma_ctl", agent, "rdma_ctl status".into(), verdict)
}

fn ports(s: &Survey) -> Vec<Row> {
    let ports = s.inventory.as_ref().map_or(&[][..], |r| &r.ports[..]);
    if ports.is_empty() {
        let why = Verdict::NotApplicable("no device port in the inventory".into());
        return vec![row(
            "ports",
            String::new(),
            "ibv_devinfo / sysfs".into(),
            why,
        )];
    }
    ports
        .iter()
        .map(|p| {
            let verdict = if p.active() {
                Verdict::Agree
            } else {
                Verdict::Disagree("port not active: RDMA on at both ends, cable in".into())
            };
            let subject = format!("{} port {} ({})", p.device, p.port, p.interface);
            row(
                &subject,
                p.state.clone(),
                "ibv_devinfo / sysfs".into(),
                verdict,
            )
        })
        .collect()
}

fn gids(s: &Survey) -> Vec<Row> {
    let Ok((planned, _)) = &s.plan else {
        return Vec::new();
    };
    planned
        .iter()
        .zip(&s.gids)
        .map(|(p, g)| {
            let (agent, verdict) = match g {
                Ok(true) => ("an address of the interface".to_string(), Verdict::Agree),
                Ok(false) => (
                    "not an address of the interface".into(),
                    Verdict::Disagree("GID index 1 must be the paired interface's address".into()),
                ),
                Err(e) => (
                    e.clone(),
                    Verdict::Unavailable("ibv_query_gid failed".into()),
                ),
            };
            let subject = format!("gid {} index 1 ({})", p.link.device, p.link.interface);
            row(&subject, agent, "ibv_query_gid".into(), verdict)
        })
        .collect()
}

fn bridge(s: &Survey, links: &[String]) -> Row {
    let (agent, verdict) = if s.bridged.is_empty() {
        ("no link in a bridge".to_string(), Verdict::Agree)
    } else {
        let b: Vec<String> = s
            .bridged
            .iter()
            .map(|(b, m)| format!("{m} in {b}"))
            .collect();
        (
            b.join(", "),
            Verdict::Disagree("turn Thunderbolt Bridge off: RTR fails with errno 22".into()),
        )
    };
    row("bridge off", agent, links.join(", "), verdict)
}

fn probe(s: &Survey) -> Row {
    let ready = s.ready();
    let verdict = match &s.plan {
        Err(why) => Verdict::NotApplicable(format!("not ready: {why}")),
        Ok(_) if ready.is_empty() => Verdict::NotApplicable("no ready link".into()),
        // A ping-pong needs the peer's queue pair, which only its running
        // agent offers over the side channel (docs/rdma.md): doctor, local
        // and short-lived, points at the running agent's figures instead.
        Ok(_) => Verdict::Unavailable(
            "a probe needs the peer agent's queue pair: read the running agent's \
             boltwatch_rdma_probe_received_total and boltwatch_rdma_rtt_p50_seconds"
                .into(),
        ),
    };
    let agent = ready
        .iter()
        .map(|p| p.link.device.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    row(
        "probe",
        agent,
        "one ping-pong per ready link".into(),
        verdict,
    )
}
