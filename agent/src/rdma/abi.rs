//! `#[repr(C)]` declarations of the verbs structs the probe hands to the
//! library, with their layout asserted at compile time. The numbers are
//! those of `infiniband/verbs.h` (rdma-core) on LP64 targets;
//! `agent/tests/rdma_abi.rs` compiles [`LAYOUT`]'s expressions against the
//! real header with `cc` and compares, so the numbers are checked, not
//! copied. Apple's `librdma.dylib` is assumed to ship the same rdma-core
//! ABI (docs/rdma.md, Status): nothing here has been compared with Apple's
//! headers, which are not public.
//!
//! Structs that end in a `pthread_mutex_t` (`ibv_context`, `ibv_qp`,
//! `ibv_mr`'s neighbours) differ in size between glibc and macOS, so only
//! their leading fields are declared (`*Head`), the ones read through a
//! pointer the library owns; their offsets are asserted, never their size.

// Fields are named and documented as in `infiniband/verbs.h`.
#![allow(missing_docs)]

use std::ffi::{c_int, c_void};
use std::mem::{offset_of, size_of};

/// `union ibv_gid`: 16 bytes, 8-aligned by its `__be64` view.
#[repr(C, align(8))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IbvGid {
    pub raw: [u8; 16],
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct IbvQpCap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

/// `enum ibv_qp_type`'s unreliable connection: the only kind Apple allows.
pub const IBV_QPT_UC: u32 = 3;
/// `enum ibv_wr_opcode`'s send: the only operation Apple allows.
pub const IBV_WR_SEND: u32 = 2;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IbvQpInitAttr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut c_void,
    pub recv_cq: *mut c_void,
    pub srq: *mut c_void,
    pub cap: IbvQpCap,
    pub qp_type: u32,
    pub sq_sig_all: i32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct IbvSge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IbvRecvWr {
    pub wr_id: u64,
    pub next: *mut IbvRecvWr,
    pub sg_list: *mut IbvSge,
    pub num_sge: i32,
}

/// `struct ibv_wc`; `imm_data` stands for its anonymous union.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct IbvWc {
    pub wr_id: u64,
    pub status: u32,
    pub opcode: u32,
    pub vendor_err: u32,
    pub byte_len: u32,
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: u32,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct IbvGlobalRoute {
    pub dgid: IbvGid,
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct IbvAhAttr {
    pub grh: IbvGlobalRoute,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}

/// `struct ibv_send_wr`. `wr` stands for the rdma/atomic/ud union,
/// `bind_mw` for the bind_mw/tso union: a send uses neither.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IbvSendWr {
    pub wr_id: u64,
    pub next: *mut IbvSendWr,
    pub sg_list: *mut IbvSge,
    pub num_sge: i32,
    pub opcode: u32,
    pub send_flags: u32,
    pub imm_data: u32,
    pub wr: [u64; 4],
    pub qp_type: u32,
    pub bind_mw: [u64; 6],
}

/// `ibv_context_ops.poll_cq`.
pub type PollCq = unsafe extern "C" fn(*mut c_void, c_int, *mut IbvWc) -> c_int;
/// `ibv_context_ops.post_send`.
pub type PostSend = unsafe extern "C" fn(*mut c_void, *mut IbvSendWr, *mut *mut IbvSendWr) -> c_int;
/// `ibv_context_ops.post_recv`.
pub type PostRecv = unsafe extern "C" fn(*mut c_void, *mut IbvRecvWr, *mut *mut IbvRecvWr) -> c_int;

/// `struct ibv_context_ops`: 32 function pointers. `ibv_post_send`,
/// `ibv_post_recv` and `ibv_poll_cq` are `static inline` in verbs.h and
/// call through these three; the others are compat slots the probe never
/// calls, kept as opaque pointers only for their place.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IbvContextOps {
    pub before_poll_cq: [*const c_void; 11],
    pub poll_cq: Option<PollCq>,
    pub before_post_send: [*const c_void; 13],
    pub post_send: Option<PostSend>,
    pub post_recv: Option<PostRecv>,
    pub after_post_recv: [*const c_void; 5],
}

/// The head of `struct ibv_context` (its mutex follows, platform-sized).
#[repr(C)]
#[derive(Debug)]
pub struct IbvContextHead {
    pub device: *mut c_void,
    pub ops: IbvContextOps,
    pub cmd_fd: i32,
    pub async_fd: i32,
    pub num_comp_vectors: i32,
}

