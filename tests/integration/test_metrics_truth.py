"""Issue 27: the figures Gregor serves mean what Kafka 2.7's do (one test per item).

1. UnderReplicatedPartitions (and the per-partition UnderReplicated gauge) leaves out the replicas
   a reassignment is still adding, as Kafka's Partition.isUnderReplicated; a missing original
   replica still counts.
2. Fetch is recorded as Kafka's RequestChannel records it: RequestsPerSec / TotalTimeMs /
   RequestQueueTimeMs under request="Fetch" and under FetchConsumer (FetchFollower), ErrorsPerSec
   only under "Fetch".
3. Histograms export every <N>thPercentile Kafka has, as the JMX exporter labels them
   (quantile="0.50" ... "0.999"), next to _sum and _count.
4. gregorctl configs prints quota values as Java's Double.toString (kafka-configs.sh).
"""

import json
import os
import subprocess
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

import gregor_harness as H
from test_metrics import parse, scrape, value

CONFIG = {"replica.lag.time.max.ms": "2000", "offsets.topic.replication.factor": "1",
          "auto.leader.rebalance.enable": "false"}


def start(cluster_factory, zk_connect, n):
    c = cluster_factory(zk_connect, n=n, config=CONFIG, start=False)
    for b in c.brokers.values():
        b.metrics_port = H.free_port()
        b.config["gregor.metrics.listener"] = f"http://127.0.0.1:{b.metrics_port}"
    c.start()
    return c


def bootstrap(cluster):
    return ",".join(f"127.0.0.1:{b.port}" for b in cluster.running())


def state(cluster, topic, p):
    return (cluster.get_json(f"/brokers/topics/{topic}/partitions/{p}/state") or [{}])[0] or {}


def create(cluster, topic, assign):
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    admin.create_topics([NewTopic(topic, len(assign), replica_assignment=assign)],
                        operation_timeout=20, request_timeout=30)[topic].result(timeout=40)
    for p in range(len(assign)):
        H.wait_for(lambda: sorted(state(cluster, topic, p).get("isr", [])) == sorted(assign[p]), 30,
                   f"{topic}-{p} full ISR")


def produce(cluster, topic, n):
    p = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all", "linger.ms": 5})
    errs = []
    for i in range(n):
        p.produce(topic, f"m{i}".encode(), on_delivery=lambda e, m: errs.append(e))
    p.flush(30)
    assert errs == [None] * n


