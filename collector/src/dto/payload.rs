//! The decoded payload of a record, tagged by `kind` (the payload-kind
//! name of [`boltwatch_proto::KINDS`]); one variant per payload kind, with
//! the `.proto`'s field names. `From<&Payload>` matches every kind, no
//! `_`: a new kind does not compile until the API says how to show it.

use boltwatch_proto::v1 as pb;
use pb::record::Payload;
use serde::Serialize;

fn enum_name<E: TryFrom<i32>>(v: i32, name: fn(&E) -> &'static str) -> String {
    E::try_from(v).map_or_else(|_| v.to_string(), |e| name(&e).to_string())
}

/// A decoded payload, tagged by `kind`.
#[derive(Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[allow(missing_docs)] // Field names and meanings are the .proto's.
pub enum PayloadDto {
    /// `RttSummary`; durations in nanoseconds.
    Rtt {
        peer: String,
        peer_address: String,
        interface: String,
        window_start_unix_ns: u64,
        window_ns: u64,
        sent: u64,
        received: u64,
        lost: u64,
        duplicates: u64,
        discarded: u64,
        min_ns: u64,
        mean_ns: u64,
        max_ns: u64,
        p50_ns: u64,
        p99_ns: u64,
        sum_ns: u64,
        /// `[index, count]` pairs in the schema-3 layout.
        buckets: Vec<(i32, u64)>,
        timestamp_source: String,
        /// The clock t1..t4 were read from (`TIMESTAMP_CLOCK_*`).
        timestamp_clock: String,
        /// That clock's resolution, ns (0 unknown).
        timestamp_resolution_ns: u64,
        under_load: bool,
    },
    /// `RdmaProbe`: one link's RDMA ping-pong window (its `rtt`'s fields,
    /// flat) and its errors by class label; durations in nanoseconds.
    RdmaProbe {
        device: String,
        peer: String,
        peer_address: String,
        interface: String,
        window_start_unix_ns: u64,
        window_ns: u64,
        sent: u64,
        received: u64,
        lost: u64,
        min_ns: u64,
        mean_ns: u64,
        max_ns: u64,
        p50_ns: u64,
        p99_ns: u64,
        sum_ns: u64,
        /// `[index, count]` pairs in the schema-3 layout.
        buckets: Vec<(i32, u64)>,
        /// `[class, count]`: the `class` label, or the number of a class
        /// this build does not know.
        errors: Vec<(String, u64)>,
        /// The window's newest send-bandwidth burst (0s when none).
        burst_sent_bytes: u64,
        burst_confirmed_bytes: u64,
        burst_ns: u64,
    },
    /// `LinkEvent`.
    LinkEvent {
        interface: String,
        carrier: bool,
        admin_up: bool,
        oper_state: String,
        carrier_up_count: u64,
        carrier_down_count: u64,
        source: String,
        bridge: String,
        /// The port's negotiated lanes and speeds (fabric events only).
        #[serde(skip_serializing_if = "Option::is_none")]
        thunderbolt: Option<ThunderboltDto>,
        /// The loop detector's verdict on the bridge (bridge loop events
        /// only).
        #[serde(skip_serializing_if = "Option::is_none")]
        bridge_loop: Option<BridgeLoopDto>,
    },
    /// `InterfaceCounters`.
    Counters {
        interface: String,
        receive_bytes: u64,
        transmit_bytes: u64,
        receive_packets: u64,
        transmit_packets: u64,
        receive_errors: u64,
        transmit_errors: u64,
        receive_drops: u64,
        transmit_drops: u64,
        carrier: Option<bool>,
        carrier_up_count: u64,
        carrier_down_count: u64,
        speed_bits_per_second: u64,
        mtu: u32,
    },
    /// `ThermalReading`.
    Thermal {
        sensors: Vec<SensorDto>,
        throttled: Option<bool>,
        pressure_level: Option<u32>,
        cpu_frequency_ratio: Option<f64>,
        throttle_events: Option<u64>,
    },
    /// `BandwidthResult`.
    Bandwidth {
        peer: String,
        peer_address: String,
        interface: String,
        direction: String,
        protocol: String,
        streams: u32,
        start_unix_ns: u64,
        duration_ns: u64,
        bytes: u64,
        bits_per_second: f64,
        retransmits: u64,
        intervals: Vec<IntervalDto>,
        cpu_percent: f64,
        error: String,
        udp_lost: u64,
        udp_packets: u64,
        udp_jitter_seconds: f64,
    },
    /// `ServiceCheck`.
    Service {
        peer: String,
        service: String,
        address: String,
        up: bool,
        connect_ns: u64,
        error: String,
    },
    /// `Outage`.
    Outage {
        peer: String,
        interface: String,
        cause: String,
        start_unix_ns: u64,
        end_unix_ns: Option<u64>,
        service: String,
        outage_id: u64,
    },
    /// `PathCheck`.
    Path {
        /// Peer node.
        peer: String,
        /// Interface the probes are meant to use.
        expected_interface: String,
        /// Interface the route leaves through now.
        route_interface: String,
        /// They agree.
        ok: bool,
        /// Path MTU in octets from the agent's in-band discovery; 0
        /// unknown.
        path_mtu: u32,
    },
    /// `PowerEvent`: a sleep or wake of the node.
    Power {
        /// `POWER_EVENT_KIND_SLEEP` or `POWER_EVENT_KIND_WAKE`.
        power_kind: String,
        at_unix_ns: u64,
        /// For a wake: how long the node slept.
        slept_ns: u64,
        source: String,
    },
    /// `FabricCheck`: one setting or state check of the node.
    FabricCheck {
        /// The check's stable name (docs/fabric.md).
        check: String,
        /// The interface it is about, empty for the whole node.
        interface: String,
        ok: bool,
        /// What was measured.
        detail: String,
        /// The RDMA device of a port check, else empty.
        device: String,
    },
    /// `AgentStats`.
    AgentStats {
        malformed_packets: u64,
        dropped_records: u64,
        reconnects: u64,
        resident_bytes: u64,
        cpu_seconds: f64,
        reflected_packets: u64,
        queued_records: u64,
        stamp_refused_reflected: u64,
        stamp_refused_own_address: u64,
        stamp_refused_rate_limited: u64,
        unsupported_sources: Vec<String>,
        clock_steps: u64,
        spool_bytes: u64,
        /// 0 when nothing waited.
        spool_oldest_unacked_unix_ns: u64,
    },
}