/// The head of `struct ibv_qp`, up to `qp_num` (a mutex follows).
#[repr(C)]
#[derive(Debug)]
pub struct IbvQpHead {
    pub context: *mut IbvContextHead,
    pub qp_context: *mut c_void,
    pub pd: *mut c_void,
    pub send_cq: *mut c_void,
    pub recv_cq: *mut c_void,
    pub srq: *mut c_void,
    pub handle: u32,
    pub qp_num: u32,
}

/// The head of `struct ibv_cq`: the context its ops come from.
#[repr(C)]
#[derive(Debug)]
pub struct IbvCqHead {
    pub context: *mut IbvContextHead,
}

/// `struct ibv_mr`.
#[repr(C)]
#[derive(Debug)]
pub struct IbvMr {
    pub context: *mut c_void,
    pub pd: *mut c_void,
    pub addr: *mut c_void,
    pub length: usize,
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

/// `struct ibv_qp_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct IbvQpAttr {
    pub qp_state: u32,
    pub cur_qp_state: u32,
    pub path_mtu: u32,
    pub path_mig_state: u32,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: u32,
    pub cap: IbvQpCap,
    pub ah_attr: IbvAhAttr,
    pub alt_ah_attr: IbvAhAttr,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub rate_limit: u32,
}

/// `struct ibv_port_attr` (what `ibv_query_port` fills).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct IbvPortAttr {
    pub state: u32,
    pub max_mtu: u32,
    pub active_mtu: u32,
    pub gid_tbl_len: i32,
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    pub active_width: u8,
    pub active_speed: u8,
    pub phys_state: u8,
    pub link_layer: u8,
    pub flags: u8,
    pub port_cap_flags2: u16,
}

/// `enum ibv_qp_state`.
pub const IBV_QPS_RESET: u32 = 0;
pub const IBV_QPS_INIT: u32 = 1;
pub const IBV_QPS_RTR: u32 = 2;
pub const IBV_QPS_RTS: u32 = 3;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_STATE: i32 = 1;
pub const IBV_QP_ACCESS_FLAGS: i32 = 1 << 3;
pub const IBV_QP_PKEY_INDEX: i32 = 1 << 4;
pub const IBV_QP_PORT: i32 = 1 << 5;
pub const IBV_QP_AV: i32 = 1 << 7;
pub const IBV_QP_PATH_MTU: i32 = 1 << 8;
pub const IBV_QP_RQ_PSN: i32 = 1 << 12;
pub const IBV_QP_SQ_PSN: i32 = 1 << 16;
pub const IBV_QP_DEST_QPN: i32 = 1 << 20;
pub const IBV_ACCESS_LOCAL_WRITE: i32 = 1;
pub const IBV_SEND_SIGNALED: u32 = 1 << 1;
pub const IBV_MTU_1024: u32 = 3;
pub const IBV_PORT_ACTIVE: u32 = 4;
pub const IBV_WC_SUCCESS: u32 = 0;
pub const IBV_WC_SEND: u32 = 0;
pub const IBV_WC_RECV: u32 = 128;

