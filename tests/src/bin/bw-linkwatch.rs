//! Runs the agent's link watcher and prints what it emits, one JSON object
//! per line, until stdin closes. Tests start it inside a bed node with
//! `ip netns exec`, so the netlink socket and `/sys` are the node's own;
//! operators can use it to see what the agent would report.
//!
//! Usage: `bw-linkwatch [--interface NAME]... [--sysfs-root DIR]`.
//! Prints `{"ready":true}` once the kernel socket is open, then
//! `{"kind":"event",...}` for every `LinkEvent` record and
//! `{"kind":"change",...}` for every observer notification.

use std::io::{BufRead, Write};
use std::path::PathBuf;

use anyhow::{bail, Context};
use boltwatch_agent::link::spawn_watcher;
use boltwatch_agent::sink::Sink;
use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::LinkEventSource;
use serde_json::json;

fn source_name(v: i32) -> &'static str {
    LinkEventSource::try_from(v)
        .map(|s| s.as_str_name())
        .unwrap_or("UNKNOWN")
}

fn main() -> anyhow::Result<()> {
    let mut interfaces = Vec::new();
    let mut sysfs_root = PathBuf::from("/sys");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--interface" => interfaces.push(args.next().context("--interface needs a name")?),
            "--sysfs-root" => sysfs_root = args.next().context("--sysfs-root needs a path")?.into(),
            other => bail!("unknown argument {other:?}"),
        }
    }
    let (sink, mut records) = Sink::new();
    let (obs_tx, obs_rx) = std::sync::mpsc::channel();
    let watcher = spawn_watcher(interfaces, sysfs_root, sink, Some(obs_tx.into()))
        .context("starting the link watcher")?;
    let out = std::sync::Arc::new(std::sync::Mutex::new(std::io::stdout()));
    let print = {
        let out = out.clone();
        move |v: serde_json::Value| {
            let mut o = out.lock().unwrap_or_else(|e| e.into_inner());
            let _ = writeln!(o, "{v}");
            let _ = o.flush();
        }
    };
    print(json!({ "ready": true }));
    let p = print.clone();
    let events = std::thread::spawn(move || {
        while let Some(e) = records.blocking_recv() {
            if let Payload::LinkEvent(ev) = e.payload {
                p(json!({
                    "kind": "event",
                    "at": e.unix_ns,
                    "interface": ev.interface,
                    "carrier": ev.carrier,
                    "admin_up": ev.admin_up,
                    "oper_state": ev.oper_state,
                    "up": ev.carrier_up_count,
                    "down": ev.carrier_down_count,
                    "source": source_name(ev.source),
                    "bridge": ev.bridge,
                }));
            }
        }
    });
    let p = print.clone();
    let changes = std::thread::spawn(move || {
        for c in obs_rx {
            p(json!({
                "kind": "change",
                "interface": c.interface,
                "carrier": c.carrier,
                "carrier_changed": c.carrier_changed,
                "missed_flaps": c.missed_flaps,
            }));
        }
    });
    // Run until whoever started us closes our stdin.
    for line in std::io::stdin().lock().lines() {
        if line.is_err() {
            break;
        }
    }
    // Stopping the watcher drops the sink and the observer, ending both
    // printer threads once they drained everything.
    watcher.stop();
    let _ = events.join();
    let _ = changes.join();
    Ok(())
}
