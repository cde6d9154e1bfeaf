#!/usr/bin/env python3
"""Rewrites the metric names of a Grafana dashboard built for Confluent's jmx-monitoring-stacks
(JMX exporter 1.x with Confluent's kafka_broker.yml rules) into the names Gregor serves, which are
those of the exporter's kafka-2_0_0.yml / Strimzi's kafka-metrics.yaml rules (docs/METRICS.md).
Metric names change, and the label names Confluent's rules lower-case or snake-case where Gregor
keeps Kafka's tag names (as Strimzi's rules do): clientid -> clientId, client_software_name /
client_software_version -> clientSoftwareName / clientSoftwareVersion. Variables, datasources and
layout stay as they are. Running it on its own output changes nothing.

    scripts/grafana-gregor-names.py IN.json OUT.json
"""
import json
import re
import sys

RENAMES = [
    # meters: Confluent keeps the MBean name (...persec, the Count), kafka-2_0_0.yml drops PerSec
    # and appends _total
    (re.compile(r"\b(kafka_[a-z0-9_]+?)persec\b"), r"\1_total"),
    # socket-server-metrics: the MBean type keeps its dashes as underscores under kafka-2_0_0.yml
    (re.compile(r"\bkafka_server_socketservermetrics_"), "kafka_server_socket_server_metrics_"),
    # percent gauges and meters: kafka-2_0_0.yml's "<Name>Percent -> <name>_percent" rules (the
    # meter's MeanRate, where Confluent shows its OneMinuteRate)
    (re.compile(r"\bkafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent_oneminuterate\b"),
     "kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent"),
    (re.compile(r"\b(kafka_[a-z0-9_]+?[a-z0-9])percent\b"), r"\1_percent"),
    # label names: Kafka's tag names (Confluent's rules set lowercaseOutputLabelNames)
    (re.compile(r"\bclientid(\s*[=!]~?)"), r"clientId\1"),
    (re.compile(r"\bclient_software_name\b"), "clientSoftwareName"),
    (re.compile(r"\bclient_software_version\b"), "clientSoftwareVersion"),
]


def rename(s):
    for rx, to in RENAMES:
        s = rx.sub(to, s)
    return s


def walk(v):
    if isinstance(v, dict):
        return {k: walk(x) for k, x in v.items()}
    if isinstance(v, list):
        return [walk(x) for x in v]
    if isinstance(v, str):
        return rename(v)
    return v


def main():
    with open(sys.argv[1]) as f:
        d = json.load(f)
    with open(sys.argv[2], "w") as f:
        json.dump(walk(d), f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
