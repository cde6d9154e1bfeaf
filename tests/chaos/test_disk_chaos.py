"""Disk-fault chaos (issue 23's "Proof we expect"; docs/CHAOS.md "Disk faults"): 3 brokers under
the disk-fault shim (tests/chaos/disk_faults.py), an acks=all idempotent workload on an RF 3,
min.insync.replicas=2 topic, plus a compacted topic (keys overwritten and deleted) and a
retention topic, both RF 3 too, and transactions: txn_chaos.TxnWorkload without its pipeline
(three transactional producers committing and aborting unique values, a read_committed observer). Round after round one broker suffers one of: disk full (broker 3's
log dir is a small tmpfs, filled up), EIO on every write, EIO on every fsync, power loss at a
random moment (SIGKILL, then the log dir rolled back to what was fsynced). After each fault the
broker is healed (fault removed, restarted) and the cluster must heal. At the end:
  - 0 acknowledged records lost, 0 duplicates, replicas converged (chaos_lib.check);
  - no broker kept serving from a dir it could not write: a broker whose only log dir failed
    (EIO, ENOSPC) halts (Kafka's "Shutdown broker because all log dirs ... have failed");
  - the compacted topic shows, per key, its last acknowledged operation (or one sent after it),
    so no deleted key is visible after compaction; its and the retention topic's replicas hold
    the same value at every offset they share;
  - after every round and at the end, txn_chaos.check_txn with the producers held between
    transactions: 0 committed values lost, 0 duplicated, 0 aborted values visible to
    read_committed, no torn transaction. Per fault kind every other fault hits the broker of a
    transaction coordinator (the leader of a transactional id's __transaction_state partition).
Kafka relies on replication, not on fsync per write: a power-lost broker recovers by truncation
to the leader epoch (KIP-101) and re-fetches.

A power loss of the broker that is both the active controller and a partition leader lost
acknowledged records before the fix in broker/unclean_restart.c (test_power_loss_of_the_controller
pins it): the restarted broker closed its previous ZooKeeper session and registered at once, the
next controller's failover read the new registration as the old broker, kept it in its ISRs as
leader, and the followers truncated to its shorter log. Kafka's restart gap (the old session must
expire first) is now kept: a restarted broker registers only once the controller took its
previous run out of the ISRs.

CI form: one round of each fault (about a minute); GREGOR_SOAK=1: 50 power-loss points and 10
rounds of each other fault. GREGOR_CHAOS_SEED picks the sequence (printed)."""

import glob
import os
import random
import struct
import threading
import time

import pytest

import gregor_harness as H

pytest.importorskip("confluent_kafka")
import chaos_lib as C  # noqa: E402
import disk_faults as D  # noqa: E402
import txn_chaos as T  # noqa: E402
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

PARTITIONS = 3
KEYS = 40
TXN_STATE_PARTITIONS = 3  # each broker leads about one: any victim is likely a coordinator

CONFIG = dict(C.CLUSTER_CONFIG, **{
    "log.index.size.max.bytes": "65536",   # small preallocated indexes: the tmpfs holds data
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "3",
    "log.cleaner.backoff.ms": "200",
    "log.retention.check.interval.ms": "500",
    "log.segment.bytes": "65536",
    "transaction.state.log.num.partitions": str(TXN_STATE_PARTITIONS),
})
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "3000", "min.cleanable.dirty.ratio": "0.01",
           "delete.retention.ms": "200", "min.insync.replicas": "2"}
RETENTION = {"retention.ms": "2000", "segment.bytes": "3000", "min.insync.replicas": "2"}


@pytest.fixture
def disk_cluster(cluster_factory, zk_connect, tmp_path):
    if not os.path.exists(D.SHIM):
        pytest.skip(f"{D.SHIM} not built")
    cluster = cluster_factory(zk_connect, n=3, config=CONFIG, start=False)
    faults = D.DiskFaults(cluster, str(tmp_path))
    try:
        faults.mount_tmpfs(cluster[3], 48)
    except Exception as e:  # no mount permission
        pytest.skip(f"cannot mount a tmpfs: {e}")
    try:
        for b in cluster.brokers.values():
            faults.start(b)
        yield cluster, faults
    finally:
        cluster.kill_all()
        faults.unmount_all()


