"""Network-fault chaos tests: a 3-member ZooKeeper ensemble, three brokers on 127.0.0.2-4, and a
fault-injecting proxy (netfault.py) in front of every ZooKeeper member and every broker listener,
so links can be cut, blackholed or slowed without killing a process. Same workload and checker
as test_chaos.py (acks=all, RF 3, min.insync.replicas 2, every replica's log read afterwards).
See docs/CHAOS.md, "Network faults". Runs from tests/netfault (its conftest.py borrows the chaos
suite's fixtures).

Short form by default (about 2.5 minutes for the file); GREGOR_SOAK=1 runs more rounds.
GREGOR_CHAOS_IDEMPOTENT=1 makes the producers idempotent (and duplicates then fail the test) once
chaos_lib.Workload takes `idempotent=`."""

import inspect
import json
import os
import random
import re
import time

import pytest

import gregor_harness as H

pytest.importorskip("confluent_kafka")
import chaos_lib as C  # noqa: E402
import netfault  # noqa: E402

SOAK = C.SOAK
PARTITIONS = 3
TOPIC = "chaos"
SESSION_S = H.SESSION_TIMEOUT_MS / 1000
# What the existing chaos suite uses (no idempotence); flipped once idempotent producers merge.
IDEMPOTENT = os.environ.get("GREGOR_CHAOS_IDEMPOTENT", "0") == "1"


def rounds(short, soak):
    return soak if SOAK else short


# ---------------------------------------------------------------------------------------------
# Fixtures: one ensemble per module, a fresh proxied cluster per test


@pytest.fixture(scope="module")
def ensemble(tmp_path_factory):
    e = H.ZkEnsemble(str(tmp_path_factory.mktemp("ensemble")), n=3)
    e.start()
    try:
        yield e
    finally:
        H.kill_leftovers()
        e.stop()


class NetCluster:
    """The test's view: cluster (harness Cluster), ensemble, net (proxies + rules)."""

    def __init__(self, cluster, ensemble, net, zk_proxies, broker_proxies, chroot):
        self.cluster = cluster
        self.ensemble = ensemble
        self.net = net
        self.zk_proxies = zk_proxies
        self.broker_proxies = broker_proxies
        self.chroot = chroot


@pytest.fixture
def netcluster(request, ensemble, cluster_factory):
    # Every member back and serving (an earlier test may have stopped some).
    for i in ensemble.members:
        if ensemble.mode(i) == "down":
            ensemble.start_member(i)
    ensemble.wait_quorum()
    net = netfault.Net()
    zk_proxies = {i: net.proxy(f"zk{i}", ("127.0.0.1", 0), ("127.0.0.1", ensemble.port(i)), groups=("zk",))
                  for i in ensemble.members}
    chroot = f"/gregor-net-{random.randrange(16**6):06x}"
    connect = ",".join(f"{p.host}:{p.port}" for p in zk_proxies.values()) + chroot
    config = dict(C.CLUSTER_CONFIG)
    marker = request.node.get_closest_marker("broker_config")  # per-test broker settings
    if marker:
        config.update(marker.args[0])
    cluster = cluster_factory(connect, n=3, config=config, start=False)
    broker_proxies = {}
    for b in cluster.brokers.values():
        b.host = f"127.0.0.{b.id + 1}"
        b.port = H.free_port()
        p = net.proxy(f"broker-{b.id}", (b.host, 0), (b.host, b.port), groups=("broker",))
        b.advertised = (p.host, p.port)
        broker_proxies[b.id] = p
    net.pids = lambda: {b.pid: f"broker-{b.id}" for b in cluster.brokers.values() if b.running()}
    cluster.start(timeout=60)
    nc = NetCluster(cluster, ensemble, net, zk_proxies, broker_proxies, chroot)
    yield nc
    net.heal()
    cluster.kill_all()
    net.close()


# ---------------------------------------------------------------------------------------------
# Nemesis for network faults


