"""The replica fetcher at the inter-broker protocol's Fetch version (Kafka 3.9's
MetadataVersion.fetchRequestVersion: 17 by topic id at 3.9-IV0, 12 at 3.0, 11 at 2.7-IV0) and its
truncation on fetch (KIP-595, Kafka 2.7+'s AbstractFetcherThread, v12+): a follower whose log
knows its latest epoch fetches at once with it as LastFetchedEpoch, and the leader's
DivergingEpoch answer makes it truncate -- no OffsetForLeaderEpoch round first (v11:
OffsetForLeaderEpoch as before). The truncation goes below the follower's own high watermark
(broker 1 had committed offsets 3-5 alone, as the only ISR member).

The divergence (an unclean election, deterministic): broker 2 is killed (the ISR shrinks to
[1]), broker 1 appends three records only it has, then is killed; broker 2 returns and is
elected uncleanly at the next epoch and appends two other records. When broker 1 returns as a
follower its last three records diverge: it must end with exactly broker 2's log. Broker 3 is the
controller and hosts no replica.
"""

import pytest

import gregor_harness as H
import kafka_codec as K
from test_datapath_v39 import batch_offsets, create, leaders, produce, rbatch, wait_led

FETCH = 1
CONFIG = {
    "replica.lag.time.max.ms": "10000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "200",
    "auto.leader.rebalance.enable": "false",
    "unclean.leader.election.enable": "true",
}


def isr(cluster, topic):
    return (cluster.get_json(f"/brokers/topics/{topic}/partitions/0/state")[0] or {}).get("isr", [])


def consumer_read(port, topic):
    """Fetch v12 (a consumer: from a follower too, KIP-392) from offset 0: (high watermark, records)."""
    r = K.call(port, FETCH, 12, {"ReplicaId": -1, "MaxWaitMs": 0, "MinBytes": 1, "MaxBytes": 1 << 20,
                                 "SessionEpoch": -1, "Topics": [{"Topic": topic, "Partitions": [
                                     {"Partition": 0, "FetchOffset": 0, "PartitionMaxBytes": 1 << 20}]}]})
    p = r["Responses"][0]["Partitions"][0]
    return p["ErrorCode"], p["HighWatermark"], p["Records"] or b""


@pytest.mark.parametrize("ibp,version", [("3.9-IV0", 17), ("3.0", 12), ("2.7-IV0", 11)])
def test_diverged_follower_truncates(cluster_factory, zk_connect, ibp, version):
    cfg = dict(CONFIG, **{"inter.broker.protocol.version": ibp})
    c = cluster_factory(zk_connect, n=3, config=cfg, start=False)
    c.start(ids=[3])
    c.start(ids=[1, 2])
    p1, p2, p3 = c.brokers[1].port, c.brokers[2].port, c.brokers[3].port
    assert c.controller_id() == 3
    create([p3], "dv", assignments=[[1, 2]])
    wait_led([p1, p2], "dv", leader=1)
    H.wait_for(lambda: sorted(isr(c, "dv")) == [1, 2], what="dv's ISR [1, 2]")
    assert produce(p1, 9, "dv", rbatch([1, 2, 3]))[1]["ErrorCode"] == 0          # acks=-1: both have 0-2
    c.brokers[2].kill()
    H.wait_for(lambda: isr(c, "dv") == [1], what="dv's ISR [1]")
    assert produce(p1, 9, "dv", rbatch([4, 5, 6]))[1]["BaseOffset"] == 3          # broker 1 only
    c.brokers[1].kill()
    H.wait_for(lambda: (leaders(p3, "dv") or {}).get(0) is None, what="dv offline")
    c.brokers[2].start()
    H.wait_for(lambda: (leaders(p2, "dv") or {}).get(0, (0,))[0] == 2, what="broker 2 leads dv (unclean)")
    assert produce(p2, 9, "dv", rbatch([7, 8]))[1]["BaseOffset"] == 3
    c.brokers[1].start()
    H.wait_for(lambda: sorted(isr(c, "dv")) == [1, 2], what="broker 1 back in dv's ISR")
    assert produce(p2, 9, "dv", rbatch([9]))[1]["BaseOffset"] == 5

    def same():
        a, b = consumer_read(p1, "dv"), consumer_read(p2, "dv")
        return a == b and a[1] == 6 and a
    err, hw, records = H.wait_for(same, what="broker 1's log equals broker 2's")
    assert err == 0 and batch_offsets(records) == [(0, 2), (3, 4), (5, 5)]
    diverged = "the leader's log diverges from ours" in c.brokers[1].log()
    assert diverged == (version >= 12), c.brokers[1].log_tail()
    # the followers fetched at the protocol's version (17: by topic id), and at no other
    key = "RequestsPerSec,request=FetchFollower,version="
    H.wait_for(lambda: (H.find_metric(c.brokers[2].metrics(), key + str(version)) or 0) > 0,
               what=f"broker 2 counted FetchFollower v{version}")
    others = [v for v in range(11, 18) if v != version and H.find_metric(c.brokers[2].metrics(), key + str(v))]
    assert others == [], others
