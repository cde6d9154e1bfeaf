"""A Jepsen-style transactional workload, its nemesis and its checker (issue 24; docs/CHAOS.md).

Pieces
  TxnWorkload     transactional producers writing unique values across two topics, committing
                  most transactions and aborting some; a consume-transform-produce pipeline (two
                  workers in one group, read_committed, offsets sent in the transaction, one worker
                  restarted midway to force rebalances) fed by an idempotent input producer; and
                  read_committed observers that never commit
  TxnNemesis      SIGKILL or SIGSTOP of a broker (the coordinator's broker of a transactional id
                  and the controller among them), each followed by a heal
  read_committed_all(...)  the final read: every committed record of the topics, offset 0 to the
                  high watermark
  check_txn(...)  the anomalies, each a count that must be 0

Outcomes of a transaction, as the client saw them: "committed" (commit_transaction returned),
"aborted" (the test chose to abort, or the client required it, and abort_transaction returned),
"indeterminate" (a client error left it unknown: a fatal error, or a timeout of commit or abort).
librdkafka 2.0.2's fatal errors count as indeterminate, never as proof: the producer is replaced
(a new one with the same transactional.id fences the old) and the transaction must then be all or
nothing.
"""

import random
import threading
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

import gregor_harness as H
import chaos_lib as C

TOPICS = ("txa", "txb")   # the transactional producers' topics
PIPE_IN, PIPE_OUT = "txin", "txout"
PARTITIONS = 3
PIPE_GROUP = "pipe"
# OffsetFetch answers while the group's coordinator moves or loads, and the client's own timeouts
COORDINATOR_MOVED = (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE,
                     KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.REQUEST_TIMED_OUT,
                     KafkaError._TIMED_OUT, KafkaError._TRANSPORT)
# The chaos cluster's settings, with the group coordinator's topic replicated like the data (the
# harness creates __consumer_offsets with RF 1, which min.insync.replicas=2 would refuse).
CLUSTER_CONFIG = {**C.CLUSTER_CONFIG, "offsets.topic.replication.factor": "3"}


def java_hash(s):
    """Java's String.hashCode for an ASCII string (Kafka's partitionFor)."""
    h = 0
    for ch in s:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def txn_state_partition(tid, partitions=50):
    return abs(java_hash(tid)) % partitions


def _txn_error(e):
    return e.args[0] if e.args and isinstance(e.args[0], KafkaError) else None