class NetNemesis(C.Nemesis):
    """The chaos nemesis plus ZooKeeper-member and link faults (every method heals before it
    returns, so rounds are independent)."""

    def __init__(self, nc, wl, rng):
        super().__init__(nc.cluster, TOPIC, wl, rng=rng, heal_timeout=90.0)
        self.nc = nc
        self.net = nc.net
        self.ens = nc.ensemble
        self.notes = []

    def _heal(self):
        self.net.heal()
        for i in self.ens.members:
            if self.ens.mode(i) == "down":
                self.ens.start_member(i)
        self.ens.wait_quorum()
        super()._heal()

    def _partition_led_by(self, pred):
        """A partition whose leader satisfies pred(broker id), else any partition."""
        ps = list(self.wl.partitions)
        self.rng.shuffle(ps)
        for p in ps:
            if pred(C.leader_of(self.cluster, self.topic, p)):
                return p
        return ps[0]

    def _ensure_controller_epoch_unique(self):
        claims = self.cluster.all_ready_epochs()
        dup = {e: ids for e, ids in claims.items() if len(set(ids)) > 1}
        assert not dup, f"controller epochs claimed by more than one broker: {dup}"

    # (1) ZooKeeper members killed
    def kill_zk_leader(self):
        """SIGKILL the ensemble's leader while producing; a new ZooKeeper leader is elected among
        the other two; brokers' sessions move over; then restart it."""
        lead = self.ens.leader()
        t0 = time.monotonic()
        self.ens.stop_member(lead, kill=True)
        others = [i for i in self.ens.members if i != lead]
        self.ens.wait_quorum(others)
        rec = C.measure_recovery(self.wl, t0)
        self._check_registered()
        self._heal()
        self.log.record("kill-zk-leader", rec, f"zk{lead}")

    def kill_zk_follower_during_failover(self):
        """SIGKILL a ZooKeeper follower and the active controller at the same moment: the
        controller election runs on a 2-member ensemble whose sessions are moving."""
        c, b = self._controller_broker()
        lead = self.ens.leader()
        fol = next(i for i in self.ens.members if i != lead)
        t0 = time.monotonic()
        b.kill()
        self.ens.stop_member(fol, kill=True)  # while the controller's session is expiring
        self.cluster.wait_new_controller(c["_stat"].czxid, timeout=30)
        rec = C.measure_recovery(self.wl, t0)
        self._heal()
        self._ensure_controller_epoch_unique()
        self.log.record("kill-zk-follower+ctrl", rec, f"zk{fol}, controller {b.id}")

    def kill_zk_leader_during_failover(self):
        c, b = self._controller_broker()
        lead = self.ens.leader()
        t0 = time.monotonic()
        b.kill()
        self.ens.stop_member(lead, kill=True)
        self.cluster.wait_new_controller(c["_stat"].czxid, timeout=40)
        rec = C.measure_recovery(self.wl, t0)
        self._heal()
        self._ensure_controller_epoch_unique()
        self.log.record("kill-zk-leader+ctrl", rec, f"zk{lead}, controller {b.id}")

    def _check_registered(self):
        for b in self.cluster.brokers.values():
            assert b.running(), f"broker {b.id} exited (code {b.returncode})"
        self.cluster.wait_registered(timeout=30)

    # (2) the whole ensemble down past the session timeout
    def ensemble_outage(self, down_s):
        """Every member SIGKILLed for down_s seconds, then restarted. Meanwhile the brokers must
        keep serving the current leaders (acks keep coming on every partition)."""
        e0, _ = self.cluster.controller_epoch()
        for i in self.ens.members:
            self.ens.stop_member(i, kill=True)
        t_down = time.monotonic()
        time.sleep(down_s)
        t_up = time.monotonic()
        served = {p: None for p in self.wl.partitions}
        with self.wl.ledger.lock:
            for v, (p, _, ta) in self.wl.ledger.acked.items():
                s = self.wl.ledger.sent.get(v)
                if s and s[1] >= t_down + 0.5 and ta <= t_up:
                    served[p] = (served[p] or 0) + 1
        for i in self.ens.members:
            self.ens.start_member(i)
        t_restart = time.monotonic()
        self.ens.wait_quorum()
        t_q = time.monotonic()
        # Observed through a fresh client straight to the ensemble (the test's own kazoo client
        # reconnects with a back-off of several seconds, which is not the cluster's recovery).
        zk = H.kazoo_client(self.ens.hosts + self.nc.chroot)
        try:
            want = {str(i) for i in self.cluster.brokers}
            H.wait_for(lambda: want <= set(zk.get_children("/brokers/ids")) and zk.exists("/controller"),
                       30, "every broker registered and a controller, after the outage", interval=0.05)
            rec = time.monotonic() - t_restart
        finally:
            H.close_kazoo(zk)
        H.wait_for(lambda: self.cluster.zk.connected, 30, "the test's kazoo client reconnected")
        self._check_registered()
        self._heal()
        self._ensure_controller_epoch_unique()
        self.notes.append(f"ensemble down {t_up - t_down:.1f}s: acks during outage per partition {served}; "
                          f"quorum {t_q - t_restart:.1f}s after the restart, every broker registered "
                          f"with a controller {rec:.1f}s after the restart; controller epoch {e0} -> "
                          f"{self.cluster.controller_epoch()[0]}")
        assert all(served.values()), (f"the brokers stopped acknowledging while ZooKeeper was down: "
                                      f"acks per partition during the outage {served}")
        # Recovery: from restarting the members until every broker is registered under a
        # controller (writes never stopped).
        self.log.record("ensemble-down", rec, f"down {down_s:.1f}s")

    # (3) split brain: a partition leader cut from ZooKeeper only
    def cut_leader_from_zk(self, hold_s=2.0):
        ctrl = self.cluster.controller_id()
        p = self._partition_led_by(lambda b: b != ctrl)
        old = C.leader_of(self.cluster, self.topic, p)
        old_state = C.part_state(self.cluster, self.topic, p)
        victim = self.cluster[old]
        log_pos = len(victim.log())
        t0 = time.monotonic()
        self.net.cut(f"broker-{old}", "zk")
        H.wait_for(lambda: old not in self.cluster.registered_ids(), SESSION_S + 15,
                   f"broker {old}'s registration gone after cutting it from ZooKeeper", interval=0.1)
        H.wait_for(lambda: C.leader_of(self.cluster, self.topic, p) not in (old, -1, None), 30,
                   f"a new leader for {self.topic}-{p} while broker {old} is cut from ZooKeeper", interval=0.1)
        t_elected = time.monotonic()
        new_state = C.part_state(self.cluster, self.topic, p)
        assert new_state["leader_epoch"] > old_state["leader_epoch"]
        # Recovery: until every partition acknowledged a record sent after the new leader was
        # elected (the old leader legitimately acknowledges until its session expires).
        rec = C.measure_recovery(self.wl, t_elected)
        rec = None if rec is None else rec + (t_elected - t0)
        time.sleep(hold_s)  # the old leader keeps believing it leads, and clients can still reach it
        assert victim.running(), f"broker {old} exited while cut from ZooKeeper (code {victim.returncode})"
        self.net.heal()
        # It must notice the expired session, re-register and rejoin as a follower by itself.
        self.cluster.wait_registered([old], timeout=40)
        self._heal()
        # ... as a follower of the new leader, after OffsetForLeaderEpoch truncation.
        assert f"{self.topic}-{p}: truncation done" in victim.log()[log_pos:], \
            f"broker {old} rejoined {self.topic}-{p} without a leader-epoch truncation step"
        m = re.search(rf"Truncated {self.topic}-{p} from (\d+) to offset (\d+)", victim.log()[log_pos:])
        self.notes.append(f"p{p}: old leader {old} truncated "
                          + (f"{int(m.group(1)) - int(m.group(2))} unacknowledged records" if m else "nothing")
                          + " on rejoining")
        self.log.record("cut-leader-zk", rec, f"p{p} leader {old} -> {new_state['leader']} "
                        f"(epoch {old_state['leader_epoch']} -> {new_state['leader_epoch']})")

    # (4) the controller cut from ZooKeeper only / from the brokers only
    def cut_controller_from_zk(self, hold_s=2.0):
        """Blackholed rather than reset: the zombie's ZooKeeper requests hang (as behind a dead
        switch) instead of failing fast."""
        c, b = self._controller_broker()
        e0, _ = self.cluster.controller_epoch()
        log_pos = len(b.log())
        t0 = time.monotonic()
        self.net.blackhole(f"broker-{b.id}", "zk")
        c2 = self.cluster.wait_new_controller(c["_stat"].czxid, timeout=SESSION_S + 20)
        t_elected = time.monotonic()
        e1, _ = self.cluster.controller_epoch()
        assert c2["brokerid"] != b.id and e1 > e0, (c2, e0, e1)
        rec = C.measure_recovery(self.wl, t_elected)
        rec = None if rec is None else rec + (t_elected - t0)
        time.sleep(hold_s)  # the zombie still thinks it is controller
        self.net.heal()
        self.cluster.wait_registered([b.id], timeout=40)
        self._heal()
        H.wait_for(lambda: f"[Controller id={b.id}] Resigned" in b.log()[log_pos:], 20,
                   f"the zombie controller {b.id} resigned after the heal")
        self._ensure_controller_epoch_unique()
        self.log.record("cut-ctrl-zk", rec, f"controller {b.id} -> {c2['brokerid']} (epoch {e0} -> {e1})")

    def cut_controller_from_brokers(self, hold_s=4.0, kind="cut"):
        """The controller keeps its ZooKeeper session but reaches no broker and no broker reaches
        it: it stays controller; partitions it leads lose their followers (ISR shrinks to 1 <
        min.insync.replicas, writes there are refused); no leadership changes; after the heal
        everything converges. kind "cut": its requests fail at once; "blackhole": they time out
        (controller.socket.timeout.ms); either way its channel manager backs off and retries."""
        c, b = self._controller_broker()
        log_pos = len(b.log())
        getattr(self.net, kind)(f"broker-{b.id}", "broker")
        # Give the controller something to send while it is cut off (a topic made in ZooKeeper:
        # LeaderAndIsr/UpdateMetadata to every broker), so its channel manager has requests to fail
        # and retry whatever else happens to be going on.
        others = sorted(x.id for x in self.cluster.brokers.values() if x.id != b.id)
        self.cluster.zk.create(f"/brokers/topics/netfault-probe-{kind}-{int(time.monotonic() * 1000)}", json.dumps(
            {"version": 2, "partitions": {"0": others}, "adding_replicas": {}, "removing_replicas": {}}).encode(),
            makepath=True)
        time.sleep(hold_s)
        still = self.cluster.controller()
        assert still is not None and still["_stat"].czxid == c["_stat"].czxid, \
            "the controller changed although its ZooKeeper session was fine"
        t_heal = time.monotonic()
        self.net.heal()
        rec = C.measure_recovery(self.wl, t_heal)
        self._heal()
        retries = [ln for ln in b.log()[log_pos:].splitlines()
                   if "ControllerChannelManager" in ln and "Reconnecting." in ln]
        assert retries, f"controller {b.id}'s channel manager logged no failed request while {kind}"
        self.notes.append(f"{kind}: controller {b.id}'s channel manager: {len(retries)} failed requests "
                          f"retried, e.g. {retries[0].split('] ', 2)[-1][:120]!r}")
        self.log.record(f"{kind}-ctrl-brokers", rec, f"controller {b.id} for {hold_s:.0f}s (recovery from heal)")

    # (5) a follower cut from its leader
    def cut_follower_from_leader(self, hold_s=None):
        """Leader and follower are both not the controller when possible: a leader that cannot
        reach the controller cannot shrink the ISR either (AlterIsr goes through the controller),
        and its acks=all writes wait until the link heals — correct, but not this scenario."""
        ctrl = self.cluster.controller_id()
        p = self._partition_led_by(lambda b: b != ctrl)
        st = C.part_state(self.cluster, self.topic, p)
        lead = st["leader"]
        others = [r for r in st["isr"] if r != lead]
        fol = next((r for r in others if r != ctrl), None) or self.rng.choice(others)
        t0 = time.monotonic()
        # Blackholed: the follower's fetch hangs (no reset), as behind a failed link.
        self.net.blackhole(f"broker-{fol}", f"broker-{lead}")
        H.wait_for(lambda: fol not in C.part_state(self.cluster, self.topic, p)["isr"], 30,
                   f"broker {fol} out of {self.topic}-{p}'s ISR after cutting it from leader {lead}",
                   interval=0.1)
        t_shrunk = time.monotonic()
        rec = C.measure_recovery(self.wl, t0)  # acks=all on p waits for the shrink
        if hold_s:
            time.sleep(hold_s)
        assert C.leader_of(self.cluster, self.topic, p) == lead, "leadership moved on a follower cut"
        self.net.heal()
        t_heal = time.monotonic()
        H.wait_for(lambda: fol in C.part_state(self.cluster, self.topic, p)["isr"], 60,
                   f"broker {fol} back in {self.topic}-{p}'s ISR after the heal", interval=0.1)
        self.notes.append(f"p{p}: ISR shrank {t_shrunk - t0:.1f}s after the cut, expanded "
                          f"{time.monotonic() - t_heal:.1f}s after the heal")
        self._heal()
        self.log.record("cut-follower", rec, f"p{p} follower {fol} from leader {lead}")

    # (6) latency on the ZooKeeper links
    def kill_leader_slow_zk(self, ms):
        self.net.delay("broker", "zk", ms)
        try:
            p = self.rng.choice(self.wl.partitions)
            victim = C.leader_of(self.cluster, self.topic, p)
            t0 = time.monotonic()
            self.cluster[victim].kill()
            H.wait_for(lambda: C.leader_of(self.cluster, self.topic, p) not in (victim, -1, None), 40,
                       f"a new leader for {self.topic}-{p} (ZooKeeper links +{ms} ms)", interval=0.1)
            t_elected = time.monotonic() - t0
            rec = C.measure_recovery(self.wl, t0)
            C.restart_broker(self.cluster, self.cluster[victim])
            C.wait_healed(self.cluster, self.topic, 90)
        finally:
            self.net.heal()
        self._heal()
        self.notes.append(f"+{ms} ms: new leader after {t_elected:.1f}s, acks everywhere after {rec}s")
        self.log.record(f"kill-leader+{ms}ms", rec, f"p{p} leader {victim}")

    def kill_controller_slow_zk(self, ms):
        self.net.delay("broker", "zk", ms)
        try:
            c, b = self._controller_broker()
            t0 = time.monotonic()
            b.kill()
            self.cluster.wait_new_controller(c["_stat"].czxid, timeout=40)
            t_elected = time.monotonic() - t0
            rec = C.measure_recovery(self.wl, t0)
            C.restart_broker(self.cluster, b)
            C.wait_healed(self.cluster, self.topic, 90)
        finally:
            self.net.heal()
        self._heal()
        self.notes.append(f"+{ms} ms: new controller after {t_elected:.1f}s, acks everywhere after {rec}s")
        self.log.record(f"kill-ctrl+{ms}ms", rec, f"controller {b.id}")


