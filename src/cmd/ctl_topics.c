/* gregorctl topics: create, list and describe topics over the Kafka protocol (like
 * kafka-topics.sh --bootstrap-server).
 *
 *   --bootstrap-server takes a comma-separated list (HOST:PORT[,HOST:PORT...]); the first
 *   address that accepts a connection is used (ctl_kafka.h).
 *
 *   topics create --topic T [--partitions N] [--replication-factor R]
 *                 [--replica-assignment 1:2,2:3] [--config k=v]... [--no-wait] [--json]
 *       Finds the controller with Metadata, sends it CreateTopics v4 (TimeoutMs = --timeout-ms)
 *       and retries on NOT_CONTROLLER (if the bootstrap broker knows no controller, the request
 *       goes to the bootstrap broker itself). Omitted counts use the broker defaults (-1).
 *       --replica-assignment: partitions separated by ',', replicas by ':'.
 *       Then, unless --no-wait, waits (up to --timeout-ms more) until the bootstrap broker's
 *       Metadata shows a leader for every partition, so that a describe or a client right after
 *       finds the topic; leaders still missing then is an error (exit 1; the topic exists).
 *       Text: "Created topic T." / "Error while executing topic command : <message>".
 *       JSON: {"topic":"T","error_code":0,"error":"NONE","message":null}
 *   topics list [--json]
 *       One name per line, sorted; JSON: ["a","b"].
 *   topics describe [--topic T] [--json]
 *       With --topic, first waits (up to --timeout-ms) while the topic is being created: while
 *       the broker does not know it yet but the controller does (a CreateTopics ValidateOnly
 *       probe answers TOPIC_ALREADY_EXISTS), and while a partition has no leader although none
 *       of its replicas is offline. An unknown topic fails at once; offline partitions are shown
 *       as they are.
 *       Text, as kafka-topics.sh 2.7:
 *         Topic: t<TAB>PartitionCount: 6<TAB>ReplicationFactor: 3<TAB>Configs: 
 *         <TAB>Topic: t<TAB>Partition: 0<TAB>Leader: 1<TAB>Replicas: 1,2,3<TAB>Isr: 1,2,3
 *       ("Leader: none" without a leader; "<TAB>Offline: 3" appended when replicas are offline.)
 *       JSON: [{"topic":"t","error_code":0,"partitions":[{"partition":0,"leader":1,
 *               "leader_epoch":0,"replicas":[1,2,3],"isr":[1,2,3],"offline":[]}]}]
 * Exit codes: 0 ok, 1 failure (including any topic error), 2 usage. */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/ctl.h"
#include "cmd/ctl_kafka.h"
#include "cmd/ctl_print.h"
#include "cmd/ctl_topics_admin.h"
#include "common/kerr.h"
#include "common/util.h"

struct topics_args {
    const char *action;
    const char *topic;
    int32_t partitions;
    int32_t rf;
    const char *assignment;
    int n_configs;
    char **configs; /* "k=v" */
    bool json;
    bool no_wait;
};

static int usage(void)
{
    fprintf(stderr,
            "usage: gregorctl --bootstrap-server HOST:PORT[,HOST:PORT...] topics create --topic T "
            "[--partitions N] [--replication-factor R] [--replica-assignment 1:2,2:3] "
            "[--config k=v]... [--no-wait] [--json]\n"
            "       gregorctl --bootstrap-server HOST:PORT[,...] topics list [--json]\n"
            "       gregorctl --bootstrap-server HOST:PORT[,...] topics describe [--topic T] [--json]\n"
            "  [--timeout-ms N]: create waits for the new topic's leaders, and describe --topic for a\n"
            "  topic being created, at most N ms (default 10000)\n");
    return 2;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}


/* ---------------- waiting for leaders ---------------- */

enum topic_state {
    T_READY,      /* every partition has a leader */
    T_UNKNOWN,    /* not (yet) in this broker's metadata */
    T_LEADERLESS, /* a partition has no leader while none of its replicas is offline */
    T_OTHER,      /* anything else (an error, offline partitions): nothing to wait for */
};

