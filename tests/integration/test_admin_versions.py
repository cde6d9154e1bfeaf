"""Kafka 3.9's versions of the admin, config, quota, ACL, token and feature APIs, and DescribeCluster
(KIP-700/919), through the wire with tests/integration/kafka_codec.py: the new top version and an
old one, each answer's content and its error paths (issue 29).

Principals other than User:ANONYMOUS come from the TEST-ONLY broker key
gregor.test.principal.by.client.id=true (client.id "User:<name>" is that principal).
"""

import json
import socket
import struct
import uuid

import pytest

import gregor_harness as H
import kafka_codec as K

AUTH = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:ANONYMOUS;User:admin",
    "gregor.test.principal.by.client.id": "true",
}

# Kafka error codes
NONE, UNKNOWN_SERVER_ERROR, UNKNOWN_TOPIC = 0, -1, 3
TOPIC_AUTH, CLUSTER_AUTH = 29, 31
NOT_CONTROLLER, INVALID_REQUEST = 41, 42
SECURITY_DISABLED, INVALID_PRINCIPAL_TYPE = 54, 67
TOKEN_AUTH_DISABLED, TOKEN_NOT_ALLOWED, TOKEN_AUTHZ_FAILED = 61, 64, 65
MISMATCHED_ENDPOINT_TYPE, UNSUPPORTED_ENDPOINT_TYPE = 114, 115

# ACL codes
RES_ANY, RES_TOPIC, RES_CLUSTER, RES_USER = 1, 2, 4, 7
OP_ANY, OP_ALL, OP_READ, OP_CREATE_TOKENS, OP_DESCRIBE_TOKENS = 1, 2, 3, 13, 14
PERM_ANY, PERM_ALLOW = 1, 3
PAT_ANY, PAT_LITERAL = 1, 3

# what Kafka 3.9's ZooKeeper broker serves (JSON listeners zkBroker), for the APIs of this file
SERVED = {17: (0, 1), 18: (0, 4), 29: (0, 3), 30: (0, 3), 31: (0, 3), 32: (0, 4), 33: (0, 2),
          36: (0, 2), 37: (0, 3), 38: (0, 3), 39: (0, 2), 40: (0, 2), 41: (0, 3), 43: (0, 2),
          44: (0, 1), 48: (0, 1), 49: (0, 1), 50: (0, 0), 51: (0, 0), 57: (0, 1), 60: (0, 1)}


@pytest.fixture
def one(cluster_factory, zk_connect):
    return cluster_factory(zk_connect, n=1, config=AUTH)


def port_of(c):
    return next(iter(c.brokers.values())).port


