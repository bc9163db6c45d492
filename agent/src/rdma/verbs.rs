//! The verbs library, opened at run time with `dlopen` (crate
//! `libloading`): `librdma.dylib` on macOS (Apple's RDMA over Thunderbolt),
//! `libibverbs.so.1` (rdma-core) elsewhere. Absent library: an error, and
//! the probe stays off; the agent itself never links against it.
//!
//! Also [`VerbsPort`], the probe's [`Port`] over the library: the one file
//! of the agent's RDMA code with `unsafe` in it. `ibv_post_send`,
//! `ibv_post_recv` and `ibv_poll_cq` are `static inline` in verbs.h, so
//! they are called through the context's ops table (`abi::IbvContextOps`,
//! its layout checked against the header).

#![allow(unsafe_code)]

use std::cell::{Cell, RefCell};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, TryRecvError};
use std::sync::Arc;
use std::time::Duration;

use libloading::Library;

use super::abi::{self, IbvContextHead, IbvCqHead, IbvGid, IbvMr, IbvQpAttr, IbvQpHead};
use super::hello::Hello;
use super::port::{Completion, Port, QpState, VerbsError};
use super::transition::{self, Local};

/// The library file the OS's verbs come in.
pub const LIBRARY: &str = if cfg!(target_os = "macos") {
    "librdma.dylib"
} else {
    "libibverbs.so.1"
};

type GetDeviceList = unsafe extern "C" fn(*mut c_int) -> *mut *mut c_void;
type FreeDeviceList = unsafe extern "C" fn(*mut *mut c_void);
type GetDeviceName = unsafe extern "C" fn(*mut c_void) -> *const c_char;
type OpenDevice = unsafe extern "C" fn(*mut c_void) -> *mut c_void;
type CloseDevice = unsafe extern "C" fn(*mut c_void) -> c_int;
type QueryGid = unsafe extern "C" fn(*mut c_void, u8, c_int, *mut IbvGid) -> c_int;
type QueryPort = unsafe extern "C" fn(*mut c_void, u8, *mut abi::IbvPortAttr) -> c_int;
type AllocPd = unsafe extern "C" fn(*mut c_void) -> *mut c_void;
type Destroy = unsafe extern "C" fn(*mut c_void) -> c_int;
type RegMr = unsafe extern "C" fn(*mut c_void, *mut c_void, usize, c_int) -> *mut IbvMr;
type DeregMr = unsafe extern "C" fn(*mut IbvMr) -> c_int;
type CreateCq =
    unsafe extern "C" fn(*mut c_void, c_int, *mut c_void, *mut c_void, c_int) -> *mut IbvCqHead;
type CreateQp = unsafe extern "C" fn(*mut c_void, *mut abi::IbvQpInitAttr) -> *mut IbvQpHead;
type ModifyQp = unsafe extern "C" fn(*mut IbvQpHead, *mut IbvQpAttr, c_int) -> c_int;

/// Every exported symbol the probe calls; resolved at open so a library
/// missing one is refused up front rather than failing mid-probe.
pub const SYMBOLS: &[&str] = &[
    "ibv_get_device_list",
    "ibv_free_device_list",
    "ibv_get_device_name",
    "ibv_open_device",
    "ibv_close_device",
    "ibv_query_gid",
    "ibv_query_port",
    "ibv_alloc_pd",
    "ibv_dealloc_pd",
    "ibv_reg_mr",
    "ibv_dereg_mr",
    "ibv_create_cq",
    "ibv_destroy_cq",
    "ibv_create_qp",
    "ibv_modify_qp",
    "ibv_destroy_qp",
];

/// The opened verbs library.
pub struct Verbs {
    lib: Arc<Library>,
}

