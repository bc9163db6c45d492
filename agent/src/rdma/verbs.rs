//! The verbs library, opened at run time with `dlopen` (crate
//! `libloading`): `librdma.dylib` on macOS (Apple's RDMA over Thunderbolt),
//! `libibverbs.so.1` (rdma-core) elsewhere. Absent library: an error, and
//! the probe stays off; the agent itself never links against it.

#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_void, CStr};

use libloading::Library;

use super::abi::IbvGid;
use super::port::VerbsError;

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

/// Every exported symbol the probe calls; resolved at open so a library
/// missing one is refused up front rather than failing mid-probe.
pub const SYMBOLS: &[&str] = &[
    "ibv_get_device_list",
    "ibv_free_device_list",
    "ibv_get_device_name",
    "ibv_open_device",
    "ibv_close_device",
    "ibv_query_gid",
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
    lib: Library,
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
        Ok(Self { lib })
    }

    /// The names of the verbs devices the library sees (`rdma_en2`, `rxe0`).
    pub fn device_names(&self) -> Result<Vec<String>, VerbsError> {
        let e = |e: libloading::Error| VerbsError::Library(e.to_string());
        // SAFETY: the signatures are rdma-core's (`infiniband/verbs.h`).
        unsafe {
            let list = self
                .lib
                .get::<GetDeviceList>(b"ibv_get_device_list")
                .map_err(e)?;
            let free = self
                .lib
                .get::<FreeDeviceList>(b"ibv_free_device_list")
                .map_err(e)?;
            let name = self
                .lib
                .get::<GetDeviceName>(b"ibv_get_device_name")
                .map_err(e)?;
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
        let e = |e: libloading::Error| VerbsError::Library(e.to_string());
        // SAFETY: the signatures are rdma-core's (`infiniband/verbs.h`); the
        // list is freed and the device closed on every path below.
        unsafe {
            let list = self
                .lib
                .get::<GetDeviceList>(b"ibv_get_device_list")
                .map_err(e)?;
            let free = self
                .lib
                .get::<FreeDeviceList>(b"ibv_free_device_list")
                .map_err(e)?;
            let name = self
                .lib
                .get::<GetDeviceName>(b"ibv_get_device_name")
                .map_err(e)?;
            let open = self.lib.get::<OpenDevice>(b"ibv_open_device").map_err(e)?;
            let close = self
                .lib
                .get::<CloseDevice>(b"ibv_close_device")
                .map_err(e)?;
            let query = self.lib.get::<QueryGid>(b"ibv_query_gid").map_err(e)?;
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