# ---------------------------------------------------------------------------------------------
# Runner


def make_workload(cluster, rate):
    kw = {}
    if "idempotent" in inspect.signature(C.Workload.__init__).parameters:
        kw["idempotent"] = IDEMPOTENT
    return C.Workload(cluster, TOPIC, PARTITIONS, producers=2, rate=rate, **kw)


def run_net_chaos(request, nc, faults, seed=1, rate=100):
    t_start = time.monotonic()
    cluster = nc.cluster
    C.create_topic(cluster, TOPIC, PARTITIONS, rf=3, min_isr=2)
    wl = make_workload(cluster, rate).start()
    nem = NetNemesis(nc, wl, random.Random(seed))
    try:
        faults(nem)
        time.sleep(1.0)
    finally:
        nc.net.heal()
        wl.stop()
    v = C.check(cluster, TOPIC, wl, converge_timeout=90.0)
    ctrl = C.check_one_controller(cluster)
    elapsed = time.monotonic() - t_start
    C.record_results(request.node.name, nem, v, elapsed)
    print(f"{request.node.name}: {v.summary()}; controller {ctrl}; failed deliveries "
          f"{len(wl.ledger.failed)}; faults {nem.log.events}; notes {nem.notes}; net {nc.net.events[-6:]}; "
          f"{elapsed:.0f}s; consumer errors {wl.consumer_errors}; offset resets {wl.offset_resets}")
    C.assert_ok(v, strict_duplicates=IDEMPOTENT)
    assert v.acked > 0
    return nem, v