impl Verbs {
    /// Opens [`LIBRARY`] and checks every symbol in [`SYMBOLS`].
    pub fn open() -> Result<Self, VerbsError> {
        let lib_err = |e: libloading::Error| VerbsError::Library(e.to_string());
        // SAFETY: the verbs library's initialisers only register providers.
        let lib = unsafe { Library::new(LIBRARY) }.map_err(lib_err)?;
        for name in SYMBOLS {
            // SAFETY: only the address is looked up, nothing is called.
            unsafe { lib.get::<*const c_void>(name.as_bytes()) }.map_err(lib_err)?;
        }
        Ok(Self { lib: Arc::new(lib) })
    }

    /// The library's function `name`, typed `T`.
    ///
    /// # Safety
    /// `T` must be the function's signature in `infiniband/verbs.h`.
    unsafe fn sym<T>(&self, name: &[u8]) -> Result<libloading::Symbol<'_, T>, VerbsError> {
        // SAFETY: the caller names the symbol's real type.
        unsafe { self.lib.get::<T>(name) }.map_err(|e| VerbsError::Library(e.to_string()))
    }

    /// The names of the verbs devices the library sees (`rdma_en2`, `rxe0`).
    pub fn device_names(&self) -> Result<Vec<String>, VerbsError> {
        // SAFETY: the signatures are rdma-core's (`infiniband/verbs.h`).
        unsafe {
            let list = self.sym::<GetDeviceList>(b"ibv_get_device_list")?;
            let free = self.sym::<FreeDeviceList>(b"ibv_free_device_list")?;
            let name = self.sym::<GetDeviceName>(b"ibv_get_device_name")?;
            let mut n: c_int = 0;
            let devs = list(&mut n);
            if devs.is_null() {
                // ENOSYS: the kernel has no RDMA subsystem, so no device.
                let errno = std::io::Error::last_os_error().raw_os_error();
                return match errno {
                    Some(libc::ENOSYS) => Ok(Vec::new()),
                    _ => Err(VerbsError::Library(format!(
                        "ibv_get_device_list: errno {errno:?}"
                    ))),
                };
            }
            let names = (0..n.max(0) as usize)
                .map(|i| {
                    CStr::from_ptr(name(*devs.add(i)))
                        .to_string_lossy()
                        .into_owned()
                })
                .collect();
            free(devs);
            Ok(names)
        }
    }

    /// The GID at `index` of `device`'s port `port` (`ibv_query_gid`),
    /// opening and closing the device around the one query.
    pub fn gid(&self, device: &str, port: u8, index: c_int) -> Result<IbvGid, VerbsError> {
        // SAFETY: the signatures are rdma-core's (`infiniband/verbs.h`); the
        // list is freed and the device closed on every path below.
        unsafe {
            let list = self.sym::<GetDeviceList>(b"ibv_get_device_list")?;
            let free = self.sym::<FreeDeviceList>(b"ibv_free_device_list")?;
            let name = self.sym::<GetDeviceName>(b"ibv_get_device_name")?;
            let open = self.sym::<OpenDevice>(b"ibv_open_device")?;
            let close = self.sym::<CloseDevice>(b"ibv_close_device")?;
            let query = self.sym::<QueryGid>(b"ibv_query_gid")?;
            let mut n: c_int = 0;
            let devs = list(&mut n);
            if devs.is_null() {
                return Err(VerbsError::PortDown);
            }
            let found = (0..n.max(0) as usize)
                .map(|i| *devs.add(i))
                .find(|d| CStr::from_ptr(name(*d)).to_bytes() == device.as_bytes());
            let ctx = found.map_or(std::ptr::null_mut(), |d| open(d));
            free(devs);
            if ctx.is_null() {
                return Err(VerbsError::PortDown);
            }
            let mut gid = IbvGid::default();
            let rc = query(ctx, port, index, &mut gid);
            close(ctx);
            match rc {
                0 => Ok(gid),
                _ => Err(VerbsError::Library(format!("ibv_query_gid: {rc}"))),
            }
        }
    }
}

