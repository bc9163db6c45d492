//! Link truth, on the namespace test bed:
//! real agents inside namespaces probing each other over veth "cables",
//! a real collector on the host, faults injected with `ip` and `nft`.
//!
//! - [`flaps`]: every carrier drop becomes a link event and an outage on both
//!   sides, each outage as long as the injected drop;
//! - [`loss`]: 5% nftables loss gives 5% reported loss, and the lost probes
//!   match the rule's drop counter; a dead reflector behind a live carrier
//!   is a probe-loss outage that starts at the first lost probe;
//! - [`services`]: a stopped service listener is a service outage;
//! - [`thermal`]: a throttle counter in a fixture sysfs drives
//!   `boltwatch_thermal_throttled`.
//!
//! Needs root, iproute2, nftables and promtool; without them they fail with
//! a message, they never skip. Assertions are on counts and on timestamps
//! the product recorded, never on how long a test took. The tests take a
//! process-wide lock: they inject timed faults and measure timestamps, so
//! two of them sharing the 2 cores would only measure each other.

mod flaps;
mod loss;
mod services;
mod support;
mod thermal;
