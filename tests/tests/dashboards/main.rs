//! Checks the operator-facing files under `dashboards/`: the Prometheus rule
//! files, their `promtool test rules` unit tests, the example Prometheus
//! config and the Grafana dashboard.
//!
//! The rules are checked and unit-tested by the real `promtool` (Debian
//! package `prometheus`); a missing promtool fails these tests, it never
//! skips them. On top of what promtool knows, the metric contract
//! (`dashboards/contract.rs`, the one list of metric names) is enforced:
//! every metric name in any PromQL expression (rules, alerts, rule tests,
//! dashboard panels, annotations and variables) must be in it or be a
//! recording rule of `recording.yml`, so a renamed metric breaks this test
//! rather than silently emptying a panel.
//!
//! The YAML files (rules, rule tests, the Prometheus config) are parsed with
//! `serde_norway` into a tree and read by key, so any valid YAML layout
//! (block or flow, quoted or plain, `|` or `>`) reads the same.
//!
//! Modules: `alertmanager` (the shipped Alertmanager config, checked and
//! routed by the real amtool), `contract` (the metric list), `files` (reading the files and
//! running promtool), `rules` (the Prometheus side), `layout` (the Grafana
//! side), `cluster` (what keeps clusters apart in one expression), `units`
//! (every panel's unit matches its metric's) and `samples` (the worst-case
//! samples of every 72-hour query of an 8-node mesh, under Prometheus'
//! default `query.max-samples`).

mod alertmanager;
mod cluster;
mod contract;
mod files;
mod layout;
mod rules;
mod samples;
mod units;
