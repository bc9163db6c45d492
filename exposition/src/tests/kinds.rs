//! Every payload kind of the schema has a record domain, and each domain
//! reads the kinds its module's `KINDS` names and no other. The kinds come
//! from the schema (`Payload::defaults()`), so a new kind is covered here
//! without being named: it fails the first test until a domain lists it.

use std::collections::BTreeSet;

use boltwatch_proto::KINDS;

use super::{rec, Payload};
use crate::family::Exposition;
use crate::{Domain, RecordMetrics, Subjects};

#[test]
fn every_schema_kind_is_read_by_a_record_domain() {
    let read: BTreeSet<&str> = RecordMetrics::DOMAIN_KINDS
        .iter()
        .flat_map(|(_, kinds)| kinds.iter().copied())
        .collect();
    let unread: Vec<&str> = KINDS.into_iter().filter(|k| !read.contains(k)).collect();
    assert!(
        unread.is_empty(),
        "payload kinds no record domain reads (its `apply` and its module's `KINDS`, \
         or a new module in `record_domains!`): {unread:?}"
    );
    for (module, kinds) in RecordMetrics::DOMAIN_KINDS {
        for k in *kinds {
            assert!(
                KINDS.contains(k),
                "{module}::KINDS: `{k}` is no payload kind"
            );
        }
    }
}

/// A domain's text on its own, with no subjects.
fn alone(d: &dyn Domain) -> String {
    let mut e = Exposition::new();
    d.render(&mut e, &Subjects::default());
    e.finish()
}

#[test]
fn each_domain_ignores_the_kinds_it_does_not_name() {
    let mut m = RecordMetrics::new();
    let mut domains = RecordMetrics::DOMAIN_KINDS.iter();
    let mut checked = 0;
    m.each_mut(|d, _| {
        let (module, kinds) = domains.next().expect("one entry per domain");
        let before = alone(d);
        let mut subjects = Subjects::default();
        let others = Payload::defaults().into_iter();
        for (p, seq) in others.filter(|p| !kinds.contains(&p.kind())).zip(1..) {
            let kind = p.kind();
            d.apply(&rec("a", "b", seq, seq * 1_000_000_000, p), &mut subjects);
            assert_eq!(
                alone(d),
                before,
                "{module} reacts to `{kind}`, not in its KINDS"
            );
        }
        assert_eq!(
            format!("{subjects:?}"),
            format!("{:?}", Subjects::default()),
            "{module} records subjects from kinds not in its KINDS"
        );
        checked += 1;
    });
    assert_eq!(checked, RecordMetrics::DOMAIN_KINDS.len());
}
