"""A subscribed topic deleted under a consumer group (issue 24 item 14), through confluent-kafka
against a 3-broker cluster, as librdkafka's own test 0113 h_delete_topic: a consumer subscribed to
two topics owns one partition of each; the second topic is deleted; the consumer must get that
partition revoked and keep the first.

What the review saw (test 0113 timing out after 139 s) is librdkafka 2.0.2's own defect, fixed in
librdkafka 2.1.0 ("Fix close blocked by reference count in test 0113", #4187): the revocation
happens, within about a second of the deletion, and then close()/destroy of that consumer never
returns because the deleted partition's fetch queue keeps a reference to itself. Gregor answers as
Kafka 2.7 does: the DeleteTopics answer waits until the metadata cache drops the topic (the
controller's UpdateMetadata with LeaderDuringDelete), after which Metadata answers
UNKNOWN_TOPIC_OR_PARTITION for it and Fetch of its partitions UNKNOWN_TOPIC_OR_PARTITION.

So the consumer runs in a child process that the test kills at the end (its close() would hang)."""

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from test_consumer_groups import bootstrap, create_topic

pytest.importorskip("confluent_kafka")

CONFIG = {
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "3",
    "group.initial.rebalance.delay.ms": "0",
}

CHILD = textwrap.dedent("""
    import json, sys, time
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient
    servers, strategy = sys.argv[1], sys.argv[2]
    def say(*a):
        print(json.dumps(a), flush=True)
    c = Consumer({"bootstrap.servers": servers, "group.id": "g-del-" + strategy,
                  "partition.assignment.strategy": strategy, "session.timeout.ms": 15000,
                  "topic.metadata.refresh.interval.ms": 3000, "auto.offset.reset": "earliest"})
    tps = lambda parts: sorted([p.topic, p.partition] for p in parts)
    c.subscribe(["keep", "gone"], on_assign=lambda c, p: say("assign", tps(p)),
                on_revoke=lambda c, p: say("revoke", tps(p)))
    deadline = time.monotonic() + 60
    while len(c.assignment()) < 2 and time.monotonic() < deadline:
        c.poll(0.5)
    say("owned", tps(c.assignment()))
    admin = AdminClient({"bootstrap.servers": servers})
    admin.delete_topics(["gone"], operation_timeout=30, request_timeout=40)["gone"].result(45)
    say("deleted")
    deadline = time.monotonic() + 60
    while tps(c.assignment()) != [["keep", 0]] and time.monotonic() < deadline:
        c.poll(0.5)
    say("owned", tps(c.assignment()))
    time.sleep(3600)  # the test kills us: librdkafka 2.0.2's close() would hang here (#4187)
""")


@pytest.mark.parametrize("strategy", ["cooperative-sticky", "range"])
def test_deleted_subscribed_topic_is_revoked(cluster_factory, zk_connect, strategy, tmp_path):
    cluster = cluster_factory(zk_connect, n=3, config=CONFIG)
    create_topic(cluster, "keep", partitions=1, rf=1)
    create_topic(cluster, "gone", partitions=1, rf=1)
    script = tmp_path / "consumer.py"
    script.write_text(CHILD)
    err = open(tmp_path / "consumer.err", "w")
    child = subprocess.Popen([sys.executable, str(script), bootstrap(cluster), strategy],
                             stdout=subprocess.PIPE, stderr=err, text=True)
    events = []
    try:
        while True:  # the child bounds each phase itself (60 s) and then reports "owned"
            line = child.stdout.readline()
            assert line, f"consumer exited ({child.poll()}): {events}"
            events.append(json.loads(line))
            owned = [e for e in events if e[0] == "owned"]
            if len(owned) == 2:
                break
        assert owned[0][1] == [["gone", 0], ["keep", 0]], events
        assert owned[1][1] == [["keep", 0]], f"deleted topic never revoked: {events}"
        after = events[events.index(["deleted"]):]
        assert any(e[0] == "revoke" and ["gone", 0] in e[1] for e in after), events
    finally:
        child.kill()
        child.wait()
        err.close()
