"""Storage faults: corrupt data met by the log cleaner, and failed writes/fsyncs.

- A batch of a compacted log whose CRC no longer matches (a flipped value byte), and another log
  whose batch header is unreadable (a bad magic byte), both in closed segments below the recovery
  point: the cleaner abandons each pass without swapping anything, logs the segment and offset,
  and marks both logs uncleanable (Kafka's KIP-346, LogCleanerManager.markPartitionUncleanable);
  their files stay byte for byte as they were, the metric
  kafka.log:type=LogCleanerManager,name=uncleanable-partitions-count says 2, and a healthy
  compacted log is still cleaned, again and again. Before: the CRC-corrupt batch was copied, the
  cleaned segment cut at it (the rest of its group lost), and the log with the bad header was
  retried forever as the dirtiest log, so the healthy one was cleaned at most once.
- fsync fails with EIO (an LD_PRELOAD shim, built here, fails fsync/fdatasync -- and on request
  write/pwrite -- for paths under one log dir once a trigger file exists; the writes themselves
  succeed in this test) on a topic with flush.messages=1: the
  produce gets KAFKA_STORAGE_ERROR instead of success, the dir goes offline, leadership moves to
  another broker, and every acknowledged record is still there. Before: the failed fsync was
  ignored and the produce acknowledged.
- A rename that fails half-way through a cleaner swap (the shim fails `<base>.log.swap` ->
  `<base>.log` with EACCES, an errno that is no disk failure): the dir goes offline anyway
  (Kafka's replaceSegments throws KafkaStorageException), leadership moves, nothing of the group
  is deleted (the .swap and the .deleted files stay), no later pass overwrites the .swap, and the
  restart without the fault completes the swap with every key's latest value. Before: the error
  was retried as a passing one while the log's segments pointed at renamed files.
- The same shim under background work only: the periodic replication-offset-checkpoint write
  fails, the dir goes offline and leadership moves. Before: the error was dropped."""

import os
import re
import shutil
import subprocess
import time
import urllib.request

import pytest

import gregor_harness as H
from test_compaction import bootstrap, create  # noqa: E402

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

COMPACT = {"cleanup.policy": "compact", "segment.bytes": "4000", "min.cleanable.dirty.ratio": "0.01"}




def produce(cluster, topic, items, **conf):
    p = Producer({"bootstrap.servers": bootstrap(cluster), "linger.ms": 2, "batch.num.messages": 5, **conf})
    for k, v in items:
        p.produce(topic, key=k.encode(), value=v.encode())
    assert p.flush(30) == 0


def files(d):
    """{name: bytes} of the segment files of a partition directory."""
    out = {}
    for n in sorted(os.listdir(d)):
        if n.endswith(".log") or ".log." in n:
            with open(os.path.join(d, n), "rb") as f:
                out[n] = f.read()
    return out


def segments(d):
    return sorted(n for n in os.listdir(d) if n.endswith(".log"))


def cleaned_count(broker, d):
    return len(re.findall(r"cleaned '" + re.escape(d) + r"': offsets", broker.log()))


