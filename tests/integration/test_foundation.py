"""The foundation's process-level tests: registration, controller election and fencing, session
expiry, ZooKeeper restart, configuration errors, gregorctl.

Real ZooKeeper, real gregord processes (harness in gregor_harness.py, fixtures in conftest.py).
Each test runs in its own ZooKeeper chroot, so /controller_epoch starts absent for every test.
"""

import json
import os
import re
import time

import pytest
from kazoo.exceptions import BadVersionError, NoNodeError

import gregor_harness as H

SESSION_S = H.SESSION_TIMEOUT_MS / 1000.0
# Long enough for ZooKeeper to notice an expired session (timeout + a tick or two), a new
# election, and a slow 2-core box.
FAILOVER_TIMEOUT = SESSION_S + 20


def assert_one_claim_per_epoch(cluster):
    """No controller epoch announced ('ready as controller, epoch N') by two brokers."""
    claims = cluster.all_ready_epochs()
    dup = {e: ids for e, ids in claims.items() if len(ids) > 1}
    assert not dup, f"controller epochs claimed by more than one broker: {dup}"
    return claims


def check_broker_znode(reg, broker):
    """Kafka 2.7's /brokers/ids/N v5 JSON for a PLAINTEXT broker on 127.0.0.1:port."""
    port = broker.port
    assert reg["version"] == 5, reg
    assert reg["host"] == "127.0.0.1" and reg["port"] == port, reg
    assert reg["jmx_port"] == -1, reg
    assert isinstance(reg["timestamp"], str) and reg["timestamp"].isdigit(), reg
    ts_ms = int(reg["timestamp"])
    assert abs(ts_ms / 1000 - time.time()) < 600, f"timestamp {ts_ms} is not ms since the epoch"
    assert reg["endpoints"] == [f"PLAINTEXT://127.0.0.1:{port}"], reg
    assert reg["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}, reg
    assert isinstance(reg.get("features", {}), dict), reg
    assert "rack" not in reg, f"rack must be absent when broker.rack is unset: {reg}"


# --------------------------------------------------------------------------------------------
def test_three_brokers_register_and_elect_one_controller(cluster):
    c = cluster.wait_controller()
    ids = {1, 2, 3}
    assert c["brokerid"] in ids, c
    assert c["version"] == 1, c
    assert isinstance(c["timestamp"], str) and c["timestamp"].isdigit(), c
    assert c["_stat"].ephemeralOwner != 0, "/controller must be ephemeral"

    data, stat = cluster.zk.get("/controller_epoch")
    assert data == b"1", f"/controller_epoch on a fresh chroot: {data!r} (want b'1')"
    assert stat.ephemeralOwner == 0, "/controller_epoch must be persistent"

    assert cluster.registered_ids() == ids
    for i in ids:
        reg, st = cluster.registration(i)
        assert st.ephemeralOwner != 0, f"/brokers/ids/{i} must be ephemeral"
        check_broker_znode(reg, cluster[i])
    # The controller's ephemeral belongs to the same session as its broker registration.
    _, cst = cluster.registration(c["brokerid"])
    assert c["_stat"].ephemeralOwner == cst.ephemeralOwner

    cid, _ = cluster.get_json("/cluster/id")
    assert cid["version"] == "1", cid
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", cid["id"]), f"cluster id not a base64 UUID: {cid}"

    # The znode layout Kafka's tools expect.
    for p in ("/brokers/topics", "/brokers/seqid", "/admin/delete_topics", "/isr_change_notification",
              "/config/topics", "/config/changes", "/log_dir_event_notification"):
        assert cluster.zk.exists(p), f"{p} missing"

    # Exactly one active controller, by every broker's own account.
    cluster.wait_active_counts(c["brokerid"])
    claims = H.wait_for(lambda: cluster.all_ready_epochs().get(1), 10,
                        "a 'ready as controller, epoch 1' log line")
    assert claims == [c["brokerid"]], f"epoch 1 announced by {claims}, controller is {c['brokerid']}"
    # Every broker's zk-session file names its live session.
    for b in cluster.brokers.values():
        sid, pw = b.session()
        _, st = cluster.registration(b.id)
        assert st.ephemeralOwner == sid, f"broker {b.id}: zk-session {sid:#x} vs owner {st.ephemeralOwner:#x}"
        assert len(pw) == 16


# --------------------------------------------------------------------------------------------
def test_controller_sigkill_reelection(cluster):
    old = cluster.wait_controller()
    old_id = old["brokerid"]
    epoch, _ = cluster.controller_epoch()
    assert epoch == 1

    t0 = time.monotonic()
    cluster[old_id].kill()
    new = cluster.wait_new_controller(old["_stat"].czxid, timeout=FAILOVER_TIMEOUT)
    took = time.monotonic() - t0
    assert new["brokerid"] != old_id and new["brokerid"] in {1, 2, 3}, new
    assert cluster.controller_epoch()[0] == epoch + 1
    assert old_id not in cluster.registered_ids(), "the killed broker's registration survived its session"
    print(f"failover after SIGKILL took {took:.1f}s (session timeout {SESSION_S:.0f}s)")

    cluster.wait_active_counts(new["brokerid"], since=time.time())
    claims = assert_one_claim_per_epoch(cluster)
    H.wait_for(lambda: cluster.all_ready_epochs().get(epoch + 1), 10, "ready line for epoch 2")
    assert claims.get(epoch + 1, [new["brokerid"]]) == [new["brokerid"]]

    # The killed broker comes back: registers again, the controller stays where it is.
    cluster[old_id].start()
    cluster.wait_registered([old_id])
    assert cluster.controller_id() == new["brokerid"]
    assert cluster.controller_epoch()[0] == epoch + 1


# --------------------------------------------------------------------------------------------
def test_controller_sigstop_past_session_timeout_then_resumes(cluster):
    old = cluster.wait_controller()
    old_id = old["brokerid"]
    epoch, _ = cluster.controller_epoch()
    old_broker_epoch = cluster.broker_epoch(old_id)
    # /controller exists before the controller has loaded its context and said so: freeze it only
    # once it has (a loaded machine let the freeze land in between, and epoch 1 was never claimed)
    H.wait_for(lambda: epoch in cluster[old_id].ready_epochs(), 30,
               f"broker {old_id} ready as controller, epoch {epoch}")

    cluster[old_id].pause()
    new = cluster.wait_new_controller(old["_stat"].czxid, timeout=FAILOVER_TIMEOUT)
    assert new["brokerid"] != old_id, new
    assert cluster.controller_epoch()[0] == epoch + 1
    H.wait_for(lambda: old_id not in cluster.registered_ids(), 10,
               "the frozen broker's registration to vanish with its session")

    resumed_at = time.time()
    cluster[old_id].resume()
    # It notices the expiry, resigns, and registers again on a new session (new broker epoch).
    H.wait_for(lambda: cluster.broker_epoch(old_id) not in (None, old_broker_epoch), 30,
               f"broker {old_id} to re-register with a new czxid")
    assert cluster[old_id].running()

    # The new controller keeps /controller; the old one does not fight for it.
    cur = cluster.controller()
    assert cur["_stat"].czxid == new["_stat"].czxid, f"/controller changed after SIGCONT: {cur}"
    assert cluster.controller_epoch()[0] == epoch + 1
    counts = cluster.wait_active_counts(new["brokerid"], since=resumed_at + 0.1)
    assert counts[old_id] == 0
    H.wait_for(lambda: cluster.all_ready_epochs().get(epoch + 1), 10, "ready line for the new epoch")
    claims = assert_one_claim_per_epoch(cluster)
    assert claims.get(epoch) == [old_id] and claims.get(epoch + 1) == [new["brokerid"]], claims
    log = cluster[old_id].log()
    if not re.search(r"resign", log, re.I):
        pytest.fail(f"broker {old_id} resumed after losing the controllership but its log never "
                    "mentions resigning")


# --------------------------------------------------------------------------------------------
def test_deleting_controller_znode_triggers_reelection(cluster):
    old = cluster.wait_controller()
    epoch, _ = cluster.controller_epoch()
    cluster.zk.delete("/controller")
    new = cluster.wait_new_controller(old["_stat"].czxid, timeout=15)
    assert new["brokerid"] in {1, 2, 3}
    assert cluster.controller_epoch()[0] == epoch + 1
    # Stable: nobody deletes or re-creates it again.
    H.wait_for(lambda: cluster.all_ready_epochs().get(epoch + 1), 10, "ready line for the new epoch")
    cluster.wait_active_counts(new["brokerid"], since=time.time())
    cur = cluster.controller()
    assert cur["_stat"].czxid == new["_stat"].czxid and cluster.controller_epoch()[0] == epoch + 1
    assert_one_claim_per_epoch(cluster)
    assert cluster.registered_ids() == {1, 2, 3}


def test_restart_after_a_kill_between_connect_and_registration(cluster_factory, zk_connect):
    """A broker SIGKILLed after it connected to ZooKeeper but before it registered (seen in a CI
    run: killed again while loading its logs) leaves two sessions of its own alive: the one that
    still holds /brokers/ids/1 and the new one. The next start must close both, not exit with
    "broker.id 1 is already registered" until the older one times out. The killed incarnation
    is simulated: a live session of the test's own, listed in zk-session in front of the
    registered one, as a start-up writes it before closing the earlier sessions."""
    cluster = cluster_factory(zk_connect, n=1)
    b = cluster[1]
    sid_a, pw_a = b.session()
    _, st = cluster.registration(1)
    assert st.ephemeralOwner == sid_a
    b.kill()
    zb = H.kazoo_client(zk_connect)  # "the incarnation killed before registering"
    try:
        sid_b, pw_b = zb.client_id
        with open(os.path.join(b.logdir, "zk-session"), "w") as f:
            f.write(f"{sid_b:#x} {pw_b.hex()}\n{sid_a:#x} {pw_a.hex()}\n")
        b.start()

        def registered_anew():
            cluster._check_alive([1])  # the old code exits 1: "already registered"
            _, st = cluster.registration(1)
            return st is not None and st.ephemeralOwner not in (sid_a, sid_b) and st.ephemeralOwner
        owner = H.wait_for(registered_anew, 20, "broker 1 registered by a new session")
        assert (b.session() or (None,))[0] == owner
        with open(os.path.join(b.logdir, "zk-session")) as f:
            assert len(f.read().splitlines()) == 1, "the earlier sessions are closed and forgotten"
        log = b.log()
        assert f"Closed the ZooKeeper session {sid_a:#x}" in log and f"{sid_b:#x}" in log, b.log_tail(30)
    finally:
        H.close_kazoo(zb)


# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("role", ["follower", "controller"])
def test_session_expiry_reregisters(cluster, role):
    ctl = cluster.wait_controller()
    epoch, _ = cluster.controller_epoch()
    if role == "controller":
        victim = ctl["brokerid"]
    else:
        victim = min(i for i in (1, 2, 3) if i != ctl["brokerid"])
    b = cluster[victim]
    sid, pw = b.session()
    old_czxid = cluster.broker_epoch(victim)

    H.expire_session(cluster.zk_connect, sid, pw)
    H.wait_for(lambda: cluster.broker_epoch(victim) not in (None, old_czxid), 30,
               f"broker {victim} to re-register after its session was expired")
    new_sid = H.wait_for(lambda: (b.session() or (None,))[0] != sid and b.session(), 10,
                         "zk-session to name the new session")[0]
    _, st = cluster.registration(victim)
    assert st.ephemeralOwner == new_sid
    assert b.running()

    if role == "controller":
        new = cluster.wait_new_controller(ctl["_stat"].czxid, timeout=FAILOVER_TIMEOUT)
        assert cluster.controller_epoch()[0] == epoch + 1
        cluster.wait_active_counts(new["brokerid"], since=time.time())
    else:
        assert cluster.controller()["_stat"].czxid == ctl["_stat"].czxid, "controller moved"
        assert cluster.controller_epoch()[0] == epoch
    assert cluster.registered_ids() == {1, 2, 3}
    assert_one_claim_per_epoch(cluster)


# --------------------------------------------------------------------------------------------
def test_zookeeper_restart(dedicated_zk, cluster_factory):
    root = H.kazoo_client(dedicated_zk.hosts)
    root.ensure_path("/gregor")
    H.close_kazoo(root)
    cluster = cluster_factory(dedicated_zk.hosts + "/gregor", n=3)
    cluster.wait_controller()
    epoch, _ = cluster.controller_epoch()

    # An outage longer than the session timeout.
    dedicated_zk.restart(down_seconds=SESSION_S + 2)
    restarted = time.time()
    for b in cluster.brokers.values():
        assert b.running(), f"broker {b.id} died while ZooKeeper was down (exit {b.returncode})"

    cluster.wait_registered(timeout=60)
    c = cluster.wait_controller(timeout=60)
    counts = cluster.wait_active_counts(c["brokerid"], since=restarted, timeout=30)
    assert sum(counts.values()) == 1
    e2, _ = cluster.controller_epoch()
    assert e2 >= epoch
    assert_one_claim_per_epoch(cluster)


# --------------------------------------------------------------------------------------------
def test_guarded_write_with_stale_epoch_version_is_refused_by_zookeeper(cluster):
    """Kafka's fencing primitive, shown with kazoo on the live layout: a multi that checks
    /controller_epoch's zkVersion fails as a whole once the epoch was bumped."""
    zk = cluster.zk
    _, version = cluster.controller_epoch()
    t = zk.transaction()
    t.check("/controller_epoch", version)
    t.create("/gregor-guard-probe-ok", b"x")
    assert all(r is True or isinstance(r, str) for r in t.commit())
    zk.delete("/gregor-guard-probe-ok")

    # Another "controller" bumps the epoch (what a newer election does) ...
    epoch, _ = cluster.controller_epoch()
    zk.set("/controller_epoch", str(epoch + 1).encode(), version=version)
    # ... and the old zkVersion no longer passes the check: nothing in the multi happens.
    t = zk.transaction()
    t.check("/controller_epoch", version)
    t.create("/gregor-guard-probe", b"x")
    res = t.commit()
    assert isinstance(res[0], BadVersionError), res
    assert not zk.exists("/gregor-guard-probe")


# Writes a ZooKeeper-mode controller makes in response to something a test can create by hand.
# Each: (name, create(zk, controller_id) -> handle, acted(zk, handle) -> bool).
def _seq_child_gone(zk, path):
    return not zk.exists(path)


PROBES = [
    ("isr_change_notification",
     lambda zk, cid: zk.create("/isr_change_notification/isr_change_",
                               json.dumps({"version": 1, "partitions": [
                                   {"topic": "gregor-probe", "partition": 0}]}).encode(),
                               sequence=True, makepath=True),
     _seq_child_gone),
    ("log_dir_event_notification",
     lambda zk, cid: zk.create("/log_dir_event_notification/log_dir_event_",
                               json.dumps({"version": 1, "broker": cid, "event": 1}).encode(),
                               sequence=True, makepath=True),
     _seq_child_gone),
    ("preferred_replica_election",
     lambda zk, cid: zk.create("/admin/preferred_replica_election",
                               json.dumps({"version": 1, "partitions": []}).encode(), makepath=True),
     _seq_child_gone),
]


def _topic_probe_create(zk, cid, _n=[0]):
    _n[0] += 1
    t = f"gregor-probe-{_n[0]}"
    zk.create(f"/brokers/topics/{t}", json.dumps(
        {"version": 2, "partitions": {"0": [cid]}, "adding_replicas": {},
         "removing_replicas": {}}).encode(), makepath=True)
    return t


PROBES.append(("topic_creation", _topic_probe_create,
               lambda zk, t: zk.exists(f"/brokers/topics/{t}/partitions/0/state") is not None))


def test_stale_controller_epoch_write_refused_by_gregord(cluster):
    """Bump /controller_epoch behind the active controller's back (as a newer controller would),
    then make it write: its guarded write must be refused; the write is made only by a
    controller elected past the bump."""
    zk = cluster.zk
    ctl = cluster.wait_controller()
    cid = ctl["brokerid"]
    cluster.wait_active_counts(cid)

    # 1. Find a write this controller makes (control phase, epoch intact).
    probe = None
    for name, create, acted in PROBES:
        h = create(zk, cid)
        try:
            H.wait_for(lambda: acted(zk, h), 5, f"the controller to act on {name}")
        except AssertionError:
            continue
        probe = (name, create, acted)
        break
    assert probe is not None, ("the controller performed none of the probed ZooKeeper writes "
                               f"({', '.join(p[0] for p in PROBES)}) within 5 s each")
    name, create, acted = probe

    # 2. Bump the epoch by hand, then trigger the same write. Its guarded write is refused
    # (controller moved); Kafka 2.7 would then stay fenced until /controller changes. Gregor's
    # controller finds /controller still naming it but its election no longer the last one: it
    # resigns, deletes /controller and elects again (controller.c note_controller), so the write
    # is made once, by a controller of the epoch after the bump.
    epoch, version = cluster.controller_epoch()
    zk.set("/controller_epoch", str(epoch + 1).encode(), version=version)
    log_mark = len(cluster[cid].log())
    h = create(zk, cid)
    H.wait_for(lambda: acted(zk, h), 20, f"a controller elected past the bump to perform the pending {name} write")
    later = cluster[cid].log()[log_mark:]
    print(f"probe {name}; controller {cid} log after the bump:\n{later[-3000:]}")
    assert "Controller moved to another broker when processing" in later, \
        f"controller {cid} did not have its guarded {name} write refused"
    assert "is no longer the last one" in later, f"controller {cid} did not notice the bumped epoch"
    H.wait_for(lambda: cluster.controller_epoch()[0] == epoch + 2, 10,
               f"/controller_epoch {epoch + 2} (the bumped epoch + 1)")
    new = cluster.wait_controller()
    cluster.wait_active_counts(new["brokerid"], since=time.time())
    claims = assert_one_claim_per_epoch(cluster)
    assert epoch + 1 not in claims, f"someone announced the hand-bumped epoch {epoch + 1}: {claims}"
    assert epoch + 2 in claims, f"no controller announced epoch {epoch + 2}: {claims}"


# --------------------------------------------------------------------------------------------
def test_sigterm_clean_shutdown_deregisters_and_hands_over(cluster):
    ctl = cluster.wait_controller()
    cid = ctl["brokerid"]
    t0 = time.monotonic()
    rc = cluster[cid].stop(timeout=30)
    assert rc == 0, f"SIGTERM exit code {rc}"
    # A clean shutdown closes its session: registration and /controller go at once, not after
    # the session timeout; well before that, a new controller is in place.
    gone = time.monotonic() - t0
    # Checked right after the exit, so an expiring (rather than closed) session would show.
    assert cid not in cluster.registered_ids(), "still registered after a clean exit"
    cur = cluster.controller()
    assert cur is None or cur["_stat"].czxid != ctl["_stat"].czxid, \
        "the old /controller outlived its clean exit (session not closed?)"
    new = cluster.wait_new_controller(ctl["_stat"].czxid, timeout=FAILOVER_TIMEOUT)
    took = time.monotonic() - t0
    print(f"clean shutdown took {gone:.1f}s, new controller after {took:.1f}s")
    assert new["brokerid"] != cid
    assert re.search(r"resign", cluster[cid].log(), re.I), "controller shut down without resigning"
    assert_one_claim_per_epoch(cluster)


# --------------------------------------------------------------------------------------------
def test_duplicate_broker_id_refused(cluster):
    target = 2
    before = cluster.broker_epoch(target)
    ctl = cluster.controller()
    dup = H.Broker(cluster, target, name="dup-2")
    dup.start()
    try:
        rc = dup.wait_exit(30)
    except Exception:
        dup.kill()
        pytest.fail(f"second broker.id={target} still running after 30s:\n{dup.log_tail(20)}")
    log = dup.log()
    assert rc == 1, f"duplicate broker.id exit code {rc} (want 1); log:\n{log[-2000:]}"
    assert f"broker.id {target} is already registered" in log, log[-2000:]
    # The first one is unaffected.
    assert cluster[target].running()
    assert cluster.broker_epoch(target) == before
    assert cluster.controller()["_stat"].czxid == ctl["_stat"].czxid
    reg, _ = cluster.registration(target)
    assert reg["port"] == cluster[target].port


# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("key,value", [
    ("zookeeper.session.timeout.ms", "abc"),
    ("broker.id", "x"),
    ("listeners", "PLAINTEXT//nonsense"),
    ("log.segment.bytes", "-5"),
])
@pytest.mark.parametrize("how", ["file", "override"])
def test_bad_config_exits_2_naming_the_key(cluster_factory, zk_connect, key, value, how):
    c = cluster_factory(zk_connect, n=1, start=False)
    b = c[1]
    if how == "file":
        b.config[key] = value
        b.start()
    else:
        b.start(args=["--override", f"{key}={value}"])
    try:
        rc = b.wait_exit(15)
    except Exception:
        b.kill()
        pytest.fail(f"gregord with {key}={value} did not exit:\n{b.log_tail(20)}")
    log = b.log()
    assert rc == 2, f"exit code {rc} (want 2) for {key}={value}; output:\n{log[-1500:]}"
    assert key in log, f"message does not name {key}:\n{log[-1500:]}"
    assert not c.registered_ids(), "a broker with a bad config registered anyway"


