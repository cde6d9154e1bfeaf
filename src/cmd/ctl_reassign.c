/* gregorctl reassign: kafka-reassign-partitions.sh (2.7, --bootstrap-server mode) for Gregor.
 *
 *   reassign generate --topics-to-move-json-file F --broker-list 1,2,3
 *       F: {"version":1,"topics":[{"topic":"t"}]}. Prints the current assignment of those topics
 *       and a proposal computed with Kafka's rack-unaware assignReplicasToBrokers over the broker
 *       list (random start), each as reassignment JSON:
 *         Current partition replica assignment
 *         {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}
 *         <empty line>
 *         Proposed partition reassignment configuration
 *         {...}
 *   reassign execute --reassignment-json-file F [--additional]
 *       F: {"version":1,"partitions":[{"topic":t,"partition":p,"replicas":[..],"log_dirs":[..]?}]}.
 *       Refuses while another reassignment is in progress unless --additional. Prints the
 *       current assignment (for rollback), sends AlterPartitionReassignments to the controller,
 *       then "Successfully started partition reassignment(s) for t-0,t-1".
 *       --throttle N (bytes/s): first "Warning: You must run --verify periodically, until the
 *       reassignment completes, to ensure the throttle is removed.", then (IncrementalAlterConfigs)
 *       leader.replication.throttled.replicas = p:b for every current replica and
 *       follower.replication.throttled.replicas = p:b for every added replica of each moving
 *       partition, and leader/follower.replication.throttled.rate = N on every broker involved;
 *       "The inter-broker throttle limit was set to N B/s".
 *   reassign verify --reassignment-json-file F [--preserve-throttles]
 *       ListPartitionReassignments for those partitions + Metadata:
 *         Status of partition reassignment:
 *         Reassignment of partition t-0 is complete.   | ... is still in progress.
 *         There is no active reassignment of partition t-0, but replica set is 1,2 rather than 3,4.
 *       Exit 0 when every partition is complete, else 1. When complete (and without
 *       --preserve-throttles) the throttles are removed: "Clearing broker-level throttles on brokers
 *       1,2,3" (every live broker and every target replica) and "Clearing topic-level throttles on
 *       topic t".
 *   reassign cancel --reassignment-json-file F
 *       Cancels (AlterPartitionReassignments with null replicas) those that are reassigning:
 *       "Successfully cancelled partition reassignment(s) for: t-0" or
 *       "None of the specified partition reassignments are active."
 *   reassign list
 *       "Current partition reassignments:" then "t-0: replicas: 1,2,3. adding: 3. removing: 1."
 * Global options: --bootstrap-server (required), --timeout-ms. */
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "admin/assignment.h"
#include "cmd/ctl.h"
#include "cmd/ctl_kafka.h"
#include "cmd/ctl_print.h"
#include "cmd/ctl_reassign.h"
#include "common/kerr.h"
#include "common/util.h"

struct tp_entry {
    char *topic;
    int32_t partition;
    int n;
    int32_t *replicas;
};

struct tp_map {
    int n, cap;
    struct tp_entry *v;
};

static void map_add(struct tp_map *m, const char *topic, int32_t partition, const int32_t *r, int n)
{
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 16;
        m->v = gr_realloc(m->v, sizeof(*m->v) * (size_t)m->cap);
    }
    struct tp_entry *e = &m->v[m->n++];
    e->topic = gr_strdup(topic);
    e->partition = partition;
    e->n = n;
    e->replicas = gr_malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    if (n) memcpy(e->replicas, r, sizeof(int32_t) * (size_t)n);
}

static void map_free(struct tp_map *m)
{
    for (int i = 0; i < m->n; i++) {
        free(m->v[i].topic);
        free(m->v[i].replicas);
    }
    free(m->v);
    memset(m, 0, sizeof(*m));
}

static int cmp_entry(const void *a, const void *b)
{
    const struct tp_entry *x = a, *y = b;
    int c = strcmp(x->topic, y->topic);
    return c ? c : (x->partition > y->partition) - (x->partition < y->partition);
}

static struct tp_entry *map_find(struct tp_map *m, const char *topic, int32_t partition)
{
    for (int i = 0; i < m->n; i++)
        if (m->v[i].partition == partition && strcmp(m->v[i].topic, topic) == 0)
            return &m->v[i];
    return NULL;
}

/* {"version":1,"partitions":[...]} with log_dirs "any", compact, sorted. */
static void print_reassignment_json(struct tp_map *m)
{
    qsort(m->v, (size_t)m->n, sizeof(*m->v), cmp_entry);
    json_t *root = json_object();
    json_object_set_new(root, "version", json_integer(1));
    json_t *parts = json_array();
    for (int i = 0; i < m->n; i++) {
        json_t *p = json_object();
        json_object_set_new(p, "topic", json_string(m->v[i].topic));
        json_object_set_new(p, "partition", json_integer(m->v[i].partition));
        json_t *r = json_array(), *d = json_array();
        for (int j = 0; j < m->v[i].n; j++) {
            json_array_append_new(r, json_integer(m->v[i].replicas[j]));
            json_array_append_new(d, json_string("any"));
        }
        json_object_set_new(p, "replicas", r);
        json_object_set_new(p, "log_dirs", d);
        json_array_append_new(parts, p);
    }
    json_object_set_new(root, "partitions", parts);
    char *s = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    printf("%s\n", s);
    free(s);
    json_decref(root);
}