def test_zk_leader_and_follower_killed(request, netcluster):
    """(1) The ZooKeeper leader SIGKILLed during produce, then a follower during a controller
    failover, then the leader during a controller failover."""
    n = rounds(1, 3)

    def faults(nem):
        for _ in range(n):
            nem.kill_zk_leader()
            nem.kill_zk_follower_during_failover()
            if SOAK:
                nem.kill_zk_leader_during_failover()
    run_net_chaos(request, netcluster, faults)


def test_ensemble_down_past_session_timeout(request, netcluster):
    """(2) Every ZooKeeper member down for session timeout + 2 s: brokers keep serving the current
    leaders; when the ensemble returns the cluster converges."""
    downs = [SESSION_S + 2] * rounds(1, 3)
    run_net_chaos(request, netcluster, lambda nem: [nem.ensemble_outage(d) for d in downs])


def test_leader_cut_from_zookeeper(request, netcluster):
    """(3) Split brain: a partition leader loses ZooKeeper but not its clients or peers. Its
    session expires, another replica is elected; the old leader must not acknowledge acks=all
    writes the new leader lacks (the checker finds every acknowledged record), and after the heal
    it rejoins as a follower, truncated by leader epoch (no divergent offset)."""
    n = rounds(1, 4)
    run_net_chaos(request, netcluster, lambda nem: [nem.cut_leader_from_zk() for _ in range(n)])


