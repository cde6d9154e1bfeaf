/* gregorctl delete-records --offset-json-file F  (Kafka's kafka-delete-records.sh)
 *
 * F: {"partitions":[{"topic":"foo","partition":0,"offset":42},...],"version":1}; offset -1 means
 * the high watermark. The leaders come from Metadata (through --bootstrap-server); each leader
 * gets one DeleteRecords v1 request (TimeoutMs = --timeout-ms) for its partitions. Prints what
 * Kafka 2.7's DeleteRecordsCommand prints: "Executing records delete operation", "Records delete
 * operation completed:", then per partition "partition: T-P\tlow_watermark: N" or
 * "partition: T-P\terror: <the ExecutionException's message: Java exception class: message>".
 * A partition named twice is refused before anything is sent, with Kafka's message. Exit 0 when
 * every partition succeeded, 1 otherwise. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/ctl.h"
#include "cmd/ctl_kafka.h"
#include "cmd/ctl_print.h"
#include "common/kerr.h"
#include "common/util.h"

struct dr_item {
    const char *topic;
    int32_t partition;
    int64_t offset;
    int32_t leader;
    int16_t error;
    int64_t low_watermark;
    bool done;
};

static int usage(void) {
    fprintf(stderr, "usage: gregorctl --bootstrap-server HOST:PORT delete-records --offset-json-file F\n");
    return 2;
}

static int load_items(const char *file, json_t **jout, struct dr_item **out, int *n_out) {
    json_error_t err;
    json_t *j = json_load_file(file, 0, &err);
    json_t *parts = j ? json_object_get(j, "partitions") : NULL;
    if (!json_is_array(parts)) {
        fprintf(stderr, "gregorctl delete-records: cannot parse %s: %s\n", file, j ? "no \"partitions\" array" : err.text);
        json_decref(j);
        return -1;
    }
    int n = (int)json_array_size(parts);
    struct dr_item *it = gr_calloc((size_t)n + 1, sizeof *it);
    for (int i = 0; i < n; i++) {
        json_t *e = json_array_get(parts, (size_t)i);
        json_t *t = json_object_get(e, "topic"), *p = json_object_get(e, "partition"), *o = json_object_get(e, "offset");
        if (!json_is_string(t) || !json_is_integer(p) || !json_is_integer(o)) {
            fprintf(stderr, "gregorctl delete-records: invalid entry %d in %s (topic, partition, offset)\n", i, file);
            free(it);
            json_decref(j);
            return -1;
        }
        it[i] = (struct dr_item){json_string_value(t), (int32_t)json_integer_value(p), json_integer_value(o), -1,
                                 GR_KERR_UNKNOWN_TOPIC_OR_PARTITION, -1, false};
    }
    /* Kafka: "Offset json file contains duplicate topic partitions: t-0,t-1" (each once) */
    char dups[4096] = "";
    size_t dl = 0;
    for (int i = 0; i < n; i++) {
        bool dup = false, seen_before = false;
        for (int k = 0; k < n && !dup; k++)
            dup = k != i && it[k].partition == it[i].partition && strcmp(it[k].topic, it[i].topic) == 0;
        for (int k = 0; k < i && dup && !seen_before; k++)
            seen_before = it[k].partition == it[i].partition && strcmp(it[k].topic, it[i].topic) == 0;
        if (dup && !seen_before && dl < sizeof dups)
            dl += (size_t)snprintf(dups + dl, sizeof dups - dl, "%s%s-%d", dl ? "," : "", it[i].topic, it[i].partition);
    }
    if (dl) {
        printf("Error while executing records delete operation: Offset json file contains duplicate topic "
               "partitions: %s\n", dups);
        free(it);
        json_decref(j);
        return -1;
    }
    *jout = j;
    *out = it;
    *n_out = n;
    return 0;
}