static json_t *load_json(const char *path)
{
    json_error_t err;
    json_t *j = json_load_file(path, 0, &err);
    if (!j)
        fprintf(stderr, "gregorctl reassign: cannot parse %s: %s (line %d)\n", path, err.text, err.line);
    return j;
}

/* Parses a reassignment JSON file into m. 0, or 1 (message printed). */
static int parse_reassignment_file(const char *path, struct tp_map *m)
{
    json_t *j = load_json(path);
    if (!j)
        return 1;
    json_t *parts = json_object_get(j, "partitions");
    json_t *ver = json_object_get(j, "version");
    if (ver && (!json_is_integer(ver) || json_integer_value(ver) != 1)) {
        fprintf(stderr, "Not supported version field value %s\n", json_is_integer(ver) ? "other than 1" : "(not an integer)");
        json_decref(j);
        return 1;
    }
    if (!json_is_array(parts)) {
        fprintf(stderr, "Partition reassignment list cannot be empty\n");
        json_decref(j);
        return 1;
    }
    size_t i;
    json_t *p;
    json_array_foreach(parts, i, p) {
        json_t *t = json_object_get(p, "topic"), *pn = json_object_get(p, "partition"),
               *r = json_object_get(p, "replicas");
        if (!json_is_string(t) || !json_is_integer(pn) || !json_is_array(r)) {
            fprintf(stderr, "Invalid partition entry %zu in %s (needs topic, partition, replicas)\n", i, path);
            json_decref(j);
            return 1;
        }
        int n = (int)json_array_size(r);
        int32_t *ids = gr_malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
        for (int k = 0; k < n; k++) {
            json_t *x = json_array_get(r, (size_t)k);
            if (!json_is_integer(x)) {
                fprintf(stderr, "Invalid replica in entry %zu of %s\n", i, path);
                free(ids);
                json_decref(j);
                return 1;
            }
            ids[k] = (int32_t)json_integer_value(x);
        }
        const char *tn = json_string_value(t);
        int32_t part = (int32_t)json_integer_value(pn);
        if (map_find(m, tn, part)) {
            fprintf(stderr, "Partition reassignment contains duplicate topic partitions: %s-%d\n", tn, part);
            free(ids);
            json_decref(j);
            return 1;
        }
        for (int a = 0; a < n; a++)
            for (int b = a + 1; b < n; b++)
                if (ids[a] == ids[b]) {
                    fprintf(stderr, "Partition replica lists may not contain duplicate entries: %s-%d contains multiple entries for %d\n",
                            tn, part, ids[a]);
                    free(ids);
                    json_decref(j);
                    return 1;
                }
        map_add(m, tn, part, ids, n);
        free(ids);
    }
    json_decref(j);
    if (m->n == 0) {
        fprintf(stderr, "Partition reassignment list cannot be empty\n");
        return 1;
    }
    return 0;
}

/* Ask the controller again while the top-level error says NOT_CONTROLLER. */
static bool list_retry(const void *resp)
{
    return ((const struct ListPartitionReassignmentsResponse *)resp)->ErrorCode == GR_KERR_NOT_CONTROLLER;
}

static bool alter_retry(const void *resp)
{
    return ((const struct AlterPartitionReassignmentsResponse *)resp)->ErrorCode == GR_KERR_NOT_CONTROLLER;
}

/* Current replicas of the topics (NULL = all) from Metadata into m. 0 or 1. */
static int current_assignment(struct ctl_kafka *boot, const char *const *topics, int n, struct tp_map *m,
                              bool quiet_missing)
{
    struct gr_arena ar;
    gr_arena_init(&ar);
    struct MetadataResponse *md = ctl_kafka_metadata(boot, topics, topics ? n : -1, &ar);
    if (!md) {
        gr_arena_free(&ar);
        return 1;
    }
    int rc = 0;
    for (int t = 0; t < md->TopicsCount; t++) {
        const struct MetadataResponse_MetadataResponseTopic *mt = &md->Topics[t];
        if (mt->ErrorCode != GR_KERR_NONE) {
            if (!quiet_missing) {
                fprintf(stderr, "Topic %s: %s\n", mt->Name ? mt->Name : "?", gr_kerr_name(mt->ErrorCode));
                rc = 1;
            }
            continue;
        }
        for (int p = 0; p < mt->PartitionsCount; p++)
            map_add(m, mt->Name, mt->Partitions[p].PartitionIndex, mt->Partitions[p].ReplicaNodes,
                    mt->Partitions[p].ReplicaNodesCount);
    }
    gr_arena_free(&ar);
    return rc;
}