static enum topic_state topic_state(const struct MetadataResponse *md, const char *topic)
{
    for (int32_t i = 0; i < md->TopicsCount; i++) {
        const struct MetadataResponse_MetadataResponseTopic *t = &md->Topics[i];
        if (!t->Name || strcmp(t->Name, topic) != 0)
            continue;
        if (t->ErrorCode == GR_KERR_UNKNOWN_TOPIC_OR_PARTITION)
            return T_UNKNOWN;
        if (t->PartitionsCount <= 0)
            return t->ErrorCode == GR_KERR_LEADER_NOT_AVAILABLE ? T_LEADERLESS : T_OTHER;
        enum topic_state st = T_READY;
        for (int32_t p = 0; p < t->PartitionsCount; p++) {
            const struct MetadataResponse_MetadataResponsePartition *pp = &t->Partitions[p];
            if (pp->LeaderId >= 0)
                continue;
            if (pp->OfflineReplicasCount > 0)
                return T_OTHER;
            st = T_LEADERLESS;
        }
        return st;
    }
    return T_UNKNOWN;
}

static bool validate_retry(const void *resp)
{
    const struct CreateTopicsResponse *r = resp;
    return r->TopicsCount != 1 || r->Topics[0].ErrorCode == GR_KERR_NOT_CONTROLLER;
}

/* Does the controller know the topic? A CreateTopics ValidateOnly for it answers
 * TOPIC_ALREADY_EXISTS: the controller checks ZooKeeper, so a topic just created counts before
 * any broker's metadata shows it. Creates nothing. */
static bool controller_knows(struct ctl_kafka *boot, const char *topic, int timeout_ms)
{
    struct gr_arena ar;
    gr_arena_init(&ar);
    struct CreateTopicsRequest_CreatableTopic t;
    gr_proto_init_struct(&gr_desc_CreateTopicsRequest_CreatableTopic, &t);
    t.Name = (char *)topic;
    t.NumPartitions = -1;
    t.ReplicationFactor = -1;
    struct CreateTopicsRequest rq;
    gr_proto_init_struct(&gr_desc_CreateTopicsRequest, &rq);
    rq.TopicsCount = 1;
    rq.Topics = &t;
    rq.TimeoutMs = timeout_ms;
    rq.ValidateOnly = true;
    struct CreateTopicsResponse *r =
        ctl_kafka_call_controller(boot, timeout_ms, 3, GR_API_CREATE_TOPICS, 4, &rq, &ar, validate_retry);
    bool known = r && r->TopicsCount == 1 && r->Topics[0].ErrorCode == GR_KERR_TOPIC_ALREADY_EXISTS;
    gr_arena_free(&ar);
    return known;
}

/* Polls k's Metadata for topic, every 100 ms for at most timeout_ms, until its leaders are
 * visible. While it is unknown to k: for_create waits; otherwise waits only if the controller
 * knows it (being created), else gives up at once. Returns the state last seen (T_OTHER also
 * when Metadata fails). */
static enum topic_state wait_for_leaders(struct ctl_kafka *k, const char *topic, int timeout_ms, bool for_create)
{
    int64_t deadline = gr_mono_ms() + timeout_ms;
    bool probed = for_create, known = for_create;
    for (;;) {
        struct gr_arena ar;
        gr_arena_init(&ar);
        const char *one[1] = { topic };
        struct MetadataResponse *md = ctl_kafka_metadata(k, one, 1, &ar);
        enum topic_state st = md ? topic_state(md, topic) : T_OTHER;
        gr_arena_free(&ar);
        if (st == T_READY || st == T_OTHER)
            return st;
        if (st == T_UNKNOWN && !probed) {
            probed = true;
            known = controller_knows(k, topic, timeout_ms);
        }
        if ((st == T_UNKNOWN && !known) || gr_mono_ms() >= deadline)
            return st;
        usleep(100 * 1000);
    }
}

/* ---------------- list / describe ---------------- */

