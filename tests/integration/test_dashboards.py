"""The dashboards operators deploy, as the test (issue 27).

deploy/grafana/ holds Strimzi's Kafka and ZooKeeper dashboards (unchanged: Gregor serves the names
Strimzi's kafka-metrics.yaml rules give Kafka's MBeans) and Confluent's jmx-monitoring-stacks
Kafka cluster and topics dashboards (metric names rewritten by scripts/grafana-gregor-names.py).
A real Prometheus scrapes a 3-broker cluster, the targets carrying the labels Strimzi's
PodMonitor / Confluent's scrape configuration attach, while the cluster gets a small workload:
produce, consume in a group, a reassignment, a broker killed and restarted. Then EVERY PromQL
expression of EVERY panel (and of every template variable) is evaluated with the variables
substituted as Grafana would, and must return data; except panels whose metrics are listed
below as not Gregor's to serve (each with its reason, which docs/METRICS.md repeats). Key panels
are checked for their values: Active Controllers is 1, the bytes-in counter grew by what the test
sent (within 10 %), Under Replicated Partitions is 0 after the reassignment and > 0 while a
broker is down.
"""

import glob
import json
import os
import re
import time

import pytest
from confluent_kafka import Consumer, Producer

import gregor_harness as H
from test_metrics import PROMETHEUS, Prometheus, bootstrap, create_topic, needs_prometheus

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DASHBOARDS = sorted(glob.glob(os.path.join(ROOT, "deploy", "grafana", "*.json")))
METRICS_DOC = os.path.join(ROOT, "docs", "METRICS.md")
CONFIG = {"replica.lag.time.max.ms": "2000", "offsets.topic.replication.factor": "3",
          "auto.leader.rebalance.enable": "false"}

# The labels the operator's scrape configuration attaches (Strimzi: its PodMonitor's relabelling;
# Confluent: job and env of its prometheus.yml).
NAMESPACE, CLUSTER, ENV, JOB = "gregor", "my-cluster", "gregor-test", "kafka-broker"

# Metric-name prefixes of panels that cannot apply to Gregor, and why (docs/METRICS.md
# "Dashboards" lists the same).
NOT_GREGOR = {
    "jvm_": "JVM memory, GC and threads: Gregor is not a JVM",
    "container_": "cAdvisor's figures of the Kubernetes container, not the broker's",
    "kubelet_": "the kubelet's volume figures (Kubernetes)",
    "zookeeper_": "the ZooKeeper ensemble's own JMX exporter (Gregor is its client)",
    "kafka_tier_": "Confluent Server Tiered Storage",
    "kafka_log_log_tiersize": "Confluent Server Tiered Storage",
    "kafka_server_replicamanager_straypartitions": "KRaft stray partitions (Kafka 3.x), not in Kafka 2.7",
    "kafka_network_requestmetrics_deprecatedrequests": "DeprecatedRequestsPerSec (Kafka 3.x), not in Kafka 2.7",
}

# Metrics Kafka 2.7 has that Gregor does not serve yet (docs/METRICS.md "Not served (yet)").
NOT_YET = {  # prefix -> the Kafka name docs/METRICS.md lists it under
    "kafka_network_requestmetrics_localtimems": "LocalTimeMs",
    "kafka_network_requestmetrics_remotetimems": "RemoteTimeMs",
    "kafka_network_requestmetrics_responsequeuetimems": "ResponseQueueTimeMs",
    "kafka_network_requestmetrics_responsesendtimems": "ResponseSendTimeMs",
    "kafka_network_requestchannel_responsequeuesize": "ResponseQueueSize",
    "kafka_server_replicafetchermanager_": "MinFetchRate / MaxLag",
    "kafka_server_fetchsessioncache_incrementalfetchsessionevictions": "IncrementalFetchSessionEvictionsPerSec",
    "kafka_server_socket_server_metrics_connection_creation_rate": "connection-creation-rate",
    "kafka_server_socket_server_metrics_connection_close_rate": "connection-close-rate",
    "kafka_server_socket_server_metrics_connections": "KIP-511",
    "kafka_network_acceptor_acceptorblocked": "AcceptorBlockedPercent",
    "kafka_coordinator_group_groupmetadatamanager_": "GroupMetadataManager NumGroups",
    "kafka_server_brokertopicmetrics_producemessageconversions": "Produce/FetchMessageConversionsPerSec",
    "kafka_server_brokertopicmetrics_fetchmessageconversions": "Produce/FetchMessageConversionsPerSec",
}