def test_urp_excludes_adding_replicas(cluster_factory, zk_connect, tmp_path):
    c = start(cluster_factory, zk_connect, 3)
    ctrl = c.controller()["brokerid"]
    dead = next(i for i in (3, 2, 1) if i != ctrl)
    a, b = [i for i in (1, 2, 3) if i != dead]
    create(c, "ra", [[a, b]])
    produce(c, "ra", 10)
    c[dead].kill()
    f = os.path.join(str(tmp_path), "r.json")
    with open(f, "w") as fh:
        json.dump({"version": 1, "partitions": [{"topic": "ra", "partition": 0, "replicas": [a, b, dead]}]}, fh)
    r = H.run_gregorctl(c.zk_connect, "--bootstrap-server", f"127.0.0.1:{c[a].port}", "--timeout-ms", "15000",
                        "reassign", "execute", "--reassignment-json-file", f)
    assert r.returncode == 0, r.stdout + r.stderr
    # the leader has the reassigning assignment once its metadata lists the adding replica
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{c[a].port}"})

    def three():
        t = admin.list_topics("ra", timeout=5).topics["ra"]
        return len(t.partitions[0].replicas) == 3
    H.wait_for(three, 15, "leader sees replicas [a, b, dead]")
    time.sleep(0.5)
    s = parse(scrape(c[a].metrics_port))
    assert value(s, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(s, "kafka_cluster_partition_underreplicated", topic="ra", partition="0") == 0
    # an original replica missing still counts (ISR [a] < 2 original replicas)
    c[b].kill()
    H.wait_for(lambda: value(parse(scrape(c[a].metrics_port)),
                             "kafka_server_replicamanager_underreplicatedpartitions") == 1,
               15, "under-replicated once an original replica is gone")


def test_fetch_recorded_as_fetch(cluster_factory, zk_connect):
    c = start(cluster_factory, zk_connect, 1)
    create(c, "fx", [[1]])
    produce(c, "fx", 20)
    cons = Consumer({"bootstrap.servers": bootstrap(c), "group.id": "g-fx", "auto.offset.reset": "earliest",
                     "enable.auto.commit": False})
    cons.subscribe(["fx"])
    got, deadline = 0, time.monotonic() + 15
    while got < 20 and time.monotonic() < deadline:
        m = cons.poll(0.5)
        got += m is not None and m.error() is None
    cons.close()
    assert got == 20
    s = parse(scrape(c[1].metrics_port))
    fetch = value(s, "kafka_network_requestmetrics_requests_total", request="Fetch")
    consumer = value(s, "kafka_network_requestmetrics_requests_total", request="FetchConsumer")
    assert fetch and fetch > 0 and fetch == consumer, (fetch, consumer)
    for fam in ("totaltimems_count", "requestqueuetimems_count"):
        assert value(s, f"kafka_network_requestmetrics_{fam}", request="Fetch") == \
            value(s, f"kafka_network_requestmetrics_{fam}", request="FetchConsumer") > 0
    assert value(s, "kafka_network_requestmetrics_errors_total", request="Fetch", error="NONE") > 0
    bad = [ls for n, ls, _ in s if n == "kafka_network_requestmetrics_errors_total"
           and ls.get("request") in ("FetchConsumer", "FetchFollower")]
    assert bad == []


def test_histogram_exports_kafka_percentiles(cluster_factory, zk_connect):
    c = start(cluster_factory, zk_connect, 1)
    create(c, "hx", [[1]])
    produce(c, "hx", 50)
    text = scrape(c[1].metrics_port)
    s = parse(text)
    assert "# TYPE kafka_network_requestmetrics_totaltimems summary" in text.splitlines()
    qs = ["0.50", "0.75", "0.95", "0.98", "0.99", "0.999"]
    vals = [value(s, "kafka_network_requestmetrics_totaltimems", request="Produce", quantile=q) for q in qs]
    assert None not in vals, dict(zip(qs, vals))
    assert vals == sorted(vals)
    assert value(s, "kafka_network_requestmetrics_totaltimems_count", request="Produce") > 0
    assert value(s, "kafka_network_requestmetrics_totaltimems_sum", request="Produce") is not None


def test_quota_values_print_as_java_double(cluster_factory, zk_connect):
    c = cluster_factory(zk_connect, n=1, config=CONFIG)

    def ctl(*args):
        r = subprocess.run([H.GREGORCTL, "--bootstrap-server", bootstrap(c), "--timeout-ms", "15000", "configs",
                            *args], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout.strip()
    ctl("--alter", "--entity-type", "clients", "--entity-name", "big", "--add-config",
        "producer_byte_rate=10485760,consumer_byte_rate=1048576,request_percentage=12.5")
    # kafka-configs.sh prints java.lang.Double values (Double.toString); the order of the values
    # is that of a Java HashMap there, so only the set is compared
    head, _, vals = ctl("--describe", "--entity-type", "clients", "--entity-name", "big").partition(" are ")
    assert head == "Quota configs for client-id 'big'"
    assert sorted(vals.split(", ")) == ["consumer_byte_rate=1048576.0", "producer_byte_rate=1.048576E7",
                                        "request_percentage=12.5"]


def test_compaction_lag_conflict_refused(cluster_factory, zk_connect):
    """5. Kafka 2.7's LogConfig.validateValues: min.compaction.lag.ms > max.compaction.lag.ms is
    INVALID_CONFIG on CreateTopics and on (Incremental)AlterConfigs (the complete new overrides,
    over LogConfig's defaults)."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import ConfigResource
    c = cluster_factory(zk_connect, n=1, config=CONFIG)
    admin = AdminClient({"bootstrap.servers": bootstrap(c)})
    bad = admin.create_topics([NewTopic("lag", 1, 1, config={"min.compaction.lag.ms": "1000",
                                                            "max.compaction.lag.ms": "500"})],
                              request_timeout=15)["lag"]
    try:
        bad.result(timeout=20)
        assert False, "created"
    except KafkaException as e:
        err = e.args[0]
        assert err.code() == KafkaError.INVALID_CONFIG
        assert "conflict topic config setting min.compaction.lag.ms (1000) > max.compaction.lag.ms (500)" in err.str()
    admin.create_topics([NewTopic("lag", 1, 1, config={"max.compaction.lag.ms": "500"})],
                        request_timeout=15)["lag"].result(timeout=20)
    res = ConfigResource("topic", "lag", set_config={"max.compaction.lag.ms": "500", "min.compaction.lag.ms": "501"})
    try:
        admin.alter_configs([res], request_timeout=15)[res].result(timeout=20)
        assert False, "altered"
    except KafkaException as e:
        assert e.args[0].code() == KafkaError.INVALID_CONFIG, e
    res = ConfigResource("topic", "lag", set_config={"max.compaction.lag.ms": "500", "min.compaction.lag.ms": "500"})
    admin.alter_configs([res], request_timeout=15)[res].result(timeout=20)
