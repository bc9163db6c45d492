//! The Linux link watcher end to end against a fixture sysfs tree: the real
//! watcher thread and netlink socket, with the interface existing only in
//! the fixture, so every record after STARTUP comes from the 1 Hz
//! reconciliation poll. (Netlink events themselves are exercised inside a
//! network namespace by `tests/tests/netns.rs`.)
#![cfg(target_os = "linux")]

use std::path::Path;
use std::sync::mpsc::Receiver;
use std::time::Duration;

use boltwatch_agent::link::{spawn_watcher, LinkChange};
use boltwatch_agent::sink::{Emitted, Sink};
use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{LinkEvent, LinkEventSource};
use tokio::sync::mpsc::UnboundedReceiver;

const IFACE: &str = "bwfix0";

fn write_if(root: &Path, carrier: bool, up: u64, down: u64) {
    // Build the new state beside the old one and swap it in with renames,
    // so a poll never reads half of one state and half of the next.
    let net = root.join("class/net");
    let new = net.join(".new");
    std::fs::create_dir_all(&new).unwrap();
    std::fs::write(new.join("carrier_up_count"), format!("{up}\n")).unwrap();
    std::fs::write(new.join("carrier_down_count"), format!("{down}\n")).unwrap();
    std::fs::write(new.join("flags"), "0x1003\n").unwrap();
    std::fs::write(
        new.join("operstate"),
        if carrier { "up\n" } else { "down\n" },
    )
    .unwrap();
    std::fs::write(new.join("carrier"), if carrier { "1\n" } else { "0\n" }).unwrap();
    let cur = net.join(IFACE);
    let old = net.join(".old");
    if cur.exists() {
        std::fs::rename(&cur, &old).unwrap();
    }
    std::fs::rename(&new, &cur).unwrap();
    let _ = std::fs::remove_dir_all(&old);
}

/// Waits (bounded) for the next link event record.
fn next_event(rx: &mut UnboundedReceiver<Emitted>) -> LinkEvent {
    for _ in 0..100 {
        match rx.try_recv() {
            Ok(Emitted {
                payload: Payload::LinkEvent(e),
                ..
            }) => return e,
            Ok(other) => panic!("unexpected record {other:?}"),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    panic!("no link event within 5 s");
}

fn next_change(rx: &Receiver<LinkChange>) -> LinkChange {
    rx.recv_timeout(Duration::from_secs(5))
        .expect("observer notified")
}

#[test]
fn poll_reports_startup_missed_flaps_and_drops() {
    let root = tempfile::tempdir().unwrap();
    write_if(root.path(), true, 1, 0);
    let (sink, mut records) = Sink::new();
    let (obs_tx, obs) = std::sync::mpsc::channel();
    let watcher = spawn_watcher(
        vec![IFACE.to_owned()],
        root.path().to_owned(),
        sink,
        Some(obs_tx.into()),
    )
    .unwrap();

    let e = next_event(&mut records);
    assert_eq!(e.source, LinkEventSource::Startup as i32);
    assert!(e.carrier && e.admin_up);
    assert_eq!((e.carrier_up_count, e.carrier_down_count), (1, 0));
    assert_eq!(next_change(&obs).missed_flaps, 0);

    // Two flaps came and went between polls: only the counters moved.
    write_if(root.path(), true, 3, 2);
    let e = next_event(&mut records);
    assert_eq!(e.source, LinkEventSource::Poll as i32);
    assert!(e.carrier);
    assert_eq!(e.carrier_down_count, 2);
    let c = next_change(&obs);
    assert_eq!((c.missed_flaps, c.carrier_changed), (2, false));

    // A drop the (absent) events never reported.
    write_if(root.path(), false, 3, 3);
    let e = next_event(&mut records);
    assert_eq!(e.source, LinkEventSource::Poll as i32);
    assert!(!e.carrier);
    let c = next_change(&obs);
    assert_eq!(
        (c.carrier_changed, c.carrier, c.missed_flaps),
        (true, false, 0)
    );

    watcher.stop();
    // Nothing else was emitted: unchanged polls are silent.
    assert!(records.try_recv().is_err());
    assert!(obs.try_recv().is_err());
}

#[test]
fn watcher_stops_promptly_and_closes_the_sink() {
    let root = tempfile::tempdir().unwrap();
    write_if(root.path(), true, 1, 0);
    let (sink, mut records) = Sink::new();
    let watcher = spawn_watcher(vec![IFACE.into()], root.path().into(), sink, None).unwrap();
    next_event(&mut records);
    drop(watcher);
    // The watcher thread owned the only sink: the channel is closed now.
    assert!(matches!(
        records.try_recv(),
        Err(tokio::sync::mpsc::error::TryRecvError::Disconnected)
    ));
}