def transactional_producer(bootstrap, tid):
    """A transactional producer with its transactions initialised (retried while the
    coordinator is not available yet; a new one fences an earlier producer of tid)."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "enable.idempotence": True,
                  "acks": "all", "linger.ms": 5, "transaction.timeout.ms": 60000,
                  "message.timeout.ms": 60000, "request.timeout.ms": 5000})
    deadline = time.monotonic() + 120
    while True:
        try:
            p.init_transactions(30)
            return p
        except KafkaException as e:
            err = _txn_error(e)
            if err is not None and err.fatal() or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


class TxnProducer:
    """One transactional.id's thread. txns: list of {"tid", "no", "values": [(topic, p, v)],
    "outcome"}; values are "<tid>:<gen>:<no>:<i>" (gen: producer incarnation)."""

    def __init__(self, wl, tid, seed):
        self.wl, self.tid = wl, tid
        self.rng = random.Random(seed)
        self.gen = 0
        self.txns = []
        self.fatal = []
        self.p = None
        self.idle = threading.Event()  # set while held at the workload's gate (TxnWorkload.quiesce)

    def _new_producer(self):
        self.gen += 1
        self.p = transactional_producer(self.wl.bootstrap, self.tid)

    def _finish(self, commit):
        """Commits or aborts the open transaction; returns the outcome."""
        deadline = time.monotonic() + 90
        while True:
            try:
                if commit:
                    self.p.commit_transaction(30)
                    return "committed"
                self.p.abort_transaction(30)
                return "aborted"
            except KafkaException as e:
                err = _txn_error(e)
                if err is None or err.fatal():
                    self.fatal.append(str(err))
                    return None
                if err.txn_requires_abort():
                    commit = False
                    continue
                if not err.retriable() or time.monotonic() > deadline:
                    self.fatal.append(f"gave up: {err}")
                    return None
                time.sleep(0.2)

    def run(self):
        self._new_producer()
        no = 0
        while not self.wl.stopping.is_set():
            if not self.wl.gate.is_set():
                self.idle.set()  # between transactions: nothing open, nothing unsettled
                while not self.wl.gate.wait(0.2) and not self.wl.stopping.is_set():
                    pass
                self.idle.clear()
                continue
            no += 1
            values = []
            outcome = None
            try:
                self.p.begin_transaction()
                for i in range(self.rng.randint(1, 6)):
                    topic = self.rng.choice(TOPICS)
                    part = self.rng.randrange(PARTITIONS)
                    v = f"{self.tid}:{self.gen}:{no}:{i}"
                    while True:
                        try:
                            self.p.produce(topic, v.encode(), partition=part)
                            break
                        except BufferError:
                            self.p.poll(0.05)
                    values.append((topic, part, v))
                self.p.poll(0)
                commit = self.rng.random() < 0.8
                if not commit:
                    # librdkafka 2.0.2 sends EndTxn as soon as AddPartitionsToTxn is sent, not
                    # answered: an abort right after the first produce can reach the coordinator
                    # while the transaction is still Empty, which answers INVALID_TXN_STATE (as
                    # Kafka does) and the client declares it fatal (confluentinc/librdkafka#4849).
                    # A delivered record proves its partition registered.
                    self.p.flush(30)
                outcome = self._finish(commit)
            except KafkaException as e:
                err = _txn_error(e)
                if err is not None and not err.fatal() and err.txn_requires_abort():
                    outcome = self._finish(False)
                else:
                    self.fatal.append(str(err))
            self.txns.append({"tid": self.tid, "no": no, "values": values,
                              "outcome": outcome or "indeterminate", "t_end": time.time()})
            if outcome is None:
                # unknown state or fatal: a new incarnation fences this one and settles the
                # transaction (its init completes a prepared commit or aborts the rest)
                self.p = None
                self._new_producer()
            time.sleep(self.rng.random() * 0.02)
        if self.p is not None:
            self.p.flush(10)


class PipelineWorker:
    """read_committed consumer in group PIPE_GROUP + transactional producer: for every input
    "in-<n>" it writes "out-<n>", with the consumed offsets in the same transaction."""

    def __init__(self, wl, name):
        self.wl, self.name = wl, name
        self.restart = threading.Event()
        self.fatal = []
        self.processed = 0
        self.assigned = []

    def _consumer(self):
        c = Consumer({"bootstrap.servers": self.wl.bootstrap, "group.id": PIPE_GROUP,
                      "isolation.level": "read_committed", "enable.auto.commit": False,
                      "auto.offset.reset": "earliest", "session.timeout.ms": 10000,
                      "heartbeat.interval.ms": 1000, "max.poll.interval.ms": 60000})
        c.subscribe([PIPE_IN])
        return c

    def _producer(self):
        return transactional_producer(self.wl.bootstrap, f"pipe-{self.name}")

    def _rewind(self, c):
        """After an abort: back to the group's committed offsets (the standard EOS loop)."""
        asg = c.assignment()
        if not asg:
            return
        deadline = time.monotonic() + 90
        while True:
            try:
                committed = c.committed(asg, timeout=30)
                break
            except KafkaException as e:
                # the group coordinator moved or is loading (NOT_COORDINATOR, ...): ask again
                err = _txn_error(e)
                again = err is not None and (err.retriable() or err.code() in COORDINATOR_MOVED)
                if not again or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        for tp in committed:
            try:
                c.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))
            except KafkaException:
                pass  # revoked meanwhile: its next owner starts from the committed offset

    def run(self):
        c, p = self._consumer(), self._producer()
        try:
            while not self.wl.pipe_done.is_set():
                if self.restart.is_set():
                    self.restart.clear()
                    c.close()
                    c = self._consumer()
                got = c.consume(num_messages=50, timeout=0.5)
                self.assigned = [(tp.topic, tp.partition) for tp in c.assignment()]
                msgs = [m for m in got if not m.error()]
                self.errors = [str(m.error()) for m in got if m.error()][:3] or getattr(self, "errors", [])
                if not msgs:
                    continue
                try:
                    p.begin_transaction()
                    for m in msgs:
                        n = m.value().decode().split("-", 1)[1]
                        p.produce(PIPE_OUT, f"out-{n}".encode(), partition=m.partition())
                    p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 30)
                    p.commit_transaction(30)
                    self.processed += len(msgs)
                except KafkaException as e:
                    err = _txn_error(e)
                    if err is not None and not err.fatal() and err.txn_requires_abort():
                        try:
                            p.abort_transaction(30)
                        except KafkaException as e2:
                            self.fatal.append(str(_txn_error(e2)))
                            p = self._producer()
                    else:
                        self.fatal.append(str(err))
                        p = self._producer()  # fences the old one, settles its transaction
                    self._rewind(c)
        finally:
            c.close()


