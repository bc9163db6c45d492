//! The verbs declarations against the real `infiniband/verbs.h` (Debian's
//! libibverbs-dev, installed by .ci/test): a C program prints each of
//! `rdma::abi::LAYOUT`'s expressions and the Rust values must match. And
//! the real libibverbs.so.1 opens through `dlopen` with every symbol.

use std::process::Command;

use boltwatch_agent::rdma::abi::LAYOUT;

#[test]
fn verbs_layout_matches_the_c_header() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include <infiniband/verbs.h>\nint main(void){\n",
    );
    for (expr, _, _) in LAYOUT {
        c.push_str(&format!("printf(\"%zu\\n\", (size_t)({expr}));\n"));
    }
    c.push_str("return 0;}\n");
    let src = dir.path().join("layout.c");
    let bin = dir.path().join("layout");
    std::fs::write(&src, c).unwrap();
    let cc = Command::new("cc")
        .arg(&src)
        .arg("-o")
        .arg(&bin)
        .output()
        .unwrap();
    assert!(
        cc.status.success(),
        "cc: {}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let out = Command::new(&bin).output().unwrap();
    let got: Vec<usize> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(got.len(), LAYOUT.len());
    for ((expr, rust, _), c) in LAYOUT.iter().zip(got) {
        println!("{expr}: C {c}, Rust {rust}");
        assert_eq!(*rust, c, "{expr}: Rust {rust}, C {c}");
    }
}

#[cfg(target_os = "linux")]
#[test]
fn libibverbs_opens_and_lists_what_sysfs_lists() {
    let v = boltwatch_agent::rdma::verbs::Verbs::open()
        .expect("libibverbs.so.1 (rdma-core) must be installed");
    let names = v.device_names().unwrap();
    // libibverbs lists one device per uverbs node the kernel exposes.
    let sysfs = std::fs::read_dir("/sys/class/infiniband_verbs")
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("uverbs"))
                .count()
        })
        .unwrap_or(0);
    assert_eq!(names.len(), sysfs, "{names:?}");
}

#[cfg(target_os = "linux")]
#[test]
fn the_verbs_port_opens_only_a_device_the_library_lists() {
    use boltwatch_agent::rdma::port::VerbsError;
    use boltwatch_agent::rdma::verbs::{Verbs, VerbsPort};
    let v = Verbs::open().expect("libibverbs.so.1 (rdma-core) must be installed");
    // Every symbol the port calls resolves in the real library; a device
    // no host has is refused as a port that is down, not a crash.
    let e = VerbsPort::open(&v, "boltwatch-no-such-device", 1, 1).err();
    assert_eq!(e, Some(VerbsError::PortDown));
}
