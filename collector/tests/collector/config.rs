//! A bad config exits 78 naming file, line and key.

#[test]
fn bad_config_exits_78_naming_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("collector.toml");
    std::fs::write(&cfg, "data_dir = \"/tmp/x\"\nhttp_listen = \"nowhere\"\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_boltwatch-collector"))
        .args(["serve", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("collector.toml:2: key `http_listen`"), "{err}");

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_boltwatch-collector"))
        .args(["serve", "--grpc-listen", "bogus"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--grpc-listen"));
}
