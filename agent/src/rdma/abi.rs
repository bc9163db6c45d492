//! `#[repr(C)]` declarations of the verbs structs the probe hands to the
//! library, with their layout asserted at compile time. The numbers are
//! those of `infiniband/verbs.h` (rdma-core) on LP64 targets;
//! `agent/tests/rdma_abi.rs` compiles [`LAYOUT`]'s expressions against the
//! real header with `cc` and compares, so the numbers are checked, not
//! copied. Apple's `librdma.dylib` ships the same rdma-core ABI.

// Fields are named and documented as in `infiniband/verbs.h`.
#![allow(missing_docs)]

use std::ffi::c_void;
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

/// Each C expression with the Rust value it must equal; a linear table
/// shared by the compile-time asserts below and the header test.
pub const LAYOUT: &[(&str, usize)] = &[
    ("sizeof(union ibv_gid)", size_of::<IbvGid>()),
    ("sizeof(struct ibv_qp_cap)", size_of::<IbvQpCap>()),
    (
        "sizeof(struct ibv_qp_init_attr)",
        size_of::<IbvQpInitAttr>(),
    ),
    (
        "offsetof(struct ibv_qp_init_attr, cap)",
        offset_of!(IbvQpInitAttr, cap),
    ),
    (
        "offsetof(struct ibv_qp_init_attr, qp_type)",
        offset_of!(IbvQpInitAttr, qp_type),
    ),
    (
        "offsetof(struct ibv_qp_init_attr, sq_sig_all)",
        offset_of!(IbvQpInitAttr, sq_sig_all),
    ),
    ("sizeof(struct ibv_sge)", size_of::<IbvSge>()),
    ("offsetof(struct ibv_sge, lkey)", offset_of!(IbvSge, lkey)),
    ("sizeof(struct ibv_recv_wr)", size_of::<IbvRecvWr>()),
    (
        "offsetof(struct ibv_recv_wr, num_sge)",
        offset_of!(IbvRecvWr, num_sge),
    ),
    ("sizeof(struct ibv_wc)", size_of::<IbvWc>()),
    ("offsetof(struct ibv_wc, status)", offset_of!(IbvWc, status)),
    (
        "offsetof(struct ibv_wc, byte_len)",
        offset_of!(IbvWc, byte_len),
    ),
    ("offsetof(struct ibv_wc, qp_num)", offset_of!(IbvWc, qp_num)),
    (
        "offsetof(struct ibv_wc, wc_flags)",
        offset_of!(IbvWc, wc_flags),
    ),
    (
        "offsetof(struct ibv_wc, dlid_path_bits)",
        offset_of!(IbvWc, dlid_path_bits),
    ),
    (
        "sizeof(struct ibv_global_route)",
        size_of::<IbvGlobalRoute>(),
    ),
    (
        "offsetof(struct ibv_global_route, sgid_index)",
        offset_of!(IbvGlobalRoute, sgid_index),
    ),
    ("sizeof(struct ibv_ah_attr)", size_of::<IbvAhAttr>()),
    (
        "offsetof(struct ibv_ah_attr, dlid)",
        offset_of!(IbvAhAttr, dlid),
    ),
    (
        "offsetof(struct ibv_ah_attr, port_num)",
        offset_of!(IbvAhAttr, port_num),
    ),
    ("IBV_QPT_UC", IBV_QPT_UC as usize),
    ("IBV_WR_SEND", IBV_WR_SEND as usize),
];

/// The header's numbers on LP64 (x86_64 and aarch64 alike).
const EXPECTED: [usize; 23] = [
    16, 20, 64, 32, 52, 56, 16, 12, 32, 24, 48, 8, 20, 28, 36, 45, 24, 20, 32, 24, 30, 3, 2,
];

const fn check() -> bool {
    let mut i = 0;
    while i < EXPECTED.len() {
        if LAYOUT[i].1 != EXPECTED[i] {
            return false;
        }
        i += 1;
    }
    LAYOUT.len() == EXPECTED.len()
}

const _: () = assert!(
    check(),
    "verbs struct layout differs from infiniband/verbs.h"
);
