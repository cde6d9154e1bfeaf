"""The Prometheus endpoint (gregor.metrics.listener, GET /metrics) against a real Prometheus.

- the example alert rules pass `promtool check rules` and their unit tests (`promtool test rules`);
- a 3-broker cluster serves Kafka's JMX-exporter names; produce/fetch/request/log figures agree
  with what real clients did;
- a real Prometheus scraping the cluster every second sees exactly one active controller; after
  a broker is SIGKILLed, under-replicated (and, with min.insync.replicas=3, under-min-ISR)
  partitions appear and the shipped alert rules fire
  (their `for:` shortened to 2 s so the test stays well under a minute).
"""

import os
import re
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
import json

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

import gregor_harness as H

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RULES = os.path.join(ROOT, "deploy", "prometheus", "gregor-alerts.yml")
RULES_TEST = os.path.join(ROOT, "deploy", "prometheus", "gregor-alerts.test.yml")
PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
CONFIG = {"replica.lag.time.max.ms": "2000", "offsets.topic.replication.factor": "1"}

needs_prometheus = pytest.mark.skipif(PROMETHEUS is None or PROMTOOL is None,
                                      reason="Debian's prometheus package is not installed (scripts/setup.sh)")


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return r.read().decode()


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text):
    """[(name, {label: value}, float)] of every sample; checks TYPE lines come once per family."""
    out, families = [], set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            fam = line.split()[2]
            assert fam not in families, f"family {fam} has two TYPE lines"
            families.add(fam)
            continue
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        out.append((m.group(1), dict(LABEL.findall(m.group(2) or "")), float(m.group(3))))
    return out


def value(samples, name, **labels):
    """Sum of the samples called name whose labels include `labels` exactly as given; labels
    not mentioned must be absent when `labels` is empty (the all-topics series)."""
    tot, found = 0.0, False
    for n, ls, v in samples:
        if n != name:
            continue
        if (labels and all(ls.get(k) == str(w) for k, w in labels.items())) or (not labels and not ls):
            tot, found = tot + v, True
    return tot if found else None


def metrics_cluster(cluster_factory, zk_connect):
    c = cluster_factory(zk_connect, n=3, config=CONFIG, start=False)
    for b in c.brokers.values():
        b.metrics_port = H.free_port()
        b.config["gregor.metrics.listener"] = f"http://127.0.0.1:{b.metrics_port}"
    c.start()
    return c


def bootstrap(cluster):
    return ",".join(f"127.0.0.1:{b.port}" for b in cluster.running())


def create_topic(cluster, topic, partitions=3, rf=3, config=None):
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    admin.create_topics([NewTopic(topic, partitions, rf, config=config or {})], operation_timeout=20,
                        request_timeout=30)[topic].result(timeout=40)
    for p in range(partitions):
        H.wait_for(lambda: (cluster.get_json(f"/brokers/topics/{topic}/partitions/{p}/state") or [{}])[0]
                   .get("leader", -1) >= 0, 30, f"a leader for {topic}-{p}")


def produce(cluster, topic, n):
    p = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all", "linger.ms": 5})
    errs = []
    for i in range(n):
        p.produce(topic, f"m{i}".encode(), partition=i % 3, on_delivery=lambda e, m: errs.append(e))
    p.flush(30)
    assert errs == [None] * n


def consume(cluster, topic, n, group="metrics-test", commit=False):
    """Reads n records of topic in consumer group `group`; commit: its offsets, at the end."""
    c = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got, deadline = 0, time.monotonic() + 30
    while got < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got += 1
    if commit:
        c.commit(asynchronous=False)
    c.close()
    assert got == n


