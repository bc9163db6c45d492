#!/usr/bin/env python3
"""The drop loop of bench/detect.sh, run inside the prober's namespace.

N times: an nftables rule in the reflector's namespace drops its STAMP
input while the carrier stays up; the time from the rule's insertion to
boltwatch_outages_total{peer="b"} incrementing on the agent's own /metrics
is taken; the rule goes, the outage ends, the next drop waits.

Each drop is split into stages from the agent's debug log (wall-clock
stamps of tracing, microseconds; BOLTWATCH_LOG must enable
boltwatch_agent::stamp::session and boltwatch_agent::run::outage_tracker):
  nft     the `nft add rule` process, start to exit (the rule is in force
          somewhere inside it: detection is given from both ends)
  first   send time of the first probe the rule caught (its overdue line
          stamp minus the probe's age, which is on the agent's timeline)
  k-th    send and overdue line of the k-th (k = 3) caught probe: the
          session called it late (late bound + the thread's wake-up)
  emit    the outage tracker emitted the start record
  seen    the first scrape that showed it (its start and its end)
and the late bound in force at each drop (its last move before).
Usage: detect-drops.py DROPS NS_B LOG [METRICS_URL]
"""
import re
import statistics
import subprocess
import sys
import time
import urllib.request
from datetime import datetime, timezone

drops, ns_b, log = int(sys.argv[1]), sys.argv[2], sys.argv[3]
url = sys.argv[4] if len(sys.argv) > 4 else "http://127.0.0.1:9472/metrics"
K = 3
STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z")


def metric(text, name):
    m = re.search(r"^" + name + r'\{[^}]*peer="b"[^}]*\} (\S+)$', text, re.M)
    return float(m.group(1)) if m else None


def scrape():
    with urllib.request.urlopen(url, timeout=2) as r:
        return r.read().decode()


def log_ns(line):
    """Wall-clock ns of a tracing line (microsecond stamps)."""
    m = STAMP.match(line)
    if not m:
        return None
    whole, frac = m.group(1).split(".")
    dt = datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
    return int(dt.timestamp()) * 10**9 + int(frac.ljust(9, "0")[:9])


def events_since(t_ns):
    """(overdue [(logged, sent)], emitted [logged]) logged at or after t_ns."""
    overdue, emitted, bound = [], [], ["timeout"]
    with open(log) as f:
        for line in f:
            t = log_ns(line)
            if t is None:
                continue
            if t < t_ns:
                if "STAMP late bound moved" in line:
                    bound.append(line.split("bound=")[1].strip())
                continue
            if "STAMP probe overdue" in line:
                # The age is on the agent's timeline, which may sit a
                # little off the wall clock: the send is taken back from
                # the line's own stamp.
                age = re.search(r"age_ns=(\d+)", line)
                overdue.append((t, t - int(age.group(1)) if age else None))
            elif "outage record emitted" in line and "ends=false" in line:
                emitted.append(t)
    return overdue, emitted, bound[-1]


def wait_for_probes():
    deadline = time.monotonic() + 60
    while True:
        try:
            if (metric(scrape(), "boltwatch_probe_received_total") or 0) > 300:
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            sys.exit("detect: the agent never probed its peer")
        time.sleep(0.2)


def one_drop(i, nft):
    text = scrape()
    before = metric(text, "boltwatch_outages_total") or 0
    # Outage seconds grow when an outage ends: the end of this one, which
    # may come before the rule is even flushed (a reply queued behind it).
    ended = metric(text, "boltwatch_outage_seconds_total") or 0
    t_nft = time.time_ns()
    subprocess.run(nft + ["add rule inet bwdetect input udp dport 862 drop"], check=True)
    t_nft_done = time.time_ns()
    scrapes = 0
    while True:
        t_scrape = time.time_ns()
        n = metric(scrape(), "boltwatch_outages_total") or 0
        scrapes += 1
        if n > before:
            break
        if time.time_ns() - t_nft > 5 * 10**9:
            sys.exit(f"detect: drop {i}: no outage in 5 s")
        time.sleep(0.001)
    t_seen = time.time_ns()
    subprocess.run(nft + ["flush chain inet bwdetect input"], check=True)
    time.sleep(0.05)  # let the agent log what it saw
    overdue, emitted, bound = events_since(t_nft - 50 * 10**6)
    # Probes the rule caught were sent after it went in (2 ms of slack
    # for the timeline's offset from the wall clock).
    overdue = [o for o in overdue if o[1] is not None and o[1] >= t_nft - 2 * 10**6]
    first = overdue[0][1] if overdue else None
    late_k = overdue[K - 1][0] if len(overdue) >= K else None
    sent_k = overdue[K - 1][1] if len(overdue) >= K else None
    emit = emitted[0] if emitted else None
    # The outage ends at the next reply; let the late bound see the link
    # again before the next drop.
    deadline = time.monotonic() + 10
    while (metric(scrape(), "boltwatch_outage_seconds_total") or 0) == ended:
        if time.monotonic() > deadline:
            sys.exit(f"detect: drop {i}: the outage did not end in 10 s")
        time.sleep(0.01)
    time.sleep(2)
    return dict(nft=t_nft, nft_done=t_nft_done, first=first, late_k=late_k, emit=emit,
                scrape=t_scrape, seen=t_seen, scrapes=scrapes, bound=bound,
                sent_k=sent_k)


def ms(a, b):
    return (b - a) / 1e6 if a is not None and b is not None else float("nan")


def summary(name, xs):
    xs = sorted(x for x in xs if x == x)
    if not xs:
        return f"{name}: none"
    return f"{name}: median {statistics.median(xs):.1f} ms, worst {xs[-1]:.1f} ms"


def main():
    wait_for_probes()
    nft = ["ip", "netns", "exec", ns_b, "nft"]
    runs = []
    for i in range(drops):
        runs.append(one_drop(i, nft))
        print(f"detect: drop {i}: {ms(runs[-1]['nft'], runs[-1]['seen']):.1f} ms", flush=True)
    cols = [
        ("nft start->seen", lambda r: ms(r["nft"], r["seen"])),
        ("nft exit->seen", lambda r: ms(r["nft_done"], r["seen"])),
        ("nft process", lambda r: ms(r["nft"], r["nft_done"])),
        ("nft start->first caught send", lambda r: ms(r["nft"], r["first"])),
        ("first caught send->k-th send", lambda r: ms(r["first"], r["sent_k"])),
        ("k-th send->k-th late (bound + wake-up)", lambda r: ms(r["sent_k"], r["late_k"])),
        ("k-th late->emitted", lambda r: ms(r["late_k"], r["emit"])),
        ("emitted->scrape start", lambda r: ms(r["emit"], r["scrape"])),
        ("seeing scrape", lambda r: ms(r["scrape"], r["seen"])),
        ("first caught send->seen", lambda r: ms(r["first"], r["seen"])),
    ]
    print(f"detect: {drops} drops with carrier up at 100 Hz "
          "(target 50 / 100 ms; BFD software 150 ms, hardware 30 ms)")
    for name, f in cols:
        print("detect:   " + summary(name, [f(r) for r in runs]))
    print("detect: each nft start->seen (ms): "
          + " ".join(f"{x:.1f}" for x in sorted(ms(r["nft"], r["seen"]) for r in runs)))
    print("detect: late bound at each drop: " + " ".join(r["bound"] for r in runs))
    print("detect: scrapes per drop: "
          + " ".join(str(r["scrapes"]) for r in runs))


main()