def test_controller_cut_from_zookeeper(request, netcluster):
    """(4a) The controller cut from ZooKeeper only: a new controller with a higher epoch takes
    over; the zombie is fenced and rejoins; exactly one controller afterwards."""
    n = rounds(1, 3)
    run_net_chaos(request, netcluster, lambda nem: [nem.cut_controller_from_zk() for _ in range(n)])


@pytest.mark.broker_config({"controller.socket.timeout.ms": "1500"})
def test_controller_cut_from_brokers(request, netcluster):
    """(4b) The controller cut from every broker but not from ZooKeeper — once reset (requests
    fail at once), once blackholed (requests time out after controller.socket.timeout.ms): it
    stays controller, its channel manager retries with back-off, partitions it leads stop taking
    acks=all writes (no loss), and after the heal everything converges."""
    n = rounds(1, 3)

    def faults(nem):
        for _ in range(n):
            nem.cut_controller_from_brokers(4.0, "cut")
            nem.cut_controller_from_brokers(4.0, "blackhole")
    run_net_chaos(request, netcluster, faults)


def test_follower_cut_from_leader(request, netcluster):
    """(5) A follower cut from its leader: ISR shrinks, writes continue, nothing lost, ISR expands
    after the heal."""
    n = rounds(1, 4)
    run_net_chaos(request, netcluster, lambda nem: [nem.cut_follower_from_leader(1.0) for _ in range(n)])