def test_missing_config_file_exits_2(cluster_factory, zk_connect, tmp_path):
    c = cluster_factory(zk_connect, n=1, start=False)
    b = c[1]
    b.write_config = lambda: None
    b.config_path = str(tmp_path / "no-such.properties")
    b.start()
    rc = b.wait_exit(15)
    assert rc != 0 and "no-such.properties" in b.log(), (rc, b.log()[-1000:])


# --------------------------------------------------------------------------------------------
def _ctl_brokers(doc):
    """{id: entry} from gregorctl's JSON, whatever the exact key names."""
    brokers = doc.get("brokers") or doc.get("live_brokers") or []
    if isinstance(brokers, dict):
        return {int(k): v for k, v in brokers.items()}
    out = {}
    for b in brokers:
        bid = next(b[k] for k in ("id", "broker_id", "brokerId", "brokerid") if k in b)
        out[int(bid)] = b
    return out


def _ctl_controller(doc):
    """(controller id, epoch) from gregorctl's JSON."""
    c = doc.get("controller")
    cid = c
    epoch = doc.get("controller_epoch", doc.get("controllerEpoch"))
    if isinstance(c, dict):
        cid = next((c[k] for k in ("id", "broker_id", "brokerId", "brokerid") if k in c), None)
        epoch = c.get("epoch", epoch)
    if cid is None:
        cid = doc.get("controller_id", doc.get("controllerId"))
    return cid, epoch


