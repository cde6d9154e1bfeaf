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
broker is down, the group counts are the groups the test made, the message conversions are the
records an old client produced and fetched, followers fetch (MinFetchRate > 0), the request time
split adds up to no more than the total, connections are counted per client software.
test_connection_metrics_of_one_broker checks the connection figures Prometheus is not needed for:
AcceptorBlockedPercent while max.connections holds a client back, the creation and close rates,
and a KIP-511 client software entry that goes with its last connection.
"""

import glob
import json
import os
import re
import time

import pytest
from confluent_kafka import Consumer, Producer

import socket
import struct

import gregor_harness as H
from kafka_wire import Reader, compact_str, frame, recv_frame
from test_metrics import PROMETHEUS, Prometheus, bootstrap, consume, create_topic, needs_prometheus, parse, scrape, value

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

# Metrics Kafka 2.7 has that Gregor does not serve yet (docs/METRICS.md "Not served (yet)"), as
# prefix -> the Kafka name the doc lists it under. Every panel's metric is served now.
NOT_YET = {}

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
        consume(cluster, "dash", 300, group="dashboards", commit=True)

        # an old client (kafka-python as 0.10.0: Produce v2 / Fetch v2, magic 1): its records are
        # converted to v2 on append and back to magic 1 for its fetches
        from kafka import KafkaConsumer, KafkaProducer
        from kafka import TopicPartition as KTP
        create_topic(cluster, "legacy", partitions=1)
        old = KafkaProducer(bootstrap_servers=bootstrap(cluster), api_version=(0, 10, 0), acks=1)
        for i in range(20):
            old.send("legacy", value=b"v%d" % i, partition=0)
        old.flush(30)
        old.close()
        oc = KafkaConsumer(bootstrap_servers=bootstrap(cluster), api_version=(0, 10, 0),
                           auto_offset_reset="earliest", consumer_timeout_ms=5000)
        oc.assign([KTP("legacy", 0)])
        assert [m.offset for _, m in zip(range(20), oc)] == list(range(20))
        oc.close()
        conv = 'sum(kafka_server_brokertopicmetrics_{}messageconversions_total{{%s,topic="legacy"}})' % strimzi
        H.wait_for(lambda: prom.query(conv.format("produce")) == 20, 20, "20 records up-converted")
        H.wait_for(lambda: (prom.query(conv.format("fetch")) or 0) >= 20, 20, "20 records down-converted")

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
        # not the leader of "legacy": its conversion counts are checked again at the end, and a
        # restarted broker's per-topic meters start anew (as Kafka's)
        legacy_leader = cluster.get_json("/brokers/topics/legacy/partitions/0/state")[0]["leader"]
        victim = cluster[next(b for b in others if b != legacy_leader)]
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
        consume(cluster, "dash", 30, group="dashboards", commit=True)
        time.sleep(2)  # two scrapes of the restarted broker's counters, for rate()/irate()

        # a group that stays Stable while the panels are read ("dashboards" is Empty by now)
        stable = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "stable",
                           "enable.auto.commit": False})
        stable.subscribe(["dash"])
        H.wait_for(lambda: stable.poll(0.2) is not None or len(stable.assignment()) == 3, 30,
                   "the stable group's consumer has its partitions")
        gmm = f"kafka_coordinator_group_groupmetadatamanager_{{}}{{{{{strimzi}}}}}"
        H.wait_for(lambda: prom.query("sum(" + gmm.format("numgroupsstable") + ")") == 1, 20, "one Stable group")
        time.sleep(2)  # two scrapes with the stable group

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

        # GroupMetadataManager: the two groups the test made, by state, on their coordinators;
        # "dashboards" committed the offsets of dash's 3 partitions ("stable" commits none)
        g = {n: prom.query("sum(" + gmm.format(n) + ")") for n in
             ("numgroups", "numgroupsstable", "numgroupsempty", "numgroupspreparingrebalance",
              "numgroupscompletingrebalance", "numgroupsdead", "numoffsets")}
        assert g == {"numgroups": 2, "numgroupsstable": 1, "numgroupsempty": 1, "numgroupspreparingrebalance": 0,
                     "numgroupscompletingrebalance": 0, "numgroupsdead": 0, "numoffsets": 3}, g
        assert prom.query(conv.format("produce")) == 20
        # followers fetch from every broker (each leads some of dash's partitions), caught up
        rates = prom.query_all(f'kafka_server_replicafetchermanager_minfetchrate{{{strimzi},clientId="Replica"}}')
        assert len(rates) == 3 and all(v > 0 for _, v in rates), rates
        H.wait_for(lambda: prom.query(f'max(kafka_server_replicafetchermanager_maxlag{{{strimzi}}})') == 0, 20,
                   "followers caught up: MaxLag 0")
        # connections: created (rate > 0), counted per client software; the per-software counts
        # add up to the connection count of each broker once no connection is opening or closing
        assert prom.query(f'sum(kafka_server_socket_server_metrics_connection_creation_rate{{{strimzi}}})') > 0
        named = prom.query_all(f'kafka_server_socket_server_metrics_connections{{{strimzi},'
                               f'clientSoftwareName!="unknown",listener="PLAINTEXT"}}')
        assert named and all(v >= 1 for _, v in named), named
        H.wait_for(lambda: prom.query_all(
            f'sum by (instance) (kafka_server_socket_server_metrics_connections{{{strimzi}}}) != '
            f'sum by (instance) (kafka_server_socket_server_metrics_connection_count{{{strimzi}}})') == [], 20,
            "per-software connections add up to connection-count")
        assert prom.query(f'sum(kafka_network_requestchannel_responsequeuesize{{{strimzi}}})') is not None
        assert prom.query(f'sum(kafka_network_acceptor_acceptorblocked_percent{{{strimzi}}})') == 0
        # the request time split (Kafka's updateRequestMetrics): one sample per request in each
        # part, and the parts add up to at most the total (the gaps: encoding the response)
        for req in ("Produce", "Fetch", "FetchFollower", "Metadata"):
            parts = ("requestqueuetimems", "localtimems", "remotetimems", "responsequeuetimems", "responsesendtimems")
            sel = f'{{{strimzi},request="{req}"}}'

            def counts_equal():
                # each part once per request: the counts agree up to the requests between two of
                # their recordings at the scrape, and those whose connection closed before the
                # answer went out (Kafka records no send time for them either); a part counted
                # twice, or never, is off by the whole count
                n = {p: prom.query(f"sum(kafka_network_requestmetrics_{p}_count{sel})")
                     for p in parts + ("totaltimems", "throttletimems")}
                total = n["totaltimems"] or 0
                return total > 0 and all(abs(v - total) <= max(3, total * 0.02) for v in n.values())
            H.wait_for(counts_equal, 20, f"{req}: every part of the request time counted once per request")
            total = prom.query(f"sum(kafka_network_requestmetrics_totaltimems_sum{sel})")
            split = sum(prom.query(f"sum(kafka_network_requestmetrics_{p}_sum{sel})") for p in parts)
            assert 0 < split <= total * 1.01 + 1, (req, split, total)
        # acks=all produces wait for the followers: remote time
        assert prom.query(f'sum(kafka_network_requestmetrics_remotetimems_sum{{{strimzi},request="Produce"}})') > 0
        for req in ("Produce", "Fetch"):
            assert prom.query(f'sum(kafka_network_requestmetrics_messageconversionstimems_count'
                              f'{{{strimzi},request="{req}"}})') > 0
        assert prom.query(f'sum(kafka_network_requestmetrics_temporarymemorybytes_sum'
                          f'{{{strimzi},request="Fetch"}})') > 0
        stable.close()
        print(f"{checked} queries returned data; skipped: " +
              "; ".join(f"{k} ({len(v)})" for k, v in skipped.items()))
    finally:
        prom.close()


def api_versions_v3(corr, name, version):
    body = compact_str(name) + compact_str(version) + b"\x00"
    return frame(18, 3, corr, body, client_id=b"dash", flexible=True)


def test_connection_metrics_of_one_broker(cluster_factory, zk_connect):
    """AcceptorBlockedPercent (KIP-402) > 0 while max.connections keeps a client waiting;
    connection-creation-rate / connection-close-rate after connections came and went; a KIP-511
    client software entry counts the connection that named it and goes with its last one."""
    c = cluster_factory(zk_connect, n=1, config={"max.connections": "6"}, start=False)
    b = c.brokers[1]
    b.metrics_port = H.free_port()
    b.config["gregor.metrics.listener"] = f"http://127.0.0.1:{b.metrics_port}"
    c.start()

    def m(name, **labels):
        return value(parse(scrape(b.metrics_port)), name, **labels)
    sw = dict(clientSoftwareName="gregor-dash-test", clientSoftwareVersion="1.0-x", listener="PLAINTEXT")
    s = socket.create_connection(("127.0.0.1", b.port), timeout=10)
    s.sendall(api_versions_v3(1, "gregor-dash-test", "1.0-x"))
    r = Reader(recv_frame(s))
    assert r.i32() == 1 and r.i16() == 0
    assert m("kafka_server_socket_server_metrics_connections", **sw) == 1
    s2 = socket.create_connection(("127.0.0.1", b.port), timeout=10)
    s2.sendall(api_versions_v3(2, "gregor-dash-test", "1.0-x"))
    assert recv_frame(s2) is not None
    assert m("kafka_server_socket_server_metrics_connections", **sw) == 2
    s.close()
    H.wait_for(lambda: m("kafka_server_socket_server_metrics_connections", **sw) == 1, 10, "one connection left")
    s2.close()
    H.wait_for(lambda: m("kafka_server_socket_server_metrics_connections", **sw) is None, 10,
               "the entry goes with its last connection")
    assert m("kafka_server_socket_server_metrics_connection_creation_rate", listener="PLAINTEXT") > 0
    assert m("kafka_server_socket_server_metrics_connection_close_rate", listener="PLAINTEXT") > 0
    blocked = "kafka_network_acceptor_acceptorblocked_percent"
    assert m(blocked, listener="PLAINTEXT") == 0
    # max.connections=6 (the broker's own connections count too): open until one is not served
    socks, waiting = [], None
    for i in range(8):
        x = socket.create_connection(("127.0.0.1", b.port), timeout=10)
        socks.append(x)
        x.sendall(api_versions_v3(i, "gregor-dash-test", "2"))
        try:
            answered = recv_frame(x, timeout=1.0) is not None
        except socket.timeout:
            answered = False
        if not answered:
            break
    else:
        pytest.fail("max.connections=6 let 8 client connections in")
    H.wait_for(lambda: m(blocked, listener="PLAINTEXT") > 0, 10, "AcceptorBlockedPercent > 0")
    for x in socks:
        x.close()
