//! What each queue-pair transition asks of `ibv_modify_qp`: the attributes
//! and their mask, for one unreliable-connection QP. Pure: the verbs port
//! hands the result to the library; the tests check it field by field.

use std::ffi::c_int;

use super::abi::{self, IbvGid, IbvQpAttr};
use super::hello::Hello;
use super::port::QpState;

/// This side's fixed facts: the device port, GID index, path MTU (an
/// `enum ibv_mtu` value) and our first PSN.
#[derive(Debug, Clone, Copy)]
pub struct Local {
    /// Device port number.
    pub port_num: u8,
    /// GID index used as the source GID.
    pub gid_index: u8,
    /// `enum ibv_mtu` of the path.
    pub mtu: u32,
    /// Our first packet sequence number (24 bits).
    pub psn: u32,
}

/// The attributes and mask of the transition to `to`; `None` for RTR
/// before the peer's hello is known. UC needs no RC timers, retry counts
/// or atomics, so none are set.
pub fn attr(to: QpState, local: &Local, remote: Option<&Hello>) -> Option<(IbvQpAttr, c_int)> {
    let mut a = IbvQpAttr::default();
    let mask = match to {
        QpState::Reset => {
            a.qp_state = abi::IBV_QPS_RESET;
            abi::IBV_QP_STATE
        }
        QpState::Init => {
            a.qp_state = abi::IBV_QPS_INIT;
            a.port_num = local.port_num;
            a.qp_access_flags = abi::IBV_ACCESS_LOCAL_WRITE as u32;
            abi::IBV_QP_STATE | abi::IBV_QP_PKEY_INDEX | abi::IBV_QP_PORT | abi::IBV_QP_ACCESS_FLAGS
        }
        QpState::Rtr => {
            let r = remote?;
            a.qp_state = abi::IBV_QPS_RTR;
            a.path_mtu = local.mtu;
            a.dest_qp_num = r.qpn;
            a.rq_psn = r.psn;
            a.ah_attr.is_global = 1;
            a.ah_attr.port_num = local.port_num;
            a.ah_attr.grh.dgid = IbvGid { raw: r.gid };
            a.ah_attr.grh.sgid_index = local.gid_index;
            // One cable: the peer is the next hop.
            a.ah_attr.grh.hop_limit = 1;
            abi::IBV_QP_STATE
                | abi::IBV_QP_AV
                | abi::IBV_QP_PATH_MTU
                | abi::IBV_QP_DEST_QPN
                | abi::IBV_QP_RQ_PSN
        }
        QpState::Rts => {
            a.qp_state = abi::IBV_QPS_RTS;
            a.sq_psn = local.psn;
            abi::IBV_QP_STATE | abi::IBV_QP_SQ_PSN
        }
    };
    Some((a, mask))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCAL: Local = Local {
        port_num: 1,
        gid_index: 1,
        mtu: abi::IBV_MTU_1024,
        psn: 0x123,
    };

    fn peer() -> Hello {
        let mut gid = [0u8; 16];
        gid[10..].copy_from_slice(&[0xff, 0xff, 169, 254, 0, 2]);
        Hello {
            qpn: 0x42,
            psn: 0x456,
            gid,
        }
    }

    #[test]
    fn init_sets_port_and_local_write_only() {
        let (a, mask) = attr(QpState::Init, &LOCAL, None).unwrap();
        assert_eq!(
            (a.qp_state, a.port_num, a.pkey_index),
            (abi::IBV_QPS_INIT, 1, 0)
        );
        assert_eq!(a.qp_access_flags, 1);
        assert_eq!(mask, 1 | 8 | 16 | 32);
    }

    #[test]
    fn rtr_needs_the_peers_hello_and_routes_to_its_gid() {
        assert!(attr(QpState::Rtr, &LOCAL, None).is_none());
        let (a, mask) = attr(QpState::Rtr, &LOCAL, Some(&peer())).unwrap();
        assert_eq!(a.qp_state, abi::IBV_QPS_RTR);
        assert_eq!((a.dest_qp_num, a.rq_psn, a.path_mtu), (0x42, 0x456, 3));
        assert_eq!(a.ah_attr.grh.dgid.raw, peer().gid);
        assert_eq!((a.ah_attr.is_global, a.ah_attr.grh.sgid_index), (1, 1));
        assert_eq!((a.ah_attr.port_num, a.ah_attr.grh.hop_limit), (1, 1));
        // No RC-only attributes: UC refuses a mask carrying them.
        assert_eq!(mask, 1 | 128 | 256 | (1 << 20) | (1 << 12));
        assert_eq!((a.max_dest_rd_atomic, a.min_rnr_timer), (0, 0));
    }

    #[test]
    fn rts_sends_from_our_psn_and_reset_is_the_state_alone() {
        let (a, mask) = attr(QpState::Rts, &LOCAL, Some(&peer())).unwrap();
        assert_eq!(
            (a.qp_state, a.sq_psn, mask),
            (abi::IBV_QPS_RTS, 0x123, 1 | (1 << 16))
        );
        let (a, mask) = attr(QpState::Reset, &LOCAL, None).unwrap();
        assert_eq!((a.qp_state, mask), (abi::IBV_QPS_RESET, 1));
    }
}