static int do_list(struct ctl_kafka *k, const struct topics_args *a)
{
    struct gr_arena ar;
    gr_arena_init(&ar);
    struct MetadataResponse *md = ctl_kafka_metadata(k, NULL, -1, &ar);
    if (!md) {
        gr_arena_free(&ar);
        return 1;
    }
    char **names = gr_arena_alloc(&ar, sizeof(char *) * (size_t)(md->TopicsCount + 1));
    int n = 0;
    for (int32_t i = 0; i < md->TopicsCount; i++)
        if (md->Topics[i].Name)
            names[n++] = md->Topics[i].Name;
    qsort(names, (size_t)n, sizeof(char *), cmp_str);
    if (a->json) {
        json_t *arr = json_array();
        for (int i = 0; i < n; i++)
            json_array_append_new(arr, json_string(names[i]));
        ctl_print_json(arr);
    } else {
        for (int i = 0; i < n; i++)
            printf("%s\n", names[i]);
    }
    gr_arena_free(&ar);
    return 0;
}

static int do_describe(struct ctl_kafka *k, const struct ctl_opts *opts, const struct topics_args *a)
{
    if (a->topic)
        wait_for_leaders(k, a->topic, opts->timeout_ms, false);
    struct gr_arena ar;
    gr_arena_init(&ar);
    const char *one[1] = { a->topic };
    struct MetadataResponse *md = ctl_kafka_metadata(k, a->topic ? one : NULL, a->topic ? 1 : -1, &ar);
    if (!md) {
        gr_arena_free(&ar);
        return 1;
    }
    int rc = 0;
    if (md->TopicsCount > 0)
        qsort(md->Topics, (size_t)md->TopicsCount, sizeof(*md->Topics), ctl_cmp_md_topic);
    json_t *arr = a->json ? json_array() : NULL;
    for (int32_t i = 0; i < md->TopicsCount; i++) {
        struct MetadataResponse_MetadataResponseTopic *t = &md->Topics[i];
        if (t->PartitionsCount > 0)
            qsort(t->Partitions, (size_t)t->PartitionsCount, sizeof(*t->Partitions), ctl_cmp_md_partition);
        if (t->ErrorCode != GR_KERR_NONE && t->PartitionsCount <= 0) {
            rc = 1;
            if (!a->json)
                fprintf(stderr, "Error describing topic %s: %s\n", t->Name ? t->Name : "?",
                        gr_kerr_name(t->ErrorCode));
        }
        if (a->json) {
            json_t *jt = json_object();
            json_object_set_new(jt, "topic", json_string(t->Name ? t->Name : ""));
            json_object_set_new(jt, "error_code", json_integer(t->ErrorCode));
            json_object_set_new(jt, "internal", json_boolean(t->IsInternal));
            json_t *jp = json_array();
            for (int32_t p = 0; p < t->PartitionsCount; p++) {
                struct MetadataResponse_MetadataResponsePartition *pp = &t->Partitions[p];
                json_t *o = json_object();
                json_object_set_new(o, "partition", json_integer(pp->PartitionIndex));
                json_object_set_new(o, "leader", json_integer(pp->LeaderId));
                json_object_set_new(o, "leader_epoch", json_integer(pp->LeaderEpoch));
                json_object_set_new(o, "error_code", json_integer(pp->ErrorCode));
                json_object_set_new(o, "replicas", ctl_json_ids(pp->ReplicaNodes, pp->ReplicaNodesCount));
                json_object_set_new(o, "isr", ctl_json_ids(pp->IsrNodes, pp->IsrNodesCount));
                json_object_set_new(o, "offline",
                                    ctl_json_ids(pp->OfflineReplicas, pp->OfflineReplicasCount));
                json_array_append_new(jp, o);
            }
            json_object_set_new(jt, "partitions", jp);
            json_array_append_new(arr, jt);
            continue;
        }
        if (t->ErrorCode != GR_KERR_NONE && t->PartitionsCount <= 0)
            continue;
        int rf = t->PartitionsCount > 0 ? t->Partitions[0].ReplicaNodesCount : 0;
        printf("Topic: %s\tPartitionCount: %d\tReplicationFactor: %d\tConfigs: \n", t->Name,
               t->PartitionsCount, rf);
        for (int32_t p = 0; p < t->PartitionsCount; p++) {
            ctl_print_partition_line(t->Name, &t->Partitions[p]);
        }
    }
    if (a->json)
        ctl_print_json(arr);
    gr_arena_free(&ar);
    return rc;
}

/* ---------------- create ---------------- */