METRIC = re.compile(r"\b((?:kafka|process|jvm|container|kubelet|zookeeper)_[a-zA-Z0-9_]+)")


def pod(bid):
    return f"{CLUSTER}-kafka-{bid - 1}"


def dashboard_queries(path):
    """[(title, expr)] of every panel target and every query variable of a dashboard."""
    with open(path) as f:
        d = json.load(f)
    out = []

    def walk(panels):
        for p in panels or []:
            walk(p.get("panels"))
            for t in p.get("targets") or []:
                if t.get("expr"):
                    out.append((p.get("title"), t["expr"]))
    walk(d.get("panels"))
    for v in (d.get("templating") or {}).get("list", []):
        if v.get("type") == "query":
            q = v.get("query")
            q = q.get("query") if isinstance(q, dict) else q
            if q:
                out.append((f"variable ${v['name']}", q, v.get("regex") or ""))
    return out


def substitute(expr, instance):
    """Grafana's template variables as an operator looking at the whole cluster sets them."""
    values = {"kubernetes_namespace": NAMESPACE, "strimzi_cluster_name": CLUSTER, "kafka_broker": ".*",
              "kafka_topic": ".+", "kafka_partition": ".*", "zk_node": ".*", "env": ENV, "instance": ".*",
              "percentile": ".*", "topic": ".*", "__rate_interval": "1m", "__interval": "15s"}
    expr = re.sub(r'(?<![=!])="\$\{?instance\}?"', f'="{instance}"', expr)  # exact match: one broker
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: values[m.group(1) or m.group(2)], expr)


def skip_reason(expr):
    names = set(METRIC.findall(expr))
    for table in (NOT_GREGOR, NOT_YET):
        hits = {n for n in names if any(n.startswith(p) for p in table)}
        if hits:
            return next(table[p] for p in table if any(n.startswith(p) for n in hits))
    return None


def test_dashboards_are_kept_and_skips_documented():
    names = {os.path.basename(p) for p in DASHBOARDS}
    assert {"strimzi-kafka.json", "strimzi-zookeeper.json", "confluent-kafka-cluster.json",
            "confluent-kafka-topics.json"} <= names
    doc = open(METRICS_DOC).read()
    for prefix in NOT_GREGOR:
        assert prefix.rstrip("_") in doc, f"docs/METRICS.md does not list {prefix}"
    flat = " ".join(doc.split())
    for name in NOT_YET.values():
        assert name in flat, f"docs/METRICS.md 'Not served (yet)' does not list {name}"
    # The ZooKeeper dashboard watches the ensemble itself: nothing in it is Gregor's
    for q in dashboard_queries(os.path.join(ROOT, "deploy", "grafana", "strimzi-zookeeper.json")):
        names = set(METRIC.findall(q[1]))
        assert all(n.startswith(("zookeeper_", "container_", "kubelet_", "jvm_")) or n == "process_open_fds"
                   for n in names), q


