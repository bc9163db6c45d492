"""The chaos soak's driver (all its I/O): builds a three-node namespace
bed, runs a real collector on the host and a real agent in each node,
injects the seeded schedule of plan.py while keeping its own ledger, then
reads the store and a range report back and hands both to verdict.py.

Usage (as root, from bench/chaos.sh, which owns the cleanup trap):
  driver.py --minutes N --seed S --bin DIR --work DIR --prefix NAME
"""

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request

import plan
import verdict

NODES = 3
PORT = 862
BW_PORT = 5202
INTERVAL_NS = 100_000_000  # probes at 10 Hz
# An outage opens after three missed probes and is backdated; a carrier
# event may lag; the report clips to the range: how far an outage may lie
# outside its ledger window and still be that window's.
SLACK_NS = 2_000_000_000
WARMUP = 15.0


def sh(*args, check=True):
    return subprocess.run(args, check=check, capture_output=True, text=True)


def ns_name(prefix, i):
    return f"{prefix}-{i}"


def _run_number(prefix):
    return int("".join(c for c in prefix if c.isdigit()) or "0")


def host_if(prefix, i):
    """The host end of node `i`'s management veth: unique per run (the
    run's number, not a cut of the prefix that two runs may share), within
    the 15 characters of an interface name."""
    return f"bwc{_run_number(prefix) % 10**8}h{i}"


def mgmt_net(prefix, i):
    """Node `i`'s management /24 on the host, one per run, so two soaks
    (a long one beside CI's) never route into each other's veths."""
    return f"10.{100 + _run_number(prefix) % 100}.{i}"


def links():
    return [(a, b) for a in range(NODES) for b in range(a + 1, NODES)]


def link_addr(a, b, which):
    """Address of node `which` on the link between a and b."""
    lo, hi = min(a, b), max(a, b)
    return f"10.92.{links().index((lo, hi))}.{1 if which == lo else 2}"


class Bed:
    def __init__(self, prefix, work):
        self.prefix, self.work = prefix, work
        self.mgmt_host = []
        for i in range(NODES):
            ns = ns_name(prefix, i)
            sh("ip", "netns", "add", ns)
            hif = host_if(prefix, i)
            sh("ip", "link", "add", hif, "type", "veth", "peer", "name", "mgmt0", "netns", ns)
            sh("ip", "addr", "add", f"{mgmt_net(prefix, i)}.1/24", "dev", hif)
            sh("ip", "link", "set", hif, "up")
            sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
               "net.ipv6.conf.default.disable_ipv6=1")
            for a in (["link", "set", "lo", "up"], ["addr", "add", f"{mgmt_net(prefix, i)}.2/24", "dev", "mgmt0"],
                      ["link", "set", "mgmt0", "up"]):
                sh("ip", "-n", ns, *a)
        for n, (a, b) in enumerate(links()):
            # Distinct ifindexes make carrier changes urgent (see tests/src/bed.rs).
            sh("ip", "-n", ns_name(prefix, a), "link", "add", f"tb{b}", "mtu", "9000", "index", str(2000 + 2 * n),
               "type", "veth", "peer", "name", f"tb{a}", "mtu", "9000", "index", str(2001 + 2 * n),
               "netns", ns_name(prefix, b))
            for x, y in ((a, b), (b, a)):
                sh("ip", "-n", ns_name(prefix, x), "addr", "add", f"{link_addr(a, b, x)}/24", "dev", f"tb{y}")
                sh("ip", "-n", ns_name(prefix, x), "link", "set", f"tb{y}", "up")

    def nft(self, i, script):
        r = subprocess.run(["ip", "netns", "exec", ns_name(self.prefix, i), "nft", "-f", "-"],
                           input=script, text=True, capture_output=True)
        if r.returncode != 0:
            raise RuntimeError(f"nft in node {i}: {r.stderr}\n{script}")

    def nft_delete(self, i, table):
        sh("ip", "netns", "exec", ns_name(self.prefix, i), "nft", "delete", "table", *table.split(), check=False)