/// A Thunderbolt port as a fabric link event reports it.
#[derive(Debug, Serialize)]
#[allow(missing_docs)] // Field names and meanings are the .proto's.
pub struct ThunderboltDto {
    pub rx_lanes: u32,
    pub tx_lanes: u32,
    pub rx_lane_bits_per_second: u64,
    pub tx_lane_bits_per_second: u64,
    pub generation: String,
    pub downshift: String,
    pub peer_name: String,
    pub peer_uid: String,
}

impl From<&pb::ThunderboltPort> for ThunderboltDto {
    fn from(t: &pb::ThunderboltPort) -> ThunderboltDto {
        ThunderboltDto {
            rx_lanes: t.rx_lanes,
            tx_lanes: t.tx_lanes,
            rx_lane_bits_per_second: t.rx_lane_bits_per_second,
            tx_lane_bits_per_second: t.tx_lane_bits_per_second,
            generation: t.generation.clone(),
            downshift: enum_name(t.downshift, pb::Downshift::as_str_name),
            peer_name: t.peer_name.clone(),
            peer_uid: t.peer_uid.clone(),
        }
    }
}

/// A bridge loop verdict as a bridge loop link event reports it.
#[derive(Debug, Serialize)]
#[allow(missing_docs)] // Field names and meanings are the .proto's.
pub struct BridgeLoopDto {
    pub suspected: bool,
    pub flood_packets_per_second: f64,
    pub own_packets_per_second: f64,
    pub mac_moves: u32,
}

impl From<&pb::BridgeLoop> for BridgeLoopDto {
    fn from(l: &pb::BridgeLoop) -> BridgeLoopDto {
        BridgeLoopDto {
            suspected: l.suspected,
            flood_packets_per_second: l.flood_packets_per_second,
            own_packets_per_second: l.own_packets_per_second,
            mac_moves: l.mac_moves,
        }
    }
}

