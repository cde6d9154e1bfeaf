"""gregorctl's operator tools against live brokers and real clients:

- consumer-groups list / describe (offsets, members, state) against a live confluent-kafka
  consumer group: the lag figures match what the consumer itself sees;
- reset-offsets (dry run by default, --execute, every mode, refused while the group is active),
  checked through kafka-python's admin client;
- delete-offsets (OffsetDelete, KIP-496) and delete (DeleteGroups), including their refusals;
- OffsetDelete on the wire: malformed requests close the connection, an unknown group is
  GROUP_ID_NOT_FOUND.
"""

import re
import socket
import struct
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient

import gregor_harness as H

CONFIG = {"offsets.topic.num.partitions": "3", "group.initial.rebalance.delay.ms": "0"}


def ctl(cluster, *args, timeout=60):
    boot = ",".join(f"127.0.0.1:{b.port}" for b in cluster.running())
    return H.subprocess.run([H.GREGORCTL, "--bootstrap-server", boot, "--timeout-ms", "20000", *args],
                            capture_output=True, text=True, timeout=timeout)


def table(out, first_col="GROUP"):
    """Rows of the table whose header starts with first_col, as dicts."""
    lines = out.splitlines()
    for i, l in enumerate(lines):
        if l.startswith(first_col + " "):
            head = re.split(r" +", l.strip())
            rows = []
            for r in lines[i + 1:]:
                if not r.strip():
                    break
                rows.append(dict(zip(head, re.split(r" +", r.strip()))))
            return rows
    return []


def setup_topic(cluster):
    boot = ",".join(f"127.0.0.1:{b.port}" for b in cluster.running())
    admin = AdminClient({"bootstrap.servers": boot})
    admin.create_topics([NewTopic("cg", 2, 1)], operation_timeout=20)["cg"].result(timeout=30)
    H.wait_for(lambda: all((cluster.get_json(f"/brokers/topics/cg/partitions/{p}/state") or [{}])[0]
                           .get("leader", -1) >= 0 for p in range(2)), 30, "leaders of cg")
    p = Producer({"bootstrap.servers": boot, "linger.ms": 1})
    for i in range(10):
        p.produce("cg", f"a{i}".encode(), partition=0)
    for i in range(6):
        p.produce("cg", f"b{i}".encode(), partition=1)
    assert p.flush(30) == 0
    return boot