/// Each C expression, the Rust value, and the header's number on LP64
/// (x86_64 and aarch64 alike): a linear table shared by the compile-time
/// assert below and the header test, which compiles the expressions.
pub const LAYOUT: &[(&str, usize, usize)] = &[
    ("sizeof(union ibv_gid)", size_of::<IbvGid>(), 16),
    ("sizeof(struct ibv_qp_cap)", size_of::<IbvQpCap>(), 20),
    (
        "sizeof(struct ibv_qp_init_attr)",
        size_of::<IbvQpInitAttr>(),
        64,
    ),
    (
        "offsetof(struct ibv_qp_init_attr, cap)",
        offset_of!(IbvQpInitAttr, cap),
        32,
    ),
    (
        "offsetof(struct ibv_qp_init_attr, qp_type)",
        offset_of!(IbvQpInitAttr, qp_type),
        52,
    ),
    (
        "offsetof(struct ibv_qp_init_attr, sq_sig_all)",
        offset_of!(IbvQpInitAttr, sq_sig_all),
        56,
    ),
    ("sizeof(struct ibv_sge)", size_of::<IbvSge>(), 16),
    (
        "offsetof(struct ibv_sge, lkey)",
        offset_of!(IbvSge, lkey),
        12,
    ),
    ("sizeof(struct ibv_recv_wr)", size_of::<IbvRecvWr>(), 32),
    (
        "offsetof(struct ibv_recv_wr, num_sge)",
        offset_of!(IbvRecvWr, num_sge),
        24,
    ),
    ("sizeof(struct ibv_wc)", size_of::<IbvWc>(), 48),
    (
        "offsetof(struct ibv_wc, status)",
        offset_of!(IbvWc, status),
        8,
    ),
    (
        "offsetof(struct ibv_wc, opcode)",
        offset_of!(IbvWc, opcode),
        12,
    ),
    (
        "offsetof(struct ibv_wc, byte_len)",
        offset_of!(IbvWc, byte_len),
        20,
    ),
    (
        "offsetof(struct ibv_wc, qp_num)",
        offset_of!(IbvWc, qp_num),
        28,
    ),
    (
        "offsetof(struct ibv_wc, wc_flags)",
        offset_of!(IbvWc, wc_flags),
        36,
    ),
    (
        "offsetof(struct ibv_wc, dlid_path_bits)",
        offset_of!(IbvWc, dlid_path_bits),
        45,
    ),
    (
        "sizeof(struct ibv_global_route)",
        size_of::<IbvGlobalRoute>(),
        24,
    ),
    (
        "offsetof(struct ibv_global_route, sgid_index)",
        offset_of!(IbvGlobalRoute, sgid_index),
        20,
    ),
    ("sizeof(struct ibv_ah_attr)", size_of::<IbvAhAttr>(), 32),
    (
        "offsetof(struct ibv_ah_attr, dlid)",
        offset_of!(IbvAhAttr, dlid),
        24,
    ),
    (
        "offsetof(struct ibv_ah_attr, is_global)",
        offset_of!(IbvAhAttr, is_global),
        29,
    ),
    (
        "offsetof(struct ibv_ah_attr, port_num)",
        offset_of!(IbvAhAttr, port_num),
        30,
    ),
    ("sizeof(struct ibv_send_wr)", size_of::<IbvSendWr>(), 128),
    (
        "offsetof(struct ibv_send_wr, sg_list)",
        offset_of!(IbvSendWr, sg_list),
        16,
    ),
    (
        "offsetof(struct ibv_send_wr, num_sge)",
        offset_of!(IbvSendWr, num_sge),
        24,
    ),
    (
        "offsetof(struct ibv_send_wr, opcode)",
        offset_of!(IbvSendWr, opcode),
        28,
    ),
    (
        "offsetof(struct ibv_send_wr, send_flags)",
        offset_of!(IbvSendWr, send_flags),
        32,
    ),
    (
        "offsetof(struct ibv_send_wr, imm_data)",
        offset_of!(IbvSendWr, imm_data),
        36,
    ),
    (
        "offsetof(struct ibv_send_wr, wr)",
        offset_of!(IbvSendWr, wr),
        40,
    ),
    (
        "offsetof(struct ibv_send_wr, qp_type)",
        offset_of!(IbvSendWr, qp_type),
        72,
    ),
    (
        "offsetof(struct ibv_send_wr, bind_mw)",
        offset_of!(IbvSendWr, bind_mw),
        80,
    ),
    (
        "sizeof(struct ibv_context_ops)",
        size_of::<IbvContextOps>(),
        256,
    ),
    (
        "offsetof(struct ibv_context_ops, poll_cq)",
        offset_of!(IbvContextOps, poll_cq),
        88,
    ),
    (
        "offsetof(struct ibv_context_ops, post_send)",
        offset_of!(IbvContextOps, post_send),
        200,
    ),
    (
        "offsetof(struct ibv_context_ops, post_recv)",
        offset_of!(IbvContextOps, post_recv),
        208,
    ),
    (
        "offsetof(struct ibv_context, ops)",
        offset_of!(IbvContextHead, ops),
        8,
    ),
    (
        "offsetof(struct ibv_context, cmd_fd)",
        offset_of!(IbvContextHead, cmd_fd),
        264,
    ),
    (
        "offsetof(struct ibv_context, num_comp_vectors)",
        offset_of!(IbvContextHead, num_comp_vectors),
        272,
    ),
    (
        "offsetof(struct ibv_qp, context)",
        offset_of!(IbvQpHead, context),
        0,
    ),
    (
        "offsetof(struct ibv_qp, qp_num)",
        offset_of!(IbvQpHead, qp_num),
        52,
    ),
    (
        "offsetof(struct ibv_cq, context)",
        offset_of!(IbvCqHead, context),
        0,
    ),
    ("sizeof(struct ibv_mr)", size_of::<IbvMr>(), 48),
    ("offsetof(struct ibv_mr, addr)", offset_of!(IbvMr, addr), 16),
    ("offsetof(struct ibv_mr, lkey)", offset_of!(IbvMr, lkey), 36),
    ("sizeof(struct ibv_qp_attr)", size_of::<IbvQpAttr>(), 144),
    (
        "offsetof(struct ibv_qp_attr, rq_psn)",
        offset_of!(IbvQpAttr, rq_psn),
        20,
    ),
    (
        "offsetof(struct ibv_qp_attr, sq_psn)",
        offset_of!(IbvQpAttr, sq_psn),
        24,
    ),
    (
        "offsetof(struct ibv_qp_attr, dest_qp_num)",
        offset_of!(IbvQpAttr, dest_qp_num),
        28,
    ),
    (
        "offsetof(struct ibv_qp_attr, qp_access_flags)",
        offset_of!(IbvQpAttr, qp_access_flags),
        32,
    ),
    (
        "offsetof(struct ibv_qp_attr, ah_attr)",
        offset_of!(IbvQpAttr, ah_attr),
        56,
    ),
    (
        "offsetof(struct ibv_qp_attr, pkey_index)",
        offset_of!(IbvQpAttr, pkey_index),
        120,
    ),
    (
        "offsetof(struct ibv_qp_attr, port_num)",
        offset_of!(IbvQpAttr, port_num),
        129,
    ),
    (
        "offsetof(struct ibv_qp_attr, rate_limit)",
        offset_of!(IbvQpAttr, rate_limit),
        136,
    ),
    ("sizeof(struct ibv_port_attr)", size_of::<IbvPortAttr>(), 52),
    (
        "offsetof(struct ibv_port_attr, lid)",
        offset_of!(IbvPortAttr, lid),
        34,
    ),
    (
        "offsetof(struct ibv_port_attr, link_layer)",
        offset_of!(IbvPortAttr, link_layer),
        46,
    ),
    (
        "offsetof(struct ibv_port_attr, port_cap_flags2)",
        offset_of!(IbvPortAttr, port_cap_flags2),
        48,
    ),
    ("IBV_QPT_UC", IBV_QPT_UC as usize, 3),
    ("IBV_WR_SEND", IBV_WR_SEND as usize, 2),
    ("IBV_QPS_RESET", IBV_QPS_RESET as usize, 0),
    ("IBV_QPS_INIT", IBV_QPS_INIT as usize, 1),
    ("IBV_QPS_RTR", IBV_QPS_RTR as usize, 2),
    ("IBV_QPS_RTS", IBV_QPS_RTS as usize, 3),
    ("IBV_QP_STATE", IBV_QP_STATE as usize, 1),
    ("IBV_QP_ACCESS_FLAGS", IBV_QP_ACCESS_FLAGS as usize, 8),
    ("IBV_QP_PKEY_INDEX", IBV_QP_PKEY_INDEX as usize, 16),
    ("IBV_QP_PORT", IBV_QP_PORT as usize, 32),
    ("IBV_QP_AV", IBV_QP_AV as usize, 128),
    ("IBV_QP_PATH_MTU", IBV_QP_PATH_MTU as usize, 256),
    ("IBV_QP_RQ_PSN", IBV_QP_RQ_PSN as usize, 4096),
    ("IBV_QP_SQ_PSN", IBV_QP_SQ_PSN as usize, 65536),
    ("IBV_QP_DEST_QPN", IBV_QP_DEST_QPN as usize, 1048576),
    ("IBV_ACCESS_LOCAL_WRITE", IBV_ACCESS_LOCAL_WRITE as usize, 1),
    ("IBV_SEND_SIGNALED", IBV_SEND_SIGNALED as usize, 2),
    ("IBV_MTU_1024", IBV_MTU_1024 as usize, 3),
    ("IBV_PORT_ACTIVE", IBV_PORT_ACTIVE as usize, 4),
    ("IBV_WC_SUCCESS", IBV_WC_SUCCESS as usize, 0),
    ("IBV_WC_SEND", IBV_WC_SEND as usize, 0),
    ("IBV_WC_RECV", IBV_WC_RECV as usize, 128),
];

const fn check() -> bool {
    let mut i = 0;
    while i < LAYOUT.len() {
        if LAYOUT[i].1 != LAYOUT[i].2 {
            return false;
        }
        i += 1;
    }
    true
}

const _: () = assert!(
    check(),
    "verbs struct layout differs from infiniband/verbs.h"
);