def test_corrupt_batches_make_logs_uncleanable(cluster_factory, zk_connect):
    mport = H.free_port()
    cluster = cluster_factory(zk_connect, n=1, config={"log.cleaner.enable": "false", "log.cleaner.threads": "1",
                                                       "log.cleaner.backoff.ms": "100",
                                                       "gregor.metrics.listener": f"http://127.0.0.1:{mport}"})
    b = cluster[1]
    for t in ("crc", "ok"):
        create(cluster, t, COMPACT)
    # index entries every 1000 bytes: loading walks a closed segment from its last index entry
    # only, so a bad header before it is first met by the cleaner
    create(cluster, "hdr", {**COMPACT, "segment.bytes": "8000", "index.interval.bytes": "1000"})
    # unique keys in the corrupt logs: every batch is kept whole by a cleaning pass
    produce(cluster, "crc", [(f"k{i}", f"value-crc-{i:05d}") for i in range(300)])
    produce(cluster, "hdr", [(f"k{i}", f"value-hdr-{i:05d}") for i in range(700)])
    produce(cluster, "ok", [(f"k{i % 10}", f"value-ok-{i:05d}") for i in range(300)])
    b.stop()  # clean shutdown: every segment lies below the recovery point (loaded, not recovered)
    dcrc, dhdr, dok = (os.path.join(b.logdir, f"{t}-0") for t in ("crc", "hdr", "ok"))
    assert len(segments(dcrc)) >= 3 and len(segments(dhdr)) >= 3
    first = os.path.join(dcrc, segments(dcrc)[0])
    with open(first, "r+b") as f:  # flip a value byte: the CRC no longer matches, records still parse
        data = f.read()
        pos = data.index(b"value-crc-00003") + 6
        f.seek(pos)
        f.write(b"X")
    with open(os.path.join(dhdr, segments(dhdr)[0]), "r+b") as f:  # magic of the second batch
        second = 12 + int.from_bytes(f.read(12)[8:12], "big")
        f.seek(second + 16)
        f.write(b"\x07")
    before_crc, before_hdr = files(dcrc), files(dhdr)
    b.config["log.cleaner.enable"] = "true"
    b.start()
    cluster.wait_registered([1])
    H.wait_for(lambda: cleaned_count(b, dok) >= 1, 15, "the healthy log cleaned")
    H.wait_for(lambda: re.search(r"(cleaned '|corrupt batch in segment ')" + re.escape(dcrc), b.log()), 15,
               "a pass over the log with the CRC mismatch")
    assert files(dcrc) == before_crc  # nothing copied, cut or swapped
    # the healthy log keeps being cleaned: a second round of overwrites gets compacted too
    produce(cluster, "ok", [(f"k{i % 10}", f"again-{i:05d}") for i in range(300)])
    n0 = cleaned_count(b, dok)
    H.wait_for(lambda: cleaned_count(b, dok) > n0, 15, "the healthy log cleaned again")
    assert files(dhdr) == before_hdr
    H.wait_for(lambda: b.log().count("Marking the partition as uncleanable") >= 2, 15, "both corrupt logs uncleanable")
    log = b.log()
    assert re.search(r"corrupt batch in segment '" + re.escape(first) + r"' at position \d+ \(offset \d+\)", log)
    assert f"corrupt batch in segment '{os.path.join(dhdr, segments(dhdr)[0])}' at position {second} " in log
    assert files(dcrc) == before_crc
    assert "cleaned '" + dcrc not in b.log() and "cleaned '" + dhdr not in b.log()
    body = urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=10).read().decode()
    m = re.search(r'kafka_log_logcleanermanager_uncleanable_partitions_count\{logDirectory="([^"]*)"\} (\S+)', body)
    assert m and float(m.group(2)) == 2.0, body[-2000:]
    # every record of the log with a readable header is still served
    c = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "rd", "enable.auto.commit": False,
                  "enable.partition.eof": True, "check.crcs": False})
    c.assign([TopicPartition("crc", 0, 0)])
    got, deadline = 0, time.time() + 15
    while time.time() < deadline:
        msg = c.poll(1)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                break
            continue
        got += 1
    c.close()
    assert got == 300


SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

/* Fails fsync/fdatasync (and write/pwrite too when $GREGOR_FAULT_WRITES is set) with EIO on
 * descriptors whose path starts with $GREGOR_FAULT_DIR while the file $GREGOR_FAULT_TRIGGER
 * exists. */