def tmpfs(path, size):
    os.makedirs(path, exist_ok=True)
    sh("mount", "-t", "tmpfs", "-o", f"size={size}", "chaos", path)


def fill(path):
    """Writes zeros into `path`/filler until the filesystem is full."""
    subprocess.run(["dd", "if=/dev/zero", f"of={path}/filler", "bs=1M"], capture_output=True)


# The lab's thermal fixture: each agent reads a sysfs-like tree of its own
# (`--sysfs-root`) whose class/net is the real one of its namespace (`ip
# netns exec` mounts that namespace's sysfs on /sys, and the agent's link
# state, counters and discovery read it through the link) and whose
# class/thermal is a fixture zone the driver warms and cools, so thermal
# records flow through every fault as the issue asks.
ZONE = "class/thermal/thermal_zone0"


def sysfs_fixture(work, i):
    root = f"{work}/sysfs-n{i}"
    if os.path.isdir(root):
        return root
    os.makedirs(f"{root}/class")
    os.symlink("/sys/class/net", f"{root}/class/net")
    os.makedirs(f"{root}/{ZONE}")
    for name, value in (("type", "x86_pkg_temp"), ("trip_point_0_type", "critical"),
                        ("trip_point_0_temp", "100000")):
        with open(f"{root}/{ZONE}/{name}", "w") as f:
            f.write(value + "\n")
    set_temperature(work, i, 0.0)
    return root


def set_temperature(work, i, elapsed):
    """A slow sawtooth per node (40-60 C over 5 minutes), written whole
    by rename so an agent never reads half a file."""
    milli = 40000 + 1000 * i + int(20000 * ((elapsed / 300.0) % 1.0))
    tmp = f"{work}/sysfs-n{i}/{ZONE}/.temp"
    with open(tmp, "w") as f:
        f.write(f"{milli}\n")
    os.replace(tmp, f"{work}/sysfs-n{i}/{ZONE}/temp")