def start_consumer(boot, group="grp"):
    c = Consumer({"bootstrap.servers": boot, "group.id": group, "client.id": "tool-test",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe(["cg"])
    got, deadline = 0, time.monotonic() + 30
    while got < 16 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got += 1
    assert got == 16
    return c


def committed(boot, group):
    a = KafkaAdminClient(bootstrap_servers=boot, request_timeout_ms=20000)
    try:
        return {(tp.topic, tp.partition): om.offset for tp, om in a.list_consumer_group_offsets(group).items()}
    finally:
        a.close()


def test_consumer_groups_tool(cluster_factory, zk_connect):
    cluster = cluster_factory(zk_connect, n=1, config=CONFIG)
    boot = setup_topic(cluster)
    c = start_consumer(boot)
    c.commit(offsets=[TopicPartition("cg", 0, 4), TopicPartition("cg", 1, 6)], asynchronous=False)

    r = ctl(cluster, "consumer-groups", "list")
    assert r.returncode == 0 and r.stdout.split() == ["grp"], r.stdout + r.stderr

    # describe (offsets): lag as the consumer sees it
    r = ctl(cluster, "consumer-groups", "describe", "--group", "grp")
    assert r.returncode == 0, r.stderr
    rows = {row["PARTITION"]: row for row in table(r.stdout) if row["TOPIC"] == "cg"}
    assert set(rows) == {"0", "1"}, r.stdout
    for p in (0, 1):
        lo, hi = c.get_watermark_offsets(TopicPartition("cg", p), timeout=10)
        com = c.committed([TopicPartition("cg", p)], timeout=10)[0].offset
        row = rows[str(p)]
        assert (int(row["CURRENT-OFFSET"]), int(row["LOG-END-OFFSET"]), int(row["LAG"])) == (com, hi, hi - com)
        assert row["CONSUMER-ID"].startswith("tool-test-") and row["CLIENT-ID"] == "tool-test"
        assert row["HOST"] == "/127.0.0.1"
    assert (int(rows["0"]["LAG"]), int(rows["1"]["LAG"])) == (6, 0)

    r = ctl(cluster, "consumer-groups", "--describe", "--group", "grp", "--members")
    m = table(r.stdout)
    assert len(m) == 1 and m[0]["CONSUMER-ID"].startswith("tool-test-") and m[0]["#PARTITIONS"] == "2", r.stdout
    r = ctl(cluster, "consumer-groups", "describe", "--group", "grp", "--state")
    assert re.search(r"(?m)^grp +127\.0\.0\.1:\d+ \(1\) +range +Stable +1$", r.stdout), r.stdout

    # no reset while the group is active
    r = ctl(cluster, "consumer-groups", "reset-offsets", "--group", "grp", "--topic", "cg", "--to-earliest",
            "--execute")
    assert r.returncode == 1 and "\nError: Assignments can only be reset if the group 'grp' is inactive, but the " \
        "current state is Stable." in r.stdout, r.stdout
    # delete-offsets of a subscribed topic / delete of an active group are refused
    r = ctl(cluster, "consumer-groups", "delete-offsets", "--group", "grp", "--topic", "cg")
    assert r.returncode == 1 and "Error: Encounter some partition level error" in r.stdout, r.stdout
    assert re.search(r"(?m)^cg +0 +Error: GROUP_SUBSCRIBED_TO_TOPIC", r.stdout), r.stdout
    r = ctl(cluster, "consumer-groups", "delete", "--group", "grp")
    assert r.returncode == 1 and "NON_EMPTY_GROUP" in r.stdout, r.stdout
    c.close()

    H.wait_for(lambda: "Empty" in ctl(cluster, "consumer-groups", "describe", "--group", "grp", "--state").stdout,
               20, "group Empty after the consumer left")
    r = ctl(cluster, "consumer-groups", "describe", "--group", "grp")
    assert "has no active members" in r.stderr
    assert {(row["PARTITION"], row["CONSUMER-ID"]) for row in table(r.stdout)} == {("0", "-"), ("1", "-")}

    # reset-offsets: dry run by default (nothing committed), then --execute for each mode
    r = ctl(cluster, "consumer-groups", "reset-offsets", "--group", "grp", "--topic", "cg", "--to-earliest")
    assert r.returncode == 0 and "--execute option is missing" in r.stderr
    assert {(x["PARTITION"], x["NEW-OFFSET"]) for x in table(r.stdout)} == {("0", "0"), ("1", "0")}
    assert committed(boot, "grp") == {("cg", 0): 4, ("cg", 1): 6}

    def reset(*args):
        r = ctl(cluster, "consumer-groups", "reset-offsets", "--group", "grp", *args, "--execute")
        assert r.returncode == 0, r.stdout + r.stderr
        return {int(x["PARTITION"]): int(x["NEW-OFFSET"]) for x in table(r.stdout)}

    assert reset("--topic", "cg:0", "--to-offset", "2") == {0: 2}
    assert committed(boot, "grp") == {("cg", 0): 2, ("cg", 1): 6}
    assert reset("--all-topics", "--shift-by", "100") == {0: 10, 1: 6}  # clamped to the log end
    assert reset("--topic", "cg", "--shift-by", "-3") == {0: 7, 1: 3}
    assert reset("--topic", "cg", "--to-datetime", "2000-01-01T00:00:00.000") == {0: 0, 1: 0}
    assert reset("--topic", "cg", "--to-datetime", "2999-01-01T00:00:00.000Z") == {0: 10, 1: 6}
    assert reset("--topic", "cg:1", "--to-earliest") == {1: 0}
    assert reset("--all-topics", "--to-latest") == {0: 10, 1: 6}
    assert committed(boot, "grp") == {("cg", 0): 10, ("cg", 1): 6}

    # delete-offsets (OffsetDelete), then delete the group
    r = ctl(cluster, "consumer-groups", "delete-offsets", "--group", "grp", "--topic", "cg:1")
    assert r.returncode == 0 and "Request succeed for deleting offsets with topic cg group grp" in r.stdout
    assert re.search(r"(?m)^cg +1 +Successful", r.stdout), r.stdout
    assert committed(boot, "grp") == {("cg", 0): 10}
    r = ctl(cluster, "consumer-groups", "delete-offsets", "--group", "grp", "--topic", "nosuch:0")
    assert r.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in r.stdout
    r = ctl(cluster, "consumer-groups", "delete", "--group", "grp")
    assert r.returncode == 0 and "Deletion of requested consumer groups ('grp') was successful." in r.stdout
    r = ctl(cluster, "consumer-groups", "delete", "--group", "grp")
    assert r.returncode == 1 and "GROUP_ID_NOT_FOUND" in r.stdout
    r = ctl(cluster, "consumer-groups", "describe", "--group", "grp")
    assert r.returncode == 1 and "Error: Consumer group 'grp' does not exist." in r.stdout
    assert ctl(cluster, "consumer-groups", "list").stdout.split() == []

    # OffsetDelete on the wire
    port = cluster.brokers[1].port
    assert offset_delete_error(port, "no-such-group") == 69  # GROUP_ID_NOT_FOUND
    for body in (b"", b"\x00\x03grp", b"\x00\x03grp\x7f\xff\xff\xff", b"\xff\xfe"):
        assert wire(port, 47, 0, body) is None, body  # malformed: the connection is closed


def wire(port, api, ver, body, corr=7):
    """Sends one request; returns the response body after the correlation id, or None if the
    broker closed the connection."""
    hdr = struct.pack(">hhih", api, ver, corr, 4) + b"test"
    msg = hdr + body
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(struct.pack(">i", len(msg)) + msg)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            chunk = s.recv(65536)
            if not chunk:
                return None
            data += chunk
        assert struct.unpack(">i", data[4:8])[0] == corr
        return data[8:]
    except (ConnectionResetError, socket.timeout):
        return None
    finally:
        s.close()


def offset_delete_error(port, group):
    g = group.encode()
    body = struct.pack(">h", len(g)) + g + struct.pack(">i", 1) + struct.pack(">h", 2) + b"cg" + \
        struct.pack(">ii", 1, 0)
    resp = wire(port, 47, 0, body)
    assert resp is not None
    return struct.unpack(">h", resp[:2])[0]


def test_log_dirs_and_min_isr_filters(cluster_factory, zk_connect):
    cluster = cluster_factory(zk_connect, n=3, config={"replica.lag.time.max.ms": "2000"})
    boot = ",".join(f"127.0.0.1:{b.port}" for b in cluster.running())
    admin = AdminClient({"bootstrap.servers": boot})
    fs = admin.create_topics([NewTopic("mi2", 1, 3, config={"min.insync.replicas": "2"}),
                              NewTopic("mi3", 1, 3, config={"min.insync.replicas": "3"})], operation_timeout=20)
    for f in fs.values():
        f.result(timeout=30)
    for t in ("mi2", "mi3"):
        H.wait_for(lambda: len((cluster.get_json(f"/brokers/topics/{t}/partitions/0/state") or [{}])[0]
                               .get("isr", [])) == 3, 30, f"full ISR of {t}")
    p = Producer({"bootstrap.servers": boot, "acks": "all"})
    for i in range(5):
        p.produce("mi2", b"x" * 100)
    assert p.flush(30) == 0

    # log-dirs describe: every broker holds a replica of mi2-0 with the 5 records
    r = ctl(cluster, "log-dirs", "describe", "--topic-list", "mi2")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "Querying brokers for log directories information"
    assert lines[1] == "Received log directory information from brokers 1,2,3"
    import json
    d = json.loads(lines[2])
    assert d["version"] == 1 and [b["broker"] for b in d["brokers"]] == [1, 2, 3]
    for b in d["brokers"]:
        (ld,) = b["logDirs"]
        assert ld["logDir"] == cluster.brokers[b["broker"]].logdir and ld["error"] is None
        (part,) = ld["partitions"]
        assert part["partition"] == "mi2-0" and part["size"] > 500 and part["offsetLag"] == 0
        assert part["isFuture"] is False
    r = ctl(cluster, "log-dirs", "describe", "--broker-list", "2")
    assert r.returncode == 0 and [b["broker"] for b in json.loads(r.stdout.splitlines()[2])["brokers"]] == [2]
    # exactly the brokers asked for (Kafka's LogDirsCommand): the "Received" line names them as
    # given; a broker that is not live fails the whole command (Kafka's allDescriptions().get()),
    # as does an id that is not a number; empty items are skipped
    r = ctl(cluster, "log-dirs", "describe", "--broker-list", "3,1", "--topic-list", "mi2")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1] == "Received log directory information from brokers 3,1"
    assert [b["broker"] for b in json.loads(r.stdout.splitlines()[2])["brokers"]] == [1, 3]
    r = ctl(cluster, "log-dirs", "describe", "--broker-list", ",2,")
    assert r.returncode == 0 and r.stdout.splitlines()[1] == "Received log directory information from brokers 2"
    for bad, why in (("1,9", "broker 9 is not a live broker"), ("1,x", "'x' is not a broker id")):
        r = ctl(cluster, "log-dirs", "describe", "--broker-list", bad)
        assert r.returncode == 1 and why in r.stderr, (bad, r.stdout, r.stderr)
        assert r.stdout.splitlines() == ["Querying brokers for log directories information"], r.stdout

    # consumer-groups across brokers: the coordinator and the partition leader may be any broker
    c = Consumer({"bootstrap.servers": boot, "group.id": "multi", "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition("mi2", 0, 3)], asynchronous=False)
    c.close()
    r = ctl(cluster, "consumer-groups", "list")
    assert r.returncode == 0 and r.stdout.split() == ["multi"], r.stdout + r.stderr
    r = ctl(cluster, "consumer-groups", "describe", "--group", "multi")
    rows = table(r.stdout)
    assert [(x["TOPIC"], x["PARTITION"], x["CURRENT-OFFSET"], x["LOG-END-OFFSET"], x["LAG"]) for x in rows] == \
        [("mi2", "0", "3", "5", "2")], r.stdout + r.stderr

    zk = ["--zookeeper", cluster.zk_connect]  # DescribeConfigs may not be served: fall back to ZooKeeper

    def filtered(flag):
        r = ctl(cluster, "topics", "describe", flag, *zk)
        assert r.returncode == 0, r.stdout + r.stderr
        return sorted(t for t in re.findall(r"Topic: (\S+)\tPartition: \d+", r.stdout) if t.startswith("mi"))

    assert filtered("--at-min-isr-partitions") == ["mi3"]
    assert filtered("--under-min-isr-partitions") == []
    victim = next(b for b in cluster.running() if b.id != cluster.controller_id())
    victim.kill()
    H.wait_for(lambda: filtered("--under-min-isr-partitions") == ["mi3"], 30, "mi3 under min ISR")
    assert filtered("--at-min-isr-partitions") == ["mi2"]

    # DescribeLogDirs on the wire: garbage closes the connection
    port = next(iter(cluster.running())).port
    for body in (b"\x00\x00\x00\x05", b"\x00\x00\x00\x01\x00\x05ab"):
        assert wire(port, 35, 1, body) is None, body


def test_tools_print_kafka_27_text(cluster_factory, zk_connect, tmp_path):
    """Issue 27 item 4: gregorctl prints what Kafka 2.7's tools print for the same commands
    (DeleteRecordsCommand, ConsumerGroupCommand); the expected text is Kafka's."""
    import json
    import os
    cluster = cluster_factory(zk_connect, n=1, config=CONFIG)
    boot = setup_topic(cluster)
    f = os.path.join(str(tmp_path), "offsets.json")

    def delete_records(parts):
        with open(f, "w") as fh:
            json.dump({"partitions": parts, "version": 1}, fh)
        return ctl(cluster, "delete-records", "--offset-json-file", f)
    # kafka-delete-records.sh: both lines, then one line per partition; an error is the
    # ExecutionException's message (exception class: Errors' default message)
    r = delete_records([{"topic": "cg", "partition": 0, "offset": 3}])
    assert r.returncode == 0 and r.stdout == ("Executing records delete operation\n"
                                              "Records delete operation completed:\n"
                                              "partition: cg-0\tlow_watermark: 3\n"), r.stdout + r.stderr
    r = delete_records([{"topic": "cg", "partition": 1, "offset": 99}])
    assert r.returncode == 1 and r.stdout == (
        "Executing records delete operation\n"
        "Records delete operation completed:\n"
        "partition: cg-1\terror: org.apache.kafka.common.errors.OffsetOutOfRangeException: "
        "The requested offset is not within the range of offsets maintained by the server.\n"), r.stdout
    # a partition named twice: Kafka refuses the file before sending anything
    r = delete_records([{"topic": "cg", "partition": 1, "offset": 1}, {"topic": "cg", "partition": 0, "offset": 4},
                        {"topic": "cg", "partition": 1, "offset": 2}])
    assert r.returncode != 0 and r.stdout == ("Error while executing records delete operation: Offset json file "
                                              "contains duplicate topic partitions: cg-1\n"), r.stdout
    assert committed_low(cluster, boot) == (3, 0)  # nothing was deleted by the refused file

    # kafka-consumer-groups.sh: LAG = LOG-END-OFFSET - CURRENT-OFFSET, not clamped at 0 (a
    # committed offset past the log end shows a negative lag)
    c = Consumer({"bootstrap.servers": boot, "group.id": "ahead", "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition("cg", 1, 20)], asynchronous=False)
    c.close()
    r = ctl(cluster, "consumer-groups", "--describe", "--group", "ahead")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout == (
        "\n"
        "GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             CONSUMER-ID     HOST            CLIENT-ID\n"
        "ahead           cg              1          20              6               -14             -               -               -\n"), r.stdout
    assert r.stderr == "\nConsumer group 'ahead' has no active members.\n"


def committed_low(cluster, boot):
    """The log start offsets of cg-0 and cg-1 (ListOffsets earliest)."""
    c = Consumer({"bootstrap.servers": boot, "group.id": "low"})
    try:
        return tuple(c.get_watermark_offsets(TopicPartition("cg", p), timeout=10)[0] for p in range(2))
    finally:
        c.close()
