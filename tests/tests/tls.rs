//! TLS and mutual TLS on the agent-to-collector stream, with the real
//! binaries on loopback and certificates made per test (rcgen): a good CA
//! connects, a wrong CA, plaintext, expired certificates and a client
//! certificate speaking for another node are refused, and a certificate
//! rotated by SIGHUP serves new connections while the open stream stays.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use boltwatch_tests::procs::{
    agent, free_udp_port, sample, wait_for, Collector, CollectorOptions, Proc,
};
use rcgen::{
    date_time_ymd, BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, SanType,
};

/// A test CA: its certificate on disk and what signs with it.
struct Ca {
    params: CertificateParams,
    key: KeyPair,
    pem: PathBuf,
}

impl Ca {
    fn new(dir: &Path, name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let pem = dir.join(format!("{name}.pem"));
        std::fs::write(&pem, cert.pem()).unwrap();
        Ca { params, key, pem }
    }

    /// A leaf certificate for `names` (DNS), written as `stem.pem` and
    /// `stem.key`: a server one also names 127.0.0.1, a client one is for
    /// client authentication; `expired` ended in 2020.
    fn leaf(&self, dir: &Path, stem: &str, names: &[&str], client: bool, expired: bool) -> Leaf {
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        params.distinguished_name.push(DnType::CommonName, stem);
        if client {
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        } else {
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
            params
                .subject_alt_names
                .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        }
        if expired {
            params.not_before = date_time_ymd(2019, 1, 1);
            params.not_after = date_time_ymd(2020, 1, 1);
        }
        let key = KeyPair::generate().unwrap();
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).unwrap();
        let leaf = Leaf {
            cert: dir.join(format!("{stem}.pem")),
            key: dir.join(format!("{stem}.key")),
        };
        std::fs::write(&leaf.cert, cert.pem()).unwrap();
        std::fs::write(&leaf.key, key.serialize_pem()).unwrap();
        leaf
    }
}