def smaps(pid):
    """Rss, anonymous, file-backed and shared kB of `pid` (smaps_rollup),
    or None once it is gone."""
    out = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                k, _, rest = line.partition(":")
                if k in ("Rss", "Anonymous", "Pss_File", "Pss_Shmem"):
                    out[k] = int(rest.split()[0])
    except OSError:
        return None
    return out


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class Procs:
    def __init__(self, args, bed):
        self.a, self.bed = args, bed
        self.grpc = 40000 + os.getpid() % 10000
        self.http = f"127.0.0.1:{self.grpc + 1}"
        self.collector = None
        self.agents = [None] * NODES
        self.started = time.time()
        self.next_series = 0.0

    def log(self, name):
        return open(os.path.join(self.a.work, f"{name}.log"), "a")

    def start_collector(self):
        self.collector = subprocess.Popen(
            [f"{self.a.bin}/boltwatch-collector", "serve", "--data-dir", f"{self.a.work}/store",
             "--grpc-listen", f"0.0.0.0:{self.grpc}", "--http-listen", self.http],
            stdout=self.log("collector"), stderr=subprocess.STDOUT)
        self.pidfile()

    def agent_config(self, i):
        peers = "\n".join(f'n{j} = "{link_addr(i, j, j)}:{BW_PORT}"' for j in range(NODES) if j != i)
        path = f"{self.a.work}/agent-n{i}.toml"
        with open(path, "w") as f:
            f.write(f'[bandwidth]\nenabled = true\nlisten = "0.0.0.0:{BW_PORT}"\ninterval = "20s"\n'
                    f'duration = "2s"\nstreams = 2\nduty_cycle = 0.5\n[bandwidth.peers]\n{peers}\n')
        return path

    def start_agent(self, i):
        args = ["ip", "netns", "exec", ns_name(self.a.prefix, i), f"{self.a.bin}/boltwatch-agent", "run",
                "--config", self.agent_config(i), "--node", f"n{i}",
                "--collector", f"http://{mgmt_net(self.bed.prefix, i)}.1:{self.grpc}", "--listen", f"0.0.0.0:{PORT}",
                "--probe-interval", "100ms", "--no-services", "--spool-dir", f"{self.a.work}/spool-n{i}/spool",
                "--sysfs-root", sysfs_fixture(self.a.work, i)]
        for j in range(NODES):
            if j != i:
                args += ["--peer", f"n{j}={link_addr(i, j, j)}:{PORT}"]
        self.agents[i] = subprocess.Popen(args, stdout=self.log(f"agent-n{i}"), stderr=subprocess.STDOUT,
                                          env=faketime_env(self.a.work, i))
        self.pidfile()

    def pidfile(self):
        with open(f"{self.a.work}/pids", "a") as f:
            for p in [self.collector, *self.agents]:
                if p is not None:
                    f.write(f"{p.pid}\n")

    def rss(self):
        out = {"collector": rss_kb(self.collector.pid)}
        for i, p in enumerate(self.agents):
            out[f"n{i}"] = rss_kb(p.pid)
        return out

    def memory_row(self, t):
        """One line per process of rss.csv: seconds since t0, role, pid,
        then smaps_rollup's Rss, Anonymous, Pss_File, Pss_Shmem (kB)."""
        rows = []
        for role, p in [("collector", self.collector)] + [(f"n{i}", a) for i, a in enumerate(self.agents)]:
            m = smaps(p.pid) if p is not None else None
            if m:
                rows.append(f"{t:.0f},{role},{p.pid},{m.get('Rss', 0)},{m.get('Anonymous', 0)},"
                            f"{m.get('Pss_File', 0)},{m.get('Pss_Shmem', 0)}")
        with open(f"{self.a.work}/rss.csv", "a") as f:
            f.write("".join(r + "\n" for r in rows))

    def metrics(self):
        with urllib.request.urlopen(f"http://{self.http}/metrics", timeout=5) as r:
            return r.read().decode()


# A wall-clock step as one agent sees it: a time namespace offsets only
# CLOCK_MONOTONIC and CLOCK_BOOTTIME, never CLOCK_REALTIME, and stepping the
# host's clock would step every process on the machine. So every agent runs
# under libfaketime (Debian's faketime package) with its real-time offset in
# a file it rereads every second, and monotonic time left alone, as a real
# step leaves it: the step is writing +STEP_S into that file, and 0 back.
FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"
STEP_S = 20


def faketime_env(work, i):
    path = f"{work}/faketime-n{i}"
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write("+0\n")
    return dict(os.environ, LD_PRELOAD=FAKETIME_LIB, FAKETIME_TIMESTAMP_FILE=path,
                FAKETIME_CACHE_DURATION="1", DONT_FAKE_MONOTONIC="1")


def step_clock(work, i, seconds):
    with open(f"{work}/faketime-n{i}", "w") as f:
        f.write(f"{seconds:+d}\n")


def directions(f):
    if f.kind == "agent_kill":
        return tuple((f"n{j}", f"n{f.node}") for j in range(NODES) if j != f.node)
    if f.peer >= 0:
        return ((f"n{f.node}", f"n{f.peer}"), (f"n{f.peer}", f"n{f.node}"))
    return ()


def nft_ingress(peer, rules):
    """A netdev table dropping on the ingress of the link to `peer`."""
    return (f"table netdev chaos {{\n chain cin {{\n  type filter hook ingress device \"tb{peer}\" priority 0; "
            f"policy accept;\n  {rules}\n }}\n}}\n")


