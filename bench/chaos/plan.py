"""The chaos soak's seeded schedule. Pure: a seed and a length in, a list
of faults out, the same list for the same seed on any machine (Python's
Mersenne Twister is specified), so a failing run is reproduced by its seed.

Every kind of fault appears at least once (a short run would otherwise
prove nothing about the kinds it happened not to draw); faults never
overlap, so each interruption in the report has exactly one cause in the
ledger and the comparison stays exact.
"""

import random
from dataclasses import dataclass

# Kind -> (shortest, longest) length in seconds. The hang is 5-30 s as
# issue 27 asks; the others are long enough for three missed probes (an
# outage at 10 Hz) and short enough to leave room for many faults.
KINDS = {
    "collector_kill": (3, 6),
    "agent_kill": (3, 6),
    "collector_hang": (5, 30),
    "carrier": (2, 6),
    "nft_drop": (2, 6),
    "loss_burst": (3, 8),
    "store_full": (5, 12),
    "spool_full": (5, 12),
    "mgmt_cut": (5, 15),
    "clock_step": (5, 15),
}

# Quiet time after a fault before the next one, s: the agents' outage
# ends and the collector's restart settle before anything else happens.
GAP = (3, 10)



@dataclass(frozen=True)
class Fault:
    start: float
    kind: str
    length: float
    node: int  # agent index (0..2), the collector's faults use 0
    peer: int  # the other end for link faults, else -1


def plan(seed, seconds, warmup=20.0, nodes=3):
    """Faults from `warmup` until 10 s before `seconds`, every kind first
    in a shuffled order, then random kinds. Lengths and gaps shrink toward
    their minimum in runs shorter than 10 minutes, so a 2-minute run still
    fits every kind."""
    rng = random.Random(seed)
    scale = min(1.0, seconds / 600.0)
    kinds = list(KINDS)
    rng.shuffle(kinds)
    out, t = [], warmup
    while True:
        kind = kinds.pop(0) if kinds else rng.choice(sorted(KINDS))
        lo, hi = KINDS[kind]
        length = round(lo + (hi - lo) * rng.random() * scale, 1)
        if t + length + 10 > seconds:
            break
        node = rng.randrange(nodes)
        peer = (node + 1 + rng.randrange(nodes - 1)) % nodes
        link = kind in ("carrier", "nft_drop", "loss_burst")
        out.append(Fault(round(t, 1), kind, length, node, peer if link else -1))
        t += length + GAP[0] + (GAP[1] - GAP[0]) * rng.random() * scale
    return out