/// Receive and send slots of the registered buffer, one 4 KiB frame each:
/// the probe keeps `probe::RECV_DEPTH` receives posted plus what a burst
/// round granted (`burst::CREDITS`), and sends at most a round's data
/// frames, its control frame and a pong at once. 64 KiB registered.
const RECV_SLOTS: usize = 8;
const SEND_SLOTS: usize = 8;
const _: () = assert!(RECV_SLOTS >= super::probe::RECV_DEPTH + super::burst::CREDITS as usize);
const _: () = assert!(SEND_SLOTS >= super::burst::CREDITS as usize + 2);
const SLOT: usize = super::frame::PAGE;
/// How long `start_transition` waits for `ibv_modify_qp` before leaving it
/// to its thread and the probe's watchdog: long enough that a refusal
/// (errno 22, 60, 16) comes back as its errno, not as a timeout.
const QUICK: Duration = Duration::from_millis(50);
/// Set in a send's `wr_id`, so a completion (whose opcode is undefined
/// when its status is an error) still says which queue it came from.
const SEND_ID: u64 = 1 << 32;
/// Completions taken per poll.
const POLL_BATCH: usize = 16;

/// The functions a port calls, copied out of the library; valid while the
/// `Arc<Library>` beside them lives.
#[derive(Clone, Copy)]
struct Fns {
    list: GetDeviceList,
    free: FreeDeviceList,
    name: GetDeviceName,
    open: OpenDevice,
    close: CloseDevice,
    query_gid: QueryGid,
    query_port: QueryPort,
    alloc_pd: AllocPd,
    dealloc_pd: Destroy,
    reg_mr: RegMr,
    dereg_mr: DeregMr,
    create_cq: CreateCq,
    destroy_cq: Destroy,
    create_qp: CreateQp,
    modify_qp: ModifyQp,
    destroy_qp: Destroy,
}

/// Symbol `name` as a `T`.
///
/// # Safety
/// `T` must be the symbol's prototype in verbs.h.
unsafe fn sym<T: Copy>(lib: &Library, name: &str) -> Result<T, VerbsError> {
    // SAFETY: the caller's prototype; the copy is used only while `lib` lives.
    unsafe { lib.get::<T>(name.as_bytes()) }
        .map(|s| *s)
        .map_err(|e| VerbsError::Library(e.to_string()))
}

impl Fns {
    fn resolve(lib: &Library) -> Result<Self, VerbsError> {
        // SAFETY: each type alias above is the function's prototype in
        // verbs.h (rdma-core); `ibv_reg_mr` is the exported 4-argument one.
        unsafe {
            Ok(Fns {
                list: sym(lib, "ibv_get_device_list")?,
                free: sym(lib, "ibv_free_device_list")?,
                name: sym(lib, "ibv_get_device_name")?,
                open: sym(lib, "ibv_open_device")?,
                close: sym(lib, "ibv_close_device")?,
                query_gid: sym(lib, "ibv_query_gid")?,
                query_port: sym(lib, "ibv_query_port")?,
                alloc_pd: sym(lib, "ibv_alloc_pd")?,
                dealloc_pd: sym(lib, "ibv_dealloc_pd")?,
                reg_mr: sym(lib, "ibv_reg_mr")?,
                dereg_mr: sym(lib, "ibv_dereg_mr")?,
                create_cq: sym(lib, "ibv_create_cq")?,
                destroy_cq: sym(lib, "ibv_destroy_cq")?,
                create_qp: sym(lib, "ibv_create_qp")?,
                modify_qp: sym(lib, "ibv_modify_qp")?,
                destroy_qp: sym(lib, "ibv_destroy_qp")?,
            })
        }
    }

    /// Opens the device named `device`; the list is freed on every path.
    fn open_context(&self, device: &str) -> Result<*mut IbvContextHead, VerbsError> {
        // SAFETY: the list is null or `n` valid device pointers, each name
        // a NUL-terminated string owned by the list; freed before return.
        unsafe {
            let mut n: c_int = 0;
            let devs = (self.list)(&mut n);
            if devs.is_null() {
                return Err(VerbsError::PortDown);
            }
            let found = (0..n.max(0) as usize)
                .map(|i| *devs.add(i))
                .find(|d| CStr::from_ptr((self.name)(*d)).to_bytes() == device.as_bytes());
            let ctx = found.map_or(std::ptr::null_mut(), |d| (self.open)(d));
            (self.free)(devs);
            match ctx.is_null() {
                true => Err(VerbsError::PortDown),
                false => Ok(ctx.cast()),
            }
        }
    }
}