def inject(f, procs, bed, work):
    """Starts fault `f`; returns the function that ends it."""
    ns = lambda i: ns_name(bed.prefix, i)
    if f.kind == "collector_kill":
        procs.collector.send_signal(signal.SIGKILL)
        procs.collector.wait()
        return procs.start_collector
    if f.kind == "agent_kill":
        procs.agents[f.node].send_signal(signal.SIGKILL)
        procs.agents[f.node].wait()
        return lambda: procs.start_agent(f.node)
    if f.kind == "collector_hang":
        procs.collector.send_signal(signal.SIGSTOP)
        return lambda: procs.collector.send_signal(signal.SIGCONT)
    if f.kind == "carrier":
        sh("ip", "-n", ns(f.node), "link", "set", f"tb{f.peer}", "down")
        return lambda: sh("ip", "-n", ns(f.node), "link", "set", f"tb{f.peer}", "up")
    if f.kind == "nft_drop":
        # One rule on one end kills both directions (probes to its
        # reflector, replies to its sender) in one commit, so the ledger's
        # window is the rule's own.
        bed.nft(f.peer, nft_ingress(f.node, f"udp dport {PORT} counter drop\n  udp sport {PORT} counter drop"))
        return lambda: bed.nft_delete(f.peer, "netdev chaos")
    if f.kind == "loss_burst":
        for x, y in ((f.node, f.peer), (f.peer, f.node)):
            bed.nft(x, nft_ingress(y, "meta protocol ip numgen random mod 1000 < 300 counter drop"))
        return lambda: [bed.nft_delete(x, "netdev chaos") for x in (f.node, f.peer)]
    if f.kind == "store_full":
        fill(f"{work}/store")
        return lambda: os.remove(f"{work}/store/filler")
    if f.kind == "spool_full":
        fill(f"{work}/spool-n{f.node}")
        return lambda: os.remove(f"{work}/spool-n{f.node}/filler")
    if f.kind == "clock_step":
        step_clock(work, f.node, STEP_S)
        return lambda: step_clock(work, f.node, 0)
    if f.kind == "mgmt_cut":
        bed.nft(f.node, "table inet chaoscut {\n chain cin {\n  type filter hook input priority 0;\n  iifname \"mgmt0\" drop\n }\n"
                        " chain cout {\n  type filter hook output priority 0;\n  oifname \"mgmt0\" drop\n }\n}\n")
        return lambda: bed.nft_delete(f.node, "inet chaoscut")
    raise ValueError(f.kind)


SERIES_EVERY = 10.0


def sample_rss(procs, t0, rss_first):
    """Over verdict.rss_baseline_window: the largest RSS of each process
    seen in it (a process killed in it is measured again after restart).
    Every SERIES_EVERY s, a row of rss.csv (what grows, anon or file),
    and the thermal fixture's next temperatures."""
    el = time.time() - t0
    if el >= procs.next_series:
        procs.next_series = el + SERIES_EVERY
        procs.memory_row(el)
        for i in range(NODES):
            set_temperature(procs.a.work, i, el)
    lo, hi = verdict.rss_baseline_window(procs.a.minutes * 60, WARMUP)
    if lo <= el <= hi:
        for k, v in procs.rss().items():
            rss_first[k] = max(rss_first.get(k, 0), v)


def run_schedule(faults, procs, bed, work, t0, ledger):
    rss_first = {}
    for f in faults:
        while time.time() - t0 < f.start:
            sample_rss(procs, t0, rss_first)
            time.sleep(0.2)
        called = time.time_ns()
        end_fn = inject(f, procs, bed, work)
        # A rule or link change is in force once its command returns (the
        # kernel commits before answering): both ends are taken after, and
        # how long each command took is the ledger's own uncertainty.
        start = time.time_ns()
        while time.time() - t0 < f.start + f.length:
            sample_rss(procs, t0, rss_first)
            time.sleep(0.1)
        clearing = time.time_ns()
        end_fn()
        end = time.time_ns()
        spread = (start - called) + (end - clearing)
        ledger.append(verdict.Window(f.kind, start, end, directions(f), spread))
        print(f"  {(start / 1e9 - t0):7.1f}s {f.kind:<15} {f.length:5.1f}s node n{f.node}"
              + (f" peer n{f.peer}" if f.peer >= 0 else ""), flush=True)
    return rss_first


