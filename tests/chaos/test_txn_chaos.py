"""The transactional workload under faults (issue 24): transactional producers across two
topics committing and aborting, a consume-transform-produce pipeline whose group rebalances, and
read_committed observers, while brokers are SIGKILLed and SIGSTOPped (the coordinators' brokers
and the controller among them) and the cluster's ZooKeeper restarts (shorter and longer than the
session timeout). The checker (txn_chaos.check_txn) counts lost, duplicated,
aborted-read, torn, poll-skip and out-of-order values and pipeline inputs lost or duplicated;
every count must be 0. Client fatal errors make a transaction indeterminate (all or nothing),
never a proof. GREGOR_SOAK=1 runs more rounds; GREGOR_CHAOS_SEED picks the fault sequence."""

import os
import random
import time

import pytest

import gregor_harness as H

pytest.importorskip("confluent_kafka")
import chaos_lib as C  # noqa: E402
import txn_chaos as T  # noqa: E402


def test_transactions_under_faults(request, cluster_factory, dedicated_zk):
    seed = int(os.environ.get("GREGOR_CHAOS_SEED", "1"))
    rounds = 14 if C.SOAK else 5
    zk = H.kazoo_client(dedicated_zk.hosts)
    try:
        zk.ensure_path("/txchaos")
    finally:
        H.close_kazoo(zk)
    cluster = cluster_factory(dedicated_zk.hosts + "/txchaos", n=3, config=T.CLUSTER_CONFIG)
    for t in T.TOPICS + (T.PIPE_IN, T.PIPE_OUT):
        C.create_topic(cluster, t, T.PARTITIONS, rf=3, min_isr=2)
    t0 = time.monotonic()
    wl = T.TxnWorkload(cluster, producers=3, seed=seed).start()
    try:
        H.wait_for(lambda: all(any(tx["outcome"] == "committed" for tx in p.txns) for p in wl.producers)
                   or wl.crashed, 90, "a first commit by every transactional producer")
        H.wait_for(lambda: all(w.processed for w in wl.workers) or wl.crashed, 90,
                   "both pipeline workers processing input")
    except AssertionError as e:
        wl.stopping.set()
        wl.pipe_done.set()
        raise AssertionError(f"{e}; {wl.describe()}") from None
    nem = T.TxnNemesis(cluster, random.Random(seed), zk_server=dedicated_zk)
    tids = [p.tid for p in wl.producers] + [f"pipe-{w.name}" for w in wl.workers]
    # every kind once (shuffled), then random ones
    kinds = list(nem.KINDS) + ["zk-restart"]
    random.Random(seed).shuffle(kinds)
    try:
        for r in range(rounds):
            nem.round(tids, kinds[r] if r < len(kinds) else None)
            if r == 0:
                wl.workers[0].restart.set()  # a rebalance of the pipeline's group
            time.sleep(1.0)
    finally:
        alive = wl.stop()
    txns = [tx for p in wl.producers for tx in p.txns]
    outcomes = {k: sum(tx["outcome"] == k for tx in txns) for k in ("committed", "aborted", "indeterminate")}
    fatal = [f for p in wl.producers for f in p.fatal] + [f for w in wl.workers for f in w.fatal]
    print(f"{request.node.name}: seed {seed}, faults {nem.events}; transactions {outcomes}; pipeline "
          f"inputs {len(wl.fed)} acknowledged ({len(wl.feed_failed)} failed), processed "
          f"{[w.processed for w in wl.workers]}; client errors (indeterminate) {fatal[:10]}; observer "
          f"errors {wl.observer.errors[:5]}; {time.monotonic() - t0:.0f}s")
    assert wl.crashed == [], wl.crashed
    assert alive == [], f"threads still running: {alive}"
    assert outcomes["committed"] > 0 and outcomes["aborted"] > 0
    bootstrap = C.bootstrap(cluster, all_brokers=True)
    final = T.read_committed_all(bootstrap, T.TOPICS)
    pipe_out = [v for recs in T.read_committed_all(bootstrap, (T.PIPE_OUT,)).values() for _, v in recs]
    assert wl.fed and pipe_out
    bad = T.check_txn(txns, final, wl.observer.seen, wl.fed, pipe_out)
    print(f"{request.node.name}: anomalies " + ", ".join(f"{k} {len(v)}" for k, v in bad.items()))
    if any(bad.values()):
        T.explain(bad, txns, wl, nem, cluster, final)
    assert not any(bad.values()), {k: v[:5] for k, v in bad.items() if v}