class KeyedWriter:
    """One idempotent acks=all producer overwriting and deleting KEYS keys of a compacted topic
    (and writing a retention topic): per key, the ops sent in order and the last acknowledged."""

    def __init__(self, cluster, compacted, retained, rng):
        self.cluster, self.compacted, self.retained, self.rng = cluster, compacted, retained, rng
        self.sent = {}    # key -> [value or None (tombstone)] in send order
        self.acked = {}   # key -> index into sent[key] of the last acknowledged op
        self.lock = threading.Lock()
        self.stop_ev = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="keyed-writer")

    def _run(self):
        p = Producer({"bootstrap.servers": C.bootstrap(self.cluster, all_brokers=True), "acks": "all",
                      "enable.idempotence": True, "linger.ms": 5, "message.timeout.ms": 60000})
        seq = 0
        while not self.stop_ev.is_set():
            k = f"k{self.rng.randrange(KEYS)}"
            v = None if self.rng.random() < 0.2 else f"{k}-{seq}".encode()
            with self.lock:
                ops = self.sent.setdefault(k, [])
                ops.append(v)
                i = len(ops) - 1

            def cb(err, msg, k=k, i=i):
                if err is None:
                    with self.lock:
                        self.acked[k] = max(self.acked.get(k, -1), i)
            try:
                p.produce(self.compacted, key=k.encode(), value=v, on_delivery=cb)
                p.produce(self.retained, value=f"r-{seq}".encode())
            except BufferError:
                p.poll(0.1)
            seq += 1
            p.poll(0)
            time.sleep(0.01)
        p.flush(60)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.stop_ev.set()
        self.thread.join(90)


