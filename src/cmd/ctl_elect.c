/* gregorctl elect-leaders: kafka-leader-election.sh (2.7) for Gregor.
 *
 *   elect-leaders --election-type preferred|unclean
 *                 (--all-topic-partitions | --topic T --partition P | --path-to-json-file F)
 *
 * F: {"partitions":[{"topic":"foo","partition":1},...]}. Sends ElectLeaders v2 (TimeoutMs =
 * --timeout-ms) to the controller and prints, as Kafka does:
 *   Successfully completed leader election (PREFERRED) for partitions t-0, t-1
 *   Valid replica already elected for partitions t-2
 *   Error completing leader election (PREFERRED) for partition: t-3: <ERROR_NAME>: <message>
 * (Kafka's tool prints the succeeded list on the "Valid replica" line, a bug; here it lists the
 * partitions that needed no election.) Exit 1 if any partition failed or on no answer. */
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cmd/ctl.h"
#include "cmd/ctl_kafka.h"
#include "cmd/ctl_reassign.h"
#include "common/kerr.h"
#include "common/util.h"

static int usage(void)
{
    fprintf(stderr, "usage: gregorctl --bootstrap-server HOST:PORT elect-leaders --election-type preferred|unclean "
                    "(--all-topic-partitions | --topic T --partition P | --path-to-json-file F)\n");
    return 2;
}

struct req_tp {
    const char *topic;
    int32_t partition;
};

static void add_tp(struct ElectLeadersRequest *rq, struct gr_arena *a, int cap, const char *topic, int32_t p)
{
    struct ElectLeadersRequest_TopicPartitions *t = NULL;
    for (int i = 0; i < rq->TopicPartitionsCount; i++)
        if (strcmp(rq->TopicPartitions[i].Topic, topic) == 0)
            t = &rq->TopicPartitions[i];
    if (!t) {
        t = &rq->TopicPartitions[rq->TopicPartitionsCount++];
        t->Topic = gr_arena_strdup(a, topic);
        t->PartitionsCount = 0;
        t->Partitions = gr_arena_alloc(a, sizeof(int32_t) * (size_t)cap);
    }
    t->Partitions[t->PartitionsCount++] = p;
}

static void print_list(const char *head, char **v, int n)
{
    printf("%s", head);
    for (int i = 0; i < n; i++)
        printf("%s%s", i ? ", " : "", v[i]);
    printf("\n");
}

/* Ask again while the answer (top level or any partition) says NOT_CONTROLLER. */
static bool elect_retry(const void *resp)
{
    const struct ElectLeadersResponse *r = resp;
    if (r->ErrorCode == GR_KERR_NOT_CONTROLLER)
        return true;
    for (int t = 0; t < r->ReplicaElectionResultsCount; t++)
        for (int p = 0; p < r->ReplicaElectionResults[t].PartitionResultCount; p++)
            if (r->ReplicaElectionResults[t].PartitionResult[p].ErrorCode == GR_KERR_NOT_CONTROLLER)
                return true;
    return false;
}