/* ListPartitionReassignments for m's partitions (m == NULL: all) into out. 0 or 1. */
static int list_reassignments(struct ctl_kafka *boot, const struct ctl_opts *o, struct tp_map *m,
                              struct gr_arena *a, struct ListPartitionReassignmentsResponse **out)
{
    struct ListPartitionReassignmentsRequest rq;
    gr_proto_init_struct(&gr_desc_ListPartitionReassignmentsRequest, &rq);
    rq.TimeoutMs = o->timeout_ms;
    if (!m) {
        rq.TopicsCount = -1;
        rq.Topics = NULL;
    } else {
        rq.TopicsCount = 0;
        rq.Topics = gr_arena_alloc(a, sizeof(*rq.Topics) * (size_t)(m->n ? m->n : 1));
        for (int i = 0; i < m->n; i++) {
            struct ListPartitionReassignmentsRequest_ListPartitionReassignmentsTopics *t = NULL;
            for (int k = 0; k < rq.TopicsCount; k++)
                if (strcmp(rq.Topics[k].Name, m->v[i].topic) == 0)
                    t = &rq.Topics[k];
            if (!t) {
                t = &rq.Topics[rq.TopicsCount++];
                t->Name = m->v[i].topic;
                t->PartitionIndexesCount = 0;
                t->PartitionIndexes = gr_arena_alloc(a, sizeof(int32_t) * (size_t)m->n);
            }
            t->PartitionIndexes[t->PartitionIndexesCount++] = m->v[i].partition;
        }
    }
    struct ListPartitionReassignmentsResponse *r =
        ctl_kafka_call_controller(boot, o->timeout_ms, 20, GR_API_LIST_PARTITION_REASSIGNMENTS, 0, &rq, a, list_retry);
    if (!r) {
        fprintf(stderr, "ListPartitionReassignments: no answer from the controller\n");
        return 1;
    }
    if (r->ErrorCode != GR_KERR_NONE) {
        fprintf(stderr, "ListPartitionReassignments failed: %s%s%s\n", gr_kerr_name(r->ErrorCode),
                r->ErrorMessage ? ": " : "", r->ErrorMessage ? r->ErrorMessage : "");
        return 1;
    }
    *out = r;
    return 0;
}

static const struct ListPartitionReassignmentsResponse_OngoingPartitionReassignment *
find_ongoing(const struct ListPartitionReassignmentsResponse *r, const char *topic, int32_t partition)
{
    for (int t = 0; t < r->TopicsCount; t++)
        if (r->Topics[t].Name && strcmp(r->Topics[t].Name, topic) == 0)
            for (int p = 0; p < r->Topics[t].PartitionsCount; p++)
                if (r->Topics[t].Partitions[p].PartitionIndex == partition)
                    return &r->Topics[t].Partitions[p];
    return NULL;
}

/* AlterPartitionReassignments for m (cancel: null replicas). Prints errors; 0 or 1. */
static int alter(struct ctl_kafka *boot, const struct ctl_opts *o, struct tp_map *m, bool cancel, const char *what)
{
    struct gr_arena ar;
    gr_arena_init(&ar);
    struct AlterPartitionReassignmentsRequest rq;
    gr_proto_init_struct(&gr_desc_AlterPartitionReassignmentsRequest, &rq);
    rq.TimeoutMs = o->timeout_ms;
    rq.TopicsCount = 0;
    rq.Topics = gr_arena_alloc(&ar, sizeof(*rq.Topics) * (size_t)(m->n ? m->n : 1));
    for (int i = 0; i < m->n; i++) {
        struct AlterPartitionReassignmentsRequest_ReassignableTopic *t = NULL;
        for (int k = 0; k < rq.TopicsCount; k++)
            if (strcmp(rq.Topics[k].Name, m->v[i].topic) == 0)
                t = &rq.Topics[k];
        if (!t) {
            t = &rq.Topics[rq.TopicsCount++];
            t->Name = m->v[i].topic;
            t->PartitionsCount = 0;
            t->Partitions = gr_arena_alloc(&ar, sizeof(*t->Partitions) * (size_t)m->n);
        }
        struct AlterPartitionReassignmentsRequest_ReassignablePartition *p = &t->Partitions[t->PartitionsCount++];
        p->PartitionIndex = m->v[i].partition;
        p->ReplicasCount = cancel ? -1 : m->v[i].n;
        p->Replicas = cancel ? NULL : m->v[i].replicas;
    }
    struct AlterPartitionReassignmentsResponse *r =
        ctl_kafka_call_controller(boot, o->timeout_ms, 20, GR_API_ALTER_PARTITION_REASSIGNMENTS, 0, &rq, &ar,
                                  alter_retry);
    int rc = 0;
    if (!r) {
        fprintf(stderr, "Error %s: no answer from the controller\n", what);
        rc = 1;
    } else if (r->ErrorCode != GR_KERR_NONE) {
        fprintf(stderr, "Error %s: %s%s%s\n", what, gr_kerr_name(r->ErrorCode), r->ErrorMessage ? ": " : "",
                r->ErrorMessage ? r->ErrorMessage : "");
        rc = 1;
    } else {
        int nerr = 0;
        for (int t = 0; t < r->ResponsesCount; t++)
            for (int p = 0; p < r->Responses[t].PartitionsCount; p++)
                if (r->Responses[t].Partitions[p].ErrorCode != GR_KERR_NONE)
                    nerr++;
        if (nerr) {
            fprintf(stderr, "Error %s for:\n", what);
            for (int t = 0; t < r->ResponsesCount; t++)
                for (int p = 0; p < r->Responses[t].PartitionsCount; p++) {
                    const struct AlterPartitionReassignmentsResponse_ReassignablePartitionResponse *x =
                        &r->Responses[t].Partitions[p];
                    if (x->ErrorCode != GR_KERR_NONE)
                        fprintf(stderr, "%s-%d: %s%s%s\n", r->Responses[t].Name, x->PartitionIndex,
                                gr_kerr_name(x->ErrorCode), x->ErrorMessage ? ": " : "",
                                x->ErrorMessage ? x->ErrorMessage : "");
                }
            rc = 1;
        }
    }
    gr_arena_free(&ar);
    return rc;
}