/* Parses "1:2,2:3" into assignments in the arena. Returns count or -1. */
static int parse_assignment(const char *s, struct gr_arena *ar,
                            struct CreateTopicsRequest_CreatableReplicaAssignment **out)
{
    int nparts = 1;
    for (const char *p = s; *p; p++)
        nparts += *p == ',';
    struct CreateTopicsRequest_CreatableReplicaAssignment *v =
        gr_arena_alloc(ar, sizeof(*v) * (size_t)nparts);
    const char *p = s;
    for (int i = 0; i < nparts; i++) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        int nrep = 1;
        for (size_t j = 0; j < len; j++)
            nrep += p[j] == ':';
        v[i].PartitionIndex = i;
        v[i].BrokerIdsCount = nrep;
        v[i].BrokerIds = gr_arena_alloc(ar, sizeof(int32_t) * (size_t)nrep);
        const char *q = p;
        for (int r = 0; r < nrep; r++) {
            char *e;
            long id = strtol(q, &e, 10);
            if (e == q || (e < p + len && *e != ':') || e > p + len || id < 0)
                return -1;
            v[i].BrokerIds[r] = (int32_t)id;
            q = e + 1;
        }
        p = end ? end + 1 : p + len;
    }
    *out = v;
    return nparts;
}

/* Retry until one topic result that is not NOT_CONTROLLER. */
static bool create_retry(const void *resp)
{
    const struct CreateTopicsResponse *r = resp;
    return r->TopicsCount != 1 || r->Topics[0].ErrorCode == GR_KERR_NOT_CONTROLLER;
}

static int do_create(struct ctl_kafka *boot, const struct ctl_opts *o, const struct topics_args *a)
{
    if (!a->topic) {
        fprintf(stderr, "gregorctl topics create: --topic is required\n");
        return 2;
    }
    struct gr_arena ar;
    gr_arena_init(&ar);
    struct CreateTopicsRequest_CreatableTopic t;
    gr_proto_init_struct(&gr_desc_CreateTopicsRequest_CreatableTopic, &t);
    t.Name = (char *)a->topic;
    t.NumPartitions = a->partitions;
    t.ReplicationFactor = (int16_t)a->rf;
    t.AssignmentsCount = 0;
    t.Assignments = NULL;
    if (a->assignment) {
        int n = parse_assignment(a->assignment, &ar, &t.Assignments);
        if (n < 0) {
            fprintf(stderr, "gregorctl topics create: invalid --replica-assignment '%s'\n",
                    a->assignment);
            gr_arena_free(&ar);
            return 2;
        }
        t.AssignmentsCount = n;
    }
    t.ConfigsCount = a->n_configs;
    t.Configs = gr_arena_alloc(&ar, sizeof(*t.Configs) * (size_t)(a->n_configs + 1));
    for (int i = 0; i < a->n_configs; i++) {
        char *eq = strchr(a->configs[i], '=');
        if (!eq) {
            fprintf(stderr, "gregorctl topics create: --config needs k=v, got '%s'\n",
                    a->configs[i]);
            gr_arena_free(&ar);
            return 2;
        }
        t.Configs[i].Name = gr_arena_strndup(&ar, a->configs[i], (size_t)(eq - a->configs[i]));
        t.Configs[i].Value = eq + 1;
    }
    struct CreateTopicsRequest rq;
    gr_proto_init_struct(&gr_desc_CreateTopicsRequest, &rq);
    rq.TopicsCount = 1;
    rq.Topics = &t;
    rq.TimeoutMs = o->timeout_ms;
    rq.ValidateOnly = false;

    struct CreateTopicsResponse *r =
        ctl_kafka_call_controller(boot, o->timeout_ms, 10, GR_API_CREATE_TOPICS, 4, &rq, &ar, create_retry);
    bool got = r && r->TopicsCount == 1;
    int16_t err = got ? r->Topics[0].ErrorCode : GR_KERR_UNKNOWN_SERVER_ERROR;
    const char *msg = got ? r->Topics[0].ErrorMessage : NULL;
    int rc = (got && err == GR_KERR_NONE) ? 0 : 1;
    if (a->json) {
        json_t *j = json_object();
        json_object_set_new(j, "topic", json_string(a->topic));
        json_object_set_new(j, "error_code", json_integer(got ? err : -1));
        json_object_set_new(j, "error", json_string(got ? gr_kerr_name(err) : "NO_RESPONSE"));
        json_object_set_new(j, "message", msg ? json_string(msg) : json_null());
        ctl_print_json(j);
    } else if (rc == 0) {
        printf("Created topic %s.\n", a->topic);
        fflush(stdout);
    } else if (got) {
        fprintf(stderr, "Error while executing topic command : %s%s%s\n", gr_kerr_name(err),
                msg ? ": " : "", msg ? msg : "");
    } else {
        fprintf(stderr, "Error while executing topic command : no answer from the controller\n");
    }
    gr_arena_free(&ar);
    if (rc == 0 && !a->no_wait && wait_for_leaders(boot, a->topic, o->timeout_ms, true) != T_READY) {
        fprintf(stderr, "Error while executing topic command : topic %s was created, but %s does not show a "
                        "leader for each of its partitions after %d ms\n",
                a->topic, ctl_kafka_peer(boot), o->timeout_ms);
        rc = 1;
    }
    return rc;
}