def stored_highest(work):
    """(node, boot_id) -> highest stored sequence."""
    c = sqlite3.connect(f"file:{work}/store/boltwatch.db?mode=ro", uri=True)
    return {(n, b): h for n, b, h in c.execute("SELECT node, boot_id, highest_seq FROM boots")}


def agents_last_seqs(work):
    """(node, boot_id) -> last_seq from each agent's clean-stop line (the
    boots killed with -9 say nothing; their spools go to the next boot)."""
    import re
    out = {}
    for i in range(NODES):
        with open(f"{work}/agent-n{i}.log") as f:
            for m in re.finditer(r"agent stopped boot_id=(\w+) last_seq=(\d+)", f.read()):
                out[(f"n{i}", m.group(1))] = int(m.group(2))
    return out


def stored_boots(work):
    c = sqlite3.connect(f"file:{work}/store/boltwatch.db?mode=ro", uri=True)
    return c.execute("SELECT node, records, highest_seq FROM boots").fetchall()


def counter(metrics_text, name):
    return int(sum(float(l.split()[-1]) for l in metrics_text.splitlines() if l.startswith(name)))


def report_outages(args, frm, to):
    out = sh(f"{args.bin}/boltwatch-collector", "report", "--data-dir", f"{args.work}/store",
             "--from", str(frm), "--to", str(to), "--format", "json").stdout
    with open(f"{args.work}/report.json", "w") as f:
        f.write(out)
    r = json.loads(out)
    items = find_outages(r)
    return [verdict.Outage(o["node"], o["peer"], o["cause"], o["start_unix_ns"], o["end_unix_ns"])
            for o in items if o["cause"] != "service"], r


def procs_names():
    return [f"n{i}" for i in range(NODES)]


def thermal_readings(r):
    """Node -> readings of the fixture's zone in the report."""
    return {t["node"]: sum(s["readings"] for s in t["sensors"]) for t in r.get("thermal", [])}


def find_outages(r):
    """Every link's interruptions (the `overall` section repeats them)."""
    return [o for link in r["links"] for o in link["interruptions"]["outages"]]