static void print_tp_list(struct tp_map *m)
{
    qsort(m->v, (size_t)m->n, sizeof(*m->v), cmp_entry);
    for (int i = 0; i < m->n; i++)
        printf("%s%s-%d", i ? "," : "", m->v[i].topic, m->v[i].partition);
    printf("\n");
}

static int parse_broker_list(const char *s, int32_t **out)
{
    int n = 0, cap = 8;
    int32_t *v = gr_malloc(sizeof(int32_t) * (size_t)cap);
    const char *p = s;
    while (*p) {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || x < 0 || x > INT32_MAX) {
            free(v);
            return -1;
        }
        if (n == cap)
            v = gr_realloc(v, sizeof(int32_t) * (size_t)(cap *= 2));
        for (int i = 0; i < n; i++)
            if (v[i] == (int32_t)x) {
                fprintf(stderr, "Duplicate brokers not allowed in --broker-list\n");
                free(v);
                return -1;
            }
        v[n++] = (int32_t)x;
        p = end;
        if (*p == ',')
            p++;
        else if (*p) {
            free(v);
            return -1;
        }
    }
    *out = v;
    return n;
}

static int do_generate(struct ctl_kafka *boot, const char *topics_file, const char *broker_list)
{
    json_t *j = load_json(topics_file);
    if (!j)
        return 1;
    json_t *arr = json_object_get(j, "topics");
    if (!json_is_array(arr) || json_array_size(arr) == 0) {
        fprintf(stderr, "List of topics to reassign cannot be empty\n");
        json_decref(j);
        return 1;
    }
    int nt = (int)json_array_size(arr);
    const char **topics = gr_calloc((size_t)nt, sizeof(char *));
    for (int i = 0; i < nt; i++) {
        json_t *t = json_object_get(json_array_get(arr, (size_t)i), "topic");
        if (!json_is_string(t)) {
            fprintf(stderr, "Invalid topic entry %d in %s\n", i, topics_file);
            free(topics);
            json_decref(j);
            return 1;
        }
        topics[i] = json_string_value(t);
    }
    int32_t *brokers = NULL;
    int nb = parse_broker_list(broker_list, &brokers);
    if (nb <= 0) {
        fprintf(stderr, "Invalid --broker-list '%s'\n", broker_list);
        free(topics);
        json_decref(j);
        return 2;
    }
    struct tp_map cur = {0}, prop = {0};
    int rc = current_assignment(boot, topics, nt, &cur, false);
    if (rc == 0) {
        struct gr_broker_meta *bm = gr_calloc((size_t)nb, sizeof(*bm));
        for (int i = 0; i < nb; i++)
            bm[i].id = brokers[i];
        for (int t = 0; t < nt && rc == 0; t++) {
            int np = 0, rf = 0;
            for (int i = 0; i < cur.n; i++)
                if (strcmp(cur.v[i].topic, topics[t]) == 0) {
                    np++;
                    rf = cur.v[i].n;
                }
            if (np == 0)
                continue;
            int32_t *out = gr_malloc(sizeof(int32_t) * (size_t)np * (size_t)(rf ? rf : 1));
            char err[256];
            int16_t e = gr_assign_replicas(bm, nb, np, rf, -1, 0, out, err, sizeof err);
            if (e != GR_KERR_NONE) {
                fprintf(stderr, "Error: %s\n", err);
                rc = 1;
            } else {
                for (int p = 0; p < np; p++)
                    map_add(&prop, topics[t], p, out + (size_t)p * (size_t)rf, rf);
            }
            free(out);
        }
        free(bm);
    }
    if (rc == 0) {
        printf("Current partition replica assignment\n");
        print_reassignment_json(&cur);
        printf("\nProposed partition reassignment configuration\n");
        print_reassignment_json(&prop);
    }
    map_free(&cur);
    map_free(&prop);
    free(brokers);
    free(topics);
    json_decref(j);
    return rc;
}

