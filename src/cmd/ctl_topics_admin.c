/* gregorctl topics: delete, alter --partitions, and the filtered describes (like kafka-topics.sh
 * 2.7 --bootstrap-server):
 *
 *   topics delete --topic T[,T2...] [--json]
 *       DeleteTopics v4 to the controller (found with Metadata; NOT_CONTROLLER -> find it again
 *       and retry), TimeoutMs = --timeout-ms. The broker answers once the topics are gone from its
 *       metadata cache (the controller finishes removing the logs afterwards).
 *       Text: "Deleted topic T." per topic, or "Error while executing topic command : <error>".
 *       JSON: [{"topic":"T","error_code":0,"error":"NONE"}]
 *   topics alter --topic T --partitions N [--replica-assignment 1:2,2:3,...] [--json]
 *       CreatePartitions v2 to the controller. As kafka-topics, --replica-assignment lists every
 *       partition; the ones that already exist are dropped before sending.
 *       Text: "Altered topic T." / error as above. JSON: {"topic":...,"error_code":...,"error":...}
 *   topics describe [--topic T] --under-replicated-partitions | --unavailable-partitions |
 *                   --under-min-isr-partitions | --at-min-isr-partitions [--json]
 *       Only the partitions whose ISR is smaller than their replica list / that have no live
 *       leader (leader -1, or a leader not among the live brokers of the Metadata answer) /
 *       that have no leader or an ISR smaller than the topic's min.insync.replicas / whose ISR
 *       size equals it (kafka-topics' isUnderMinIsr / isAtMinIsrPartitions; min.insync.replicas
 *       through DescribeConfigs, or ZooKeeper with --zookeeper: ctl_min_isr.c), in
 *       kafka-topics' partition-line format:
 *         <TAB>Topic: t<TAB>Partition: 0<TAB>Leader: 1<TAB>Replicas: 1,2,3<TAB>Isr: 1,2
 *       JSON: [{"topic":"t","partition":0,"leader":1,"replicas":[..],"isr":[..],"offline":[..]}]
 * Exit codes: 0 ok, 1 failure (any topic error), 2 usage. Single-threaded. */
#include "cmd/ctl_topics_admin.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/ctl.h"
#include "cmd/ctl_kafka.h"
#include "cmd/ctl_print.h"
#include "common/kerr.h"
#include "common/util.h"

struct admin_args {
    const char *action;
    const char *topic;
    int32_t partitions;
    const char *assignment;
    bool json, under, unavailable, under_min_isr, at_min_isr;
};

static int usage(void) {
    fprintf(stderr, "usage: gregorctl --bootstrap-server HOST:PORT topics delete --topic T[,T2...] [--json]\n"
                    "       gregorctl --bootstrap-server HOST:PORT topics alter --topic T --partitions N "
                    "[--replica-assignment 1:2,2:3] [--json]\n"
                    "       gregorctl --bootstrap-server HOST:PORT topics describe [--topic T] "
                    "(--under-replicated-partitions | --unavailable-partitions | --under-min-isr-partitions |\n"
                    "        --at-min-isr-partitions) [--json]\n");
    return 2;
}

bool ctl_topics_admin_handles(int argc, char **argv) {
    static const char *const with_value[] = {"--topic", "--partitions", "--replication-factor", "--replica-assignment",
                                             "--config", "--bootstrap-server", "--timeout-ms"};
    const char *action = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--under-replicated-partitions") == 0 || strcmp(argv[i], "--unavailable-partitions") == 0 ||
            strcmp(argv[i], "--under-min-isr-partitions") == 0 || strcmp(argv[i], "--at-min-isr-partitions") == 0)
            return true;
        bool takes = false;
        for (size_t k = 0; k < GR_ARRAY_LEN(with_value); k++)
            if (strcmp(argv[i], with_value[k]) == 0) takes = true;
        if (takes) i++;
        else if (argv[i][0] != '-' && !action) action = argv[i];
    }
    return action && (strcmp(action, "delete") == 0 || strcmp(action, "alter") == 0);
}