/// One `ibv_modify_qp` call, run on its own thread: Apple's ports can hang
/// in a transition, and the probe must never block on one.
struct Modify {
    f: ModifyQp,
    qp: *mut IbvQpHead,
    attr: IbvQpAttr,
    mask: c_int,
    _lib: Arc<Library>,
}

// SAFETY: the QP stays allocated while a `Modify` may run (`VerbsPort`'s
// drop leaks its resources while a transition is pending) and the `Arc`
// keeps the library mapped; the attr is owned.
unsafe impl Send for Modify {}

impl Modify {
    fn run(mut self) -> c_int {
        // SAFETY: see `impl Send`; the attr and mask are built together.
        let rc = unsafe { (self.f)(self.qp, &mut self.attr, self.mask) };
        match rc {
            // Some providers return -1 and set errno instead.
            r if r < 0 => std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO),
            r => r,
        }
    }
}

/// One link's port over the real verbs library: one PD, one 64 KiB
/// registered buffer (4 KiB slots for 64 B and 4 KiB frames), one CQ, one
/// UC QP. Not `Send` (it holds the library's raw handles): it lives on the
/// thread of its link's probe.
pub struct VerbsPort {
    lib: Arc<Library>,
    f: Fns,
    port_num: u8,
    gid_index: u8,
    ctx: *mut IbvContextHead,
    pd: *mut c_void,
    buf: *mut [u8],
    mr: *mut IbvMr,
    cq: *mut IbvCqHead,
    qp: *mut IbvQpHead,
    gid: IbvGid,
    mtu: u32,
    psn: u32,
    remote: Option<Hello>,
    created: Option<Result<(), VerbsError>>,
    reached: Cell<QpState>,
    pending: RefCell<Option<(QpState, Receiver<c_int>)>>,
    free_recv: Vec<usize>,
    free_send: Vec<usize>,
}

impl VerbsPort {
    /// Opens `device` (port `port_num`, GID at `gid_index`); nothing is
    /// allocated until [`Port::create_uc_qp`].
    pub fn open(
        verbs: &Verbs,
        device: &str,
        port_num: u8,
        gid_index: u8,
    ) -> Result<Self, VerbsError> {
        let f = Fns::resolve(&verbs.lib)?;
        let ctx = f.open_context(device)?;
        let buf = Box::into_raw(vec![0u8; (RECV_SLOTS + SEND_SLOTS) * SLOT].into_boxed_slice());
        Ok(Self {
            lib: Arc::clone(&verbs.lib),
            f,
            port_num,
            gid_index,
            ctx,
            pd: std::ptr::null_mut(),
            buf,
            mr: std::ptr::null_mut(),
            cq: std::ptr::null_mut(),
            qp: std::ptr::null_mut(),
            gid: IbvGid::default(),
            mtu: abi::IBV_MTU_1024,
            // 24 bits, random so a restarted agent's first packets are not
            // taken for the previous QP's.
            psn: rand::random::<u32>() & 0x00ff_ffff,
            remote: None,
            created: None,
            reached: Cell::new(QpState::Reset),
            pending: RefCell::new(None),
            free_recv: (0..RECV_SLOTS).collect(),
            free_send: (0..SEND_SLOTS).collect(),
        })
    }

    /// Our QP's coordinates for the peer, once the QP exists.
    pub fn local(&self) -> Option<Hello> {
        if self.qp.is_null() {
            return None;
        }
        // SAFETY: a non-null `qp` is the library's live QP.
        let qpn = unsafe { (*self.qp).qp_num };
        Some(Hello {
            qpn,
            psn: self.psn,
            gid: self.gid.raw,
        })
    }