def main():
    p = argparse.ArgumentParser()
    for a in ("--bin", "--work", "--prefix"):
        p.add_argument(a, required=True)
    p.add_argument("--minutes", type=float, required=True)
    p.add_argument("--seed", type=int, required=True)
    args = p.parse_args()
    seconds = args.minutes * 60
    faults = plan.plan(args.seed, seconds, warmup=WARMUP)
    print(f"chaos soak: {args.minutes:g} min, seed {args.seed}, {len(faults)} faults, work {args.work}", flush=True)
    tmpfs(f"{args.work}/store", "512m")
    for i in range(NODES):
        tmpfs(f"{args.work}/spool-n{i}", "64m")
    bed = Bed(args.prefix, args.work)
    procs = Procs(args, bed)
    procs.start_collector()
    time.sleep(1)
    for i in range(NODES):
        procs.start_agent(i)
    t0 = time.time()
    ledger = []
    rss_first = run_schedule(faults, procs, bed, args.work, t0, ledger)
    while time.time() - t0 < seconds:
        sample_rss(procs, t0, rss_first)
        time.sleep(0.5)
    to = int(time.time())
    # Quiet: the agents deliver what they spooled, then stop cleanly.
    time.sleep(5)
    rss_end = procs.rss()
    procs.memory_row(time.time() - t0)
    m = procs.metrics()
    drops = counter(m, "boltwatch_agent_dropped_records_total")
    steps = counter(m, "boltwatch_agent_clock_steps_total")
    for a in procs.agents:
        a.send_signal(signal.SIGTERM)
    for a in procs.agents:
        a.wait(timeout=30)
    procs.collector.send_signal(signal.SIGTERM)
    procs.collector.wait(timeout=60)
    outages, report = report_outages(args, int(t0 + WARMUP - 5), to)
    boots = stored_boots(args.work)
    with open(f"{args.work}/ledger.json", "w") as f:
        json.dump({"t0": t0, "windows": [w.__dict__ for w in ledger]}, f)
    rows = verdict.compare(ledger, outages, INTERVAL_NS, SLACK_NS)
    rows += verdict.records(boots, drops)
    last_seqs = agents_last_seqs(args.work)
    print(f"agents' own last sequences at their clean stop: {sorted((k[0], v) for k, v in last_seqs.items())}")
    rows += verdict.undelivered(stored_highest(args.work), last_seqs)
    injected = sum(w.kind == "clock_step" for w in ledger)
    print(f"clock steps: {injected} injected (each forward then back), agents saw {steps}")
    if steps < injected:
        rows.append(("clock steps the agents saw", f"{injected} injected", f"{steps} seen"))
    thermal = thermal_readings(report)
    print("thermal readings in the report (fixture zone, every 5 s): "
          + ", ".join(f"{n} {thermal.get(n, 0)}" for n in sorted(procs_names())))
    for n in procs_names():
        if thermal.get(n, 0) == 0:
            rows.append((f"thermal records of {n}", "fixture read every 5 s", "none in the report"))
    for k, first in rss_first.items():
        r = verdict.rss_growth(first, rss_end.get(k, 0))
        if r:
            rows.append((f"{k} {r[0]}", r[1], r[2]))
    summary(faults, ledger, outages, boots, drops, rss_first, rss_end)
    if rows:
        print("\nCHAOS FAILED: what disagreed")
        print(f"  {'check':<44} {'ledger':<28} report")
        for r in rows:
            print(f"  {r[0]:<44} {r[1]:<28} {r[2]}")
        return 1
    print("\nchaos soak: PASS")
    return 0


def summary(faults, ledger, outages, boots, drops, rss_first, rss_end):
    kinds = {}
    for w in ledger:
        kinds[w.kind] = kinds.get(w.kind, 0) + 1
    print("\nfaults by kind: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
    missing = sorted(set(plan.KINDS) - set(kinds))
    if missing:
        print("kinds not injected (run too short): " + ", ".join(missing))
    req = [w for w in ledger if w.kind in verdict.REQUIRED]
    print(f"ledger: {len(req)} required interruption windows ({sum(len(w.directions) for w in req)} directions), "
          f"{sum((w.end - w.start) for w in req) / 1e9:.1f} s")
    print(f"report: {len(outages)} interruptions, {sum(o.end - o.start for o in outages) / 1e9:.1f} s down "
          f"(all directions)")
    stored = sum(n for _, n, _ in boots)
    print(f"records: {stored} stored over {len(boots)} agent boots, highest seqs sum "
          f"{sum(h for _, _, h in boots)}, dropped {drops}")
    print_side_by_side(ledger, outages)
    print("RSS kB (max of the baseline window, verdict.rss_baseline_window -> end): "
          + ", ".join(f"{k} {rss_first.get(k, 0)}->{rss_end.get(k, 0)}" for k in sorted(rss_end)))


def print_side_by_side(ledger, outages):
    print("\n| fault kind | ledger windows | directions | ledger down s (x dirs) | report interruptions | report down s |")
    print("|---|---|---|---|---|---|")
    for k, n, d, ls, ro, rs in verdict.side_by_side(ledger, outages, SLACK_NS):
        print(f"| {k} | {n} | {d} | {ls:.1f} | {ro} | {rs:.1f} |")


if __name__ == "__main__":
    sys.exit(main())