/// One temperature sensor.
#[derive(Debug, Serialize)]
pub struct SensorDto {
    /// Sensor name.
    pub name: String,
    /// Reading.
    pub celsius: f64,
    /// Where it was read.
    pub source: String,
    /// Critical threshold, 0 if unknown.
    pub critical_celsius: f64,
}

/// One bandwidth-test interval.
#[derive(Debug, Serialize)]
pub struct IntervalDto {
    /// Offset from the test start, ns.
    pub offset_ns: u64,
    /// Length, ns.
    pub duration_ns: u64,
    /// Bytes in the interval.
    pub bytes: u64,
    /// Rate in the interval.
    pub bits_per_second: f64,
    /// TCP retransmits in the interval.
    pub retransmits: u64,
}

impl From<&Payload> for PayloadDto {
    fn from(p: &Payload) -> Self {
        match p {
            Payload::Rtt(s) => PayloadDto::Rtt {
                peer: s.peer.clone(),
                peer_address: s.peer_address.clone(),
                interface: s.interface.clone(),
                window_start_unix_ns: s.window_start_unix_ns,
                window_ns: s.window_ns,
                sent: s.sent,
                received: s.received,
                lost: s.lost,
                duplicates: s.duplicates,
                discarded: s.discarded,
                min_ns: s.min_ns,
                mean_ns: s.mean_ns,
                max_ns: s.max_ns,
                p50_ns: s.p50_ns,
                p99_ns: s.p99_ns,
                sum_ns: s.sum_ns,
                buckets: s.buckets.iter().map(|b| (b.index, b.count)).collect(),
                timestamp_source: enum_name(s.timestamp_source, pb::TimestampSource::as_str_name),
                timestamp_clock: enum_name(s.timestamp_clock, pb::TimestampClock::as_str_name),
                timestamp_resolution_ns: s.timestamp_resolution_ns,
                under_load: s.under_load,
            },
            Payload::LinkEvent(e) => PayloadDto::LinkEvent {
                interface: e.interface.clone(),
                carrier: e.carrier,
                admin_up: e.admin_up,
                oper_state: e.oper_state.clone(),
                carrier_up_count: e.carrier_up_count,
                carrier_down_count: e.carrier_down_count,
                source: enum_name(e.source, pb::LinkEventSource::as_str_name),
                bridge: e.bridge.clone(),
                thunderbolt: e.thunderbolt.as_ref().map(ThunderboltDto::from),
                bridge_loop: e.bridge_loop.as_ref().map(BridgeLoopDto::from),
            },
            Payload::Counters(c) => PayloadDto::Counters {
                interface: c.interface.clone(),
                receive_bytes: c.receive_bytes,
                transmit_bytes: c.transmit_bytes,
                receive_packets: c.receive_packets,
                transmit_packets: c.transmit_packets,
                receive_errors: c.receive_errors,
                transmit_errors: c.transmit_errors,
                receive_drops: c.receive_drops,
                transmit_drops: c.transmit_drops,
                carrier: c.carrier_known.then_some(c.carrier),
                carrier_up_count: c.carrier_up_count,
                carrier_down_count: c.carrier_down_count,
                speed_bits_per_second: c.speed_bits_per_second,
                mtu: c.mtu,
            },
            Payload::Thermal(t) => PayloadDto::Thermal {
                sensors: t
                    .sensors
                    .iter()
                    .map(|s| SensorDto {
                        name: s.name.clone(),
                        celsius: s.celsius,
                        source: s.source.clone(),
                        critical_celsius: s.critical_celsius,
                    })
                    .collect(),
                throttled: t.throttle.as_ref().map(|t| t.throttled),
                pressure_level: t.throttle.as_ref().map(|t| t.pressure_level),
                cpu_frequency_ratio: t.throttle.as_ref().and_then(|t| t.cpu_frequency_ratio),
                throttle_events: t.throttle.as_ref().map(|t| t.throttle_events),
            },
            Payload::Bandwidth(b) => PayloadDto::Bandwidth {
                peer: b.peer.clone(),
                peer_address: b.peer_address.clone(),
                interface: b.interface.clone(),
                direction: enum_name(b.direction, pb::Direction::as_str_name),
                protocol: enum_name(b.protocol, pb::Protocol::as_str_name),
                streams: b.streams,
                start_unix_ns: b.start_unix_ns,
                duration_ns: b.duration_ns,
                bytes: b.bytes,
                bits_per_second: b.bits_per_second,
                retransmits: b.retransmits,
                intervals: b
                    .intervals
                    .iter()
                    .map(|i| IntervalDto {
                        offset_ns: i.offset_ns,
                        duration_ns: i.duration_ns,
                        bytes: i.bytes,
                        bits_per_second: i.bits_per_second,
                        retransmits: i.retransmits,
                    })
                    .collect(),
                cpu_percent: b.cpu_percent,
                error: b.error.clone(),
                udp_lost: b.udp_lost,
                udp_packets: b.udp_packets,
                udp_jitter_seconds: b.udp_jitter_seconds,
            },
            Payload::Service(s) => PayloadDto::Service {
                peer: s.peer.clone(),
                service: s.service.clone(),
                address: s.address.clone(),
                up: s.up,
                connect_ns: s.connect_ns,
                error: s.error.clone(),
            },
            Payload::Outage(o) => PayloadDto::Outage {
                peer: o.peer.clone(),
                interface: o.interface.clone(),
                cause: enum_name(o.cause, pb::OutageCause::as_str_name),
                start_unix_ns: o.start_unix_ns,
                end_unix_ns: o.end_unix_ns,
                service: o.service.clone(),
                outage_id: o.outage_id,
            },
            Payload::AgentStats(s) => PayloadDto::AgentStats {
                malformed_packets: s.malformed_packets,
                dropped_records: s.dropped_records,
                reconnects: s.reconnects,
                resident_bytes: s.resident_bytes,
                cpu_seconds: s.cpu_seconds,
                reflected_packets: s.reflected_packets,
                queued_records: s.queued_records,
                stamp_refused_reflected: s.stamp_refused_reflected,
                stamp_refused_own_address: s.stamp_refused_own_address,
                stamp_refused_rate_limited: s.stamp_refused_rate_limited,
                unsupported_sources: s.unsupported_sources.clone(),
                clock_steps: s.clock_steps,
                spool_bytes: s.spool_bytes,
                spool_oldest_unacked_unix_ns: s.spool_oldest_unacked_unix_ns,
            },
            Payload::Path(p) => PayloadDto::Path {
                peer: p.peer.clone(),
                expected_interface: p.expected_interface.clone(),
                route_interface: p.route_interface.clone(),
                ok: p.ok,
                path_mtu: p.path_mtu,
            },
            Payload::Power(p) => PayloadDto::Power {
                power_kind: enum_name(p.kind, pb::PowerEventKind::as_str_name),
                at_unix_ns: p.at_unix_ns,
                slept_ns: p.slept_ns,
                source: enum_name(p.source, pb::PowerEventSource::as_str_name),
            },
            Payload::RdmaProbe(p) => rdma_probe(p),
            Payload::FabricCheck(c) => PayloadDto::FabricCheck {
                check: c.check.clone(),
                interface: c.interface.clone(),
                ok: c.ok,
                detail: c.detail.clone(),
                device: c.device.clone(),
            },
        }
    }
}

