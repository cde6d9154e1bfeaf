"""Authorization (Kafka 2.7's AclAuthorizer): ACL admin APIs, per-API checks, ACL znodes and
change propagation, gregorctl acls, zookeeper.set.acl.

Principals other than User:ANONYMOUS come from the TEST-ONLY broker key
gregor.test.principal.by.client.id=true: a client whose client.id is "User:<name>" is that
principal (PLAINTEXT listeners have no authentication). Inter-broker traffic is
User:ANONYMOUS, made a super user here (as a PLAINTEXT Kafka cluster with an authorizer needs).
"""

import json
import os
import subprocess
import time

import pytest

import gregor_harness as H

from confluent_kafka import KafkaException, Producer, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import errors as KE
from kafka.admin import (ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType,
                         KafkaAdminClient, ResourcePattern, ResourcePatternFilter, ResourceType)

AUTH = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:ANONYMOUS;User:admin",
    "gregor.test.principal.by.client.id": "true",
}
LIT, PRE = ACLResourcePatternType.LITERAL, ACLResourcePatternType.PREFIXED


def bootstrap(c):
    return ",".join(f"127.0.0.1:{b.port}" for b in c.brokers.values())


def kp_admin(c, principal="User:admin"):
    """kafka-python's admin client (it speaks the ACL APIs; confluent-kafka 1.7 does not)."""
    return KafkaAdminClient(bootstrap_servers=bootstrap(c), client_id=principal, request_timeout_ms=10000)


def ck_admin(c, principal="User:admin"):
    return AdminClient({"bootstrap.servers": bootstrap(c), "client.id": principal})


def acl(rtype, name, principal, op, perm=ACLPermissionType.ALLOW, pattern=LIT, host="*"):
    return ACL(principal=principal, host=host, operation=op, permission_type=perm,
               resource_pattern=ResourcePattern(rtype, name, pattern))


def afilter(rtype=ResourceType.ANY, name=None, pattern=ACLResourcePatternType.ANY, principal=None,
            op=ACLOperation.ANY, perm=ACLPermissionType.ANY):
    return ACLFilter(principal=principal, host=None, operation=op, permission_type=perm,
                     resource_pattern=ResourcePatternFilter(rtype, name, pattern))


def create_acls(a, acls):
    res = a.create_acls(acls)
    assert not res["failed"], res["failed"]


def create_topic(a, name, partitions=1, rf=1):
    a.create_topics([NewTopic(name, partitions, rf)])[name].result()


@pytest.fixture
def one(cluster_factory, zk_connect):
    return cluster_factory(zk_connect, n=1, config=AUTH)


def test_acl_admin_round_trip_and_znodes(one):
    a = kp_admin(one)
    create_acls(a, [
        acl(ResourceType.TOPIC, "t1", "User:alice", ACLOperation.READ),
        acl(ResourceType.TOPIC, "t1", "User:bob", ACLOperation.WRITE, ACLPermissionType.DENY),
        acl(ResourceType.GROUP, "g-", "User:alice", ACLOperation.READ, pattern=PRE),
    ])
    # Kafka's znodes
    data, _ = one.zk.get("/kafka-acl/Topic/t1")
    acls = json.loads(data)
    assert acls["version"] == 1
    assert {(x["principal"], x["permissionType"], x["operation"], x["host"]) for x in acls["acls"]} == {
        ("User:alice", "Allow", "Read", "*"), ("User:bob", "Deny", "Write", "*")}
    data, _ = one.zk.get("/kafka-acl-extended/prefixed/Group/g-")
    assert json.loads(data)["acls"] == [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}]
    changes = one.zk.get_children("/kafka-acl-changes")
    assert changes and all(c.startswith("acl_changes_") for c in changes)
    assert {one.zk.get("/kafka-acl-changes/" + c)[0] for c in changes} == {b"TOPIC:t1"}
    ext = [json.loads(one.zk.get("/kafka-acl-extended-changes/" + c)[0])
           for c in one.zk.get_children("/kafka-acl-extended-changes")]
    assert ext == [{"version": 1, "resourceType": "GROUP", "name": "g-", "patternType": "PREFIXED"}]

    got, err = a.describe_acls(afilter())
    assert err is KE.NoError and len(got) == 3
    # MATCH filter: the prefixed group ACL applies to group g-1
    got, _ = a.describe_acls(afilter(ResourceType.GROUP, "g-1", ACLResourcePatternType.MATCH))
    assert [(b.resource_pattern.resource_name, b.resource_pattern.pattern_type) for b in got] == [("g-", PRE)]

    res = a.delete_acls([afilter(ResourceType.TOPIC, "t1", LIT, principal="User:bob")])
    (_, matched, ferr), = res
    assert ferr is KE.NoError
    assert [(m.principal, m.operation, e) for m, e in matched] == [("User:bob", ACLOperation.WRITE, KE.NoError)]
    acls = json.loads(one.zk.get("/kafka-acl/Topic/t1")[0])["acls"]
    assert [x["principal"] for x in acls] == ["User:alice"]
    # last ACL of a resource removed -> znode removed
    a.delete_acls([afilter(ResourceType.TOPIC, "t1")])
    assert not one.zk.exists("/kafka-acl/Topic/t1")
    a.close()


def test_acl_apis_need_cluster_alter_and_describe(one):
    a = kp_admin(one, "User:mallory")
    res = a.create_acls([acl(ResourceType.TOPIC, "t", "User:mallory", ACLOperation.ALL)])
    assert [e for _, e in res["failed"]] == [KE.ClusterAuthorizationFailedError]
    with pytest.raises(KE.ClusterAuthorizationFailedError):
        a.describe_acls(afilter())
    (_, _, ferr), = a.delete_acls([afilter()])
    assert ferr is KE.ClusterAuthorizationFailedError
    assert not one.zk.exists("/kafka-acl/Topic/t")
    a.close()
