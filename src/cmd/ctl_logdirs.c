/* gregorctl log-dirs describe: kafka-log-dirs.sh --describe over the Kafka protocol.
 *
 *   log-dirs describe [--broker-list 1,2] [--topic-list t1,t2]
 *
 * Sends DescribeLogDirs v1 (every partition) to exactly the brokers of --broker-list (comma-
 * separated ids, empty items skipped, each once), or to every live broker of the Metadata answer
 * without it; keeps the partitions of --topic-list's topics when given, and prints what
 * kafka-log-dirs.sh 2.7 (LogDirsCommand) prints:
 *   Querying brokers for log directories information
 *   Received log directory information from brokers 1,2,3
 *   {"version":1,"brokers":[{"broker":1,"logDirs":[{"logDir":"/d","error":null,"partitions":
 *     [{"partition":"t-0","size":123,"offsetLag":0,"isFuture":false}]}]}]}
 * ("error" is Kafka's exception class name for a dir's error, e.g.
 * org.apache.kafka.common.errors.KafkaStorageException.) The "Received" line names the brokers as
 * asked (--broker-list as given, else the live brokers by id), as Kafka prints its list. As Kafka's
 * allDescriptions().get(), it is all or nothing: a broker asked for that is not live (not in the
 * Metadata answer), or that cannot be reached or answer, fails the command (exit 1, an error on
 * stderr, no "Received" line and no JSON); an id that is not an integer too. Exit codes: 0 ok,
 * 1 failure, 2 usage. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/ctl.h"
#include "cmd/ctl_kafka.h"
#include "cmd/ctl_print.h"
#include "common/kerr.h"
#include "common/util.h"

static int usage(void) {
    fprintf(stderr, "usage: gregorctl --bootstrap-server HOST:PORT log-dirs describe [--broker-list 1,2] "
                    "[--topic-list t1,t2]\n");
    return 2;
}

static bool in_list(const char *list, const char *item) {
    if (!list) return true;
    size_t n = strlen(item);
    for (const char *p = list; p && *p;) {
        const char *c = strchr(p, ',');
        size_t l = c ? (size_t)(c - p) : strlen(p);
        if (l == n && strncmp(p, item, n) == 0) return true;
        p = c ? c + 1 : NULL;
    }
    return false;
}

/* --broker-list as Kafka splits it (split(','), empty items dropped, toInt): the ids into *ids
 * (malloc'd, *n of them, duplicates kept as given). Returns 0, or -1 naming the bad item. */
static int parse_broker_list(const char *list, int32_t **ids, int *n) {
    *ids = gr_calloc(strlen(list) / 2 + 1, sizeof **ids);
    *n = 0;
    for (const char *p = list; *p;) {
        const char *c = strchr(p, ',');
        size_t l = c ? (size_t)(c - p) : strlen(p);
        if (l > 0) {
            char item[32];
            char *end;
            long v = l < sizeof item ? (snprintf(item, sizeof item, "%.*s", (int)l, p), strtol(item, &end, 10)) : 0;
            if (l >= sizeof item || end == item || *end || v < INT32_MIN || v > INT32_MAX) {
                fprintf(stderr, "Error: --broker-list: '%.*s' is not a broker id\n", (int)GR_MIN(l, (size_t)64), p);
                return -1;
            }
            (*ids)[(*n)++] = (int32_t)v;
        }
        if (!c) break;
        p = c + 1;
    }
    return 0;
}

/* Kafka's LogDirsCommand prints the error's exception class name (ex.getClass.getName) */
static const char *error_class(int16_t e) { return e == GR_KERR_NONE ? NULL : ctl_java_exception(e); }

