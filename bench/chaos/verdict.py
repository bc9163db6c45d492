"""The chaos soak's verdict: its own ledger of injections against the
soak report's interruptions and the store's record counts. Pure: data in,
a list of disagreements out (empty is a pass).

Which faults must show as interruptions, and with which cause:
- carrier down on a link: both directions, cause carrier (or both);
- nftables drop of the probes with carrier up: both directions, probe_loss;
- agent kill -9: its peers' directions towards it, probe_loss (its
  reflector is gone until the restart);
- a loss burst drops a share of the packets: an outage during it is
  allowed (three probes in a row may be lost) but not required.
Every other fault (collector kill and hang, full store, full spool, cut
management path) must show none: the agents spool and deliver later.
"""

from dataclasses import dataclass

REQUIRED = {
    "carrier": ("carrier", "both"),
    "nft_drop": ("probe_loss", "both"),
    "agent_kill": ("probe_loss",),
}
ALLOWED = {"loss_burst": ("probe_loss",)}


@dataclass(frozen=True)
class Window:
    """One executed fault, unix ns; `directions` the (node, peer) pairs
    it interrupts."""

    kind: str
    start: int
    end: int
    directions: tuple
    # How long the commands that set and cleared the fault took, summed:
    # it took hold somewhere within the first and ended within the second,
    # so the ledger's own length is known only to within this.
    spread: int = 0


@dataclass(frozen=True)
class Outage:
    node: str
    peer: str
    cause: str
    start: int
    end: int


def _overlaps(o, w, slack):
    return o.start <= w.end + slack and o.end >= w.start - slack


def _owner(o, windows, slack):
    for w in windows:
        causes = REQUIRED.get(w.kind, ()) + ALLOWED.get(w.kind, ())
        if (o.node, o.peer) in w.directions and o.cause in causes and _overlaps(o, w, slack):
            return w
    return None


def compare(windows, outages, interval_ns, slack_ns):
    """Disagreements: (what, ledger, report) rows. `slack_ns` is how far
    an outage may start or end outside its window (the detection delay of
    three missed probes); durations of carrier and nftables windows must
    equal the ledger's within `interval_ns` (the probes' own resolution)
    plus the window's `spread` (the ledger's)."""
    rows = []
    for o in outages:
        if _owner(o, windows, slack_ns) is None:
            rows.append(("interruption not in the ledger", "-", f"{o.node}->{o.peer} {o.cause} at {o.start}"))
    for w in windows:
        if w.kind not in REQUIRED:
            continue
        for d in w.directions:
            mine = [o for o in outages if (o.node, o.peer) == d and _owner(o, [w], slack_ns) is w]
            if not mine:
                rows.append((f"{w.kind} missing", f"{d[0]}->{d[1]} at {w.start}", "no interruption"))
                continue
            if w.kind == "agent_kill":
                continue  # the restart's end is the agent's, not the ledger's
            down = sum(o.end - o.start for o in mine)
            if abs(down - (w.end - w.start)) > interval_ns + w.spread:
                rows.append((f"{w.kind} down time {d[0]}->{d[1]}", f"{(w.end - w.start) / 1e9:.3f} s", f"{down / 1e9:.3f} s"))
    return rows


def side_by_side(windows, outages, slack_ns):
    """Per fault kind, the ledger beside the report: (kind, windows,
    directions, ledger seconds summed over directions, interruptions the
    report gives that kind, their seconds). Outages no window owns are one
    last row, kind "(none)". For the results table; `compare` judges."""
    rows = {}
    for w in windows:
        r = rows.setdefault(w.kind, [0, 0, 0, 0, 0])
        r[0] += 1
        r[1] += len(w.directions)
        r[2] += (w.end - w.start) * len(w.directions)
    for o in outages:
        w = _owner(o, windows, slack_ns)
        r = rows.setdefault(w.kind if w else "(none)", [0, 0, 0, 0, 0])
        r[3] += 1
        r[4] += o.end - o.start
    return [(k, r[0], r[1], r[2] / 1e9, r[3], r[4] / 1e9) for k, r in sorted(rows.items())]


def rss_baseline_window(seconds, warmup):
    """(from, to) seconds into the run over which each process's largest
    RSS is its baseline: the first third of the run, at least the first
    minute after warm-up. Not the first minute alone: a collector
    restarted on a store of thousands of records (its /metrics rebuild)
    and catching up the agents' spools leaves glibc's per-thread arenas
    holding freed memory (60-min run, 25 min in: 7.0 MB of arenas, 1.7 MB in use,
    1.0 MB of it SQLite's), reached at the first such restart and not
    before; the check is that the rest of the run adds no more than 10 %
    to that working size, which a leak per restart, stream or fault
    would."""
    return warmup, max(warmup + 60, seconds / 3)


def rss_growth(first, last, limit=0.10):
    """A disagreement row when `last` RSS exceeds `first` by more than
    `limit`, else None."""
    if first > 0 and last > first * (1 + limit):
        return ("RSS growth", f"{first} kB", f"{last} kB")
    return None


def records(boots, dropped):
    """Records stored exactly once: per (node, boot) the stored count must
    equal the highest sequence number (sequence numbers start at 1 and the
    store keeps (boot, seq) unique), less what the agents counted dropped."""
    rows = []
    missing = sum(hi - n for _, n, hi in boots)
    if missing != dropped:
        rows.append(("records lost (not stored, not dropped)", f"{dropped} dropped", f"{missing} missing"))
    return rows


def undelivered(highest, last_seqs):
    """Rows for boots whose agent said at a clean stop that it wrote up
    to `last_seqs[(node, boot_id)]` but whose highest stored sequence,
    `highest[(node, boot_id)]`, is lower: a tail never stored, which
    `records` cannot see (it counts up to the highest *stored* sequence)."""
    rows = []
    for key, last in sorted(last_seqs.items()):
        got = highest.get(key, 0)
        if got < last:
            rows.append((f"records of {key[0]} boot {key[1][:8]} not stored", f"last_seq {last}", f"highest stored {got}"))
    return rows