def query_result_text(series):
    """A series as Grafana's query_result() renders it for a variable's regex."""
    labels = dict(series)
    name = labels.pop("__name__", "")
    return name + "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def produce(cluster, topic, n, size):
    p = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all", "linger.ms": 5,
                  "compression.type": "none"})
    errs, sent = [], 0
    for i in range(n):
        v = (b"%06d" % i) * (size // 6)
        sent += len(v)
        p.produce(topic, v, partition=i % 3, on_delivery=lambda e, m: errs.append(e))
    p.flush(30)
    assert errs == [None] * n
    return sent


def consume_in_group(cluster, topic, n):
    c = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "dashboards",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got, deadline = 0, time.monotonic() + 30
    while got < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got += 1
    c.commit(asynchronous=False)
    c.close()
    assert got == n


@needs_prometheus
def test_every_panel_of_every_dashboard_shows_data(cluster_factory, zk_connect, tmp_path):
    cluster = cluster_factory(zk_connect, n=3, config=CONFIG, start=False)
    for b in cluster.brokers.values():
        b.metrics_port = H.free_port()
        b.config["gregor.metrics.listener"] = f"http://127.0.0.1:{b.metrics_port}"
    cluster.start()
    targets = {f"127.0.0.1:{b.metrics_port}": b.id for b in cluster.brokers.values()}
    labels = {t: {"namespace": NAMESPACE, "strimzi_io_cluster": CLUSTER, "strimzi_io_kind": "Kafka",
                  "strimzi_io_name": f"{CLUSTER}-kafka", "kubernetes_pod_name": pod(bid), "pod": pod(bid),
                  "container": "kafka", "env": ENV} for t, bid in targets.items()}
    prom = Prometheus(str(tmp_path), list(targets), job=JOB, labels=labels)
    try:
        H.wait_for(lambda: prom.query(f'count(up{{job="{JOB}"}} == 1)') == 3, 30, "3 targets up")
        strimzi = f'namespace="{NAMESPACE}",strimzi_io_cluster="{CLUSTER}"'

        # produce: the bytes-in counters grow by what was sent (Kafka counts the record batches
        # appended by leaders: values plus ~70 bytes of batch and record headers per batch)
        create_topic(cluster, "dash", config={"min.insync.replicas": "2"})
        bytes_in = f'sum(kafka_server_brokertopicmetrics_bytesin_total{{{strimzi},topic="dash"}})'
        msgs_in = f'sum(kafka_server_brokertopicmetrics_messagesin_total{{{strimzi},topic="dash"}})'
        time.sleep(1.5)
        before = prom.query(bytes_in) or 0.0
        sent = produce(cluster, "dash", 300, 1200)
        H.wait_for(lambda: prom.query(msgs_in) == 300, 20, "Prometheus sees 300 messages in")
        grown = prom.query(bytes_in) - before
        assert sent <= grown <= sent * 1.10, (sent, grown)
        consume_in_group(cluster, "dash", 300)

        # a reassignment: Under Replicated Partitions stays 0 once it completed
        ctrl = cluster.controller_id()
        others = [b.id for b in cluster.running() if b.id != ctrl]
        create_topic(cluster, "moving", partitions=1, rf=2)
        replicas = cluster.get_json("/brokers/topics/moving")[0]["partitions"]["0"]
        target = sorted(set(targets.values()) - {replicas[1]})
        f = os.path.join(str(tmp_path), "r.json")
        with open(f, "w") as fh:
            json.dump({"version": 1, "partitions": [{"topic": "moving", "partition": 0, "replicas": target}]}, fh)
        r = H.run_gregorctl(cluster.zk_connect, "--bootstrap-server", bootstrap(cluster), "--timeout-ms", "15000",
                            "reassign", "execute", "--reassignment-json-file", f)
        assert r.returncode == 0, r.stdout + r.stderr
        H.wait_for(lambda: cluster.get_json("/admin/reassign_partitions")[0] is None and
                   sorted(cluster.get_json("/brokers/topics/moving")[0]["partitions"]["0"]) == target,
                   30, "the reassignment completes")
        urp = f"sum(kafka_server_replicamanager_underreplicatedpartitions{{{strimzi}}})"
        H.wait_for(lambda: prom.query(urp) == 0 and prom.query(f"max_over_time({urp}[3s:1s])") == 0, 20,
                   "no under-replicated partition after the reassignment")

        # a broker restart: Under Replicated Partitions > 0 while it is down, 0 once it is back;
        # meanwhile a produce that needs every replica is refused (NOT_ENOUGH_REPLICAS), which
        # Kafka counts in FailedProduceRequestsPerSec (the per-topic meter appears with it)
        create_topic(cluster, "strict", config={"min.insync.replicas": "3"})
        victim = cluster[others[0]]
        victim.kill()
        H.wait_for(lambda: (prom.query(urp) or 0) > 0, 30, "under-replicated partitions while a broker is down")
        p = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all", "message.timeout.ms": 3000,
                      "retry.backoff.ms": 500})
        errs = []
        p.produce("strict", b"x", on_delivery=lambda e, m: errs.append(e))
        p.flush(10)
        assert len(errs) == 1 and errs[0] is not None
        failed = f'sum(kafka_server_brokertopicmetrics_failedproducerequests_total{{{strimzi},topic="strict"}})'
        H.wait_for(lambda: (prom.query(failed) or 0) > 0, 10, "the refused produce counted as failed")
        assert prom.query(f'sum(kafka_server_brokertopicmetrics_failedproducerequests_total{{topic="dash"}})') is None
        victim.start()
        cluster.wait_registered()
        H.wait_for(lambda: prom.query(f'count(up{{job="{JOB}"}} == 1)') == 3 and prom.query(urp) == 0, 40,
                   "the restarted broker is back in every ISR")
        assert prom.query(f"sum(kafka_controller_kafkacontroller_activecontrollercount{{{strimzi}}})") == 1
        # the group goes on after the restart (its coordinator may have been the restarted broker,
        # whose counters started again from 0)
        produce(cluster, "dash", 30, 100)
        consume_in_group(cluster, "dash", 30)
        time.sleep(2)  # two scrapes of the restarted broker's counters, for rate()/irate()

        instance = next(iter(targets))
        empty, checked, skipped = [], 0, {}
        for path in DASHBOARDS:
            board = os.path.basename(path)
            if board == "strimzi-zookeeper.json":
                continue  # the ensemble's own metrics (test_dashboards_are_kept_and_skips_documented)
            for q in dashboard_queries(path):
                title, expr = q[0], substitute(q[1], instance)
                why = skip_reason(expr)
                if why:
                    skipped.setdefault(why, []).append(f"{board}: {title}")
                    continue
                checked += 1
                m = re.fullmatch(r"\s*(query_result|label_values)\((.*)\)\s*", expr, re.S)
                if m and m.group(1) == "label_values" and "," not in m.group(2):
                    d = prom.get(f"/api/v1/label/{m.group(2).strip()}/values")
                    if not d["data"]:
                        empty.append((board, title, expr))
                    continue
                if m:
                    inner, _, label = m.group(2).rpartition(",") if m.group(1) == "label_values" else (m.group(2), "", "")
                    res = prom.query_all(inner)
                    if label and not any(label.strip() in ls for ls, _ in res):
                        res = []
                    rx = substitute(q[2], instance).strip("/") if len(q) > 2 else ""
                    if rx and res and not any(re.match(rx, query_result_text(ls)) for ls, _ in res):
                        empty.append((board, title, f"regex {rx} matches nothing of {expr}"))
                        continue
                else:
                    res = prom.query_all(expr)
                if not res:
                    empty.append((board, title, expr))
        assert empty == [], "panels without data:\n" + "\n".join(map(str, empty))
        assert checked >= 90, checked

        # key panels, as the dashboards compute them
        s_urp = f'sum(kafka_server_replicamanager_underreplicatedpartitions{{{strimzi}}})'
        assert prom.query(s_urp) == 0
        assert prom.query(f'count(kafka_server_replicamanager_leadercount{{{strimzi}}})') == 3  # Brokers Online
        active = prom.query_all(f'kafka_controller_kafkacontroller_activecontrollercount{{job="{JOB}",env="{ENV}"}} > 0')
        assert len(active) == 1 and active[0][1] == 1
        idle = prom.query_all(f'kafka_network_socketserver_networkprocessoravgidle_percent{{{strimzi}}}')
        assert len(idle) == 3 and all(0 <= v <= 1 for _, v in idle)
        assert prom.query(f'sum(kafka_server_kafkaserver_brokerstate{{job="{JOB}"}})') == 9  # 3 x RunningAsBroker
        assert prom.query('sum(kafka_server_socket_server_metrics_connection_count{listener="PLAINTEXT"})') > 0
        replicas_count = prom.query(f'sum(kafka_cluster_partition_replicascount{{{strimzi},topic="dash"}})')
        assert replicas_count == 9  # 3 partitions x 3 replicas, one series per leader
        assert prom.query(f'sum(kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms_count{{{strimzi}}})') > 0
        print(f"{checked} queries returned data; skipped: " +
              "; ".join(f"{k} ({len(v)})" for k, v in skipped.items()))
    finally:
        prom.close()