    /// The peer's coordinates, needed before RTR.
    pub fn set_remote(&mut self, remote: Hello) {
        self.remote = Some(remote);
    }

    fn create(&mut self) -> Result<(), VerbsError> {
        let index = c_int::from(self.gid_index);
        let mut attr = abi::IbvPortAttr::default();
        // SAFETY: `ctx` is an open context; each handle is checked for null
        // before use and kept, so drop frees what was made, in reverse.
        unsafe {
            if (self.f.query_port)(self.ctx.cast(), self.port_num, &mut attr) != 0 {
                return Err(VerbsError::PortDown);
            }
            self.mtu = attr.active_mtu.clamp(1, abi::IBV_MTU_1024 + 2);
            if (self.f.query_gid)(self.ctx.cast(), self.port_num, index, &mut self.gid) != 0 {
                return Err(VerbsError::PortDown);
            }
            self.pd = (self.f.alloc_pd)(self.ctx.cast());
            if self.pd.is_null() {
                return Err(VerbsError::PdAlloc);
            }
            let (base, len) = (self.buf.cast::<c_void>(), self.buf.len());
            self.mr = (self.f.reg_mr)(self.pd, base, len, abi::IBV_ACCESS_LOCAL_WRITE);
            if self.mr.is_null() {
                return Err(VerbsError::PdAlloc);
            }
            let depth = (RECV_SLOTS + SEND_SLOTS) as c_int;
            let none = std::ptr::null_mut();
            self.cq = (self.f.create_cq)(self.ctx.cast(), depth, none, none, 0);
            if self.cq.is_null() {
                return Err(VerbsError::PdAlloc);
            }
            let mut init = self.init_attr();
            self.qp = (self.f.create_qp)(self.pd, &mut init);
        }
        if self.qp.is_null() {
            let errno = std::io::Error::last_os_error().raw_os_error();
            return Err(match errno {
                Some(libc::ENOMEM | libc::ENOSPC) => VerbsError::QpBudget,
                _ => VerbsError::PdAlloc,
            });
        }
        Ok(())
    }

    fn init_attr(&self) -> abi::IbvQpInitAttr {
        abi::IbvQpInitAttr {
            qp_context: std::ptr::null_mut(),
            send_cq: self.cq.cast(),
            recv_cq: self.cq.cast(),
            srq: std::ptr::null_mut(),
            cap: abi::IbvQpCap {
                max_send_wr: SEND_SLOTS as u32,
                max_recv_wr: RECV_SLOTS as u32,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            qp_type: abi::IBV_QPT_UC,
            // Every send completes: its slot is reused only after.
            sq_sig_all: 1,
        }
    }

    fn local_facts(&self) -> Local {
        Local {
            port_num: self.port_num,
            gid_index: self.gid_index,
            mtu: self.mtu,
            psn: self.psn,
        }
    }

    fn slot_ptr(&self, i: usize) -> *mut u8 {
        // SAFETY: `i` < RECV_SLOTS + SEND_SLOTS, so the slot is inside `buf`.
        unsafe { self.buf.cast::<u8>().add(i * SLOT) }
    }

    fn sge(&self, i: usize, len: usize) -> abi::IbvSge {
        // SAFETY: a non-null `mr` (checked by the callers) is live.
        let lkey = unsafe { (*self.mr).lkey };
        abi::IbvSge {
            addr: self.slot_ptr(i) as u64,
            length: len as u32,
            lkey,
        }
    }

    fn ops(&self) -> Result<&abi::IbvContextOps, VerbsError> {
        if self.qp.is_null() || self.mr.is_null() {
            return Err(VerbsError::Library("no queue pair".into()));
        }
        // SAFETY: a live QP's context is the open context whose ops table
        // verbs.h's inline post/poll functions call through.
        Ok(unsafe { &(*(*self.qp).context).ops })
    }

    fn completion(&mut self, wc: &abi::IbvWc) -> Completion {
        let ok = wc.status == abi::IBV_WC_SUCCESS;
        let slot = (wc.wr_id & !SEND_ID) as usize;
        if wc.wr_id & SEND_ID != 0 {
            // Only ids we posted go back to the free list: a provider's
            // stray id must never make a slot pointer outside the buffer.
            if slot < SEND_SLOTS && !self.free_send.contains(&slot) {
                self.free_send.push(slot);
            }
            return Completion::Send { ok };
        }
        if slot >= RECV_SLOTS || self.free_recv.contains(&slot) {
            return Completion::Recv {
                ok: false,
                data: Vec::new(),
            };
        }
        let len = (wc.byte_len as usize).min(SLOT);
        let data = match ok {
            // SAFETY: the adapter has finished writing this slot (its
            // receive completed) and it is not posted again until after.
            true => unsafe { std::slice::from_raw_parts(self.slot_ptr(slot), len) }.to_vec(),
            false => Vec::new(),
        };
        self.free_recv.push(slot);
        Completion::Recv { ok, data }
    }
}

impl Port for VerbsPort {
    fn active(&self) -> bool {
        let mut attr = abi::IbvPortAttr::default();
        // SAFETY: `ctx` is open; the exported `ibv_query_port` fills at
        // most the (older, smaller) compat layout of this zeroed struct.
        let rc = unsafe { (self.f.query_port)(self.ctx.cast(), self.port_num, &mut attr) };
        rc == 0 && attr.state == abi::IBV_PORT_ACTIVE
    }