static json_t *describe_broker(const struct MetadataResponse_MetadataResponseBroker *br, const char *topics,
                               int timeout_ms, struct gr_arena *a) {
    struct ctl_kafka k;
    if (ctl_kafka_connect(br->Host, br->Port, timeout_ms, &k) != 0) return NULL;
    struct DescribeLogDirsRequest rq;
    gr_proto_init_struct(&gr_desc_DescribeLogDirsRequest, &rq);
    rq.TopicsCount = -1;
    struct DescribeLogDirsResponse *r = ctl_kafka_call(&k, GR_API_DESCRIBE_LOG_DIRS, 1, &rq, a);
    ctl_kafka_close(&k);
    if (!r) return NULL;
    json_t *b = json_object(), *dirs = json_array();
    json_object_set_new(b, "broker", json_integer(br->NodeId));
    for (int32_t d = 0; d < r->ResultsCount; d++) {
        const struct DescribeLogDirsResponse_DescribeLogDirsResult *res = &r->Results[d];
        json_t *dir = json_object(), *parts = json_array();
        const char *err = error_class(res->ErrorCode);
        json_object_set_new(dir, "logDir", json_string(res->LogDir ? res->LogDir : ""));
        json_object_set_new(dir, "error", err ? json_string(err) : json_null());
        for (int32_t t = 0; t < res->TopicsCount; t++) {
            const struct DescribeLogDirsResponse_DescribeLogDirsTopic *tp = &res->Topics[t];
            if (!tp->Name || !in_list(topics, tp->Name)) continue;
            for (int32_t p = 0; p < tp->PartitionsCount; p++) {
                const struct DescribeLogDirsResponse_DescribeLogDirsPartition *pp = &tp->Partitions[p];
                char name[512];
                snprintf(name, sizeof name, "%s-%d", tp->Name, pp->PartitionIndex);
                json_t *o = json_object();
                json_object_set_new(o, "partition", json_string(name));
                json_object_set_new(o, "size", json_integer(pp->PartitionSize));
                json_object_set_new(o, "offsetLag", json_integer(pp->OffsetLag));
                json_object_set_new(o, "isFuture", json_boolean(pp->IsFutureKey));
                json_array_append_new(parts, o);
            }
        }
        json_object_set_new(dir, "partitions", parts);
        json_array_append_new(dirs, dir);
    }
    json_object_set_new(b, "logDirs", dirs);
    return b;
}

static int cmp_broker(const void *a, const void *b) {
    const struct MetadataResponse_MetadataResponseBroker *x = a, *y = b;
    return (x->NodeId > y->NodeId) - (x->NodeId < y->NodeId);
}

int ctl_logdirs_main(const struct ctl_opts *o, int argc, char **argv) {
    const char *brokers = NULL, *topics = NULL;
    bool describe = false;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "describe") == 0 || strcmp(argv[i], "--describe") == 0)
            describe = true;
        else if (strcmp(argv[i], "--broker-list") == 0 && v)
            brokers = argv[++i];
        else if (strcmp(argv[i], "--topic-list") == 0 && v)
            topics = argv[++i];
        else
            return usage();
    }
    if (!describe) return usage();
    if (!o->bootstrap_server) {
        fprintf(stderr, "gregorctl log-dirs: --bootstrap-server HOST:PORT is required\n");
        return 2;
    }
    struct ctl_kafka boot;
    if (ctl_kafka_connect_str(o->bootstrap_server, o->timeout_ms, &boot) != 0) return 1;
    struct gr_arena a;
    gr_arena_init(&a);
    int rc = 1;
    struct MetadataResponse *md = ctl_kafka_metadata(&boot, NULL, 0, &a);
    if (!md) goto out;
    printf("Querying brokers for log directories information\n");
    fflush(stdout);
    if (md->BrokersCount > 0) qsort(md->Brokers, (size_t)md->BrokersCount, sizeof *md->Brokers, cmp_broker);
    /* the brokers asked for, as given (the "Received" line), and each once in id order (the JSON) */
    int32_t *asked = NULL;
    int nasked = 0;
    if (brokers && parse_broker_list(brokers, &asked, &nasked) != 0) {
        free(asked);
        goto out;
    }
    if (!brokers) {
        asked = gr_calloc((size_t)md->BrokersCount + 1, sizeof *asked);
        for (int32_t i = 0; i < md->BrokersCount; i++) asked[nasked++] = md->Brokers[i].NodeId;
    }
    for (int i = 0; i < nasked; i++) {
        int32_t j = 0;
        while (j < md->BrokersCount && md->Brokers[j].NodeId != asked[i]) j++;
        if (j == md->BrokersCount) {
            fprintf(stderr, "Error: broker %d is not a live broker of the cluster\n", asked[i]);
            free(asked);
            goto out;
        }
    }
    json_t *arr = json_array();
    for (int32_t i = 0; i < md->BrokersCount; i++) {
        bool wanted = false;
        for (int j = 0; j < nasked && !wanted; j++) wanted = asked[j] == md->Brokers[i].NodeId;
        if (!wanted) continue;
        json_t *b = describe_broker(&md->Brokers[i], topics, o->timeout_ms, &a);
        if (!b) {
            fprintf(stderr, "Error: cannot describe the log dirs of broker %d\n", md->Brokers[i].NodeId);
            json_decref(arr);
            free(asked);
            goto out;
        }
        json_array_append_new(arr, b);
    }
    printf("Received log directory information from brokers ");
    for (int i = 0; i < nasked; i++) printf("%s%d", i ? "," : "", asked[i]);
    printf("\n");
    free(asked);
    json_t *top = json_object();
    json_object_set_new(top, "version", json_integer(1));
    json_object_set_new(top, "brokers", arr);
    ctl_print_json(top);
    rc = 0;
out:
    gr_arena_free(&a);
    ctl_kafka_close(&boot);
    return rc;
}