def test_gregorctl_cluster(cluster):
    ctl = cluster.wait_controller()
    cluster.wait_active_counts(ctl["brokerid"])
    r = H.run_gregorctl(cluster.zk_connect, "cluster", "--json")
    assert r.returncode == 0, f"gregorctl exit {r.returncode}: {r.stderr}"
    doc = json.loads(r.stdout)
    brokers = _ctl_brokers(doc)
    assert set(brokers) == {1, 2, 3}, doc
    for i, entry in brokers.items():
        text = json.dumps(entry)
        assert str(cluster[i].port) in text, f"broker {i}'s endpoint missing: {entry}"
        assert str(cluster.broker_epoch(i)) in text, f"broker {i}'s epoch (czxid) missing: {entry}"
    cid, epoch = _ctl_controller(doc)
    assert cid == ctl["brokerid"] and epoch == cluster.controller_epoch()[0], doc
    cluster_id, _ = cluster.get_json("/cluster/id")
    assert cluster_id["id"] in r.stdout

    # Human-readable form names the same things.
    r = H.run_gregorctl(cluster.zk_connect, "cluster")
    assert r.returncode == 0, r.stderr
    for i in (1, 2, 3):
        assert f"127.0.0.1:{cluster[i].port}" in r.stdout, r.stdout
    assert cluster_id["id"] in r.stdout


# --------------------------------------------------------------------------------------------
def test_missing_chroot_is_created(zk_server, cluster_factory):
    """zookeeper.connect=host:port/a/b where /a/b does not exist yet: created (as Kafka does)."""
    chroot = f"/gregor-fresh-{int(time.time() * 1000) % 10**9}/nested"
    cluster = cluster_factory(zk_server.hosts + chroot, n=1)
    assert cluster.registered_ids() == {1}
    root = H.kazoo_client(zk_server.hosts)
    try:
        assert root.exists(chroot + "/brokers/ids/1"), "registration not under the chroot"
        assert not root.exists("/brokers/ids/1"), "registration leaked outside the chroot"
    finally:
        H.close_kazoo(root)