static int parse(int argc, char **argv, struct admin_args *a, struct ctl_opts *o) {
    memset(a, 0, sizeof *a);
    a->partitions = -1;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(s, "--json") == 0) a->json = true;
        else if (strcmp(s, "--under-replicated-partitions") == 0) a->under = true;
        else if (strcmp(s, "--unavailable-partitions") == 0) a->unavailable = true;
        else if (strcmp(s, "--under-min-isr-partitions") == 0)
            a->under_min_isr = true;
        else if (strcmp(s, "--at-min-isr-partitions") == 0)
            a->at_min_isr = true;
        else if (strcmp(s, "--zookeeper") == 0 && v)
            o->zookeeper = argv[++i];
        else if (strcmp(s, "--topic") == 0 && v) a->topic = argv[++i];
        else if (strcmp(s, "--partitions") == 0 && v) a->partitions = atoi(argv[++i]);
        else if (strcmp(s, "--replica-assignment") == 0 && v) a->assignment = argv[++i];
        else if (strcmp(s, "--bootstrap-server") == 0 && v) o->bootstrap_server = argv[++i];
        else if (strcmp(s, "--timeout-ms") == 0 && v) o->timeout_ms = atoi(argv[++i]);
        else if (s[0] != '-' && !a->action) a->action = s;
        else {
            fprintf(stderr, "gregorctl topics: unknown or incomplete argument '%s'\n", s);
            return -1;
        }
    }
    return a->action ? 0 : -1;
}


/* ---------------- delete ---------------- */

static bool delete_not_controller(const void *resp) {
    const struct DeleteTopicsResponse *r = resp;
    for (int32_t i = 0; i < r->ResponsesCount; i++)
        if (r->Responses[i].ErrorCode == GR_KERR_NOT_CONTROLLER) return true;
    return false;
}

static int do_delete(struct ctl_kafka *boot, const struct ctl_opts *o, const struct admin_args *a) {
    if (!a->topic) {
        fprintf(stderr, "gregorctl topics delete: --topic is required\n");
        return 2;
    }
    struct gr_arena ar;
    gr_arena_init(&ar);
    char *list = gr_arena_strdup(&ar, a->topic);
    int n = 1;
    for (const char *p = list; *p; p++) n += *p == ',';
    struct DeleteTopicsRequest rq;
    gr_proto_init_struct(&gr_desc_DeleteTopicsRequest, &rq);
    rq.TopicNames = gr_arena_alloc(&ar, sizeof(char *) * (size_t)n);
    rq.TopicNamesCount = 0;
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save))
        rq.TopicNames[rq.TopicNamesCount++] = t;
    rq.TimeoutMs = o->timeout_ms;
    struct DeleteTopicsResponse *r = ctl_kafka_call_controller(boot, o->timeout_ms, 20, GR_API_DELETE_TOPICS, 4, &rq, &ar,
                                                                delete_not_controller);
    int rc = r ? 0 : 1;
    json_t *arr = a->json ? json_array() : NULL;
    if (!r && !a->json) fprintf(stderr, "Error while executing topic command : no answer from the controller\n");
    for (int32_t i = 0; r && i < r->ResponsesCount; i++) {
        const struct DeleteTopicsResponse_DeletableTopicResult *t = &r->Responses[i];
        if (t->ErrorCode != GR_KERR_NONE) rc = 1;
        if (a->json) {
            json_t *j = json_object();
            json_object_set_new(j, "topic", json_string(t->Name ? t->Name : ""));
            json_object_set_new(j, "error_code", json_integer(t->ErrorCode));
            json_object_set_new(j, "error", json_string(gr_kerr_name(t->ErrorCode)));
            json_array_append_new(arr, j);
        } else if (t->ErrorCode == GR_KERR_NONE) {
            printf("Deleted topic %s.\n", t->Name ? t->Name : "?");
        } else {
            fprintf(stderr, "Error while executing topic command : %s: %s\n", t->Name ? t->Name : "?",
                    gr_kerr_name(t->ErrorCode));
        }
    }
    if (a->json) ctl_print_json(arr);
    gr_arena_free(&ar);
    return rc;
}

/* ---------------- alter ---------------- */

static bool alter_not_controller(const void *resp) {
    const struct CreatePartitionsResponse *r = resp;
    return r->ResultsCount > 0 && r->Results[0].ErrorCode == GR_KERR_NOT_CONTROLLER;
}

/* The current partition count of topic (Metadata), or -1 (error printed). */
static int32_t partition_count(struct ctl_kafka *k, const char *topic) {
    struct gr_arena ar;
    gr_arena_init(&ar);
    const char *one[1] = {topic};
    struct MetadataResponse *md = ctl_kafka_metadata(k, one, 1, &ar);
    int32_t n = -1;
    if (md && md->TopicsCount == 1 && md->Topics[0].ErrorCode == GR_KERR_NONE) n = md->Topics[0].PartitionsCount;
    else if (md && md->TopicsCount == 1)
        fprintf(stderr, "Error while executing topic command : %s: %s\n", topic, gr_kerr_name(md->Topics[0].ErrorCode));
    gr_arena_free(&ar);
    return n;
}