static int hit(int fd, int is_write) {
    const char *dir = getenv("GREGOR_FAULT_DIR"), *trig = getenv("GREGOR_FAULT_TRIGGER");
    if (is_write && !getenv("GREGOR_FAULT_WRITES")) return 0;
    if (!dir || !trig || access(trig, F_OK) != 0) return 0;
    char link[64], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0) return 0;
    path[n] = 0;
    size_t dl = strlen(dir);
    return strncmp(path, dir, dl) == 0 && (path[dl] == '/' || path[dl] == 0);
}
#define WRAP(ret, name, params, args, fd, w)                               \
    ret name params {                                                      \
        static ret(*real) params;                                          \
        if (!real) real = (ret(*) params)dlsym(RTLD_NEXT, #name);          \
        if (hit(fd, w)) { errno = EIO; return -1; }                        \
        return real args;                                                  \
    }
WRAP(int, fsync, (int fd), (fd), fd, 0)
WRAP(int, fdatasync, (int fd), (fd), fd, 0)
WRAP(ssize_t, write, (int fd, const void *b, size_t n), (fd, b, n), fd, 1)
WRAP(ssize_t, pwrite, (int fd, const void *b, size_t n, off_t o), (fd, b, n, o), fd, 1)
WRAP(ssize_t, pwrite64, (int fd, const void *b, size_t n, off_t o), (fd, b, n, o), fd, 1)
WRAP(ssize_t, pwritev, (int fd, const struct iovec *v, int c, off_t o), (fd, v, c, o), fd, 1)

/* Fails rename(old, new) with errno $GREGOR_FAULT_RENAME_ERRNO when old lies under
 * $GREGOR_FAULT_DIR and ends with $GREGOR_FAULT_RENAME while the file $GREGOR_FAULT_TRIGGER-rename
 * exists (its own trigger: fsync and write keep working). */
int rename(const char *from, const char *to) {
    static int (*real)(const char *, const char *);
    if (!real) real = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
    const char *dir = getenv("GREGOR_FAULT_DIR"), *trig = getenv("GREGOR_FAULT_TRIGGER");
    const char *suffix = getenv("GREGOR_FAULT_RENAME"), *err = getenv("GREGOR_FAULT_RENAME_ERRNO");
    if (dir && trig && suffix) {
        char t[PATH_MAX];
        snprintf(t, sizeof t, "%s-rename", trig);
        size_t dl = strlen(dir), fl = strlen(from), sl = strlen(suffix);
        if (access(t, F_OK) == 0 && strncmp(from, dir, dl) == 0 && from[dl] == '/' && fl >= sl &&
            strcmp(from + fl - sl, suffix) == 0) {
            errno = err ? atoi(err) : EIO;
            return -1;
        }
    }
    return real(from, to);
}
"""


def build_shim(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler for the fault shim")
    src = tmp_path / "eio_shim.c"
    so = tmp_path / "eio_shim.so"
    src.write_text(SHIM)
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(so), str(src), "-ldl"], check=True)
    return str(so)


def state(cluster, topic, p=0):
    return cluster.get_json(f"/brokers/topics/{topic}/partitions/{p}/state")[0] or {}


def faulty_cluster(cluster_factory, zk_connect, tmp_path, monkeypatch, topic_config, b1_config=None):
    """3 brokers; broker 1 has two log dirs and runs under the EIO shim for the second one. Topic
    "f" with 4 partitions led by broker 1. Returns (cluster, second dir, trigger path)."""
    so = build_shim(tmp_path)
    trigger = str(tmp_path / "fail-now")
    cluster = cluster_factory(zk_connect, n=3, config={"num.replica.fetchers": "1"}, start=False)
    b1 = cluster[1]
    second = b1.logdir + "-b"
    b1.config["log.dirs"] = f"{b1.logdir},{second}"
    b1.config.update(b1_config or {})
    preload = so
    if H.SANITIZED:  # the ASan runtime must come first in the list of preloaded libraries
        cc = shutil.which("cc") or shutil.which("gcc")
        asan = subprocess.run([cc, "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
        preload = f"{asan}:{so}"
    monkeypatch.setenv("LD_PRELOAD", preload)
    monkeypatch.setenv("GREGOR_FAULT_DIR", second)
    monkeypatch.setenv("GREGOR_FAULT_TRIGGER", trigger)
    b1.start()
    monkeypatch.delenv("LD_PRELOAD")
    cluster.start(ids=[2, 3])
    cluster.wait_registered([1, 2, 3])
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    admin.create_topics([NewTopic("f", num_partitions=4, replica_assignment=[[1, 2, 3]] * 4, config=topic_config)],
                        operation_timeout=20, request_timeout=30)["f"].result(timeout=40)
    for q in range(4):
        H.wait_for(lambda: len(state(cluster, "f", q).get("isr", [])) == 3, 20, "full ISR")
    return cluster, second, trigger


def test_failed_fsync_fails_the_produce_and_takes_the_dir_offline(cluster_factory, zk_connect, tmp_path,
                                                                 monkeypatch):
    cluster, second, trigger = faulty_cluster(cluster_factory, zk_connect, tmp_path, monkeypatch,
                                              {"flush.messages": "1", "min.insync.replicas": "2"})
    b1 = cluster[1]
    n = 4
    acked = []

    def cb(err, msg):
        if err is None:
            acked.append(msg.value())

    p = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all", "linger.ms": 0})
    for q in range(n):
        p.produce("f", f"first-{q}".encode(), partition=q, on_delivery=cb)
    assert p.flush(30) == 0
    assert len(acked) == n
    H.wait_for(lambda: any(d.startswith("f-") for d in os.listdir(second)), 10, "partitions placed in the second dir")
    failed = sorted(int(d.rsplit("-", 1)[1]) for d in os.listdir(second) if d.startswith("f-"))
    assert failed, os.listdir(second)
    q = failed[0]
    open(trigger, "w").close()
    errors = []
    p2 = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all", "linger.ms": 0,
                   "message.send.max.retries": 0, "message.timeout.ms": 10000})
    p2.produce("f", b"during-fault", partition=q,
               on_delivery=lambda err, msg: errors.append(err) if err else acked.append(msg.value()))
    p2.flush(15)
    assert errors and errors[0].code() == KafkaError.KAFKA_STORAGE_ERROR, (errors, acked)
    assert b"during-fault" not in acked
    H.wait_for(lambda: state(cluster, "f", q).get("leader") in (2, 3) and 1 not in state(cluster, "f", q)["isr"], 15,
               "leadership moved off the failed dir")
    assert "the log dir goes offline" in b1.log()
    assert re.search(r"flush of '[^']*/f-%d' failed: Input/output error" % q, b1.log())
    assert b1.running()
    # clients carry on; every acknowledged record is there
    for k in range(n):
        p.produce("f", f"after-{k}".encode(), partition=k, on_delivery=cb)
    assert p.flush(30) == 0
    got = []
    c = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "rd", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    c.assign([TopicPartition("f", k, 0) for k in range(n)])
    eof, deadline = set(), time.time() + 15
    while len(eof) < n and time.time() < deadline:
        msg = c.poll(1)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                eof.add(msg.partition())
            continue
        got.append(msg.value())
    c.close()
    assert set(acked) <= set(got), (acked, got)
    assert len(acked) == 2 * n


def test_failed_checkpoint_write_takes_the_dir_offline(cluster_factory, zk_connect, tmp_path, monkeypatch):
    """Background work: the periodic replication-offset-checkpoint write into the failing dir
    fails its fsync; the dir goes offline and leadership of its partitions moves, without any
    produce. Before: the error was only returned to the log manager's thread and dropped."""
    cluster, second, trigger = faulty_cluster(cluster_factory, zk_connect, tmp_path, monkeypatch, {},
                                              {"replica.high.watermark.checkpoint.interval.ms": "300"})
    b1 = cluster[1]
    p = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all"})
    for q in range(4):
        p.produce("f", f"first-{q}".encode(), partition=q)
    assert p.flush(30) == 0
    H.wait_for(lambda: any(d.startswith("f-") for d in os.listdir(second)), 10, "partitions placed in the second dir")
    failed = sorted(int(d.rsplit("-", 1)[1]) for d in os.listdir(second) if d.startswith("f-"))
    healthy = [q for q in range(4) if q not in failed]
    open(trigger, "w").close()
    for q in failed:
        H.wait_for(lambda: state(cluster, "f", q).get("leader") in (2, 3) and 1 not in state(cluster, "f", q)["isr"],
                   15, f"f-{q} moved off the failed dir")
    assert re.search(r"Error while writing [^ ]*" + re.escape(second) + r"/replication-offset-checkpoint", b1.log())
    for q in healthy:
        assert state(cluster, "f", q)["leader"] == 1
    assert b1.running()


def test_failed_swap_rename_takes_the_dir_offline_and_keeps_the_group(cluster_factory, zk_connect, tmp_path,
                                                                      monkeypatch):
    monkeypatch.setenv("GREGOR_FAULT_RENAME", ".log.swap")
    monkeypatch.setenv("GREGOR_FAULT_RENAME_ERRNO", "13")  # EACCES
    cluster, second, trigger = faulty_cluster(
        cluster_factory, zk_connect, tmp_path, monkeypatch,
        {"cleanup.policy": "compact", "segment.bytes": "4000", "min.cleanable.dirty.ratio": "0.01",
         "min.compaction.lag.ms": "3600000"},  # nothing is cleaned until the data is all there
        {"log.cleaner.backoff.ms": "200"})
    b1 = cluster[1]
    latest = {}
    for rnd in range(10):
        items = []
        for q in range(4):
            for k in range(30):
                items.append((q, f"k{k}", f"r{rnd}-q{q}-k{k}-" + "x" * 40))
        p = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all", "linger.ms": 2,
                      "batch.num.messages": 5})
        for q, k, v in items:
            p.produce("f", key=k.encode(), value=v.encode(), partition=q)
            latest[(q, k)] = v
        assert p.flush(30) == 0
    failed = sorted(int(d.rsplit("-", 1)[1]) for d in os.listdir(second) if d.startswith("f-"))
    assert failed, os.listdir(second)
    open(trigger + "-rename", "w").close()
    out = subprocess.run([H.GREGORCTL, "--bootstrap-server", bootstrap(cluster), "configs", "--alter",
                          "--entity-type", "topics", "--entity-name", "f", "--delete-config", "min.compaction.lag.ms"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    H.wait_for(lambda: re.search(r"cannot put '[^']*\.log\.swap' in place: Permission denied", b1.log()), 30,
               "a swap failed at its last rename")
    for q in failed:
        H.wait_for(lambda q=q: state(cluster, "f", q).get("leader") in (2, 3) and
                   1 not in state(cluster, "f", q)["isr"], 15, f"f-{q} moved off the failed dir")
    assert b1.running()
    left = {q: os.listdir(os.path.join(second, f"f-{q}")) for q in failed}
    swaps = [(q, n) for q, ns in left.items() for n in ns if n.endswith(".log.swap")]
    assert swaps, left
    for q, n in swaps:  # the group's old segments are kept, renamed, beside the .swap
        assert any(m.endswith(".log.deleted") for m in left[q]), left[q]
    time.sleep(1.0)  # several cleaner backoffs: the dir is offline, nothing touches it any more
    for q, n in swaps:
        assert n in os.listdir(os.path.join(second, f"f-{q}"))
    b1.stop()
    os.unlink(trigger + "-rename")
    b1.start()
    cluster.wait_registered([1, 2, 3])
    for q, n in swaps:  # the recovery at open completed the swap
        d = os.path.join(second, f"f-{q}")
        H.wait_for(lambda d=d: not any(m.endswith((".swap", ".deleted")) for m in os.listdir(d)), 30,
                   f"swap completed in {d}")
    for q in range(4):
        H.wait_for(lambda q=q: 1 in state(cluster, "f", q).get("isr", []), 30, f"broker 1 back in the ISR of f-{q}")
    # broker 1, whose swap was completed by its recovery, leads again: what it serves counts
    subprocess.run([H.GREGORCTL, "--bootstrap-server", bootstrap(cluster), "elect-leaders", "--election-type",
                    "preferred", "--all-topic-partitions"], capture_output=True, text=True, timeout=60)
    for q in range(4):
        H.wait_for(lambda q=q: state(cluster, "f", q).get("leader") == 1, 30, f"broker 1 leading f-{q}")
    got = {}
    c = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "swp", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    c.assign([TopicPartition("f", q, 0) for q in range(4)])
    eof, deadline = set(), time.time() + 30
    while len(eof) < 4 and time.time() < deadline:
        msg = c.poll(1)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                eof.add(msg.partition())
            continue
        got[(msg.partition(), msg.key().decode())] = msg.value().decode()
    c.close()
    assert got == latest