def closes_connection(port, frame):
    """Send a raw frame; True when the broker closes the connection without answering."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(frame)
        try:
            return s.recv(1) == b""
        except ConnectionResetError:
            return True


def raw_frame(api_key, version, payload, flexible=True, cid=9):
    """A request frame with a valid header (v2 when flexible) and `payload` as its body."""
    client = b"gregor-test"
    hdr = struct.pack(">hhih", api_key, version, cid, len(client)) + client + (b"\x00" if flexible else b"")
    body = hdr + payload
    return struct.pack(">i", len(body)) + body


# ---- ApiVersions ----

def test_api_versions_v4_advertises_the_admin_versions(cluster_factory, zk_connect):
    c = cluster_factory(zk_connect, n=1)
    port = port_of(c)
    for ver in (4, 3):
        r = K.call(port, 18, ver, {"ClientSoftwareName": "gregor-test", "ClientSoftwareVersion": "1.0"})
        assert r["ErrorCode"] == NONE
        got = {k["ApiKey"]: (k["MinVersion"], k["MaxVersion"]) for k in r["ApiKeys"]}
        assert {k: got.get(k) for k in SERVED} == SERVED
        assert r["SupportedFeatures"] == []   # a ZooKeeper broker of IBP 2.7 supports no feature
    # v0 still answers, without the v3 fields
    r = K.call(port, 18, 0)
    assert r["ErrorCode"] == NONE and (60, 0, 1) in {(k["ApiKey"], k["MinVersion"], k["MaxVersion"])
                                                      for k in r["ApiKeys"]}
    # v4's software-name check is v3's
    r = K.call(port, 18, 4, {"ClientSoftwareName": "-bad", "ClientSoftwareVersion": "1"})
    assert r["ErrorCode"] == INVALID_REQUEST


# ---- DescribeCluster ----

def test_describe_cluster_v0_v1(cluster):
    cluster.wait_controller()
    ports = {b.id: b.port for b in cluster.brokers.values()}
    cluster_id = cluster.zk.get("/cluster/id")[0]
    cluster_id = json.loads(cluster_id)["id"]
    controller = cluster.controller_id()

    def brokers_seen(port):
        r = K.call(port, 60, 1)
        return r if len(r["Brokers"]) == 3 else None

    for bid, port in ports.items():
        r = H.wait_for(lambda: brokers_seen(port), what=f"broker {bid} knows 3 brokers")
        assert r["ErrorCode"] == NONE and r["ErrorMessage"] is None
        assert r["EndpointType"] == 1 and r["ClusterId"] == cluster_id
        assert r["ControllerId"] == controller
        assert sorted((b["BrokerId"], b["Host"], b["Port"], b["Rack"]) for b in r["Brokers"]) == sorted(
            (i, "127.0.0.1", p, None) for i, p in ports.items())
        assert r["ClusterAuthorizedOperations"] == -2**31   # not asked
    port = ports[controller]
    # v0 (no EndpointType) answers the same
    r0 = K.call(port, 60, 0, {"IncludeClusterAuthorizedOperations": True})
    assert r0["ErrorCode"] == NONE and r0["ClusterId"] == cluster_id and len(r0["Brokers"]) == 3
    # no authorizer: every operation the cluster resource supports (KIP-430 bits)
    ops = {5, 7, 8, 9, 10, 11, 12}  # CREATE ALTER DESCRIBE CLUSTER_ACTION DESCRIBE/ALTER_CONFIGS IDEMPOTENT_WRITE
    assert r0["ClusterAuthorizedOperations"] == sum(1 << o for o in ops)
    # a ZooKeeper broker has no controller endpoints; unknown endpoint types
    r = K.call(port, 60, 1, {"EndpointType": 2})
    assert (r["ErrorCode"], r["Brokers"], r["ClusterId"]) == (MISMATCHED_ENDPOINT_TYPE, [], "")
    assert "CONTROLLER" in r["ErrorMessage"]
    for bad in (0, 3, -1):
        r = K.call(port, 60, 1, {"EndpointType": bad})
        assert r["ErrorCode"] == UNSUPPORTED_ENDPOINT_TYPE and r["ErrorMessage"] == f"Unsupported endpoint type {bad}"
    # malformed: a truncated body and an unknown version close the connection; the broker still serves
    assert closes_connection(port, raw_frame(60, 1, b"\x01"))
    assert closes_connection(port, raw_frame(60, 2, b"\x01\x01\x00"))
    assert K.call(port, 60, 1)["ErrorCode"] == NONE
    # a broker that dies leaves the answer once the controller tells the others (UpdateMetadata)
    gone = next(i for i in ports if i != controller)
    cluster[gone].kill()
    H.wait_for(lambda: sorted(b["BrokerId"] for b in K.call(port, 60, 1)["Brokers"]) ==
               sorted(i for i in ports if i != gone), what=f"broker {gone} gone from DescribeCluster")


def test_describe_cluster_authorized_operations_and_rack(cluster_factory, zk_connect):
    one = cluster_factory(zk_connect, n=1, config=dict(AUTH, **{"broker.rack": "rack-a"}))
    port = port_of(one)
    r = H.wait_for(lambda: (lambda r: r if len(r["Brokers"]) == 1 else None)(
        K.call(port, 60, 1, {"IncludeClusterAuthorizedOperations": True}, client_id="User:admin")),
        what="the broker in its own metadata cache")
    assert r["ErrorCode"] == NONE and r["ControllerId"] == one.controller_id()
    assert [(b["BrokerId"], b["Rack"]) for b in r["Brokers"]] == [(1, "rack-a")]
    assert r["ClusterAuthorizedOperations"] == sum(1 << o for o in (5, 7, 8, 9, 10, 11, 12))
    # no Cluster DESCRIBE: 0, brokers still listed (as Kafka)
    r = K.call(port, 60, 1, {"IncludeClusterAuthorizedOperations": True}, client_id="User:nobody")
    assert r["ErrorCode"] == NONE and r["ClusterAuthorizedOperations"] == 0 and len(r["Brokers"]) == 1


# ---- configs ----

def create_topic(port, name, client_id="User:admin"):
    r = K.call(port, 19, 5, {"Topics": [{"Name": name, "NumPartitions": 1, "ReplicationFactor": 1}],
                             "timeoutMs": 10000}, client_id=client_id)
    assert r["Topics"][0]["ErrorCode"] == NONE, r


def describe_topic_config(port, topic, key, ver=4, client_id="User:admin"):
    r = K.call(port, 32, ver, {"Resources": [{"ResourceType": 2, "ResourceName": topic,
                                              "ConfigurationKeys": [key]}]}, client_id=client_id)
    (res,) = r["Results"]
    return res


def test_describe_and_alter_configs_new_versions(one):
    port = port_of(one)
    create_topic(port, "cfg")
    # AlterConfigs v2 (flexible), then DescribeConfigs v4 and v0 see it
    r = K.call(port, 33, 2, {"Resources": [{"ResourceType": 2, "ResourceName": "cfg",
                                            "Configs": [{"Name": "retention.ms", "Value": "12345"}]}]},
               client_id="User:admin")
    assert [(x["ErrorCode"], x["ResourceName"]) for x in r["Responses"]] == [(NONE, "cfg")]
    res = describe_topic_config(port, "cfg", "retention.ms")
    assert res["ErrorCode"] == NONE
    (cfg,) = res["Configs"]
    assert (cfg["Name"], cfg["Value"], cfg["ConfigSource"]) == ("retention.ms", "12345", 1)
    res0 = describe_topic_config(port, "cfg", "retention.ms", ver=0)
    assert [(c["Name"], c["Value"]) for c in res0["Configs"]] == [("retention.ms", "12345")]
    # AlterConfigs v1 still served; validateOnly changes nothing
    r = K.call(port, 33, 1, {"Resources": [{"ResourceType": 2, "ResourceName": "cfg",
                                            "Configs": [{"Name": "retention.ms", "Value": "1"}]}],
                             "ValidateOnly": True}, client_id="User:admin")
    assert r["Responses"][0]["ErrorCode"] == NONE
    assert describe_topic_config(port, "cfg", "retention.ms")["Configs"][0]["Value"] == "12345"
    # IncrementalAlterConfigs v1 (SET)
    r = K.call(port, 44, 1, {"Resources": [{"ResourceType": 2, "ResourceName": "cfg", "Configs": [
        {"Name": "retention.ms", "ConfigOperation": 0, "Value": "999"}]}]}, client_id="User:admin")
    assert r["Responses"][0]["ErrorCode"] == NONE
    assert describe_topic_config(port, "cfg", "retention.ms")["Configs"][0]["Value"] == "999"
    # errors: unknown topic, bad value, unauthorized
    assert describe_topic_config(port, "nope", "retention.ms")["ErrorCode"] == UNKNOWN_TOPIC
    r = K.call(port, 33, 2, {"Resources": [{"ResourceType": 2, "ResourceName": "nope",
                                            "Configs": [{"Name": "retention.ms", "Value": "1"}]}]},
               client_id="User:admin")
    assert r["Responses"][0]["ErrorCode"] == UNKNOWN_TOPIC
    r = K.call(port, 33, 2, {"Resources": [{"ResourceType": 2, "ResourceName": "cfg",
                                            "Configs": [{"Name": "retention.ms", "Value": "soon"}]}]},
               client_id="User:admin")
    assert r["Responses"][0]["ErrorCode"] == INVALID_REQUEST   # a ConfigException, as Kafka
    assert describe_topic_config(port, "cfg", "retention.ms", client_id="User:eve")["ErrorCode"] == TOPIC_AUTH
    r = K.call(port, 33, 2, {"Resources": [{"ResourceType": 2, "ResourceName": "cfg",
                                            "Configs": [{"Name": "retention.ms", "Value": "1"}]}]},
               client_id="User:eve")
    assert r["Responses"][0]["ErrorCode"] == TOPIC_AUTH
    assert describe_topic_config(port, "cfg", "retention.ms")["Configs"][0]["Value"] == "999"
    # malformed flexible body (a compact array claiming 1000 resources) closes the connection
    assert closes_connection(port, raw_frame(33, 2, b"\xe9\x07"))
    assert closes_connection(port, raw_frame(32, 4, b"\x02\x02"))
    assert describe_topic_config(port, "cfg", "retention.ms")["ErrorCode"] == NONE


# ---- client quotas ----

def test_client_quotas_v1(one):
    port = port_of(one)
    alice = [{"EntityType": "user", "EntityName": "alice"}]
    r = K.call(port, 49, 1, {"Entries": [{"Entity": alice, "Ops": [
        {"Key": "producer_byte_rate", "Value": 1024.0, "Remove": False}]}]}, client_id="User:admin")
    assert [(e["ErrorCode"], e["Entity"]) for e in r["Entries"]] == [(NONE, alice)]
    data = json.loads(one.zk.get("/config/users/alice")[0])
    assert data["config"] == {"producer_byte_rate": "1024.0"} or data["config"] == {"producer_byte_rate": "1024"}

    def described(ver):
        r = K.call(port, 48, ver, {"Components": [{"EntityType": "user", "MatchType": 0, "Match": "alice"}]},
                   client_id="User:admin")
        assert r["ErrorCode"] == NONE
        return [(e["Entity"], [(v["Key"], v["Value"]) for v in e["Values"]]) for e in r["Entries"]]
    assert H.wait_for(lambda: described(1) == [(alice, [("producer_byte_rate", 1024.0)])],
                      what="quota described at v1")
    assert described(0) == [(alice, [("producer_byte_rate", 1024.0)])]
    # AlterClientQuotas v0 still served: remove it
    r = K.call(port, 49, 0, {"Entries": [{"Entity": alice, "Ops": [
        {"Key": "producer_byte_rate", "Value": 0.0, "Remove": True}]}]}, client_id="User:admin")
    assert r["Entries"][0]["ErrorCode"] == NONE
    assert H.wait_for(lambda: described(1) == [], what="quota removed")
    # errors: an unknown entity type / a bad key / a bad match type; unauthorized
    r = K.call(port, 49, 1, {"Entries": [{"Entity": [{"EntityType": "planet", "EntityName": "x"}], "Ops": [
        {"Key": "producer_byte_rate", "Value": 1.0, "Remove": False}]}]}, client_id="User:admin")
    assert r["Entries"][0]["ErrorCode"] == INVALID_REQUEST
    r = K.call(port, 49, 1, {"Entries": [{"Entity": alice, "Ops": [
        {"Key": "warp_factor", "Value": 1.0, "Remove": False}]}]}, client_id="User:admin")
    assert r["Entries"][0]["ErrorCode"] == INVALID_REQUEST
    r = K.call(port, 48, 1, {"Components": [{"EntityType": "user", "MatchType": 9}]}, client_id="User:admin")
    assert r["ErrorCode"] == INVALID_REQUEST
    r = K.call(port, 49, 1, {"Entries": [{"Entity": alice, "Ops": [
        {"Key": "producer_byte_rate", "Value": 1.0, "Remove": False}]}]}, client_id="User:eve")
    assert r["Entries"][0]["ErrorCode"] == CLUSTER_AUTH
    r = K.call(port, 48, 1, {"Components": []}, client_id="User:eve")
    assert r["ErrorCode"] == CLUSTER_AUTH
    assert not one.zk.exists("/config/users/alice") or \
        json.loads(one.zk.get("/config/users/alice")[0])["config"] == {}
    # truncated flexible body
    assert closes_connection(port, raw_frame(49, 1, b"\x02\x02"))
    assert K.call(port, 48, 1, {"Components": []}, client_id="User:admin")["ErrorCode"] == NONE


# ---- ACLs v3: the User resource type ----

def user_acl(name, principal, op):
    return {"ResourceType": RES_USER, "ResourceName": name, "ResourcePatternType": PAT_LITERAL,
            "Principal": principal, "Host": "*", "Operation": op, "PermissionType": PERM_ALLOW}


def describe_all(port, ver=3, client_id="User:admin"):
    body = {"ResourceTypeFilter": RES_ANY, "ResourceNameFilter": None, "PrincipalFilter": None,
            "HostFilter": None, "Operation": OP_ANY, "PermissionType": PERM_ANY}
    if ver >= 1:
        body["PatternTypeFilter"] = PAT_ANY
    return K.call(port, 29, ver, body, client_id=client_id)


def test_acls_v3_user_resource(one):
    port = port_of(one)
    one.wait_controller()
    r = K.call(port, 30, 3, {"Creations": [user_acl("User:bob", "User:alice", OP_CREATE_TOKENS),
                                           user_acl("User:bob", "User:alice", OP_DESCRIBE_TOKENS)]},
               client_id="User:admin")
    assert [x["ErrorCode"] for x in r["Results"]] == [NONE, NONE]
    # Kafka's znode for the User resource
    acls = json.loads(one.zk.get("/kafka-acl/User/User:bob")[0])["acls"]
    assert sorted(a["operation"] for a in acls) == ["CreateTokens", "DescribeTokens"]
    r = describe_all(port)
    assert r["ErrorCode"] == NONE
    assert [(x["ResourceType"], x["ResourceName"], x["PatternType"], sorted(a["Operation"] for a in x["Acls"]))
            for x in r["Resources"]] == [(RES_USER, "User:bob", PAT_LITERAL, [OP_CREATE_TOKENS, OP_DESCRIBE_TOKENS])]
    # v2 and v0 describe the same bindings (the broker does not filter by version, as Kafka's)
    assert [x["ResourceName"] for x in describe_all(port, ver=2)["Resources"]] == ["User:bob"]
    assert [x["ResourceName"] for x in describe_all(port, ver=0)["Resources"]] == ["User:bob"]
    # errors: unknown resource type / operation; unauthorized; no authorizer tested below
    r = K.call(port, 30, 3, {"Creations": [dict(user_acl("x", "User:a", OP_READ), ResourceType=8),
                                           dict(user_acl("x", "User:a", OP_READ), Operation=15)]},
               client_id="User:admin")
    assert [x["ErrorCode"] for x in r["Results"]] == [INVALID_REQUEST, INVALID_REQUEST]
    # the token operations on another resource type: refused (Kafka 3.9 stores them, where they
    # never match; an older Gregor cannot parse them in /kafka-acl/Topic/t and would keep the
    # topic's stale ACLs, or not start)
    r = K.call(port, 30, 3, {"Creations": [dict(user_acl("t", "User:a", OP_CREATE_TOKENS), ResourceType=RES_TOPIC),
                                           dict(user_acl("kafka-cluster", "User:a", OP_DESCRIBE_TOKENS),
                                                ResourceType=RES_CLUSTER)]},
               client_id="User:admin")
    assert [x["ErrorCode"] for x in r["Results"]] == [INVALID_REQUEST, INVALID_REQUEST]
    assert not one.zk.exists("/kafka-acl/Topic/t") and not one.zk.exists("/kafka-acl/Cluster/kafka-cluster")
    r = describe_all(port, client_id="User:eve")
    assert r["ErrorCode"] == CLUSTER_AUTH and r["Resources"] == []
    r = K.call(port, 30, 3, {"Creations": [user_acl("User:eve", "User:eve", OP_CREATE_TOKENS)]},
               client_id="User:eve")
    assert r["Results"][0]["ErrorCode"] == CLUSTER_AUTH
    assert not one.zk.exists("/kafka-acl/User/User:eve")
    # DeleteAcls v3 by the User type
    r = K.call(port, 31, 3, {"Filters": [{"ResourceTypeFilter": RES_USER, "ResourceNameFilter": "User:bob",
                                          "PatternTypeFilter": PAT_LITERAL, "PrincipalFilter": None,
                                          "HostFilter": None, "Operation": OP_DESCRIBE_TOKENS,
                                          "PermissionType": PERM_ANY}]}, client_id="User:admin")
    (fr,) = r["FilterResults"]
    assert fr["ErrorCode"] == NONE
    assert [(m["ResourceType"], m["Operation"]) for m in fr["MatchingAcls"]] == [(RES_USER, OP_DESCRIBE_TOKENS)]
    acls = json.loads(one.zk.get("/kafka-acl/User/User:bob")[0])["acls"]
    assert [a["operation"] for a in acls] == ["CreateTokens"]
    # malformed: truncated
    assert closes_connection(port, raw_frame(30, 3, b"\x02\x07"))
    assert describe_all(port)["ErrorCode"] == NONE


def test_acls_v3_without_authorizer(cluster_factory, zk_connect):
    c = cluster_factory(zk_connect, n=1)
    port = port_of(c)
    assert describe_all(port)["ErrorCode"] == SECURITY_DISABLED
    r = K.call(port, 30, 3, {"Creations": [user_acl("User:bob", "User:alice", OP_CREATE_TOKENS)]})
    assert r["Results"][0]["ErrorCode"] == SECURITY_DISABLED


# ---- delegation tokens: token authentication is disabled ----

def create_token(port, client_id, ver=3, **kw):
    return K.call(port, 38, ver, dict({"Renewers": [], "MaxLifetimeMs": -1}, **kw), client_id=client_id)


def test_delegation_tokens_new_versions(one):
    port = port_of(one)
    # PLAINTEXT and ANONYMOUS: not allowed; v3 names the requester
    r = create_token(port, "gregor-test")
    assert (r["ErrorCode"], r["PrincipalType"], r["PrincipalName"]) == (TOKEN_NOT_ALLOWED, "User", "ANONYMOUS")
    assert (r["TokenRequesterPrincipalType"], r["TokenRequesterPrincipalName"]) == ("User", "ANONYMOUS")
    assert (r["IssueTimestampMs"], r["TokenId"], r["Hmac"]) == (-1, "", b"")
    # an authenticated caller for itself: AUTH_DISABLED (v3 and v2)
    r = create_token(port, "User:alice")
    assert (r["ErrorCode"], r["PrincipalName"], r["TokenRequesterPrincipalName"]) == (TOKEN_AUTH_DISABLED, "alice", "alice")
    r = create_token(port, "User:alice", ver=2)
    assert (r["ErrorCode"], r["PrincipalName"]) == (TOKEN_AUTH_DISABLED, "alice")
    # for another owner: needs CREATE_TOKENS on User:bob
    r = create_token(port, "User:alice", OwnerPrincipalType="User", OwnerPrincipalName="bob")
    assert (r["ErrorCode"], r["PrincipalName"], r["TokenRequesterPrincipalName"]) == (TOKEN_AUTHZ_FAILED, "bob", "alice")
    r = K.call(port, 30, 3, {"Creations": [user_acl("User:bob", "User:alice", OP_CREATE_TOKENS)]},
               client_id="User:admin")
    assert r["Results"][0]["ErrorCode"] == NONE
    r = create_token(port, "User:alice", OwnerPrincipalType="User", OwnerPrincipalName="bob")
    assert (r["ErrorCode"], r["PrincipalType"], r["PrincipalName"]) == (TOKEN_AUTH_DISABLED, "User", "bob")
    assert (r["TokenRequesterPrincipalType"], r["TokenRequesterPrincipalName"]) == ("User", "alice")
    # the owner named as the caller needs no ACL; an empty owner name is the caller
    r = create_token(port, "User:carol", OwnerPrincipalType="User", OwnerPrincipalName="carol")
    assert r["ErrorCode"] == TOKEN_AUTH_DISABLED
    r = create_token(port, "User:carol", OwnerPrincipalType="User", OwnerPrincipalName="")
    assert (r["ErrorCode"], r["PrincipalName"]) == (TOKEN_AUTH_DISABLED, "carol")
    # a named owner without a type (Kafka: NullPointerException) and a non-User renewer
    r = create_token(port, "User:alice", OwnerPrincipalType=None, OwnerPrincipalName="bob")
    assert r["ErrorCode"] == UNKNOWN_SERVER_ERROR
    r = create_token(port, "User:alice", Renewers=[{"PrincipalType": "Group", "PrincipalName": "g"}])
    assert r["ErrorCode"] == INVALID_PRINCIPAL_TYPE
    # Describe v3 / v0, Renew and Expire v2
    for ver in (3, 0):
        r = K.call(port, 41, ver, {"Owners": None}, client_id="User:alice")
        assert (r["ErrorCode"], r["Tokens"]) == (TOKEN_AUTH_DISABLED, [])
        r = K.call(port, 41, ver, {"Owners": None})
        assert r["ErrorCode"] == TOKEN_NOT_ALLOWED
    r = K.call(port, 39, 2, {"Hmac": b"x", "RenewPeriodMs": 1}, client_id="User:alice")
    assert (r["ErrorCode"], r["ExpiryTimestampMs"]) == (TOKEN_AUTH_DISABLED, -1)
    r = K.call(port, 40, 2, {"Hmac": b"x", "ExpiryTimePeriodMs": 1})
    assert (r["ErrorCode"], r["ExpiryTimestampMs"]) == (TOKEN_NOT_ALLOWED, -1)
    # truncated v3 body
    assert closes_connection(port, raw_frame(38, 3, b"\x05Us"))
    assert create_token(port, "User:alice")["ErrorCode"] == TOKEN_AUTH_DISABLED


# ---- UpdateFeatures v1 ----

def update_features(port, ver, updates, validate_only=False, client_id="gregor-test"):
    body = {"timeoutMs": 5000, "FeatureUpdates": updates}
    if ver >= 1:
        body["ValidateOnly"] = validate_only
    r = K.call(port, 57, ver, body, client_id=client_id)
    return r["ErrorCode"], {x["Feature"]: (x["ErrorCode"], x["ErrorMessage"]) for x in r["Results"]}


def test_update_features_v1(cluster_factory, zk_connect):
    c = cluster_factory(zk_connect, n=2)
    cid = c.wait_controller()
    cid = c.controller_id()
    ctl = c[cid].port
    other = next(b.port for b in c.brokers.values() if b.id != cid)
    assert update_features(other, 1, [{"Feature": "x", "MaxVersionLevel": 1}]) == (NOT_CONTROLLER, {})
    # someone else's finalized feature "f" at [1,3]
    data, _ = c.zk.get("/feature")
    node = json.loads(data)
    node["features"] = {"f": {"min_version_level": 1, "max_version_level": 3}}
    c.zk.set("/feature", json.dumps(node).encode())
    top, res = update_features(ctl, 1, [{"Feature": "f", "MaxVersionLevel": 0, "UpgradeType": 0},
                                        {"Feature": "g", "MaxVersionLevel": 0, "UpgradeType": 7},
                                        {"Feature": "h", "MaxVersionLevel": 2, "UpgradeType": 1}])
    assert top == NONE
    assert res["f"] == (INVALID_REQUEST, "Received unknown upgrade type.")
    assert res["g"] == (INVALID_REQUEST, "Received unknown upgrade type.")
    assert res["h"][0] == INVALID_REQUEST and "not supported" in res["h"][1]
    # unsafe downgrade to 2 is refused (not SAFE); validate-only delete answers NONE, writes nothing
    assert update_features(ctl, 1, [{"Feature": "f", "MaxVersionLevel": 2, "UpgradeType": 3}])[1]["f"][0] == INVALID_REQUEST
    stat_before = c.zk.get("/feature")[1].version
    assert update_features(ctl, 1, [{"Feature": "f", "MaxVersionLevel": 0, "UpgradeType": 2}],
                           validate_only=True) == (NONE, {"f": (NONE, None)})
    assert c.zk.get("/feature")[1].version == stat_before
    assert "f" in json.loads(c.zk.get("/feature")[0])["features"]
    # the real delete (unsafe downgrade below 1)
    assert update_features(ctl, 1, [{"Feature": "f", "MaxVersionLevel": 0, "UpgradeType": 3}]) == (NONE, {"f": (NONE, None)})
    assert json.loads(c.zk.get("/feature")[0])["features"] == {}
    # v0: AllowDowngrade is the safe downgrade; deleting a missing feature is refused
    top, res = update_features(ctl, 0, [{"Feature": "f", "MaxVersionLevel": 0, "AllowDowngrade": True}])
    assert res["f"] == (INVALID_REQUEST, "Can not delete non-existing finalized feature.")
    # truncated v1 body
    assert closes_connection(ctl, raw_frame(57, 1, b"\x00\x00\x13\x88\x02\x02f"))
    assert update_features(ctl, 1, [])[0] == NONE


def test_update_features_v1_needs_cluster_alter(one):
    port = port_of(one)
    one.wait_controller()
    top, res = update_features(port, 1, [{"Feature": "f", "MaxVersionLevel": 0, "UpgradeType": 2}],
                               client_id="User:eve")
    assert (top, res) == (CLUSTER_AUTH, {})