class Observer:
    """read_committed consumer over every partition of TOPICS from offset 0; never commits.
    seen[(topic, p)] = [(offset, value), ...] in delivery order."""

    def __init__(self, wl):
        self.wl = wl
        self.seen = {(t, p): [] for t in TOPICS for p in range(PARTITIONS)}
        self.seen_at = {}  # (topic, p, offset) -> wall time delivered
        self.errors = []

    def run(self):
        c = Consumer({"bootstrap.servers": self.wl.bootstrap, "group.id": f"observer-{time.time()}",
                      "isolation.level": "read_committed", "enable.auto.commit": False,
                      "auto.offset.reset": "earliest"})
        c.assign([TopicPartition(t, p, 0) for t in TOPICS for p in range(PARTITIONS)])
        try:
            while not self.wl.stopping.is_set():
                m = c.poll(0.2)
                if m is None:
                    continue
                if m.error():
                    if m.error().code() != KafkaError._PARTITION_EOF:
                        self.errors.append(str(m.error()))
                    continue
                self.seen[(m.topic(), m.partition())].append((m.offset(), m.value().decode()))
                self.seen_at[(m.topic(), m.partition(), m.offset())] = time.time()
        finally:
            c.close()


class TxnWorkload:
    """pipeline=False: the transactional producers and the observer only (no feeder, no
    consume-transform-produce workers), as the disk-fault family runs it."""

    def __init__(self, cluster, producers=3, seed=1, pipeline=True):
        self.cluster = cluster
        self.bootstrap = C.bootstrap(cluster, all_brokers=True)
        self.stopping = threading.Event()   # transactional producers, observer, feeder
        self.pipe_done = threading.Event()  # pipeline workers (they drain the input first)
        self.gate = threading.Event()       # cleared: producers hold between transactions
        self.gate.set()
        self.pipeline = pipeline
        self.producers = [TxnProducer(self, f"tx-{k}", seed * 100 + k) for k in range(producers)]
        self.workers = [PipelineWorker(self, "w0"), PipelineWorker(self, "w1")] if pipeline else []
        self.observer = Observer(self)
        self.fed = []          # input values acknowledged by the feeder
        self.feed_failed = []
        self.threads = []
        self.crashed = []

    def describe(self):
        return (f"crashed {self.crashed}; transactions per producer "
                f"{[(p.tid, len(p.txns), p.fatal[:3]) for p in self.producers]}; pipeline processed "
                f"{[(w.name, w.processed, w.assigned, w.fatal[:3], getattr(w, 'errors', [])) for w in self.workers]}; "
                f"inputs acknowledged {len(self.fed)}, failed {self.feed_failed[:3]}")

    def quiesce(self, timeout=180):
        """Holds every transactional producer between two transactions (each one's last
        transaction finished: committed, aborted, or indeterminate and settled by the next
        incarnation's init); returns the producers that did not get there within timeout.
        After stop() (the producers' threads joined) there is nothing to hold."""
        if self.stopping.is_set():
            return []
        self.gate.clear()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(p.idle.is_set() for p in self.producers) or self.crashed:
                break
            time.sleep(0.1)
        return [p.tid for p in self.producers if not p.idle.is_set()]

    def resume(self):
        self.gate.set()

    def txns(self):
        """Every recorded transaction so far (a copy)."""
        return [tx for p in self.producers for tx in list(p.txns)]

    def _feeder(self):
        p = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all",
                      "linger.ms": 5, "message.timeout.ms": 120000})
        n = 0

        def dr(err, m):
            (self.feed_failed if err else self.fed).append(m.value().decode())

        while not self.stopping.is_set():
            try:
                p.produce(PIPE_IN, f"in-{n}".encode(), partition=n % PARTITIONS, on_delivery=dr)
                n += 1
            except BufferError:
                pass
            p.poll(0.01)
        p.flush(120)

    def _guard(self, fn):
        def run():
            try:
                fn()
            except BaseException as e:  # noqa: B902 - reported by the test
                self.crashed.append(f"{fn.__qualname__}: {e!r}")
        return run

    def start(self):
        fns = [tp.run for tp in self.producers] + [w.run for w in self.workers] + \
              [self.observer.run] + ([self._feeder] if self.pipeline else [])
        for fn in fns:
            t = threading.Thread(target=self._guard(fn), daemon=True)
            t.start()
            self.threads.append(t)
        return self

    def stop(self, drain_timeout=120):
        """Stops the writers, waits for the pipeline to consume the whole input, then stops it."""
        self.stopping.set()
        self.gate.set()
        for t in self.threads:
            if t not in self._pipe_threads():
                t.join(180)
        deadline = time.monotonic() + drain_timeout
        while self.pipeline and time.monotonic() < deadline and not self.pipeline_drained():
            time.sleep(1)
        self.pipe_done.set()
        for t in self._pipe_threads():
            t.join(120)
        return [t.name for t in self.threads if t.is_alive()]

    def _pipe_threads(self):
        k = len(self.producers)
        return self.threads[k:k + len(self.workers)]

    def pipeline_drained(self):
        """The group's committed offsets reached the end of every input partition."""
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": PIPE_GROUP,
                      "enable.auto.commit": False})
        try:
            tps = [TopicPartition(PIPE_IN, p) for p in range(PARTITIONS)]
            committed = c.committed(tps, timeout=10)
            for tp in committed:
                hw = c.get_watermark_offsets(TopicPartition(PIPE_IN, tp.partition), timeout=10)[1]
                if tp.offset < hw:
                    return False
            return True
        except KafkaException:
            return False
        finally:
            c.close()