def read_all(cluster, topic, p=0, timeout=60.0):
    """[(offset, key, value)] of topic-p from its leader, up to the high watermark."""
    c = Consumer({"bootstrap.servers": C.bootstrap(cluster), "group.id": f"read-{topic}-{time.time()}",
                  "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=20)
        c.assign([TopicPartition(topic, p, lo)])
        out, deadline = [], time.time() + timeout
        while time.time() < deadline and (not out or out[-1][0] < hi - 1) and hi > lo:
            m = c.poll(0.5)
            if m is not None and not m.error():
                out.append((m.offset(), m.key(), m.value()))
        return out
    finally:
        c.close()


def shared_offsets_agree(cluster, topic, problems):
    """Every offset two replicas both hold has the same value (compaction and retention run on
    each replica by itself, so the sets of offsets may differ)."""
    for p, replicas in C.assignment(cluster, topic).items():
        logs = {r: C.read_replica_log(cluster[r].logdir, topic, p) for r in replicas}
        for r, (_, probs) in logs.items():
            problems.extend(f"{topic}-{p} replica {r}: {x}" for x in probs)
        rs = list(logs)
        for i, a in enumerate(rs):
            for b in rs[i + 1:]:
                ra, rb = logs[a][0], logs[b][0]
                bad = [o for o in set(ra) & set(rb) if ra[o] != rb[o]]
                if bad:
                    problems.append(f"{topic}-{p}: replicas {a} and {b} differ at offsets {sorted(bad)[:5]}")


def state_versions(cluster, topics, victim):
    """{(topic, p): zkVersion of its state} for the partitions with a replica on victim."""
    out = {}
    for t in topics:
        for p, replicas in C.assignment(cluster, t).items():
            if victim in replicas:
                _, stat = cluster.get_json(f"/brokers/topics/{t}/partitions/{p}/state")
                out[(t, p)] = stat.version if stat else -1
    return out


def run_fault(cluster, faults, topics, kind, victim, rng, problems, log):
    """One fault on broker `victim`, healed: the fault removed, the broker restarted, and the
    cluster healed -- which includes the controller having handled the broker's death (every
    partition it holds had its state rewritten since: it left the ISR), so rounds never overlap."""
    b = cluster[victim]
    before = state_versions(cluster, topics, victim)
    t0 = time.monotonic()
    if kind == "power-loss":
        time.sleep(rng.uniform(0, 1.5))  # a random point of the broker's work
        r = faults.power_loss(b)
        log.append(f"power-loss b{victim}: {r}")
    else:
        if kind == "disk-full":
            faults.fill(b)
        else:
            faults.set_fault(b, kind, True)
        try:
            H.wait_for(lambda: not b.running(), 40, f"broker {victim} halting after {kind}", interval=0.2)
        except AssertionError:
            problems.append(f"broker {victim} kept running {kind} for 40 s (serving from a dir it cannot write)")
            b.kill()
        if kind == "disk-full":
            faults.unfill(b)
        else:
            faults.set_fault(b, kind, False)
        faults.settle(b)
        log.append(f"{kind} b{victim}: halted after {time.monotonic() - t0:.1f}s")
    faults.start(b)
    H.wait_for(lambda: all(v > before[k] for k, v in state_versions(cluster, topics, victim).items()), 90,
               f"the controller handling broker {victim}'s {kind}", interval=0.2)
    for t in topics:
        C.wait_healed(cluster, t, 90)


def coordinator_of(cluster, tid):
    """The broker leading tid's __transaction_state partition (its transaction coordinator)."""
    return C.leader_of(cluster, "__transaction_state", T.txn_state_partition(tid, TXN_STATE_PARTITIONS))


def check_transactions(cluster, tw, label, problems, counts):
    """Holds the transactional producers between transactions, reads every committed value of
    T.TOPICS (read_committed, offset 0 to the high watermark) and runs T.check_txn on every
    transaction so far and on what the observer saw: 0 committed values lost, 0 duplicated, 0
    aborted values visible, no torn transaction (an indeterminate one is all or nothing)."""
    stuck = tw.quiesce()
    try:
        if stuck:
            problems.append(f"{label}: transactional producers {stuck} never finished a transaction")
            return
        txns = tw.txns()
        try:
            final = T.read_committed_all(C.bootstrap(cluster, all_brokers=True), T.TOPICS)
        except AssertionError as e:
            problems.append(f"{label}: {e}")
            return
        observed = {k: list(v) for k, v in tw.observer.seen.items()}
        bad = T.check_txn(txns, final, observed, [], [])
        for k in ("committed", "aborted", "indeterminate"):
            counts[k] = sum(tx["outcome"] == k for tx in txns)
        for kind, items in bad.items():
            if items:
                problems.append(f"{label}: transactions {kind} {len(items)}: {items[:3]}")
        if any(bad.values()):
            where_txn_values(cluster, tw, bad, problems)
    finally:
        tw.resume()


def txn_index_entries(logdir, topic, p):
    """[(file, producer id, first, last, lso)] of every .txnindex of topic-p under logdir."""
    out = []
    for f in sorted(glob.glob(os.path.join(logdir, f"{topic}-{p}", "*.txnindex"))):
        with open(f, "rb") as fh:
            data = fh.read()
        for i in range(0, len(data) - 33, 34):
            _, pid, first, last, lso = struct.unpack_from(">hqqqq", data, i)
            out.append((os.path.basename(f), pid, first, last, lso))
    return out


def where_txn_values(cluster, tw, bad, problems):
    """Diagnosis of lost or aborted-read values: where each replica holds them on disk, the
    .txnindex entries covering those offsets, the partition's leader, and a second read."""
    by_value = {v: (t, p) for tx in tw.txns() for (t, p, v) in tx["values"]}
    vals = [x for x in bad.get("lost", [])[:4] if isinstance(x, str)]
    for item in bad.get("aborted_read", [])[:4]:  # (value, places) or (tp, offset, value, why)
        vals.append(item[0] if isinstance(item[0], str) else item[2])
    for v in dict.fromkeys(vals):
        if v not in by_value:
            continue
        t, p = by_value[v]
        leader = C.leader_of(cluster, t, p)
        for r in C.assignment(cluster, t)[p]:
            recs, _ = C.read_replica_log(cluster[r].logdir, t, p)
            offs = [o for o, x in recs.items() if x is not None and x.decode(errors="replace") == v]
            near = [e for e in txn_index_entries(cluster[r].logdir, t, p)
                    if offs and e[2] <= max(offs) + 50 and e[3] >= min(offs) - 50]
            problems.append(f"  {v} in {t}-{p} (leader {leader}): replica {r} holds it at {offs}; "
                            f".txnindex entries near: {near}")
    again = T.read_committed_all(C.bootstrap(cluster, all_brokers=True), T.TOPICS)
    seen = {x for recs in again.values() for _, x in recs}
    problems.append(f"  a second read now has {[v for v in vals if v in seen]} of {vals}")


def test_disk_faults(request, disk_cluster):
    cluster, faults = disk_cluster
    seed = int(os.environ.get("GREGOR_CHAOS_SEED", random.randrange(1 << 30)))
    print(f"disk chaos seed {seed} (GREGOR_CHAOS_SEED={seed} repeats it)")
    rng = random.Random(seed)
    C.create_topic(cluster, "chaos", PARTITIONS, rf=3, min_isr=2)
    admin = C.AdminClient({"bootstrap.servers": C.bootstrap(cluster)})
    futs = admin.create_topics([C.NewTopic("ck", 1, 3, config=COMPACT), C.NewTopic("ret", 1, 3, config=RETENTION)],
                               operation_timeout=20, request_timeout=30)
    for f in futs.values():
        f.result(timeout=40)
    topics = ["chaos", "ck", "ret"]
    for t in topics:
        C.wait_healed(cluster, t, 30)
    wl = C.Workload(cluster, "chaos", PARTITIONS, producers=2, rate=100, idempotent=True,
                    tolerate_fatal=True).start()  # see docs/CHAOS.md: reported, not failed
    kw = KeyedWriter(cluster, "ck", "ret", random.Random(seed + 1)).start()
    for t in T.TOPICS:
        C.create_topic(cluster, t, T.PARTITIONS, rf=3, min_isr=2)
    tw = T.TxnWorkload(cluster, producers=3, seed=seed, pipeline=False).start()
    tids = [p.tid for p in tw.producers]
    try:
        H.wait_for(lambda: all(any(tx["outcome"] == "committed" for tx in p.txns) for p in tw.producers)
                   or tw.crashed, 90, "a first commit by every transactional producer")
    except AssertionError as e:
        kw.stop()
        wl.stop()
        tw.stop()
        raise AssertionError(f"{e}; {tw.describe()}") from None
    topics += list(T.TOPICS) + ["__transaction_state"]
    if C.SOAK:
        plan = ["power-loss"] * 50 + ["eio-write", "eio-fsync", "disk-full"] * 10
    else:
        plan = ["power-loss", "eio-write", "eio-fsync", "disk-full", "power-loss"]
    rng.shuffle(plan)
    problems, log = [], []
    txn_counts = {}
    t_start = time.monotonic()
    per_kind = {}
    try:
        for r, kind in enumerate(plan):
            # per kind, every other fault hits a transaction coordinator's broker (the leader of
            # a transactional id's __transaction_state partition), starting with the first
            n = per_kind[kind] = per_kind.get(kind, -1) + 1
            if kind == "disk-full":
                victim = 3  # the tmpfs one
            elif n % 2 == 0:
                tid = rng.choice(tids)
                victim = coordinator_of(cluster, tid)
                log.append(f"b{victim} coordinates {tid}")
            else:
                victim = rng.choice([1, 2, 3])
            if victim in [coordinator_of(cluster, tid) for tid in tids]:
                txn_counts["coordinator faults"] = txn_counts.get("coordinator faults", 0) + 1
            run_fault(cluster, faults, topics, kind, victim, rng, problems, log)
            check_transactions(cluster, tw, f"round {r} ({kind} b{victim})", problems, txn_counts)
        time.sleep(1.0)
    finally:
        kw.stop()
        wl.stop()
        alive = tw.stop()
    assert tw.crashed == [], tw.crashed
    assert alive == [], f"threads still running: {alive}"
    check_transactions(cluster, tw, "final", problems, txn_counts)
    fatal = [f for p in tw.producers for f in p.fatal]
    v = C.check(cluster, "chaos", wl)
    # the compacted topic: per key its last acknowledged op, or one sent after it
    time.sleep(2.0)  # a cleaner pass or two over the last segments
    final = {}
    for _, k, val in read_all(cluster, "ck"):
        final[k.decode()] = val
    with kw.lock:
        for k, ops in kw.sent.items():
            i = kw.acked.get(k)
            if i is None:
                continue
            allowed = set(ops[i:])
            got = final.get(k)
            if got not in allowed:
                what = "deleted key visible" if ops[i] is None else "value"
                problems.append(f"ck key {k}: {what}: shows {got!r}, last acknowledged {ops[i]!r}")
    for t in ("ck", "ret"):
        shared_offsets_agree(cluster, t, problems)
    print(f"disk chaos: {v.summary()}; rounds {log}; keyed ops acked {len(kw.acked)} keys; "
          f"transactions {txn_counts}, client errors (indeterminate) {fatal[:5]}, observer errors "
          f"{tw.observer.errors[:3]}; {time.monotonic() - t_start:.0f}s")
    C.assert_ok(v, strict_duplicates=True)
    assert v.acked > 0
    assert txn_counts.get("committed", 0) > 0 and txn_counts.get("aborted", 0) > 0, txn_counts
    assert not problems, "\n".join(problems[:20])


def test_power_loss_of_the_controller(request, disk_cluster):
    """Power loss of the active controller while it leads a partition of an acks=all topic: the
    restarted broker must not lead from its shorter log (see the module doc)."""
    cluster, faults = disk_cluster
    C.create_topic(cluster, "chaos", PARTITIONS, rf=3, min_isr=2)
    wl = C.Workload(cluster, "chaos", PARTITIONS, producers=2, rate=100, idempotent=True,
                    tolerate_fatal=True).start()
    problems, log = [], []
    try:
        for _ in range(3 if not C.SOAK else 20):
            ctrl = cluster.wait_controller(timeout=30)["brokerid"]
            if ctrl not in [C.leader_of(cluster, "chaos", p) for p in range(PARTITIONS)]:
                continue  # the controller leads nothing now: the next round
            run_fault(cluster, faults, ["chaos"], "power-loss", ctrl, random.Random(1), problems, log)
        time.sleep(1.0)
    finally:
        wl.stop()
    v = C.check(cluster, "chaos", wl)
    print(f"controller power loss: {v.summary()}; rounds {log}")
    C.assert_ok(v, strict_duplicates=True)
    assert not problems, "\n".join(problems[:20])