/* Sends the items led by broker `leader` (host:port) one DeleteRecords v1. */
static void send_to_leader(const struct ctl_opts *o, const char *host, int port, struct dr_item *it, int n,
                           int32_t leader) {
    struct gr_arena ar;
    gr_arena_init(&ar);
    struct DeleteRecordsRequest rq;
    gr_proto_init_struct(&gr_desc_DeleteRecordsRequest, &rq);
    rq.TimeoutMs = o->timeout_ms;
    rq.Topics = gr_arena_alloc(&ar, sizeof *rq.Topics * (size_t)(n + 1));
    rq.TopicsCount = 0;
    for (int i = 0; i < n; i++) {
        if (it[i].leader != leader || it[i].done) continue;
        struct DeleteRecordsRequest_DeleteRecordsTopic *t = &rq.Topics[rq.TopicsCount++];
        t->Name = (char *)it[i].topic;
        t->PartitionsCount = 1;
        t->Partitions = gr_arena_alloc(&ar, sizeof *t->Partitions);
        t->Partitions[0].PartitionIndex = it[i].partition;
        t->Partitions[0].Offset = it[i].offset;
    }
    struct ctl_kafka k;
    struct DeleteRecordsResponse *r = NULL;
    if (ctl_kafka_connect(host, port, o->timeout_ms, &k) == 0) {
        r = ctl_kafka_call(&k, GR_API_DELETE_RECORDS, 1, &rq, &ar);
        ctl_kafka_close(&k);
    }
    for (int i = 0; i < n; i++) {
        if (it[i].leader != leader || it[i].done) continue;
        it[i].done = true;
        it[i].error = GR_KERR_NETWORK_EXCEPTION;
        for (int t = 0; r && t < r->TopicsCount; t++)
            for (int p = 0; p < r->Topics[t].PartitionsCount; p++)
                if (strcmp(r->Topics[t].Name, it[i].topic) == 0 &&
                    r->Topics[t].Partitions[p].PartitionIndex == it[i].partition) {
                    it[i].error = r->Topics[t].Partitions[p].ErrorCode;
                    it[i].low_watermark = r->Topics[t].Partitions[p].LowWatermark;
                }
    }
    gr_arena_free(&ar);
}

int ctl_delete_records_main(const struct ctl_opts *o, int argc, char **argv) {
    const char *file = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--offset-json-file") == 0 && i + 1 < argc) file = argv[++i];
        else return usage();
    }
    if (!file) return usage();
    if (!o->bootstrap_server) {
        fprintf(stderr, "gregorctl delete-records: --bootstrap-server is required\n");
        return 2;
    }
    json_t *j = NULL;
    struct dr_item *it = NULL;
    int n = 0;
    if (load_items(file, &j, &it, &n) < 0) return 1;
    struct ctl_kafka boot;
    if (ctl_kafka_connect_str(o->bootstrap_server, o->timeout_ms, &boot) != 0) {
        free(it);
        json_decref(j);
        return 1;
    }
    struct gr_arena ar;
    gr_arena_init(&ar);
    const char **topics = gr_arena_alloc(&ar, sizeof *topics * (size_t)(n + 1));
    for (int i = 0; i < n; i++) topics[i] = it[i].topic;
    struct MetadataResponse *md = ctl_kafka_metadata(&boot, topics, n, &ar);
    ctl_kafka_close(&boot);
    for (int i = 0; md && i < n; i++)
        for (int t = 0; t < md->TopicsCount; t++) {
            const struct MetadataResponse_MetadataResponseTopic *mt = &md->Topics[t];
            if (!mt->Name || strcmp(mt->Name, it[i].topic) != 0) continue;
            for (int p = 0; p < mt->PartitionsCount; p++)
                if (mt->Partitions[p].PartitionIndex == it[i].partition) {
                    it[i].leader = mt->Partitions[p].LeaderId;
                    it[i].error = it[i].leader >= 0 ? GR_KERR_NONE : GR_KERR_LEADER_NOT_AVAILABLE;
                }
        }
    for (int i = 0; md && i < n; i++) {
        if (it[i].done || it[i].error != GR_KERR_NONE) continue;
        for (int b = 0; b < md->BrokersCount; b++)
            if (md->Brokers[b].NodeId == it[i].leader)
                send_to_leader(o, md->Brokers[b].Host, md->Brokers[b].Port, it, n, it[i].leader);
    }
    int rc = md ? 0 : 1;
    printf("Executing records delete operation\n");
    printf("Records delete operation completed:\n");
    for (int i = 0; i < n; i++) {
        if (it[i].error == GR_KERR_NONE) {
            printf("partition: %s-%d\tlow_watermark: %lld\n", it[i].topic, it[i].partition,
                   (long long)it[i].low_watermark);
        } else {
            const char *msg = ctl_java_message(it[i].error);
            printf("partition: %s-%d\terror: %s%s%s\n", it[i].topic, it[i].partition, ctl_java_exception(it[i].error),
                   msg ? ": " : "", msg ? msg : "");
            rc = 1;
        }
    }
    gr_arena_free(&ar);
    free(it);
    json_decref(j);
    return rc;
}
