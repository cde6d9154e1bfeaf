"""The transactional checker (txn_chaos.check_txn) on hand-made histories: a clean one passes,
and each anomaly it must count is counted. Runs without a cluster."""

import txn_chaos as T


def tx(tid, no, values, outcome, gen=1):
    return {"tid": tid, "no": no, "outcome": outcome,
            "values": [(t, p, f"{tid}:{gen}:{no}:{i}") for i, (t, p) in enumerate(values)]}


def history():
    txns = [tx("a", 1, [("txa", 0), ("txb", 1)], "committed"),
            tx("a", 2, [("txa", 0)], "aborted"),
            tx("b", 1, [("txa", 0), ("txa", 1)], "committed"),
            tx("b", 2, [("txb", 1)], "indeterminate")]
    final = {("txa", 0): [(0, "a:1:1:0"), (3, "b:1:1:0")], ("txa", 1): [(0, "b:1:1:1")],
             ("txb", 1): [(0, "a:1:1:1")]}
    observed = {("txa", 0): [(0, "a:1:1:0"), (3, "b:1:1:0")], ("txb", 1): [(0, "a:1:1:1")]}
    return txns, final, observed, ["in-0", "in-1"], ["out-0", "out-1"]


def anomalies(*args):
    return {k: v for k, v in T.check_txn(*args).items() if v}


def test_clean_history_passes():
    assert anomalies(*history()) == {}


def test_lost_committed_value():
    txns, final, obs, fed, out = history()
    final[("txa", 1)] = []
    assert set(anomalies(txns, final, {}, fed, out)) == {"lost"}


def test_aborted_value_visible():
    txns, final, obs, fed, out = history()
    final[("txa", 0)].insert(1, (1, "a:1:2:0"))
    assert set(anomalies(txns, final, {}, fed, out)) == {"aborted_read"}


def test_aborted_value_seen_by_an_observer():
    txns, final, obs, fed, out = history()
    obs[("txa", 0)].insert(1, (1, "a:1:2:0"))
    assert set(anomalies(txns, final, obs, fed, out)) == {"aborted_read"}


def test_duplicate():
    txns, final, obs, fed, out = history()
    final[("txa", 0)].append((5, "a:1:1:0"))
    assert "duplicated" in anomalies(txns, final, {}, fed, out)


def test_indeterminate_transaction_half_visible_is_torn():
    txns, final, obs, fed, out = history()
    txns[3] = tx("b", 2, [("txb", 1), ("txb", 2)], "indeterminate")
    final[("txb", 1)].append((4, "b:1:2:0"))
    assert set(anomalies(txns, final, obs, fed, out)) == {"torn"}


def test_observer_skipping_a_committed_record():
    txns, final, obs, fed, out = history()
    obs[("txa", 0)] = [(3, "b:1:1:0")]
    assert set(anomalies(txns, final, obs, fed, out)) == {"poll_skip"}


def test_out_of_order_within_a_producer():
    txns, final, obs, fed, out = history()
    txns.append(tx("a", 3, [("txa", 0)], "committed"))
    final[("txa", 0)] = [(0, "a:1:3:0"), (2, "a:1:1:0"), (3, "b:1:1:0")]
    assert set(anomalies(txns, final, {}, fed, out)) == {"out_of_order"}


def test_pipeline_lost_and_duplicated():
    txns, final, obs, fed, out = history()
    assert set(anomalies(txns, final, obs, fed, ["out-0", "out-0"])) == {"pipeline_lost", "pipeline_duplicated"}