def test_alert_rules_pass_promtool():
    if PROMTOOL is None:
        pytest.skip("promtool not installed (Debian's prometheus package; scripts/setup.sh)")
    r = subprocess.run([PROMTOOL, "check", "rules", RULES], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([PROMTOOL, "test", "rules", RULES_TEST], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr


class Prometheus:
    def __init__(self, workdir, targets, job="gregor", labels=None):
        """labels: {target: {label: value}}, attached to that target's series (the operator's
        relabelling: Kubernetes namespace, pod, ...)."""
        self.dir = os.path.join(workdir, "prometheus")
        os.makedirs(self.dir, exist_ok=True)
        self.port = H.free_port()
        with open(RULES) as f:  # the shipped rules, with short `for:` so the test is quick
            rules = re.sub(r"(?m)^(\s+for:)\s*\S+", r"\1 2s", f.read())
        with open(os.path.join(self.dir, "rules.yml"), "w") as f:
            f.write(rules)
        with open(os.path.join(self.dir, "prometheus.yml"), "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
                    "rule_files: [rules.yml]\n"
                    f"scrape_configs:\n  - job_name: {job}\n    static_configs:\n")
            for t in targets:
                f.write(f"      - targets: ['{t}']\n")
                if labels and labels.get(t):
                    f.write("        labels: {" + ", ".join(f'{k}: "{v}"' for k, v in labels[t].items()) + "}\n")
        self.log = open(os.path.join(self.dir, "prometheus.log"), "wb")
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={self.dir}/prometheus.yml", f"--storage.tsdb.path={self.dir}/data",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=self.dir)
        H.wait_for(self.ready, 30, "Prometheus ready")

    def get(self, path, **params):
        url = f"http://127.0.0.1:{self.port}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=5) as r:
            return json.loads(r.read().decode()) if path.startswith("/api/") else r.read().decode()

    def ready(self):
        assert self.proc.poll() is None, "prometheus exited: " + open(self.log.name).read()[-2000:]
        try:
            self.get("/-/ready")
            return True
        except (urllib.error.URLError, ConnectionError):
            return False

    def query_all(self, expr, at=None):
        """Every series of an instant query (at a Unix time, else now): [(labels, value)]."""
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        d = self.get("/api/v1/query", **params)
        assert d["status"] == "success", d
        res = d["data"]["result"]
        if d["data"]["resultType"] == "scalar":
            return [({}, float(res[1]))]
        return [(r["metric"], float(r["value"][1])) for r in res]

    def query(self, expr):
        """The single value of an instant query, or None when the result is empty."""
        d = self.get("/api/v1/query", query=expr)
        assert d["status"] == "success", d
        res = d["data"]["result"]
        return float(res[0]["value"][1]) if res else None

    def firing(self):
        d = self.get("/api/v1/alerts")
        return {(a["alertname"] if "alertname" in a else a["labels"]["alertname"])
                for a in d["data"]["alerts"] if a["state"] == "firing"}

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()


@needs_prometheus
def test_prometheus_scrapes_cluster_and_alerts_fire(cluster_factory, zk_connect, tmp_path):
    cluster = metrics_cluster(cluster_factory, zk_connect)
    create_topic(cluster, "pm", config={"min.insync.replicas": "3"})  # under min ISR once a broker dies
    produce(cluster, "pm", 30)
    consume(cluster, "pm", 30)

    # The endpoint itself: Kafka's names, values that match what the clients did.
    per_broker = {b.id: parse(scrape(b.metrics_port)) for b in cluster.running()}
    leaders_of = {p: cluster.get_json(f"/brokers/topics/pm/partitions/{p}/state")[0]["leader"] for p in range(3)}
    total_in = sum(value(s, "kafka_server_brokertopicmetrics_messagesin_total", topic="pm") or 0
                   for s in per_broker.values())
    assert total_in == 30
    for bid, s in per_broker.items():
        # every broker hosts a replica of each partition; its log has the 10 records
        for p in range(3):
            assert value(s, "kafka_log_log_logendoffset", topic="pm", partition=p) == 10
            assert value(s, "kafka_log_log_size", topic="pm", partition=p) > 0
        assert value(s, "kafka_server_replicamanager_leadercount") >= sum(1 for l in leaders_of.values() if l == bid)
        assert value(s, "kafka_server_replicamanager_partitioncount") >= 3
        assert value(s, "kafka_server_replicamanager_underreplicatedpartitions") == 0
        assert value(s, "kafka_server_replicamanager_underminisrpartitioncount") == 0
        assert value(s, "kafka_log_logmanager_offlinelogdirectorycount") == 0
        assert value(s, "kafka_server_delayedoperationpurgatory_purgatorysize", delayedOperation="Produce") == 0
        assert value(s, "process_resident_memory_bytes") > 0 and value(s, "process_open_fds") > 0
        assert value(s, "kafka_network_requestmetrics_requests_total", request="UpdateMetadata") > 0  # from the controller
        assert value(s, "kafka_controller_controllerstats_uncleanleaderelections_total") == 0
    assert sum(value(s, "kafka_network_requestmetrics_requests_total", request="Produce") or 0
               for s in per_broker.values()) > 0
    # 3 partitions with acks=all: every partition-level ErrorCode of the answers is NONE
    assert sum(value(s, "kafka_network_requestmetrics_errors_total", request="Produce", error="NONE") or 0
               for s in per_broker.values()) >= 3
    assert sum(value(s, "kafka_network_requestmetrics_totaltimems_count", request="FetchFollower") or 0
               for s in per_broker.values()) > 0
    assert sum(value(s, "kafka_server_brokertopicmetrics_bytesout_total", topic="pm") or 0
               for s in per_broker.values()) > 0
    assert sum(value(s, "kafka_controller_kafkacontroller_activecontrollercount") for s in per_broker.values()) == 1

    prom = Prometheus(str(tmp_path), [f"127.0.0.1:{b.metrics_port}" for b in cluster.running()])
    try:
        H.wait_for(lambda: prom.query('count(up{job="gregor"} == 1)') == 3, 30, "3 targets up")
        H.wait_for(lambda: prom.query("sum(kafka_controller_kafkacontroller_activecontrollercount)") == 1,
                   20, "PromQL: exactly one active controller")
        assert prom.query("sum(kafka_server_replicamanager_underreplicatedpartitions)") == 0
        assert "GregorUnderReplicatedPartitions" not in prom.firing()

        # SIGKILL a broker that is not the controller: the controller takes it out of every
        # ISR, the leaders report under-replicated partitions, the alerts fire.
        ctrl = cluster.controller_id()
        victim = next(b for b in cluster.running() if b.id != ctrl)
        victim.kill()
        H.wait_for(lambda: (prom.query("sum(kafka_server_replicamanager_underreplicatedpartitions)") or 0) > 0,
                   30, "PromQL: under-replicated partitions after the kill")
        want = {"GregorUnderReplicatedPartitions", "GregorUnderMinIsrPartitions", "GregorBrokerDown"}
        H.wait_for(lambda: want <= prom.firing(), 30, f"alerts {sorted(want)} firing")
        alerts = prom.query('count(ALERTS{alertname="GregorUnderReplicatedPartitions",alertstate="firing"})')
        assert alerts and alerts >= 1
        assert prom.query("sum(kafka_controller_kafkacontroller_activecontrollercount)") == 1
        assert "GregorActiveControllerCount" not in prom.firing()
    finally:
        prom.close()


def test_metrics_listener_refuses_a_bad_url(cluster_factory, zk_connect):
    cluster = cluster_factory(zk_connect, n=1, config=CONFIG, start=False)
    b = cluster.brokers[1]
    b.config["gregor.metrics.listener"] = "ftp://nowhere"
    b.start()
    assert b.wait_exit(20) != 0
    assert "gregor.metrics.listener" in b.log()
