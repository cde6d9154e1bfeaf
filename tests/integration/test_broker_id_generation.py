"""Automatic broker ids (Kafka 2.7's broker.id.generation.enable, KafkaServer.getOrGenerateBrokerId).

A gregord whose server.properties has no broker.id gets reserved.broker.max.id + the new data
version of /brokers/seqid (1001, 1002, ... in a fresh cluster), registers under it, writes it to
meta.properties and keeps it across restarts; a configured broker.id that differs from
meta.properties, or log dirs that disagree, stop the broker; broker.id.generation.enable=false
without broker.id is an invalid configuration (exit 2).
"""

import os

import pytest
from confluent_kafka.admin import AdminClient

import gregor_harness as H

NO_ID = {"broker.id": None}


def auto_broker(cluster, name, config=None):
    """A broker of `cluster` whose config file has no broker.id (the harness key is `name`)."""
    b = H.Broker(cluster, name, config={**NO_ID, **(config or {})})
    cluster.brokers[name] = b
    return b


def registered_id(cluster, broker, timeout=30.0):
    """Waits until some /brokers/ids/N carries broker's port; returns N."""
    def find():
        if not broker.running():
            raise AssertionError(f"broker {broker.id} exited with code {broker.returncode}:\n"
                                 + broker.log_tail(30))
        for i in cluster.registered_ids():
            reg, _ = cluster.registration(i)
            if reg is not None and reg.get("port") == broker.port:
                return i
        return None
    return H.wait_for(find, timeout, f"broker {broker.id} (port {broker.port}) registered")


def meta_properties(logdir):
    with open(os.path.join(logdir, "meta.properties")) as f:
        lines = [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]
    return dict(ln.split("=", 1) for ln in lines)


def write_meta(logdir, broker_id):
    os.makedirs(logdir, exist_ok=True)
    with open(os.path.join(logdir, "meta.properties"), "w") as f:
        f.write(f"#\nversion=0\nbroker.id={broker_id}\n")


def exit_code(broker, timeout=20.0):
    try:
        return broker.wait_exit(timeout)
    except Exception:
        broker.kill()
        pytest.fail(f"broker {broker.id} still running after {timeout:.0f}s:\n{broker.log_tail(30)}")


def test_generated_ids_registered_stored_and_seen_by_clients(cluster_factory, zk_connect):
    c = cluster_factory(zk_connect, n=0, start=False)
    a, b = auto_broker(c, "a"), auto_broker(c, "b")
    a.start()
    assert registered_id(c, a) == 1001
    b.start()
    assert registered_id(c, b) == 1002
    assert c.registered_ids() == {1001, 1002}
    assert c.zk.exists("/brokers/seqid").version == 2
    cluster_id = c.get_json("/cluster/id")[0]["id"]
    for broker, want in ((a, 1001), (b, 1002)):
        mp = meta_properties(broker.logdir)
        assert mp["broker.id"] == str(want), mp
        assert mp["cluster.id"] == cluster_id, mp
        assert f"Generated broker.id {want}" in broker.log(), broker.log_tail(30)
    c.wait_controller(lambda ctl: ctl["brokerid"] in (1001, 1002))

    # A client's Metadata lists the generated ids with their listeners.
    admin = AdminClient({"bootstrap.servers": a.address, "socket.timeout.ms": 10000})

    def brokers():
        md = admin.list_topics(timeout=10)
        got = {i: bm.port for i, bm in md.brokers.items()}
        return got if len(got) == 2 else None
    assert H.wait_for(brokers, 20, "both brokers in Metadata") == {1001: a.port, 1002: b.port}

    # A restarted broker takes its id from meta.properties: no new sequence number.
    assert a.stop() == 0
    H.wait_for(lambda: 1001 not in c.registered_ids(), 20, "1001 deregistered")
    a.start()
    assert registered_id(c, a) == 1001
    assert "Using broker.id 1001 stored in meta.properties" in a.log(), a.log_tail(30)
    assert "Generated broker.id" not in a.log()
    assert c.zk.exists("/brokers/seqid").version == 2
    assert c.registered_ids() == {1001, 1002}


def test_first_generated_id_follows_reserved_broker_max_id(cluster_factory, zk_connect):
    c = cluster_factory(zk_connect, n=0, start=False)
    a = auto_broker(c, "a", {"reserved.broker.max.id": "5000"})
    a.start()
    assert registered_id(c, a) == 5001
    assert meta_properties(a.logdir)["broker.id"] == "5001"


def test_configured_id_must_match_meta_properties(cluster_factory, zk_connect):
    c = cluster_factory(zk_connect, n=0, start=False)
    a = auto_broker(c, "a")
    a.start()
    assert registered_id(c, a) == 1001
    assert a.stop() == 0
    a.config["broker.id"] = "5"
    a.start()
    rc = exit_code(a)
    log = a.log()
    assert rc == 1, f"exit code {rc} (want 1):\n{log[-2000:]}"
    assert ("Configured broker.id 5 doesn't match stored broker.id 1001 in meta.properties" in log
            and "you should remove all data in your data directories (log.dirs)" in log), log[-2000:]
    assert not c.registered_ids()
    assert meta_properties(a.logdir)["broker.id"] == "1001"


def test_log_dirs_with_different_ids_refused(cluster_factory, zk_connect):
    c = cluster_factory(zk_connect, n=0, start=False)
    a = auto_broker(c, "a")
    other = a.logdir + "-2"
    a.config["log.dirs"] = f"{a.logdir},{other}"
    write_meta(a.logdir, 7)
    write_meta(other, 8)
    a.start()
    rc = exit_code(a)
    log = a.log()
    assert rc == 1, f"exit code {rc} (want 1):\n{log[-2000:]}"
    assert "Failed to match broker.id across log.dirs" in log, log[-2000:]
    assert "7 (in " in log and "8 (in " in log, log[-2000:]
    assert not c.registered_ids()
    assert c.zk.exists("/brokers/seqid").version == 0, "a broker id was generated anyway"


def test_stored_id_is_used_and_written_to_new_dirs(cluster_factory, zk_connect):
    c = cluster_factory(zk_connect, n=0, start=False)
    a = auto_broker(c, "a")
    other = a.logdir + "-2"
    a.config["log.dirs"] = f"{a.logdir},{other}"
    write_meta(other, 42)
    a.start()
    assert registered_id(c, a) == 42
    assert meta_properties(a.logdir)["broker.id"] == "42"
    assert c.zk.exists("/brokers/seqid").version == 0


@pytest.mark.parametrize("config,expect", [
    ({"broker.id.generation.enable": "false"}, "broker.id must be greater than or equal to 0"),
    ({"broker.id.generation.enable": "false", "broker.id": "-1"}, "broker.id must be greater than or equal to 0"),
    ({"broker.id": "1001"},
     "broker.id must be greater than or equal to -1 and not greater than reserved.broker.max.id"),
])
def test_invalid_broker_id_config_exits_2(cluster_factory, zk_connect, config, expect):
    c = cluster_factory(zk_connect, n=0, start=False)
    a = auto_broker(c, "a", config)
    a.start()
    rc = exit_code(a, 15)
    log = a.log()
    assert rc == 2, f"exit code {rc} (want 2) for {config}:\n{log[-1500:]}"
    assert "broker.id" in log and expect in log, log[-1500:]
    assert not c.registered_ids()