def test_failover_with_slow_zookeeper(request, netcluster):
    """(6) 200 ms added in each direction on every broker's ZooKeeper links: a leader failover and
    a controller failover still complete (figures in the summary table)."""
    n = rounds(1, 3)

    def faults(nem):
        for _ in range(n):
            nem.kill_leader_slow_zk(200)
            nem.kill_controller_slow_zk(200)
    run_net_chaos(request, netcluster, faults)


@pytest.mark.broker_config({"offsets.topic.replication.factor": "3"})
def test_transactions_under_network_faults(request, netcluster):
    """(7) The transactional workload of tests/chaos/test_txn_chaos.py (transactional producers,
    a consume-transform-produce pipeline, a read_committed observer; txn_chaos.check_txn) while
    links are cut: a transaction coordinator's broker cut from the other brokers (its markers
    cannot be delivered, its followers fall behind), the same broker blackholed from ZooKeeper
    past its session timeout (it loses its partitions, another broker becomes coordinator), and a
    data partition's leader cut from ZooKeeper. Every anomaly count must be 0."""
    import txn_chaos as T
    nc, cluster = netcluster, netcluster.cluster
    rng = random.Random(int(os.environ.get("GREGOR_CHAOS_SEED", "1")))
    for t in T.TOPICS + (T.PIPE_IN, T.PIPE_OUT):
        C.create_topic(cluster, t, T.PARTITIONS, rf=3, min_isr=2)
    wl = T.TxnWorkload(cluster, producers=3, seed=rng.randrange(1000)).start()
    nem = T.TxnNemesis(cluster, rng)
    events = []

    def heal():
        nc.net.heal()
        cluster.wait_registered(timeout=40)
        nem.heal()

    def coordinator(tid):
        return nem.coordinator_of(tid)

    try:
        H.wait_for(lambda: all(any(tx["outcome"] == "committed" for tx in p.txns) for p in wl.producers)
                   or wl.crashed, 90, "a first commit by every transactional producer")
        for _ in range(rounds(1, 3)):
            b = coordinator(rng.choice(wl.producers).tid)
            nc.net.cut(f"broker-{b}", "broker")
            time.sleep(4.0)
            events.append(f"coordinator {b} cut from the brokers 4s")
            heal()
            b = coordinator(rng.choice(wl.producers).tid)
            nc.net.blackhole(f"broker-{b}", "zk")
            H.wait_for(lambda: b not in cluster.registered_ids(), SESSION_S + 15,
                       f"broker {b}'s registration gone while blackholed from ZooKeeper", interval=0.1)
            time.sleep(1.0)
            events.append(f"coordinator {b} blackholed from ZooKeeper past its session")
            heal()
            p = rng.randrange(T.PARTITIONS)
            b = C.leader_of(cluster, T.TOPICS[0], p)
            nc.net.cut(f"broker-{b}", "zk")
            H.wait_for(lambda: C.leader_of(cluster, T.TOPICS[0], p) not in (b, -1, None), SESSION_S + 30,
                       f"a new leader for {T.TOPICS[0]}-{p} while broker {b} is cut from ZooKeeper", interval=0.1)
            events.append(f"{T.TOPICS[0]}-{p} leader {b} cut from ZooKeeper")
            heal()
    finally:
        nc.net.heal()
        alive = wl.stop()
    txns = [tx for p in wl.producers for tx in p.txns]
    outcomes = {k: sum(tx["outcome"] == k for tx in txns) for k in ("committed", "aborted", "indeterminate")}
    print(f"{request.node.name}: faults {events}; transactions {outcomes}; pipeline inputs {len(wl.fed)}, "
          f"processed {[w.processed for w in wl.workers]}; client errors "
          f"{[f for p in wl.producers for f in p.fatal][:10]}")
    assert wl.crashed == [], wl.crashed
    assert alive == [], f"threads still running: {alive}"
    assert outcomes["committed"] > 0
    bootstrap = C.bootstrap(cluster, all_brokers=True)
    final = T.read_committed_all(bootstrap, T.TOPICS)
    pipe_out = [v for recs in T.read_committed_all(bootstrap, (T.PIPE_OUT,)).values() for _, v in recs]
    bad = T.check_txn(txns, final, wl.observer.seen, wl.fed, pipe_out)
    print(f"{request.node.name}: anomalies " + ", ".join(f"{k} {len(v)}" for k, v in bad.items()))
    assert not any(bad.values()), {k: v[:5] for k, v in bad.items() if v}