fn rdma_probe(p: &pb::RdmaProbe) -> PayloadDto {
    let s = p.rtt.clone().unwrap_or_default();
    let class = |c: i32| {
        pb::RdmaErrorClass::try_from(c)
            .ok()
            .and_then(boltwatch_proto::rdma::class_label)
            .map_or_else(|| c.to_string(), str::to_string)
    };
    PayloadDto::RdmaProbe {
        device: p.device.clone(),
        peer: s.peer,
        peer_address: s.peer_address,
        interface: s.interface,
        window_start_unix_ns: s.window_start_unix_ns,
        window_ns: s.window_ns,
        sent: s.sent,
        received: s.received,
        lost: s.lost,
        min_ns: s.min_ns,
        mean_ns: s.mean_ns,
        max_ns: s.max_ns,
        p50_ns: s.p50_ns,
        p99_ns: s.p99_ns,
        sum_ns: s.sum_ns,
        buckets: s.buckets.iter().map(|b| (b.index, b.count)).collect(),
        errors: p.errors.iter().map(|e| (class(e.class), e.count)).collect(),
        burst_sent_bytes: p.burst_sent_bytes,
        burst_confirmed_bytes: p.burst_confirmed_bytes,
        burst_ns: p.burst_ns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_tagged_with_its_schema_name() {
        // The API's `kind` is the name `?kind=` filters on and the store
        // keeps: the variant's snake_case name must be the oneof field's.
        for p in Payload::defaults() {
            let v = serde_json::to_value(PayloadDto::from(&p)).unwrap();
            assert_eq!(v["kind"], p.kind(), "{v}");
        }
    }

    #[test]
    fn payload_json_is_tagged_and_names_enums() {
        let p = Payload::Rtt(pb::RttSummary {
            peer: "b".into(),
            timestamp_source: pb::TimestampSource::Kernel as i32,
            timestamp_clock: pb::TimestampClock::KernelMonotonicMach as i32,
            timestamp_resolution_ns: 42,
            buckets: vec![pb::HistogramBucket {
                index: -108,
                count: 3,
            }],
            ..Default::default()
        });
        let v = serde_json::to_value(PayloadDto::from(&p)).unwrap();
        assert_eq!(v["kind"], "rtt");
        assert_eq!(v["peer"], "b");
        assert_eq!(v["timestamp_source"], "TIMESTAMP_SOURCE_KERNEL");
        assert_eq!(
            v["timestamp_clock"],
            "TIMESTAMP_CLOCK_KERNEL_MONOTONIC_MACH"
        );
        assert_eq!(v["timestamp_resolution_ns"], 42);
        assert_eq!(v["buckets"][0][0], -108);
        let o = Payload::Outage(pb::Outage {
            cause: 42,
            ..Default::default()
        });
        let v = serde_json::to_value(PayloadDto::from(&o)).unwrap();
        assert_eq!(v["cause"], "42");
        assert!(v["end_unix_ns"].is_null());
    }

    #[test]
    fn fabric_link_events_show_the_port_and_others_do_not() {
        let e = |thunderbolt| {
            let p = Payload::LinkEvent(pb::LinkEvent {
                interface: "thunderbolt0".into(),
                source: pb::LinkEventSource::Fabric as i32,
                thunderbolt,
                ..Default::default()
            });
            serde_json::to_value(PayloadDto::from(&p)).unwrap()
        };
        let v = e(Some(pb::ThunderboltPort {
            rx_lanes: 1,
            tx_lanes: 2,
            generation: "4".into(),
            downshift: pb::Downshift::BelowCapability as i32,
            ..Default::default()
        }));
        assert_eq!(v["source"], "LINK_EVENT_SOURCE_FABRIC");
        assert_eq!(v["thunderbolt"]["rx_lanes"], 1);
        assert_eq!(v["thunderbolt"]["generation"], "4");
        assert_eq!(v["thunderbolt"]["downshift"], "DOWNSHIFT_BELOW_CAPABILITY");
        assert!(e(None).get("thunderbolt").is_none());
        assert!(e(None).get("bridge_loop").is_none());
    }

    #[test]
    fn bridge_loop_link_events_show_the_verdict() {
        let p = Payload::LinkEvent(pb::LinkEvent {
            interface: "bridge0".into(),
            source: pb::LinkEventSource::BridgeLoop as i32,
            bridge_loop: Some(pb::BridgeLoop {
                suspected: true,
                flood_packets_per_second: 4000.0,
                own_packets_per_second: 2.0,
                mac_moves: 3,
            }),
            ..Default::default()
        });
        let v = serde_json::to_value(PayloadDto::from(&p)).unwrap();
        assert_eq!(v["source"], "LINK_EVENT_SOURCE_BRIDGE_LOOP");
        assert_eq!(v["bridge_loop"]["suspected"], true);
        assert_eq!(v["bridge_loop"]["flood_packets_per_second"], 4000.0);
        assert_eq!(v["bridge_loop"]["mac_moves"], 3);
    }
}