    /// Ours only: verbs has no call that counts other processes' QPs on
    /// the device (docs/rdma.md, Status).
    fn qps_in_use(&self) -> u32 {
        u32::from(!self.qp.is_null())
    }

    /// Once per port: later calls return the first call's result, so a
    /// failed set-up is never retried (Apple's ports wedge after many).
    fn create_uc_qp(&mut self) -> Result<(), VerbsError> {
        if self.created.is_none() {
            self.created = Some(self.create());
        }
        self.created.clone().expect("set above")
    }

    fn start_transition(&mut self, to: QpState) -> Result<(), VerbsError> {
        if self.qp.is_null() || self.pending.borrow().is_some() {
            return Err(VerbsError::Library(
                "no queue pair, or a transition running".into(),
            ));
        }
        let (attr, mask) = transition::attr(to, &self.local_facts(), self.remote.as_ref())
            .ok_or_else(|| VerbsError::Library("RTR before the peer's hello".into()))?;
        let job = Modify {
            f: self.f.modify_qp,
            qp: self.qp,
            attr,
            mask,
            _lib: Arc::clone(&self.lib),
        };
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("rdma-modify-qp".into())
            .spawn(move || tx.send(job.run()).unwrap_or_default())
            .map_err(|e| VerbsError::Library(e.to_string()))?;
        match rx.recv_timeout(QUICK) {
            Ok(0) => {
                self.reached.set(to);
                Ok(())
            }
            Ok(errno) => Err(VerbsError::Modify(errno)),
            Err(RecvTimeoutError::Timeout) => {
                *self.pending.borrow_mut() = Some((to, rx));
                Ok(())
            }
            Err(RecvTimeoutError::Disconnected) => Err(VerbsError::Library(
                "modify_qp thread ended without a result".into(),
            )),
        }
    }

    fn qp_state(&self) -> QpState {
        let mut pending = self.pending.borrow_mut();
        if let Some((to, rx)) = pending.as_ref() {
            match rx.try_recv() {
                Ok(0) => self.reached.set(*to),
                // Late and failed: the state stays below `to` and the
                // probe's watchdog marks the port wedged.
                Ok(errno) => tracing::warn!(errno, "RDMA modify_qp failed after the quick wait"),
                Err(TryRecvError::Empty) => return self.reached.get(),
                Err(TryRecvError::Disconnected) => {}
            }
            *pending = None;
        }
        self.reached.get()
    }