/* ---- replication throttles (--throttle; cleared by verify once everything is complete) ---- */

#define RT_TOPIC 2
#define RT_BROKER 4

/* IncrementalAlterConfigs of one resource on k: n keys, all SET to vals[i] or (vals NULL) DELETE. */
static int incr_alter(struct ctl_kafka *k, int8_t type, const char *name, const char *const *keys,
                      const char *const *vals, int n)
{
    struct gr_arena a;
    gr_arena_init(&a);
    struct IncrementalAlterConfigsRequest rq;
    gr_proto_init_struct(&gr_desc_IncrementalAlterConfigsRequest, &rq);
    rq.ResourcesCount = 1;
    rq.Resources = gr_arena_alloc(&a, sizeof(*rq.Resources));
    rq.Resources[0].ResourceType = type;
    rq.Resources[0].ResourceName = gr_arena_strdup(&a, name);
    rq.Resources[0].ConfigsCount = n;
    rq.Resources[0].Configs = gr_arena_alloc(&a, sizeof(*rq.Resources[0].Configs) * (size_t)n);
    for (int i = 0; i < n; i++)
        rq.Resources[0].Configs[i] = (struct IncrementalAlterConfigsRequest_AlterableConfig){
            gr_arena_strdup(&a, keys[i]), (int8_t)(vals ? 0 : 1), vals ? gr_arena_strdup(&a, vals[i]) : NULL};
    struct IncrementalAlterConfigsResponse *r = ctl_kafka_call(k, GR_API_INCREMENTAL_ALTER_CONFIGS, 1, &rq, &a);
    int rc = 0;
    if (!r || r->ResponsesCount != 1 || r->Responses[0].ErrorCode) {
        fprintf(stderr, "Error setting throttle configs of %s %s: %s%s%s\n", type == RT_TOPIC ? "topic" : "broker", name,
                r && r->ResponsesCount == 1 ? gr_kerr_name(r->Responses[0].ErrorCode) : "no response",
                r && r->ResponsesCount == 1 && r->Responses[0].ErrorMessage ? ": " : "",
                r && r->ResponsesCount == 1 && r->Responses[0].ErrorMessage ? r->Responses[0].ErrorMessage : "");
        rc = 1;
    }
    gr_arena_free(&a);
    return rc;
}

/* The same for a broker resource, sent to that broker (as Kafka's admin client does). */
static int broker_alter(struct ctl_kafka *boot, const struct ctl_opts *o, int32_t id, const char *const *keys,
                        const char *const *vals, int n)
{
    struct gr_arena a;
    gr_arena_init(&a);
    struct MetadataResponse *md = ctl_kafka_metadata(boot, NULL, 0, &a);
    struct ctl_kafka bk;
    bool own = false;
    for (int i = 0; md && i < md->BrokersCount && !own; i++)
        if (md->Brokers[i].NodeId == id)
            own = ctl_kafka_connect(md->Brokers[i].Host, md->Brokers[i].Port, o->timeout_ms, &bk) == 0;
    char name[16];
    snprintf(name, sizeof name, "%d", id);
    int rc = incr_alter(own ? &bk : boot, RT_BROKER, name, keys, vals, n);
    if (own)
        ctl_kafka_close(&bk);
    gr_arena_free(&a);
    return rc;
}

static const char *const broker_throttles[] = {"leader.replication.throttled.rate",
                                               "follower.replication.throttled.rate",
                                               "replica.alter.log.dirs.io.max.bytes.per.second"};
static const char *const topic_throttles[] = {"leader.replication.throttled.replicas",
                                              "follower.replication.throttled.replicas"};

