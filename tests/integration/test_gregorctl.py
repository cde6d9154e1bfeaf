"""gregorctl as Kafka's tools: --bootstrap-server takes a comma-separated list (each address tried
until one answers, a malformed one is an error naming it), and a topic just created is described
with its leaders instead of UNKNOWN_TOPIC_OR_PARTITION (create waits for the leaders unless
--no-wait; describe --topic waits while a topic is being created).
"""

import json
import subprocess
import time

import gregor_harness as H


def ctl(bootstrap, *args, timeout_ms=20000):
    return subprocess.run([H.GREGORCTL, "--bootstrap-server", bootstrap, "--timeout-ms", str(timeout_ms), *args],
                          capture_output=True, text=True, timeout=90)


def addr(cluster, i):
    return f"127.0.0.1:{cluster[i].port}"


def leaders(describe_json, topic):
    [t] = [t for t in describe_json if t["topic"] == topic]
    return [p["leader"] for p in sorted(t["partitions"], key=lambda p: p["partition"])]


def test_bootstrap_list_skips_a_dead_address(cluster):
    dead = f"127.0.0.1:{H.free_port()}"
    out = ctl(f"{dead},{addr(cluster, 2)}", "topics", "create", "--topic", "boot", "--partitions", "2",
              "--replication-factor", "2")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Created topic boot." in out.stdout
    # the form scripts/cluster-up.sh prints ("bootstrap: a,b,c"), dead address first
    everyone = ",".join([dead] + [addr(cluster, i) for i in sorted(cluster.brokers)])
    out = ctl(everyone, "topics", "describe", "--topic", "boot")
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith("Topic: boot\tPartitionCount: 2\tReplicationFactor: 2")
    out = ctl(everyone, "topics", "list")
    assert out.returncode == 0 and "boot" in out.stdout.split(), out.stdout + out.stderr
    # every address dead: a failure that names them
    dead2 = f"127.0.0.1:{H.free_port()}"
    out = ctl(f"{dead},{dead2}", "topics", "list", timeout_ms=3000)
    assert out.returncode == 1
    assert dead in out.stderr and dead2 in out.stderr


def test_malformed_bootstrap_address_is_named(cluster):
    good = addr(cluster, 1)
    for bad in ["127.0.0.1:99999", "no-port", "127.0.0.1:", "host:12ab"]:
        for lst in [f"{good},{bad}", f"{bad},{good}"]:
            out = ctl(lst, "topics", "list")
            assert out.returncode != 0, f"{lst}: {out.stdout}"
            assert f"'{bad}'" in out.stderr, f"{lst}: {out.stderr}"
            assert "invalid bootstrap server address" in out.stderr
            assert out.stdout == ""


def test_create_then_describe_at_once_shows_leaders(cluster):
    """create (through a broker) and describe right after (through another): the leaders are
    there, on text and JSON output, for every partition."""
    for i, (via_create, via_describe) in enumerate([(1, 2), (2, 3), (3, 1), (2, 1)]):
        topic = f"fresh{i}"
        out = ctl(addr(cluster, via_create), "topics", "create", "--topic", topic, "--partitions", "8",
                  "--replication-factor", "3")
        assert out.returncode == 0, out.stdout + out.stderr
        out = ctl(addr(cluster, via_describe), "topics", "describe", "--topic", topic, "--json")
        assert out.returncode == 0, out.stdout + out.stderr
        ls = leaders(json.loads(out.stdout), topic)
        assert len(ls) == 8 and all(l in cluster.brokers for l in ls), ls


def test_create_then_describe_through_a_lagging_broker(cluster):
    """The broker asked to describe has not applied the controller's metadata yet (it was paused
    while the topic was created through the controller): describe still shows every leader."""
    ctrl = cluster.controller_id()
    lag = [i for i in sorted(cluster.brokers) if i != ctrl][0]
    cluster[lag].pause()
    try:
        out = ctl(addr(cluster, ctrl), "topics", "create", "--topic", "lagged", "--partitions", "8",
                  "--replication-factor", "3", timeout_ms=1500)
    finally:
        cluster[lag].resume()  # well within the 3 s ZooKeeper session
    assert out.returncode == 0, out.stdout + out.stderr
    out = ctl(addr(cluster, lag), "topics", "describe", "--topic", "lagged", "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    ls = leaders(json.loads(out.stdout), "lagged")
    assert len(ls) == 8 and all(l in cluster.brokers for l in ls), ls


def test_describe_waits_for_a_topic_being_created(cluster):
    """A topic written to ZooKeeper directly (as kafka-topics --zookeeper does) and described at
    once: the broker does not know it yet, the controller does; describe waits for the leaders."""
    for i in range(3):
        topic = f"zkmade{i}"
        assignment = {str(p): [1 + (p + r) % 3 for r in range(3)] for p in range(6)}
        cluster.zk.create(f"/brokers/topics/{topic}",
                          json.dumps({"version": 2, "partitions": assignment, "adding_replicas": {},
                                      "removing_replicas": {}}).encode())
        out = ctl(addr(cluster, 1 + i % 3), "topics", "describe", "--topic", topic, "--json")
        assert out.returncode == 0, out.stdout + out.stderr
        ls = leaders(json.loads(out.stdout), topic)
        assert len(ls) == 6 and all(l in cluster.brokers for l in ls), ls


def test_describe_unknown_topic_fails_fast_and_no_wait(cluster):
    t0 = time.monotonic()
    out = ctl(addr(cluster, 1), "topics", "describe", "--topic", "never-created", timeout_ms=20000)
    assert out.returncode == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION" in out.stderr
    assert time.monotonic() - t0 < 10, "describe of an unknown topic must not wait for --timeout-ms"
    out = ctl(addr(cluster, 2), "topics", "create", "--topic", "nowait", "--partitions", "1",
              "--replication-factor", "1", "--no-wait")
    assert out.returncode == 0 and "Created topic nowait." in out.stdout, out.stdout + out.stderr