class TxnNemesis:
    """Faults for the transactional workload; every one ends with the cluster healed."""

    def __init__(self, cluster, rng, zk_server=None):
        self.cluster, self.rng, self.zk_server = cluster, rng, zk_server
        self.events = []
        self.times = []

    def heal(self):
        for b in self.cluster.brokers.values():
            if b.paused:
                b.resume()
        for b in self.cluster.brokers.values():
            C.restart_broker(self.cluster, b)
        for t in TOPICS + (PIPE_IN, PIPE_OUT, "__transaction_state"):
            C.wait_healed(self.cluster, t, timeout=90)

    def coordinator_of(self, tid):
        return C.leader_of(self.cluster, "__transaction_state", txn_state_partition(tid))

    def kill(self, bid, why):
        self.times.append((time.strftime("%H:%M:%S"), "kill", bid))
        b = self.cluster[bid]
        b.kill()
        time.sleep(self.rng.uniform(0.5, 3.0))
        self.events.append(f"kill {bid} ({why})")
        self.heal()

    def pause(self, bid, why):
        self.times.append((time.strftime("%H:%M:%S"), "pause", bid))
        b = self.cluster[bid]
        b.pause()
        try:
            H.wait_for(lambda: bid not in self.cluster.registered_ids(), H.SESSION_TIMEOUT_MS / 1000 + 10,
                       f"broker {bid}'s registration gone after SIGSTOP", interval=0.1)
            time.sleep(self.rng.uniform(0.5, 2.0))
        finally:
            b.resume()
        self.events.append(f"pause {bid} ({why})")
        self.cluster.wait_registered([bid], timeout=30)
        self.heal()

    def restart_zookeeper(self):
        down = self.rng.choice([1.0, H.SESSION_TIMEOUT_MS / 1000 + 2])
        self.times.append((time.strftime("%H:%M:%S"), "zk-restart", down))
        self.zk_server.restart(down_seconds=down)
        H.wait_for(lambda: self.cluster.zk.connected, 30, "the test's kazoo client reconnected")
        self.cluster.wait_controller(timeout=30)
        for b in self.cluster.brokers.values():
            assert b.running(), f"broker {b.id} exited (code {b.returncode}) after a ZooKeeper restart"
        self.cluster.wait_registered(timeout=30)
        self.events.append(f"zookeeper down {down:.0f}s")
        self.heal()

    KINDS = ("kill-coordinator", "pause-coordinator", "kill-controller", "kill-any")

    def round(self, tids, kind=None):
        kind = kind or self.rng.choice(self.KINDS + (("zk-restart",) if self.zk_server else ()))
        if kind == "zk-restart":
            return self.restart_zookeeper()
        if kind.endswith("coordinator"):
            tid = self.rng.choice(tids)
            bid, why = self.coordinator_of(tid), f"coordinator of {tid}"
        elif kind == "kill-controller":
            bid, why = self.cluster.wait_controller(timeout=30)["brokerid"], "controller"
        else:
            bid, why = self.rng.choice(sorted(self.cluster.brokers)), "any"
        (self.pause if kind.startswith("pause") else self.kill)(bid, why)