static bool has_id(const int32_t *v, int n, int32_t id)
{
    for (int i = 0; i < n; i++)
        if (v[i] == id)
            return true;
    return false;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Appends "p:b" to a comma list (keeps it sorted as text, like Kafka's TreeSet, by insertion of
 * sorted input). */
static void list_add(char **list, int32_t p, int32_t b)
{
    char item[32];
    snprintf(item, sizeof item, "%d:%d", p, b);
    char *old = *list;
    *list = old && *old ? gr_asprintf("%s,%s", old, item) : gr_strdup(item);
    free(old);
}

/* Kafka's calculateLeaderThrottles / calculateFollowerThrottles / calculateReassigningBrokers and
 * modifyReassignmentThrottle: topic throttled-replica lists, then the rate on every broker involved. */
static int set_throttles(struct ctl_kafka *boot, const struct ctl_opts *o, struct tp_map *m, struct tp_map *cur,
                         long long throttle)
{
    int rc = 0;
    int32_t *brokers = NULL;
    int nb = 0;
    qsort(m->v, (size_t)m->n, sizeof(*m->v), cmp_entry);
    for (int i = 0; i < m->n && !rc;) {
        const char *topic = m->v[i].topic;
        char *leaders = NULL, *followers = NULL;
        for (; i < m->n && strcmp(m->v[i].topic, topic) == 0; i++) {
            const struct tp_entry *t = &m->v[i], *c = map_find(cur, t->topic, t->partition);
            if (!c)
                continue;
            for (int k = 0; k < c->n; k++) {
                list_add(&leaders, t->partition, c->replicas[k]);
                if (!has_id(brokers, nb, c->replicas[k])) {
                    brokers = gr_realloc(brokers, sizeof(int32_t) * (size_t)(nb + 1));
                    brokers[nb++] = c->replicas[k];
                }
            }
            for (int k = 0; k < t->n; k++) {
                if (!has_id(c->replicas, c->n, t->replicas[k]))
                    list_add(&followers, t->partition, t->replicas[k]);
                if (!has_id(brokers, nb, t->replicas[k])) {
                    brokers = gr_realloc(brokers, sizeof(int32_t) * (size_t)(nb + 1));
                    brokers[nb++] = t->replicas[k];
                }
            }
        }
        const char *vals[2] = {leaders ? leaders : "", followers ? followers : ""};
        rc = incr_alter(boot, RT_TOPIC, topic, topic_throttles, vals, 2);
        free(leaders);
        free(followers);
    }
    if (nb)
        qsort(brokers, (size_t)nb, sizeof(int32_t), cmp_i32);
    char rate[32];
    snprintf(rate, sizeof rate, "%lld", throttle);
    const char *vals[2] = {rate, rate};
    for (int i = 0; i < nb && !rc; i++)
        rc = broker_alter(boot, o, brokers[i], broker_throttles, vals, 2);
    free(brokers);
    if (!rc)
        printf("The inter-broker throttle limit was set to %lld B/s\n", throttle);
    return rc;
}

/* Kafka's clearAllThrottles: every live broker and every broker of the targets, then the topics. */
static int clear_throttles(struct ctl_kafka *boot, const struct ctl_opts *o, struct tp_map *m)
{
    struct gr_arena a;
    gr_arena_init(&a);
    struct MetadataResponse *md = ctl_kafka_metadata(boot, NULL, 0, &a);
    int32_t *ids = NULL;
    int n = 0;
    for (int i = 0; md && i < md->BrokersCount; i++) {
        ids = gr_realloc(ids, sizeof(int32_t) * (size_t)(n + 1));
        ids[n++] = md->Brokers[i].NodeId;
    }
    for (int i = 0; i < m->n; i++)
        for (int k = 0; k < m->v[i].n; k++)
            if (!has_id(ids, n, m->v[i].replicas[k])) {
                ids = gr_realloc(ids, sizeof(int32_t) * (size_t)(n + 1));
                ids[n++] = m->v[i].replicas[k];
            }
    if (n)
        qsort(ids, (size_t)n, sizeof(int32_t), cmp_i32);
    printf("Clearing broker-level throttles on broker%s ", n == 1 ? "" : "s");
    for (int i = 0; i < n; i++)
        printf("%s%d", i ? "," : "", ids[i]);
    printf("\n");
    int rc = 0;
    for (int i = 0; md && i < md->BrokersCount; i++) /* only live brokers can be asked */
        rc |= broker_alter(boot, o, md->Brokers[i].NodeId, broker_throttles, NULL, 3);
    int nt = 0;
    const char **topics = gr_calloc((size_t)(m->n ? m->n : 1), sizeof(char *));
    for (int i = 0; i < m->n; i++) {
        bool seen = false;
        for (int k = 0; k < nt; k++)
            seen |= strcmp(topics[k], m->v[i].topic) == 0;
        if (!seen)
            topics[nt++] = m->v[i].topic;
    }
    printf("Clearing topic-level throttles on topic%s ", nt == 1 ? "" : "s");
    for (int i = 0; i < nt; i++)
        printf("%s%s", i ? "," : "", topics[i]);
    printf("\n");
    for (int i = 0; i < nt; i++)
        rc |= incr_alter(boot, RT_TOPIC, topics[i], topic_throttles, NULL, 2);
    free(topics);
    free(ids);
    gr_arena_free(&a);
    return rc;
}

static int do_execute(struct ctl_kafka *boot, const struct ctl_opts *o, const char *file, bool additional,
                      long long throttle)
{
    struct tp_map m = {0}, cur = {0};
    if (parse_reassignment_file(file, &m)) {
        map_free(&m);
        return 1;
    }
    struct gr_arena ar;
    gr_arena_init(&ar);
    int rc = 0;
    if (!additional) {
        struct ListPartitionReassignmentsResponse *lr = NULL;
        rc = list_reassignments(boot, o, NULL, &ar, &lr);
        if (rc == 0 && lr->TopicsCount > 0) {
            fprintf(stderr, "Cannot execute because there is an existing partition assignment.  Use --additional "
                            "to override this and create a new partition assignment in addition to the existing one.\n");
            rc = 1;
        }
    }
    if (rc == 0) {
        const char **topics = gr_calloc((size_t)m.n, sizeof(char *));
        int nt = 0;
        for (int i = 0; i < m.n; i++) {
            bool seen = false;
            for (int k = 0; k < nt; k++)
                if (strcmp(topics[k], m.v[i].topic) == 0)
                    seen = true;
            if (!seen)
                topics[nt++] = m.v[i].topic;
        }
        rc = current_assignment(boot, topics, nt, &cur, false);
        free(topics);
        for (int i = 0; rc == 0 && i < m.n; i++)
            if (!map_find(&cur, m.v[i].topic, m.v[i].partition)) {
                fprintf(stderr, "The proposed assignment contains non-existent partitions: %s-%d\n", m.v[i].topic,
                        m.v[i].partition);
                rc = 1;
            }
    }
    if (rc == 0) {
        struct tp_map shown = {0};
        for (int i = 0; i < cur.n; i++)
            if (map_find(&m, cur.v[i].topic, cur.v[i].partition))
                map_add(&shown, cur.v[i].topic, cur.v[i].partition, cur.v[i].replicas, cur.v[i].n);
        printf("Current partition replica assignment\n\n");
        print_reassignment_json(&shown);
        printf("\nSave this to use as the --reassignment-json-file option during rollback\n");
        map_free(&shown);
        if (throttle >= 0) {
            printf("Warning: You must run --verify periodically, until the reassignment completes, to ensure the "
                   "throttle is removed.\n");
            rc = set_throttles(boot, o, &m, &cur, throttle);
        }
        if (rc == 0)
            rc = alter(boot, o, &m, false, "reassigning partition(s)");
        if (rc == 0) {
            printf("Successfully started partition reassignment%s for ", m.n == 1 ? "" : "s");
            print_tp_list(&m);
        }
    }
    gr_arena_free(&ar);
    map_free(&m);
    map_free(&cur);
    return rc;
}

static bool same_ids(const int32_t *a, int na, const int32_t *b, int nb)
{
    return na == nb && (na == 0 || memcmp(a, b, sizeof(int32_t) * (size_t)na) == 0);
}

static int do_verify(struct ctl_kafka *boot, const struct ctl_opts *o, const char *file, bool preserve)
{
    struct tp_map m = {0}, cur = {0};
    if (parse_reassignment_file(file, &m)) {
        map_free(&m);
        return 1;
    }
    qsort(m.v, (size_t)m.n, sizeof(*m.v), cmp_entry);
    struct gr_arena ar;
    gr_arena_init(&ar);
    struct ListPartitionReassignmentsResponse *lr = NULL;
    int rc = list_reassignments(boot, o, &m, &ar, &lr);
    if (rc == 0)
        rc = current_assignment(boot, NULL, 0, &cur, true);
    if (rc == 0) {
        bool all_done = true;
        printf("Status of partition reassignment:\n");
        for (int i = 0; i < m.n; i++) {
            const struct tp_entry *t = &m.v[i];
            if (find_ongoing(lr, t->topic, t->partition)) {
                printf("Reassignment of partition %s-%d is still in progress.\n", t->topic, t->partition);
                all_done = false;
                continue;
            }
            const struct tp_entry *c = map_find(&cur, t->topic, t->partition);
            if (c && same_ids(c->replicas, c->n, t->replicas, t->n)) {
                printf("Reassignment of partition %s-%d is complete.\n", t->topic, t->partition);
            } else {
                printf("There is no active reassignment of partition %s-%d, but replica set is ", t->topic, t->partition);
                if (c)
                    ctl_print_ids(c->replicas, c->n);
                printf(" rather than ");
                ctl_print_ids(t->replicas, t->n);
                printf(".\n");
                all_done = false;
            }
        }
        rc = all_done ? 0 : 1;
        if (all_done && !preserve)
            rc = clear_throttles(boot, o, &m);
    }
    gr_arena_free(&ar);
    map_free(&m);
    map_free(&cur);
    return rc;
}

static int do_cancel(struct ctl_kafka *boot, const struct ctl_opts *o, const char *file)
{
    struct tp_map m = {0}, active = {0};
    if (parse_reassignment_file(file, &m)) {
        map_free(&m);
        return 1;
    }
    struct gr_arena ar;
    gr_arena_init(&ar);
    struct ListPartitionReassignmentsResponse *lr = NULL;
    int rc = list_reassignments(boot, o, &m, &ar, &lr);
    if (rc == 0) {
        for (int i = 0; i < m.n; i++) {
            const struct ListPartitionReassignmentsResponse_OngoingPartitionReassignment *x =
                find_ongoing(lr, m.v[i].topic, m.v[i].partition);
            if (x && (x->AddingReplicasCount > 0 || x->RemovingReplicasCount > 0))
                map_add(&active, m.v[i].topic, m.v[i].partition, NULL, 0);
        }
        if (active.n == 0) {
            printf("None of the specified partition reassignments are active.\n");
        } else {
            rc = alter(boot, o, &active, true, "cancelling partition reassignment(s)");
            if (rc == 0) {
                printf("Successfully cancelled partition reassignment%s for: ", active.n == 1 ? "" : "s");
                print_tp_list(&active);
            }
        }
    }
    gr_arena_free(&ar);
    map_free(&m);
    map_free(&active);
    return rc;
}

static int do_list(struct ctl_kafka *boot, const struct ctl_opts *o)
{
    struct gr_arena ar;
    gr_arena_init(&ar);
    struct ListPartitionReassignmentsResponse *lr = NULL;
    int rc = list_reassignments(boot, o, NULL, &ar, &lr);
    if (rc == 0) {
        if (lr->TopicsCount == 0) {
            printf("No partition reassignments found.\n");
        } else {
            printf("Current partition reassignments:\n");
            for (int t = 0; t < lr->TopicsCount; t++)
                for (int p = 0; p < lr->Topics[t].PartitionsCount; p++) {
                    const struct ListPartitionReassignmentsResponse_OngoingPartitionReassignment *x =
                        &lr->Topics[t].Partitions[p];
                    printf("%s-%d: replicas: ", lr->Topics[t].Name, x->PartitionIndex);
                    ctl_print_ids(x->Replicas, x->ReplicasCount);
                    printf(".");
                    if (x->AddingReplicasCount > 0) {
                        printf(" adding: ");
                        ctl_print_ids(x->AddingReplicas, x->AddingReplicasCount);
                        printf(".");
                    }
                    if (x->RemovingReplicasCount > 0) {
                        printf(" removing: ");
                        ctl_print_ids(x->RemovingReplicas, x->RemovingReplicasCount);
                        printf(".");
                    }
                    printf("\n");
                }
        }
    }
    gr_arena_free(&ar);
    return rc;
}

static int usage(void)
{
    fprintf(stderr,
            "usage: gregorctl --bootstrap-server HOST:PORT reassign generate --topics-to-move-json-file F --broker-list 1,2,3\n"
            "       gregorctl --bootstrap-server HOST:PORT reassign execute --reassignment-json-file F [--additional]\n"
            "                 [--throttle BYTES_PER_SEC]\n"
            "       gregorctl --bootstrap-server HOST:PORT reassign verify --reassignment-json-file F [--preserve-throttles]\n"
            "       gregorctl --bootstrap-server HOST:PORT reassign cancel --reassignment-json-file F\n"
            "       gregorctl --bootstrap-server HOST:PORT reassign list\n");
    return 2;
}

int ctl_reassign_main(const struct ctl_opts *o, int argc, char **argv)
{
    if (argc < 2)
        return usage();
    const char *action = argv[1], *topics_file = NULL, *reassign_file = NULL, *brokers = NULL;
    bool additional = false, preserve = false;
    long long throttle = -1;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--additional") == 0) {
            additional = true;
            continue;
        }
        if (strcmp(a, "--preserve-throttles") == 0) {
            preserve = true;
            continue;
        }
        if (i + 1 >= argc)
            return usage();
        if (strcmp(a, "--topics-to-move-json-file") == 0)
            topics_file = argv[++i];
        else if (strcmp(a, "--reassignment-json-file") == 0)
            reassign_file = argv[++i];
        else if (strcmp(a, "--broker-list") == 0)
            brokers = argv[++i];
        else if (strcmp(a, "--throttle") == 0) {
            char *end;
            throttle = strtoll(argv[++i], &end, 10);
            if (*end || throttle < 0)
                return usage();
        }
        else
            return usage();
    }
    if (!o->bootstrap_server) {
        fprintf(stderr, "gregorctl reassign: --bootstrap-server is required\n");
        return 2;
    }
    bool gen = strcmp(action, "generate") == 0, list = strcmp(action, "list") == 0;
    if (gen && (!topics_file || !brokers))
        return usage();
    if (!gen && !list && !reassign_file)
        return usage();
    struct ctl_kafka boot;
    if (ctl_kafka_connect_str(o->bootstrap_server, o->timeout_ms, &boot) != 0)
        return 1;
    int rc;
    if (gen)
        rc = do_generate(&boot, topics_file, brokers);
    else if (list)
        rc = do_list(&boot, o);
    else if (strcmp(action, "execute") == 0)
        rc = do_execute(&boot, o, reassign_file, additional, throttle);
    else if (strcmp(action, "verify") == 0)
        rc = do_verify(&boot, o, reassign_file, preserve);
    else if (strcmp(action, "cancel") == 0)
        rc = do_cancel(&boot, o, reassign_file);
    else
        rc = usage();
    ctl_kafka_close(&boot);
    return rc;
}
