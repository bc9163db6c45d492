//! Looking up series keyed by owned label values (`(node, peer)` as
//! `(String, String)`, ...) with the record's borrowed strings, so a record
//! whose series exist already (nearly every one) allocates nothing: the
//! owned key is made only for a new series.
//!
//! A `(String, String)` map cannot be searched with a `(&str, &str)`
//! directly; both borrow as `dyn Pair` (and the three-part keys as
//! `dyn Triple`), ordered exactly like the tuple of owned strings, so the
//! maps keep their key types and their iteration order.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

/// Runs `f` on the value of `key` in `map`, inserted first (as `make()`,
/// with the default value) when missing. One search when present.
pub fn with<K, Q, V, R>(
    map: &mut BTreeMap<K, V>,
    key: &Q,
    make: impl FnOnce() -> K,
    f: impl FnOnce(&mut V) -> R,
) -> R
where
    K: Ord + Borrow<Q>,
    Q: Ord + ?Sized,
    V: Default,
{
    // (Returning the `get_mut` borrow itself would not pass the borrow
    // checker on the insert path; a closure does.)
    if let Some(v) = map.get_mut(key) {
        return f(v);
    }
    f(map.entry(make()).or_default())
}

/// Adds `key` to `set` (as `make()`) unless it is there.
pub fn insert<K, Q>(set: &mut BTreeSet<K>, key: &Q, make: impl FnOnce() -> K)
where
    K: Ord + Borrow<Q>,
    Q: Ord + ?Sized,
{
    if !set.contains(key) {
        set.insert(make());
    }
}

/// Declares a borrowed view of an N-part string key, ordered as the tuple.
macro_rules! string_key {
    ($(#[$doc:meta])* $trait:ident, $n:literal, $owned:ty, $borrowed:ty, $($i:tt),+) => {
        $(#[$doc])*
        pub trait $trait {
            /// The parts, in order.
            fn parts(&self) -> [&str; $n];
        }

        impl $trait for $owned {
            fn parts(&self) -> [&str; $n] {
                [$(self.$i.as_str()),+]
            }
        }

        impl $trait for $borrowed {
            fn parts(&self) -> [&str; $n] {
                [$(self.$i),+]
            }
        }

        impl<'a> Borrow<dyn $trait + 'a> for $owned {
            fn borrow(&self) -> &(dyn $trait + 'a) {
                self
            }
        }

        impl PartialEq for dyn $trait + '_ {
            fn eq(&self, o: &Self) -> bool {
                self.parts() == o.parts()
            }
        }

        impl Eq for dyn $trait + '_ {}

        impl PartialOrd for dyn $trait + '_ {
            fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
                Some(self.cmp(o))
            }
        }

        impl Ord for dyn $trait + '_ {
            fn cmp(&self, o: &Self) -> Ordering {
                // Part by part, as the tuple of `String`s compares.
                self.parts().cmp(&o.parts())
            }
        }
    };
}

string_key!(
    /// A two-part key such as (node, peer), owned or borrowed.
    Pair, 2, (String, String), (&str, &str), 0, 1
);
string_key!(
    /// A three-part key such as (node, peer, service), owned or borrowed.
    Triple, 3, (String, String, String), (&str, &str, &str), 0, 1, 2
);

/// `(a, b)` as a key of a `(String, String)` map or set.
pub fn pair<'a>(k: &'a (&'a str, &'a str)) -> &'a (dyn Pair + 'a) {
    k
}

/// `(a, b, c)` as a key of a `(String, String, String)` map or set.
pub fn triple<'a>(k: &'a (&'a str, &'a str, &'a str)) -> &'a (dyn Triple + 'a) {
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn borrowed_keys_find_owned_ones_in_tuple_order() {
        let names = ["", "a", "a\u{0}", "ab", "b", "é", "z"];
        let mut map: BTreeMap<(String, String), u32> = BTreeMap::new();
        let mut n = 0;
        for a in names {
            for b in names.iter().rev() {
                n += 1;
                with(
                    &mut map,
                    pair(&(a, b)),
                    || (a.into(), (*b).into()),
                    |v| *v += n,
                );
            }
        }
        // Each key once, found again without a new entry.
        assert_eq!(map.len(), names.len() * names.len());
        with(
            &mut map,
            pair(&("ab", "z")),
            || unreachable!(),
            |v| *v += 1000,
        );
        // The order is the tuples' order.
        let keys: Vec<_> = map.keys().cloned().collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
        assert!(map[&("ab".to_string(), "z".to_string())] > 1000);
        let mut set: BTreeSet<(String, String, String)> = BTreeSet::new();
        for k in [("n", "p", "ssh"), ("n", "p", "http"), ("n", "p", "ssh")] {
            insert(&mut set, triple(&k), || {
                (k.0.into(), k.1.into(), k.2.into())
            });
        }
        assert_eq!(set.len(), 2);
    }
}