/// A certificate and key on disk.
struct Leaf {
    cert: PathBuf,
    key: PathBuf,
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// A collector speaking TLS with `server`, requiring client certificates
/// from `client_ca` when given.
fn tls_collector(dir: &Path, server: &Leaf, client_ca: Option<&Ca>) -> Collector {
    let mut extra = vec![
        "--tls-cert".into(),
        s(&server.cert),
        "--tls-key".into(),
        s(&server.key),
    ];
    if let Some(ca) = client_ca {
        extra.extend(["--tls-client-ca".into(), s(&ca.pem)]);
    }
    Collector::launch(
        dir,
        &dir.join("data"),
        &CollectorOptions {
            flags: extra,
            ..Default::default()
        },
    )
}

/// An agent of `node` probing nothing but sending its own records to
/// `url`, with `tls` flags.
fn tls_agent(dir: &Path, node: &str, url: &str, tls: &[String]) -> Proc {
    let mut args = vec![
        "--collector".into(),
        url.to_string(),
        "--listen".into(),
        format!("127.0.0.1:{}", free_udp_port()),
        "--probe-interval".into(),
        "50ms".into(),
        "--no-services".into(),
    ];
    args.extend(tls.iter().cloned());
    agent(dir, node, &args)
}

fn https(c: &Collector) -> String {
    format!("https://{}", c.grpc)
}

fn up(c: &Collector, node: &str) -> bool {
    sample(&c.metrics(), "boltwatch_agent_up", &[("node", node)]) == Some(1.0)
}

fn counted(c: &Collector, name: &str, labels: &[(&str, &str)]) -> f64 {
    sample(&c.metrics(), name, labels).unwrap_or(0.0)
}

/// Nodes the collector has stored anything from.
fn stored_nodes(c: &Collector) -> Vec<String> {
    c.nodes()["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| n["node"].as_str().unwrap().to_string())
        .collect()
}

fn records_of(c: &Collector, node: &str) -> u64 {
    c.nodes()["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter(|n| n["node"] == node)
        .flat_map(|n| n["boots"].as_array().unwrap().iter())
        .map(|b| b["records"].as_u64().unwrap())
        .sum()
}

const LIMIT: Duration = Duration::from_secs(60);

#[test]
fn tls_connects_with_the_right_ca_and_refuses_wrong_ca_plaintext_and_expired() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ca = Ca::new(d, "ca");
    let other = Ca::new(d, "other-ca");
    let server = ca.leaf(d, "server", &["localhost"], false, false);
    let c = tls_collector(d, &server, None);
    let ca_flag = vec!["--tls-ca".to_string(), s(&ca.pem)];

    let _good = tls_agent(d, "good", &https(&c), &ca_flag);
    wait_for("the agent with the right CA streams", LIMIT, || {
        up(&c, "good") && records_of(&c, "good") > 0
    });

    // A wrong CA: the agent refuses the collector's certificate.
    let wrong = tls_agent(
        d,
        "wrongca",
        &https(&c),
        &["--tls-ca".into(), s(&other.pem)],
    );
    // Plaintext to the TLS port: the collector refuses the handshake.
    let plain = tls_agent(d, "plain", &format!("http://{}", c.grpc), &[]);
    wait_for("both refusals seen", LIMIT, || {
        wrong.log_text().contains("UnknownIssuer")
            && c.proc.log_text().contains("TLS handshake failed")
    });
    // The wrong-CA agent logs its refusal before the collector reads the
    // alert that ends the handshake on its side: wait for both counts.
    wait_for("both refused handshakes counted", LIMIT, || {
        counted(&c, "boltwatch_ingest_malformed_connections_total", &[]) >= 2.0
    });
    wait_for("the plaintext agent is told why", LIMIT, || {
        plain
            .log_text()
            .contains("use an https:// collector URL and --tls-ca")
    });
    let nodes = stored_nodes(&c);
    assert_eq!(nodes, vec!["good".to_string()], "stored: {nodes:?}");

    // An expired server certificate is refused by the agent.
    let e = tempfile::tempdir().unwrap();
    let expired = ca.leaf(e.path(), "expired-server", &["localhost"], false, true);
    let old = tls_collector(e.path(), &expired, None);
    let late = tls_agent(e.path(), "late", &https(&old), &ca_flag);
    wait_for("expired server certificate refused", LIMIT, || {
        late.log_text().contains("certificate expired")
    });
    assert!(stored_nodes(&old).is_empty(), "{:?}", stored_nodes(&old));
}

#[test]
fn mutual_tls_binds_the_node_to_its_certificate_and_reloads_on_sighup() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ca = Ca::new(d, "ca");
    let server = ca.leaf(d, "server", &["localhost"], false, false);
    let c = tls_collector(d, &server, Some(&ca));
    let with = |node: &str, trust: &Ca, leaf: Option<&Leaf>| -> Proc {
        let mut flags = vec!["--tls-ca".to_string(), s(&trust.pem)];
        if let Some(l) = leaf {
            flags.extend([
                "--tls-cert".into(),
                s(&l.cert),
                "--tls-key".into(),
                s(&l.key),
            ]);
        }
        tls_agent(d, node, &https(&c), &flags)
    };

    let a_cert = ca.leaf(d, "a", &["a"], true, false);
    let _a = with("a", &ca, Some(&a_cert));
    wait_for("a streams with its certificate", LIMIT, || {
        up(&c, "a") && records_of(&c, "a") > 0
    });

    // b presents a's certificate: the stream is refused for b.
    let _b = with("b", &ca, Some(&a_cert));
    // No client certificate, and an expired one: no handshake.
    let _anon = with("anon", &ca, None);
    let x_cert = ca.leaf(d, "x", &["x"], true, true);
    let _x = with("x", &ca, Some(&x_cert));
    wait_for("every refusal counted", LIMIT, || {
        let log = c.proc.log_text();
        counted(
            &c,
            "boltwatch_ingest_errors_total",
            &[("kind", "permission_denied")],
        ) >= 1.0
            && log.contains("peer sent no certificates")
            && log.contains("certificate expired")
    });
    let nodes = stored_nodes(&c);
    assert_eq!(nodes, vec!["a".to_string()], "stored: {nodes:?}");

    // Rotate the server certificate to one from a new CA and send SIGHUP:
    // a's open stream keeps delivering, new agents need the new CA.
    let next = Ca::new(d, "next-ca");
    let rotated = next.leaf(d, "rotated", &["localhost"], false, false);
    std::fs::copy(&rotated.cert, &server.cert).unwrap();
    std::fs::copy(&rotated.key, &server.key).unwrap();
    let before = records_of(&c, "a");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(c.proc.pid() as i32),
        nix::sys::signal::Signal::SIGHUP,
    )
    .unwrap();
    wait_for("reload logged", LIMIT, || {
        c.proc.log_text().contains("TLS files reloaded")
    });
    let d_cert = ca.leaf(d, "d", &["d"], true, false);
    let _d = with("d", &next, Some(&d_cert));
    wait_for("a new agent trusting the new CA streams", LIMIT, || {
        up(&c, "d") && records_of(&c, "d") > 0
    });
    wait_for("a keeps delivering on its first stream", LIMIT, || {
        records_of(&c, "a") > before
    });
    let opened = c
        .proc
        .log_text()
        .matches("agent stream opened node=a ")
        .count();
    assert_eq!(opened, 1, "a's stream was reopened by the reload");
}