/* ---------------- entry points ---------------- */

static int parse_args(int argc, char **argv, struct topics_args *a, struct ctl_opts *o)
{
    memset(a, 0, sizeof(*a));
    a->partitions = -1;
    a->rf = -1;
    a->configs = calloc((size_t)argc + 1, sizeof(char *));
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(s, "--json") == 0) {
            a->json = true;
        } else if (strcmp(s, "--no-wait") == 0) {
            a->no_wait = true;
        } else if (strcmp(s, "--topic") == 0 && v) {
            a->topic = v;
            i++;
        } else if (strcmp(s, "--partitions") == 0 && v) {
            a->partitions = atoi(v);
            i++;
        } else if (strcmp(s, "--replication-factor") == 0 && v) {
            a->rf = atoi(v);
            i++;
        } else if (strcmp(s, "--replica-assignment") == 0 && v) {
            a->assignment = v;
            i++;
        } else if (strcmp(s, "--config") == 0 && v) {
            a->configs[a->n_configs++] = (char *)v;
            i++;
        } else if (o && strcmp(s, "--bootstrap-server") == 0 && v) {
            o->bootstrap_server = v;
            i++;
        } else if (o && strcmp(s, "--timeout-ms") == 0 && v) {
            o->timeout_ms = atoi(v);
            i++;
        } else if (s[0] != '-' && !a->action) {
            a->action = s;
        } else {
            fprintf(stderr, "gregorctl topics: unknown or incomplete argument '%s'\n", s);
            return -1;
        }
    }
    if (!a->action)
        return -1;
    return 0;
}

static int run(const struct ctl_opts *o, struct topics_args *a)
{
    if (!o->bootstrap_server) {
        fprintf(stderr, "gregorctl topics: --bootstrap-server HOST:PORT is required\n");
        return 2;
    }
    bool create = strcmp(a->action, "create") == 0;
    if (!create && strcmp(a->action, "list") != 0 && strcmp(a->action, "describe") != 0)
        return usage();
    struct ctl_kafka k;
    if (ctl_kafka_connect_str(o->bootstrap_server, o->timeout_ms, &k) != 0)
        return 1;
    int rc;
    if (create)
        rc = do_create(&k, o, a);
    else if (strcmp(a->action, "list") == 0)
        rc = do_list(&k, a);
    else
        rc = do_describe(&k, o, a);
    ctl_kafka_close(&k);
    return rc;
}

int ctl_topics_main(const struct ctl_opts *o, int argc, char **argv)
{
    if (ctl_topics_admin_handles(argc, argv)) /* delete, alter, filtered describe */
        return ctl_topics_admin_main(o, argc, argv);
    struct topics_args a;
    struct ctl_opts local = *o;
    if (local.timeout_ms <= 0)
        local.timeout_ms = 10000;
    int rc = parse_args(argc, argv, &a, &local) == 0 ? run(&local, &a) : usage();
    free(a.configs);
    return rc;
}

int gr_ctl_topics_main(int argc, char **argv)
{
    struct ctl_opts o = { .zookeeper = NULL, .bootstrap_server = NULL, .timeout_ms = 10000 };
    return ctl_topics_main(&o, argc, argv);
}