static int do_alter(struct ctl_kafka *boot, const struct ctl_opts *o, const struct admin_args *a) {
    if (!a->topic || a->partitions <= 0) {
        fprintf(stderr, "gregorctl topics alter: --topic and --partitions N are required\n");
        return 2;
    }
    struct gr_arena ar;
    gr_arena_init(&ar);
    struct CreatePartitionsRequest_CreatePartitionsTopic t;
    gr_proto_init_struct(&gr_desc_CreatePartitionsRequest_CreatePartitionsTopic, &t);
    t.Name = (char *)a->topic;
    t.Count = a->partitions;
    t.AssignmentsCount = -1;
    t.Assignments = NULL;
    if (a->assignment) {
        int32_t existing = partition_count(boot, a->topic);
        if (existing < 0) {
            gr_arena_free(&ar);
            return 1;
        }
        /* "1:2,2:3,..." -> one assignment per partition; the first `existing` are dropped */
        char *s = gr_arena_strdup(&ar, a->assignment);
        int n = 1;
        for (const char *p = s; *p; p++) n += *p == ',';
        t.Assignments = gr_arena_alloc(&ar, sizeof(*t.Assignments) * (size_t)n);
        t.AssignmentsCount = 0;
        int idx = 0;
        for (char *save = NULL, *part = strtok_r(s, ",", &save); part; part = strtok_r(NULL, ",", &save), idx++) {
            if (idx < existing) continue;
            struct CreatePartitionsRequest_CreatePartitionsAssignment *as = &t.Assignments[t.AssignmentsCount++];
            int nr = 1;
            for (const char *p = part; *p; p++) nr += *p == ':';
            as->BrokerIds = gr_arena_alloc(&ar, sizeof(int32_t) * (size_t)nr);
            as->BrokerIdsCount = 0;
            for (char *s2 = NULL, *id = strtok_r(part, ":", &s2); id; id = strtok_r(NULL, ":", &s2)) {
                char *e;
                long v = strtol(id, &e, 10);
                if (*e || e == id || v < 0) {
                    fprintf(stderr, "gregorctl topics alter: invalid --replica-assignment '%s'\n", a->assignment);
                    gr_arena_free(&ar);
                    return 2;
                }
                as->BrokerIds[as->BrokerIdsCount++] = (int32_t)v;
            }
        }
    }
    struct CreatePartitionsRequest rq;
    gr_proto_init_struct(&gr_desc_CreatePartitionsRequest, &rq);
    rq.TopicsCount = 1;
    rq.Topics = &t;
    rq.TimeoutMs = o->timeout_ms;
    rq.ValidateOnly = false;
    struct CreatePartitionsResponse *r =
        ctl_kafka_call_controller(boot, o->timeout_ms, 20, GR_API_CREATE_PARTITIONS, 2, &rq, &ar, alter_not_controller);
    int16_t err = r && r->ResultsCount == 1 ? r->Results[0].ErrorCode : GR_KERR_UNKNOWN_SERVER_ERROR;
    const char *msg = r && r->ResultsCount == 1 ? r->Results[0].ErrorMessage : NULL;
    int rc = r && err == GR_KERR_NONE ? 0 : 1;
    if (a->json) {
        json_t *j = json_object();
        json_object_set_new(j, "topic", json_string(a->topic));
        json_object_set_new(j, "error_code", json_integer(r ? err : -1));
        json_object_set_new(j, "error", json_string(r ? gr_kerr_name(err) : "NO_RESPONSE"));
        json_object_set_new(j, "message", msg ? json_string(msg) : json_null());
        ctl_print_json(j);
    } else if (rc == 0) {
        printf("Altered topic %s.\n", a->topic);
    } else {
        fprintf(stderr, "Error while executing topic command : %s%s%s\n", r ? gr_kerr_name(err) : "no answer",
                msg ? ": " : "", msg ? msg : "");
    }
    gr_arena_free(&ar);
    return rc;
}

/* ---------------- filtered describe ---------------- */

