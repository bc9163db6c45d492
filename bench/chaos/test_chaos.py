"""Unit tests of the chaos soak's pure parts: python3 -m unittest
discover -s bench/chaos (run by .ci/test)."""

import unittest

from plan import KINDS, plan
from verdict import Outage, Window, compare, records, rss_baseline_window, rss_growth, side_by_side, undelivered

S = 1_000_000_000


class PlanTest(unittest.TestCase):
    def test_same_seed_same_plan_other_seed_other_plan(self):
        self.assertEqual(plan(7, 600), plan(7, 600))
        self.assertNotEqual(plan(7, 600), plan(8, 600))

    def test_two_minutes_fit_every_kind_without_overlap(self):
        for seed in range(20):
            p = plan(seed, 120, warmup=15)
            self.assertEqual({f.kind for f in p}, set(KINDS), seed)
            for a, b in zip(p, p[1:]):
                self.assertLess(a.start + a.length, b.start, seed)
            self.assertLessEqual(p[-1].start + p[-1].length, 110)

    def test_link_faults_name_two_distinct_nodes(self):
        for f in plan(3, 3600):
            if f.peer >= 0:
                self.assertNotEqual(f.node, f.peer)
            lo, hi = KINDS[f.kind]
            self.assertTrue(lo <= f.length <= hi, f)


def both(a, b):
    return ((a, b), (b, a))


class CompareTest(unittest.TestCase):
    w = Window("carrier", 10 * S, 14 * S, both("n0", "n1"))

    def test_a_carrier_drop_seen_both_ways_agrees(self):
        got = [Outage("n0", "n1", "carrier", 10 * S, 14 * S + S // 20),
               Outage("n1", "n0", "both", 10 * S + S // 20, 14 * S)]
        self.assertEqual(compare([self.w], got, S // 10, 2 * S), [])

    def test_a_missing_direction_wrong_cause_and_stray_outage_disagree(self):
        got = [Outage("n0", "n1", "probe_loss", 10 * S, 14 * S),
               Outage("n2", "n0", "probe_loss", 50 * S, 51 * S)]
        rows = compare([self.w], got, S // 10, 2 * S)
        self.assertEqual(sum(r[0] == "carrier missing" for r in rows), 2, rows)
        self.assertEqual(sum(r[0] == "interruption not in the ledger" for r in rows), 2, rows)

    def test_the_ledgers_own_spread_widens_the_tolerance(self):
        # The commands took 30 ms in all: a report 120 ms long of a 100 ms
        # interval agrees, one 140 ms long does not.
        w = Window("carrier", 10 * S, 14 * S, both("n0", "n1"), 30 * S // 1000)
        near = [Outage(a, b, "carrier", 10 * S, 14 * S + 120 * S // 1000) for a, b in w.directions]
        self.assertEqual(compare([w], near, S // 10, 2 * S), [])
        far = [Outage(a, b, "carrier", 10 * S, 14 * S + 140 * S // 1000) for a, b in w.directions]
        self.assertEqual(len(compare([w], far, S // 10, 2 * S)), 2)

    def test_down_time_beyond_one_interval_disagrees(self):
        got = [Outage(a, b, "carrier", 10 * S, 15 * S) for a, b in self.w.directions]
        rows = compare([self.w], got, S // 10, 2 * S)
        self.assertEqual([r[0] for r in rows], ["carrier down time n0->n1", "carrier down time n1->n0"])

    def test_loss_burst_outages_allowed_not_required(self):
        w = Window("loss_burst", 10 * S, 14 * S, both("n0", "n1"))
        self.assertEqual(compare([w], [], S // 10, S), [])
        self.assertEqual(compare([w], [Outage("n0", "n1", "probe_loss", 11 * S, 12 * S)], S // 10, S), [])

    def test_collector_faults_allow_no_outage(self):
        w = Window("collector_kill", 10 * S, 14 * S, both("n0", "n1"))
        rows = compare([w], [Outage("n0", "n1", "probe_loss", 11 * S, 12 * S)], S // 10, S)
        self.assertEqual(len(rows), 1)


class RecordsTest(unittest.TestCase):
    def test_every_sequence_number_stored_or_dropped(self):
        self.assertEqual(records([("n0", 10, 10), ("n1", 5, 5)], 0), [])
        self.assertEqual(records([("n0", 8, 10)], 2), [])
        self.assertEqual(len(records([("n0", 8, 10)], 0)), 1)

    def test_rss_within_ten_percent(self):
        self.assertIsNone(rss_growth(1000, 1100))
        self.assertIsNotNone(rss_growth(1000, 1101))

    def test_rss_baseline_is_the_first_third_or_the_first_minute(self):
        self.assertEqual(rss_baseline_window(3600, 15), (15, 1200))
        self.assertEqual(rss_baseline_window(120, 15), (15, 75))


if __name__ == "__main__":
    unittest.main()


class SideBySideTest(unittest.TestCase):
    def test_each_outage_counts_under_its_window_and_strays_apart(self):
        ws = [Window("carrier", 10 * S, 14 * S, both("n0", "n1")),
              Window("collector_kill", 20 * S, 25 * S, ())]
        os_ = [Outage("n0", "n1", "carrier", 10 * S, 14 * S),
               Outage("n1", "n0", "both", 10 * S, 13 * S),
               Outage("n2", "n0", "probe_loss", 21 * S, 22 * S)]
        self.assertEqual(side_by_side(ws, os_, S), [
            ("(none)", 0, 0, 0.0, 1, 1.0),
            ("carrier", 1, 2, 8.0, 2, 7.0),
            ("collector_kill", 1, 0, 0.0, 0, 0.0),
        ])


class UndeliveredTest(unittest.TestCase):
    def test_a_tail_the_agent_wrote_but_the_store_lacks_is_reported(self):
        last = {("n0", "aa"): 10, ("n1", "bb"): 7}
        self.assertEqual(undelivered({("n0", "aa"): 10, ("n1", "bb"): 7}, last), [])
        rows = undelivered({("n0", "aa"): 10, ("n1", "bb"): 5}, last)
        self.assertEqual(rows, [("records of n1 boot bb not stored", "last_seq 7", "highest stored 5")])
        self.assertEqual(len(undelivered({}, {("n2", "cc"): 1})), 1)