int ctl_elect_main(const struct ctl_opts *o, int argc, char **argv)
{
    const char *type = NULL, *topic = NULL, *file = NULL;
    int32_t partition = -1;
    bool all = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--all-topic-partitions") == 0) {
            all = true;
            continue;
        }
        if (i + 1 >= argc)
            return usage();
        if (strcmp(a, "--election-type") == 0)
            type = argv[++i];
        else if (strcmp(a, "--topic") == 0)
            topic = argv[++i];
        else if (strcmp(a, "--partition") == 0)
            partition = atoi(argv[++i]);
        else if (strcmp(a, "--path-to-json-file") == 0)
            file = argv[++i];
        else
            return usage();
    }
    if (!type || (strcasecmp(type, "preferred") != 0 && strcasecmp(type, "unclean") != 0))
        return usage();
    if ((all ? 1 : 0) + (topic ? 1 : 0) + (file ? 1 : 0) != 1 || (topic && partition < 0))
        return usage();
    if (!o->bootstrap_server) {
        fprintf(stderr, "gregorctl elect-leaders: --bootstrap-server is required\n");
        return 2;
    }
    int8_t etype = strcasecmp(type, "unclean") == 0 ? 1 : 0;
    const char *tname = etype ? "UNCLEAN" : "PREFERRED";

    struct gr_arena ar;
    gr_arena_init(&ar);
    struct ElectLeadersRequest rq;
    gr_proto_init_struct(&gr_desc_ElectLeadersRequest, &rq);
    rq.ElectionType = etype;
    rq.TimeoutMs = o->timeout_ms;
    json_t *j = NULL;
    if (all) {
        rq.TopicPartitionsCount = -1;
        rq.TopicPartitions = NULL;
    } else if (topic) {
        rq.TopicPartitionsCount = 0;
        rq.TopicPartitions = gr_arena_alloc(&ar, sizeof(*rq.TopicPartitions));
        add_tp(&rq, &ar, 1, topic, partition);
    } else {
        json_error_t err;
        j = json_load_file(file, 0, &err);
        json_t *parts = j ? json_object_get(j, "partitions") : NULL;
        if (!json_is_array(parts)) {
            fprintf(stderr, "gregorctl elect-leaders: cannot parse %s: %s\n", file, j ? "no \"partitions\" array" : err.text);
            json_decref(j);
            gr_arena_free(&ar);
            return 1;
        }
        int n = (int)json_array_size(parts);
        rq.TopicPartitionsCount = 0;
        rq.TopicPartitions = gr_arena_alloc(&ar, sizeof(*rq.TopicPartitions) * (size_t)(n ? n : 1));
        for (int i = 0; i < n; i++) {
            json_t *e = json_array_get(parts, (size_t)i);
            json_t *t = json_object_get(e, "topic"), *p = json_object_get(e, "partition");
            if (!json_is_string(t) || !json_is_integer(p)) {
                fprintf(stderr, "gregorctl elect-leaders: invalid entry %d in %s\n", i, file);
                json_decref(j);
                gr_arena_free(&ar);
                return 1;
            }
            add_tp(&rq, &ar, n, json_string_value(t), (int32_t)json_integer_value(p));
        }
    }
    struct ctl_kafka boot;
    if (ctl_kafka_connect_str(o->bootstrap_server, o->timeout_ms, &boot) != 0) {
        json_decref(j);
        gr_arena_free(&ar);
        return 1;
    }
    struct ElectLeadersResponse *r =
        ctl_kafka_call_controller(&boot, o->timeout_ms, 20, GR_API_ELECT_LEADERS, 2, &rq, &ar, elect_retry);
    ctl_kafka_close(&boot);
    int rc = 0;
    if (!r) {
        printf("Error while making request\n");
        rc = 1;
    } else if (r->ErrorCode != GR_KERR_NONE) {
        printf("Error while making request: %s\n", gr_kerr_name(r->ErrorCode));
        rc = 1;
    } else {
        int n = 0;
        for (int t = 0; t < r->ReplicaElectionResultsCount; t++)
            n += r->ReplicaElectionResults[t].PartitionResultCount;
        char **ok = gr_calloc((size_t)(n ? n : 1), sizeof(char *)), **noop = gr_calloc((size_t)(n ? n : 1), sizeof(char *));
        int n_ok = 0, n_noop = 0, n_failed = 0;
        for (int t = 0; t < r->ReplicaElectionResultsCount; t++)
            for (int p = 0; p < r->ReplicaElectionResults[t].PartitionResultCount; p++) {
                const struct ElectLeadersResponse_PartitionResult *x = &r->ReplicaElectionResults[t].PartitionResult[p];
                char *name = gr_asprintf("%s-%d", r->ReplicaElectionResults[t].Topic, x->PartitionId);
                if (x->ErrorCode == GR_KERR_NONE) {
                    ok[n_ok++] = name;
                } else if (x->ErrorCode == GR_KERR_ELECTION_NOT_NEEDED) {
                    noop[n_noop++] = name;
                } else {
                    n_failed++;
                    printf("Error completing leader election (%s) for partition: %s: %s%s%s\n", tname, name,
                           gr_kerr_name(x->ErrorCode), x->ErrorMessage ? ": " : "", x->ErrorMessage ? x->ErrorMessage : "");
                    free(name);
                }
            }
        char head[128];
        if (n_ok) {
            snprintf(head, sizeof head, "Successfully completed leader election (%s) for partitions ", tname);
            print_list(head, ok, n_ok);
        }
        if (n_noop)
            print_list("Valid replica already elected for partitions ", noop, n_noop);
        if (n_failed) {
            printf("%d replica(s) could not be elected\n", n_failed);
            rc = 1;
        }
        for (int i = 0; i < n_ok; i++)
            free(ok[i]);
        for (int i = 0; i < n_noop; i++)
            free(noop[i]);
        free(ok);
        free(noop);
    }
    json_decref(j);
    gr_arena_free(&ar);
    return rc;
}