static int do_describe(struct ctl_kafka *k, const struct ctl_opts *opts, const struct admin_args *a) {
    struct gr_arena ar;
    gr_arena_init(&ar);
    const char *one[1] = {a->topic};
    struct MetadataResponse *md = ctl_kafka_metadata(k, a->topic ? one : NULL, a->topic ? 1 : -1, &ar);
    if (!md) {
        gr_arena_free(&ar);
        return 1;
    }
    int rc = 0;
    json_t *arr = a->json ? json_array() : NULL;
    if (md->TopicsCount > 0) qsort(md->Topics, (size_t)md->TopicsCount, sizeof *md->Topics, ctl_cmp_md_topic);
    int32_t *min_isr = gr_arena_alloc(&ar, (size_t)(md->TopicsCount + 1) * sizeof *min_isr);
    for (int32_t i = 0; i < md->TopicsCount; i++) min_isr[i] = -1;
    if (a->under_min_isr || a->at_min_isr) {
        const char **names = gr_arena_alloc(&ar, (size_t)(md->TopicsCount + 1) * sizeof *names);
        for (int32_t i = 0; i < md->TopicsCount; i++) names[i] = md->Topics[i].Name ? md->Topics[i].Name : "";
        int mrc = ctl_topics_min_isr(k, opts, names, md->TopicsCount, min_isr);
        if (mrc != 0) {
            if (arr) json_decref(arr);
            gr_arena_free(&ar);
            return mrc;
        }
    }
    for (int32_t i = 0; i < md->TopicsCount; i++) {
        struct MetadataResponse_MetadataResponseTopic *t = &md->Topics[i];
        if (t->ErrorCode != GR_KERR_NONE && t->PartitionsCount <= 0) {
            rc = 1;
            fprintf(stderr, "Error describing topic %s: %s\n", t->Name ? t->Name : "?", gr_kerr_name(t->ErrorCode));
            continue;
        }
        if (t->PartitionsCount > 0) qsort(t->Partitions, (size_t)t->PartitionsCount, sizeof *t->Partitions, ctl_cmp_md_partition);
        for (int32_t p = 0; p < t->PartitionsCount; p++) {
            struct MetadataResponse_MetadataResponsePartition *pp = &t->Partitions[p];
            bool leader_live = false;
            for (int32_t b = 0; b < md->BrokersCount; b++)
                if (md->Brokers[b].NodeId == pp->LeaderId) leader_live = true;
            bool under = pp->IsrNodesCount < pp->ReplicaNodesCount;
            bool unavailable = pp->LeaderId < 0 || !leader_live;
            bool under_min = pp->LeaderId < 0 || (min_isr[i] >= 0 && pp->IsrNodesCount < min_isr[i]);
            bool at_min = min_isr[i] >= 0 && pp->IsrNodesCount == min_isr[i];
            if (!((a->under && under) || (a->unavailable && unavailable) || (a->under_min_isr && under_min) ||
                  (a->at_min_isr && at_min)))
                continue;
            if (a->json) {
                json_t *o = json_object();
                json_object_set_new(o, "topic", json_string(t->Name ? t->Name : ""));
                json_object_set_new(o, "partition", json_integer(pp->PartitionIndex));
                json_object_set_new(o, "leader", json_integer(pp->LeaderId));
                json_object_set_new(o, "replicas", ctl_json_ids(pp->ReplicaNodes, pp->ReplicaNodesCount));
                json_object_set_new(o, "isr", ctl_json_ids(pp->IsrNodes, pp->IsrNodesCount));
                json_object_set_new(o, "offline", ctl_json_ids(pp->OfflineReplicas, pp->OfflineReplicasCount));
                json_array_append_new(arr, o);
                continue;
            }
            ctl_print_partition_line(t->Name, pp);
        }
    }
    if (a->json) ctl_print_json(arr);
    gr_arena_free(&ar);
    return rc;
}

int ctl_topics_admin_main(const struct ctl_opts *o, int argc, char **argv) {
    struct ctl_opts local = *o;
    if (local.timeout_ms <= 0) local.timeout_ms = 10000;
    struct admin_args a;
    if (parse(argc, argv, &a, &local) != 0) return usage();
    if (!local.bootstrap_server) {
        fprintf(stderr, "gregorctl topics: --bootstrap-server HOST:PORT is required\n");
        return 2;
    }
    bool describe = strcmp(a.action, "describe") == 0;
    if (!describe && strcmp(a.action, "delete") != 0 && strcmp(a.action, "alter") != 0) return usage();
    struct ctl_kafka k;
    if (ctl_kafka_connect_str(local.bootstrap_server, local.timeout_ms, &k) != 0) return 1;
    int rc = describe                          ? do_describe(&k, &local, &a)
             : strcmp(a.action, "delete") == 0 ? do_delete(&k, &local, &a)
                                               : do_alter(&k, &local, &a);
    ctl_kafka_close(&k);
    return rc;
}
