//! What a path check observed, for `boltwatch_path_route_info`: the route
//! to a peer that left its expected interface is told apart by what the
//! agent saw of that interface, so an alert says "administratively down"
//! or "no carrier" rather than guess a Wi-Fi fallback. Pure.

/// The newest path check of a link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The route leaves through the expected interface.
    pub ok: bool,
    /// The interface probes are meant to use.
    pub expected: String,
    /// The interface the kernel routes the peer through; empty: no route.
    pub via: String,
}

/// The `state` label: `ok`, or why not, the expected interface's own state
/// first (an interface set down, or without carrier, takes its routes with
/// it), then the route: `no_route` (none at all) or `other_interface`
/// (another interface carries the peer's traffic: a fallback).
/// `admin_up` and `carrier` are the interface's newest observations, if
/// any.
pub fn state(r: &Route, admin_up: Option<bool>, carrier: Option<bool>) -> &'static str {
    if r.ok {
        "ok"
    } else if admin_up == Some(false) {
        "admin_down"
    } else if carrier == Some(false) {
        "no_carrier"
    } else if r.via.is_empty() {
        "no_route"
    } else {
        "other_interface"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(ok: bool, via: &str) -> Route {
        Route {
            ok,
            expected: "tb0".into(),
            via: via.into(),
        }
    }

    #[test]
    fn the_interface_state_comes_before_the_route() {
        let off = route(false, "wlan0");
        assert_eq!(state(&off, Some(false), Some(false)), "admin_down");
        assert_eq!(state(&off, Some(true), Some(false)), "no_carrier");
        assert_eq!(state(&off, None, Some(false)), "no_carrier");
        assert_eq!(state(&off, Some(true), Some(true)), "other_interface");
        assert_eq!(state(&off, None, None), "other_interface");
        assert_eq!(state(&route(false, ""), None, Some(true)), "no_route");
        // A route on the expected interface is ok whatever was seen last.
        assert_eq!(state(&route(true, "tb0"), Some(false), None), "ok");
    }
}