def read_committed_all(bootstrap, topics, partitions=PARTITIONS, timeout=90):
    """{(topic, p): [(offset, value), ...]}: every committed record, offset 0 up to each
    partition's high watermark (a read_committed position passes aborted records and markers).
    The bound is the high watermark, asked by a read_uncommitted client: a read_committed one's
    ListOffsets answers the last stable offset, which stays below a transaction whose commit was
    acknowledged (PrepareCommit written) while its markers are still being written -- a read up
    to that would miss committed values. Reaching the high watermark waits for those markers."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"final-{time.time()}",
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    q = Consumer({"bootstrap.servers": bootstrap, "group.id": f"final-hw-{time.time()}",
                  "isolation.level": "read_uncommitted", "enable.auto.commit": False})
    tps = [TopicPartition(t, p) for t in topics for p in range(partitions)]
    try:
        try:
            hw = {(tp.topic, tp.partition): q.get_watermark_offsets(tp, timeout=30)[1] for tp in tps}
        finally:
            q.close()
        c.assign([TopicPartition(t, p, 0) for (t, p) in hw])
        got = {k: [] for k in hw}
        deadline = time.time() + timeout

        def done():
            pos = c.position([TopicPartition(t, p) for (t, p) in hw])
            return all(tp.offset >= hw[(tp.topic, tp.partition)] for tp in pos)

        while time.time() < deadline and not done():
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            got[(m.topic(), m.partition())].append((m.offset(), m.value().decode()))
        assert done(), f"final read_committed read did not reach the high watermarks {hw} " \
                       f"(positions {c.position([TopicPartition(t, p) for (t, p) in hw])}): " \
                       "a transaction left open or an LSO stuck"
        return got
    finally:
        c.close()


def check_txn(txns, final, observed, fed, pipe_out):
    """txns: every transaction's record (TxnProducer.txns); final: read_committed_all of TOPICS;
    observed: Observer.seen; fed: acknowledged pipeline inputs "in-<n>"; pipe_out: the final
    committed values of PIPE_OUT. Returns {anomaly: [examples]}; every list must be empty."""
    bad = {k: [] for k in ("lost", "duplicated", "aborted_read", "torn", "poll_skip",
                           "out_of_order", "pipeline_lost", "pipeline_duplicated")}
    where = {}  # value -> [(topic, p, offset)] in the final read
    for (t, p), recs in final.items():
        for off, v in recs:
            where.setdefault(v, []).append((t, p, off))
    by_value = {}
    for tx in txns:
        for (t, p, v) in tx["values"]:
            by_value[v] = tx
    for v, places in where.items():
        if len(places) > 1:
            bad["duplicated"].append((v, places))
        tx = by_value.get(v)
        if tx is None:
            bad["aborted_read"].append((v, "not written by any transaction"))
        elif tx["outcome"] == "aborted":
            bad["aborted_read"].append((v, places))
    for tx in txns:
        present = [v for (_, _, v) in tx["values"] if v in where]
        if tx["outcome"] == "committed":
            bad["lost"] += [v for (_, _, v) in tx["values"] if v not in where]
        elif tx["outcome"] == "indeterminate" and 0 < len(present) < len(tx["values"]):
            bad["torn"].append((tx["tid"], tx["no"], present))
        # each value is in the partition it was written to
        for (t, p, v) in tx["values"]:
            for place in where.get(v, []):
                if place[:2] != (t, p):
                    bad["lost"].append((v, f"written to {t}-{p}, found at {place}"))
    # per producer and partition, committed values in offset order follow the producer's order
    for (t, p), recs in final.items():
        last = {}
        for off, v in recs:
            tid, gen, no, i = v.split(":")
            key = (int(gen), int(no), int(i))
            if tid in last and key <= last[tid]:
                bad["out_of_order"].append((t, p, off, v))
            last[tid] = key
    committed_offsets = {k: {off for off, _ in recs} for k, recs in final.items()}
    for k, recs in observed.items():
        if not recs:
            continue
        top = max(off for off, _ in recs)
        seen = {off for off, _ in recs}
        for off, v in recs:
            tx = by_value.get(v)
            if tx is not None and tx["outcome"] == "aborted" or v not in where:
                bad["aborted_read"].append((k, off, v, "seen by an observer"))
        missing = sorted(o for o in committed_offsets.get(k, ()) if o <= top and o not in seen)
        if missing:
            bad["poll_skip"].append((k, missing[:10], len(missing)))
    outs = {}
    for v in pipe_out:
        outs[v] = outs.get(v, 0) + 1
    for v in fed:
        n = outs.get("out-" + v.split("-", 1)[1], 0)
        if n == 0:
            bad["pipeline_lost"].append(v)
        elif n > 1:
            bad["pipeline_duplicated"].append((v, n))
    return bad


def explain(bad, txns, wl, nem, cluster, final=None):
    """Prints what a failing run needs for diagnosis: the transactions behind the first anomalies
    with their end times, when the observer saw their values, the faults with their times; with
    GREGOR_KEEP_DIR set, the cluster's directory (broker logs and log dirs) is copied there."""
    import os
    import shutil
    by_value = {v: tx for tx in txns for (_, _, v) in tx["values"]}
    for kind, items in bad.items():
        for item in items[:3]:
            vals = [x for x in (item if isinstance(item, tuple) else (item,)) if isinstance(x, str) and ":" in x]
            for v in vals:
                tx = by_value.get(v)
                if tx:
                    print(f"explain {kind}: {v} in transaction {tx['tid']}#{tx['no']} {tx['outcome']} at "
                          f"{time.strftime('%H:%M:%S', time.localtime(tx['t_end']))}.{int(tx['t_end'] * 1000) % 1000:03d}; "
                          f"values {tx['values']}")
                    for (t, p, vv) in tx["values"]:
                        seen = [(off, wl.observer.seen_at.get((t, p, off))) for off, x in wl.observer.seen[(t, p)] if x == vv]
                        print(f"explain   {t}-{p} {vv}: observer saw {[(o, time.strftime('%H:%M:%S', time.localtime(ts))) for o, ts in seen if ts]}")
    for item in bad.get("aborted_read", [])[:5]:
        if final is not None and isinstance(item[0], tuple):
            (k, off) = item[0], item[1]
            at = [x for x in final.get(k, []) if x[0] == off]
            print(f"explain aborted_read: {k} offset {off}: the final read has {at or 'nothing'} there "
                  "(another value: the replica the observer read diverged; nothing: aborted records exposed)")
    print(f"explain faults: {nem.events} (times: {getattr(nem, 'times', [])})")
    keep = os.environ.get("GREGOR_KEEP_DIR")
    if keep:
        dst = os.path.join(keep, f"cluster-{int(time.time())}")
        shutil.copytree(cluster.workdir, dst, ignore_dangling_symlinks=True)
        print(f"explain: cluster directory copied to {dst}")
