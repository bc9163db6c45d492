# Homebrew formula for boltwatch: builds both binaries from source with the
# Rust toolchain and runs the agent as a `brew services` job (the `service`
# block below becomes a launchd plist). Until a release is tagged it builds
# the main branch (`--HEAD`); see docs/deployment.md, "From packages to a
# running soak". The repository is its own tap (`Formula` at its top is a
# link to this directory):
#
#   brew tap boltwatch/boltwatch https://example.invalid/boltwatch.git
#   brew install --HEAD boltwatch
#   sudo brew services start boltwatch    # the agent, as a LaunchDaemon
#
# tests/tests/packaging.rs checks this file with `ruby -c` and that every
# path it installs exists in the repository.
class Boltwatch < Formula
  desc "Link telemetry for Thunderbolt clusters: STAMP RTT, link drops, soaks"
  homepage "https://example.invalid/boltwatch"
  license "Apache-2.0"
  head "https://example.invalid/boltwatch.git", branch: "main"

  depends_on "rust" => :build

  def install
    # A HEAD build's version is "HEAD-<commit>": --version says that commit
    # (the staged source has no .git for build-support/commit.rs to ask).
    ENV["BOLTWATCH_COMMIT"] = version.commit if build.head?
    system "cargo", "install", *std_cargo_args(path: "agent")
    system "cargo", "install", *std_cargo_args(path: "collector")
    (pkgshare/"examples").install "agent.example.toml"
    (pkgshare/"examples").install "collector/collector.example.toml"
    # The LaunchDaemons install-macos.sh uses, for a system-wide install
    # by hand (they name /usr/local/bin; brew's prefix differs).
    (pkgshare/"launchd").install "systemd-launchd/io.boltwatch.agent.plist"
    (pkgshare/"launchd").install "systemd-launchd/io.boltwatch.collector.plist"
    (pkgshare/"launchd").install "systemd-launchd/boltwatch.newsyslog.conf"
  end

  def post_install
    (var/"lib/boltwatch").mkpath
    (var/"log/boltwatch").mkpath
    config = etc/"boltwatch/agent.toml"
    return if config.exist?

    # Named after this Mac (an agent must never report as the example's
    # "mini-a"), every other key at its default: the keys a cluster sets
    # (collector, token_file, peers) are appended to it, as
    # docs/deployment.md shows; the example lists them all.
    (etc/"boltwatch").mkpath
    host = Utils.safe_popen_read("scutil", "--get", "LocalHostName").strip
    config.write <<~EOS
      # Every key, commented: #{opt_pkgshare}/examples/agent.example.toml
      node = "#{host}"
    EOS
  end

  service do
    run [opt_bin/"boltwatch-agent", "run", "--config", etc/"boltwatch/agent.toml",
         "--spool-dir", var/"lib/boltwatch/spool"]
    # A config error exits 0 for good (logged with file, line and key);
    # anything else is restarted, as the shipped plist does.
    environment_variables BOLTWATCH_CONFIG_ERROR_EXIT_STATUS: "0"
    keep_alive successful_exit: false
    process_type :interactive
    log_path var/"log/boltwatch/agent.log"
    error_log_path var/"log/boltwatch/agent.log"
  end

  def caveats
    <<~EOS
      Edit #{etc}/boltwatch/agent.toml (collector, peers, token_file), then:
        sudo brew services start boltwatch
      The collector: #{opt_bin}/boltwatch-collector serve --config FILE
      (example in #{opt_pkgshare}/examples/collector.example.toml).
    EOS
  end

  test do
    assert_match "commit", shell_output("#{bin}/boltwatch-agent --version")
    assert_match "commit", shell_output("#{bin}/boltwatch-collector --version")
    system bin/"boltwatch-agent", "run", "--config", pkgshare/"examples/agent.example.toml",
           "--check-config"
  end
end