    fn post_recv(&mut self, frames: usize) -> Result<(), VerbsError> {
        let post = self
            .ops()?
            .post_recv
            .ok_or(VerbsError::Post(libc::ENOSYS))?;
        for _ in 0..frames {
            let slot = self.free_recv.pop().ok_or(VerbsError::Post(libc::ENOMEM))?;
            let mut sge = self.sge(slot, SLOT);
            let mut wr = abi::IbvRecvWr {
                wr_id: slot as u64,
                next: std::ptr::null_mut(),
                sg_list: &mut sge,
                num_sge: 1,
            };
            let mut bad = std::ptr::null_mut();
            // SAFETY: `qp` is live; the wr and sge live across the call,
            // which copies them; the slot is registered memory we own.
            let rc = unsafe { post(self.qp.cast(), &mut wr, &mut bad) };
            if rc != 0 {
                self.free_recv.push(slot);
                return Err(VerbsError::Post(rc));
            }
        }
        Ok(())
    }

    fn post_send(&mut self, frame: &[u8]) -> Result<(), VerbsError> {
        let post = self
            .ops()?
            .post_send
            .ok_or(VerbsError::Post(libc::ENOSYS))?;
        if frame.len() > SLOT {
            return Err(VerbsError::Post(libc::EMSGSIZE));
        }
        let slot = self.free_send.pop().ok_or(VerbsError::Post(libc::ENOMEM))?;
        let at = RECV_SLOTS + slot;
        // SAFETY: a free send slot is not in any posted work request.
        unsafe { std::ptr::copy_nonoverlapping(frame.as_ptr(), self.slot_ptr(at), frame.len()) };
        let mut sge = self.sge(at, frame.len());
        let mut wr = abi::IbvSendWr {
            wr_id: SEND_ID | slot as u64,
            next: std::ptr::null_mut(),
            sg_list: &mut sge,
            num_sge: 1,
            opcode: abi::IBV_WR_SEND,
            send_flags: abi::IBV_SEND_SIGNALED,
            imm_data: 0,
            wr: [0; 4],
            qp_type: 0,
            bind_mw: [0; 6],
        };
        let mut bad = std::ptr::null_mut();
        // SAFETY: as in `post_recv`.
        let rc = unsafe { post(self.qp.cast(), &mut wr, &mut bad) };
        if rc != 0 {
            self.free_send.push(slot);
            return Err(VerbsError::Post(rc));
        }
        Ok(())
    }

    fn poll(&mut self) -> Vec<Completion> {
        let Some(poll) = self.ops().ok().and_then(|o| o.poll_cq) else {
            return Vec::new();
        };
        let mut wc = [abi::IbvWc::default(); POLL_BATCH];
        // SAFETY: `cq` is live (the QP exists); `wc` holds POLL_BATCH.
        let n = unsafe { poll(self.cq.cast(), POLL_BATCH as c_int, wc.as_mut_ptr()) };
        let n = usize::try_from(n).unwrap_or(0).min(POLL_BATCH);
        wc[..n].iter().map(|w| self.completion(w)).collect()
    }
}

impl Drop for VerbsPort {
    fn drop(&mut self) {
        self.qp_state();
        if self.pending.borrow().is_some() {
            // A modify_qp is still inside the library with our QP: freeing
            // anything now could crash the agent. Leaked until exit.
            tracing::warn!("RDMA port left allocated: a QP transition never returned");
            return;
        }
        // SAFETY: each non-null handle came from the library and is freed
        // once, in reverse order of creation; no thread uses them now.
        unsafe {
            if !self.qp.is_null() {
                (self.f.destroy_qp)(self.qp.cast());
            }
            if !self.cq.is_null() {
                (self.f.destroy_cq)(self.cq.cast());
            }
            if !self.mr.is_null() {
                (self.f.dereg_mr)(self.mr);
            }
            if !self.pd.is_null() {
                (self.f.dealloc_pd)(self.pd);
            }
            (self.f.close)(self.ctx.cast());
            drop(Box::from_raw(self.buf));
        }
    }
}
