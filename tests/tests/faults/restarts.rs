//! Crashes: the collector killed five times under two agents, an agent
//! killed and restarted on its spool.

use std::time::Duration;

use boltwatch_tests::procs::{agent, wait_for};

use crate::support::{
    agent_up, all_boots, boot_held, spooled, start_pair, stopped_line, Held, Home,
};

#[test]
fn collector_killed_five_times_every_seq_stored_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path());
    let mut c = home.start();
    let (mut a, mut b, _) = start_pair(dir.path(), &home);
    wait_for("both agents connected", Duration::from_secs(60), || {
        agent_up(&c, "a") && agent_up(&c, "b")
    });

    // About 60 s: five rounds of running, SIGKILL, a pause, a restart.
    for round in 0..5 {
        std::thread::sleep(Duration::from_secs(9));
        c.proc.kill9();
        std::thread::sleep(Duration::from_millis(1500 + 500 * round));
        c = home.start();
        assert!(a.alive() && b.alive(), "agents survive collector crashes");
    }
    wait_for("agents reconnected", Duration::from_secs(60), || {
        agent_up(&c, "a") && agent_up(&c, "b")
    });
    // Let the replay finish, then a clean stop flushes the rest.
    wait_for("spool replayed", Duration::from_secs(60), || {
        all_boots(&c).iter().all(|b| b.held.gaps == 0)
    });
    assert_eq!(a.terminate(), Some(0));
    assert_eq!(b.terminate(), Some(0));
    for (node, p) in [("a", &a), ("b", &b)] {
        let s = stopped_line(&p.log_text());
        assert_eq!(s.undelivered, 0, "{node} flushed everything");
        assert!(s.last_seq > 20, "{node} made only {} records", s.last_seq);
        wait_for(
            &format!("{node} boot {} complete", s.boot_id),
            Duration::from_secs(30),
            || boot_held(&c, node, &s.boot_id) == Some(Held::complete(s.last_seq)),
        );
    }
    for b in all_boots(&c) {
        let h = b.held;
        assert_eq!(h.records, h.highest_seq, "records == highest_seq: {b:?}");
        assert_eq!(h.gaps, 0, "no gaps: {b:?}");
    }
    assert_eq!(all_boots(&c).len(), 2, "one boot per agent");
}

#[test]
fn agent_killed_and_restarted_delivers_the_old_boots_spool() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path());
    let mut c = home.start();
    let (mut a, _b, a_args) = start_pair(dir.path(), &home);
    wait_for("a connected", Duration::from_secs(60), || agent_up(&c, "a"));
    std::thread::sleep(Duration::from_secs(2));

    // The collector goes away; a keeps spooling, then dies hard too.
    c.proc.kill9();
    std::thread::sleep(Duration::from_secs(4));
    a.kill9();
    let spool_dir = dir.path().join("spool-a");
    let held = spooled(&spool_dir);
    assert_eq!(held.len(), 1, "{held:?}");
    let (old_boot, old_last) = held.into_iter().next().unwrap();
    assert!(old_last > 3, "a spooled only {old_last}");

    let mut a = agent(dir.path(), "a", &a_args);
    let c = home.start();
    wait_for(
        "the old boot's spooled records arrive",
        Duration::from_secs(60),
        || boot_held(&c, "a", &old_boot) == Some(Held::complete(old_last)),
    );
    assert_eq!(a.terminate(), Some(0));
    let new = stopped_line(&a.log_text());
    assert_ne!(new.boot_id, old_boot, "a restart is a new boot");
    wait_for("the new boot complete", Duration::from_secs(30), || {
        boot_held(&c, "a", &new.boot_id) == Some(Held::complete(new.last_seq))
    });
}
