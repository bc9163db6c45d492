"""The ledger beside the report, per fault kind, for a finished run:
  sidebyside.py REPORT.json LEDGER.json
or, for a run whose ledger was not kept, the ledger rebuilt from its
seeded plan (windows as planned, from t0 = unix seconds the driver's
clock started, to within the driver's 0.2 s polling):
  sidebyside.py REPORT.json --seed S --minutes M --t0 T
"""

import argparse
import json

import driver
import plan
import verdict


def planned(seed, minutes, t0):
    out = []
    for f in plan.plan(seed, minutes * 60, warmup=driver.WARMUP):
        start = int((t0 + f.start) * 1e9)
        out.append(verdict.Window(f.kind, start, start + int(f.length * 1e9), driver.directions(f)))
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("report")
    p.add_argument("ledger", nargs="?")
    p.add_argument("--seed", type=int)
    p.add_argument("--minutes", type=float)
    p.add_argument("--t0", type=float)
    a = p.parse_args()
    with open(a.report) as f:
        r = json.load(f)
    outages = [verdict.Outage(o["node"], o["peer"], o["cause"], o["start_unix_ns"], o["end_unix_ns"])
               for o in driver.find_outages(r) if o["cause"] != "service"]
    if a.ledger:
        with open(a.ledger) as f:
            ledger = [verdict.Window(w["kind"], w["start"], w["end"], tuple(map(tuple, w["directions"])),
                                     w.get("spread", 0))
                      for w in json.load(f)["windows"]]
    else:
        ledger = planned(a.seed, a.minutes, a.t0)
    driver.print_side_by_side(ledger, outages)
    for row in verdict.compare(ledger, outages, driver.INTERVAL_NS, driver.SLACK_NS):
        print("disagrees:", *row)


if __name__ == "__main__":
    main()
