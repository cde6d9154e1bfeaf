/* gregorctl consumer-groups: kafka-consumer-groups.sh over the Kafka protocol.
 *
 *   consumer-groups list                      every group of every broker (ListGroups), one per line
 *   consumer-groups describe --group G [--offsets|--members|--state] | --all-groups
 *       --offsets (default): GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID
 *       HOST CLIENT-ID, one row per assigned partition (committed offsets from OffsetFetch, log end
 *       offsets from ListOffsets at each leader), a row per member without partitions, then the
 *       committed partitions no member holds; "-" where there is no value.
 *       --members: GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS. --state: GROUP COORDINATOR (ID)
 *       ASSIGNMENT-STRATEGY STATE #MEMBERS.
 *   consumer-groups reset-offsets --group G (--topic T[:P,P...]... | --all-topics)
 *       (--to-earliest | --to-latest | --to-offset N | --to-datetime YYYY-MM-DDTHH:mm:SS[.sss][Z]
 *        | --shift-by N) [--dry-run | --execute]
 *       Prints GROUP TOPIC PARTITION NEW-OFFSET; commits them only with --execute (OffsetCommit,
 *       generation -1) and only while the group is inactive (Empty or Dead), as Kafka requires.
 *       New offsets are clamped to [log start, log end]; --to-datetime takes the first offset
 *       with a timestamp at or after the time (the log end if none).
 *   consumer-groups delete --group G [--group G2 ...]            DeleteGroups
 *   consumer-groups delete-offsets --group G --topic T[:P,P...]   OffsetDelete (KIP-496)
 * kafka-consumer-groups.sh's flag forms (--list, --describe, --reset-offsets, --delete,
 * --delete-offsets) are accepted too. Requests go to the group's coordinator (FindCoordinator,
 * retried while it loads). Errors are printed as kafka-consumer-groups.sh 2.7 prints them ("\nError: ..."
 * on stdout; notes such as "has no active members" on stderr), with Kafka's error code names where
 * the Java tool prints an exception. Exit codes: 0 ok, 1 failure, 2 usage. */
#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd/ctl.h"
#include "cmd/ctl_kafka.h"
#include "common/kerr.h"
#include "common/util.h"

#define MISSING "-"

enum reset_mode { R_NONE, R_EARLIEST, R_LATEST, R_OFFSET, R_DATETIME, R_SHIFT };

struct tsel { /* --topic T[:P,P...] */
    char *topic;
    int n;
    int32_t *parts; /* n == 0: every partition */
};

struct gargs {
    const char *action;
    const char **groups;
    int n_groups;
    bool all_groups, all_topics, execute, dry_run, members, state;
    struct tsel *topics;
    int n_topics;
    enum reset_mode mode;
    int64_t value; /* --to-offset / --shift-by / --to-datetime (ms) */
};

/* One row: a partition (topic NULL for a member without partitions). */
struct row {
    const char *topic;
    int32_t partition;
    int64_t committed, start, end, at_time, target; /* -1 unknown */
    const char *member, *host, *client;
};

struct rows {
    struct row *v;
    int n, cap;
};

static struct row *rows_add(struct rows *r, const char *topic, int32_t partition) {
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 16;
        r->v = gr_realloc(r->v, (size_t)r->cap * sizeof *r->v);
    }
    struct row *x = &r->v[r->n++];
    *x = (struct row){topic, partition, -1, -1, -1, -1, -1, NULL, NULL, NULL};
    return x;
}

static struct row *rows_find(struct rows *r, const char *topic, int32_t partition) {
    for (int i = 0; i < r->n; i++)
        if (r->v[i].topic && r->v[i].partition == partition && strcmp(r->v[i].topic, topic) == 0) return &r->v[i];
    return NULL;
}

/* kafka-consumer-groups.sh's printError: a blank line and "Error: ..." on stdout. */
static void print_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void print_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("\nError: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
}

static int usage(void) {
    fprintf(stderr,
            "usage: gregorctl --bootstrap-server HOST:PORT consumer-groups list\n"
            "       ... consumer-groups describe (--group G | --all-groups) [--offsets|--members|--state]\n"
            "       ... consumer-groups reset-offsets --group G (--topic T[:P,P] | --all-topics)\n"
            "           (--to-earliest|--to-latest|--to-offset N|--to-datetime YYYY-MM-DDTHH:mm:SS.sss|--shift-by N)\n"
            "           [--dry-run|--execute]\n"
            "       ... consumer-groups delete --group G [--group G2...]\n"
            "       ... consumer-groups delete-offsets --group G --topic T[:P,P]\n");
    return 2;
}

/* ---- parsing ---- */

static bool parse_i64(const char *s, int64_t *out) {
    char *end;
    if (!s || !*s) return false;
    long long v = strtoll(s, &end, 10);
    if (*end) return false;
    *out = v;
    return true;
}

/* "YYYY-MM-DDTHH:mm:SS[.sss][Z|+hh:mm]" -> epoch ms (local time when no zone, as Kafka). */
static bool parse_datetime(const char *s, int64_t *ms) {
    struct tm tm = {0};
    int msec = 0;
    const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!p) return false;
    if (*p == '.') {
        char *end;
        msec = (int)strtol(p + 1, &end, 10);
        p = end;
    }
    time_t t;
    if (*p == 'Z' && !p[1]) {
        t = timegm(&tm);
    } else if ((*p == '+' || *p == '-') && strlen(p) == 6 && p[3] == ':') {
        t = timegm(&tm) - (*p == '+' ? 1 : -1) * (atoi(p + 1) * 3600 + atoi(p + 4) * 60);
    } else if (!*p) {
        tm.tm_isdst = -1;
        t = mktime(&tm);
    } else {
        return false;
    }
    *ms = (int64_t)t * 1000 + msec;
    return true;
}

static bool parse_tsel(const char *s, struct tsel *out) {
    const char *colon = strchr(s, ':');
    out->topic = colon ? gr_strndup(s, (size_t)(colon - s)) : gr_strdup(s);
    out->n = 0;
    out->parts = NULL;
    if (!colon) return out->topic[0] != 0;
    for (const char *p = colon + 1; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0) return false;
        out->parts = gr_realloc(out->parts, (size_t)(out->n + 1) * sizeof *out->parts);
        out->parts[out->n++] = (int32_t)v;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return false;
    }
    return out->n > 0;
}

static int parse_args(int argc, char **argv, struct gargs *g) {
    static const char *const actions[][2] = {{"--list", "list"},
                                             {"--describe", "describe"},
                                             {"--reset-offsets", "reset-offsets"},
                                             {"--delete", "delete"},
                                             {"--delete-offsets", "delete-offsets"}};
    g->groups = gr_calloc((size_t)argc + 1, sizeof *g->groups);
    g->topics = gr_calloc((size_t)argc + 1, sizeof *g->topics);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool is_action = false;
        for (size_t k = 0; k < GR_ARRAY_LEN(actions); k++)
            if (strcmp(a, actions[k][0]) == 0 || strcmp(a, actions[k][1]) == 0) {
                if (g->action) return usage();
                g->action = actions[k][1];
                is_action = true;
            }
        if (is_action) continue;
        if (strcmp(a, "--group") == 0 && v)
            g->groups[g->n_groups++] = argv[++i];
        else if (strcmp(a, "--all-groups") == 0)
            g->all_groups = true;
        else if (strcmp(a, "--all-topics") == 0)
            g->all_topics = true;
        else if (strcmp(a, "--topic") == 0 && v) {
            if (!parse_tsel(argv[++i], &g->topics[g->n_topics++])) {
                fprintf(stderr, "Error: invalid --topic %s\n", argv[i]);
                return 2;
            }
        } else if (strcmp(a, "--to-earliest") == 0)
            g->mode = R_EARLIEST;
        else if (strcmp(a, "--to-latest") == 0)
            g->mode = R_LATEST;
        else if (strcmp(a, "--to-offset") == 0 && v && parse_i64(v, &g->value))
            g->mode = R_OFFSET, i++;
        else if (strcmp(a, "--shift-by") == 0 && v && parse_i64(v, &g->value))
            g->mode = R_SHIFT, i++;
        else if (strcmp(a, "--to-datetime") == 0 && v && parse_datetime(v, &g->value))
            g->mode = R_DATETIME, i++;
        else if (strcmp(a, "--execute") == 0)
            g->execute = true;
        else if (strcmp(a, "--dry-run") == 0)
            g->dry_run = true;
        else if (strcmp(a, "--members") == 0)
            g->members = true;
        else if (strcmp(a, "--state") == 0)
            g->state = true;
        else if (strcmp(a, "--offsets") == 0 || strcmp(a, "--verbose") == 0)
            continue;
        else {
            fprintf(stderr, "Error: unknown or incomplete option %s\n", a);
            return usage();
        }
    }
    if (!g->action) return usage();
    return 0;
}

/* ---- talking to brokers ---- */

static bool coordinator_retriable(int16_t e) {
    return e == GR_KERR_COORDINATOR_NOT_AVAILABLE || e == GR_KERR_COORDINATOR_LOAD_IN_PROGRESS ||
           e == GR_KERR_NOT_COORDINATOR;
}

/* FindCoordinator for group, then a connection to it; retried while the coordinator is not
 * available (the offsets topic is being created or loaded). Fills *id and *addr. 0 or 1. */
static int connect_coordinator(struct ctl_kafka *boot, const char *group, int timeout_ms, struct ctl_kafka *out,
                               int32_t *id, char *addr, size_t addrlen) {
    int64_t deadline = gr_mono_ms() + timeout_ms;
    int16_t last = GR_KERR_NONE;
    for (;;) {
        struct gr_arena a;
        gr_arena_init(&a);
        struct FindCoordinatorRequest rq;
        gr_proto_init_struct(&gr_desc_FindCoordinatorRequest, &rq);
        rq.Key = (char *)group;
        struct FindCoordinatorResponse *r = ctl_kafka_call(boot, GR_API_FIND_COORDINATOR, 2, &rq, &a);
        if (!r) {
            gr_arena_free(&a);
            return 1;
        }
        last = r->ErrorCode;
        if (last == GR_KERR_NONE) {
            *id = r->NodeId;
            snprintf(addr, addrlen, "%s:%d", r->Host, r->Port);
            int rc = ctl_kafka_connect(r->Host, r->Port, timeout_ms, out);
            gr_arena_free(&a);
            return rc == 0 ? 0 : 1;
        }
        gr_arena_free(&a);
        if (!coordinator_retriable(last) || gr_mono_ms() > deadline) break;
        usleep(200 * 1000);
    }
    print_error("cannot find the coordinator of group '%s': %s", group, gr_kerr_name(last));
    return 1;
}

/* Calls the coordinator, retrying (reconnecting) while it answers a retriable coordinator error
 * as reported by err_of(resp). */
static void *call_group(struct ctl_kafka *boot, const char *group, int timeout_ms, int16_t key, int16_t ver,
                        const void *rq, struct gr_arena *a, int16_t (*err_of)(const void *), int32_t *coord_id,
                        char *addr, size_t addrlen) {
    int64_t deadline = gr_mono_ms() + timeout_ms;
    for (;;) {
        struct ctl_kafka c;
        int32_t id;
        char ad[300];
        if (connect_coordinator(boot, group, timeout_ms, &c, &id, ad, sizeof ad) != 0) return NULL;
        void *r = ctl_kafka_call(&c, key, ver, rq, a);
        ctl_kafka_close(&c);
        if (coord_id) *coord_id = id;
        if (addr) snprintf(addr, addrlen, "%s", ad);
        if (!r || !coordinator_retriable(err_of(r)) || gr_mono_ms() > deadline) return r;
        usleep(200 * 1000);
    }
}

static int16_t describe_err(const void *r) {
    const struct DescribeGroupsResponse *d = r;
    return d->GroupsCount > 0 ? d->Groups[0].ErrorCode : GR_KERR_NONE;
}
static int16_t offset_fetch_err(const void *r) {
    return ((const struct OffsetFetchResponse *)r)->ErrorCode;
}
static int16_t commit_err(const void *r) {
    const struct OffsetCommitResponse *c = r;
    return c->TopicsCount > 0 && c->Topics[0].PartitionsCount > 0 ? c->Topics[0].Partitions[0].ErrorCode : GR_KERR_NONE;
}
static int16_t delete_err(const void *r) {
    const struct DeleteGroupsResponse *d = r;
    return d->ResultsCount > 0 ? d->Results[0].ErrorCode : GR_KERR_NONE;
}
static int16_t offset_delete_err(const void *r) {
    return ((const struct OffsetDeleteResponse *)r)->ErrorCode;
}

/* Fills start/end (and at_time when ts >= 0) of every row with a topic, asking each partition's
 * leader with ListOffsets v1. Rows whose leader is unknown keep -1. */
static void list_log_offsets(struct ctl_kafka *boot, struct rows *rows, int64_t ts, int timeout_ms) {
    struct gr_arena a;
    gr_arena_init(&a);
    struct MetadataResponse *md = ctl_kafka_metadata(boot, NULL, -1, &a);
    if (!md) goto out;
    for (int32_t b = 0; b < md->BrokersCount; b++) {
        const struct MetadataResponse_MetadataResponseBroker *br = &md->Brokers[b];
        /* the rows this broker leads */
        int n = 0;
        int *idx = gr_calloc((size_t)rows->n + 1, sizeof *idx);
        for (int i = 0; i < rows->n; i++) {
            struct row *r = &rows->v[i];
            if (!r->topic) continue;
            for (int32_t t = 0; t < md->TopicsCount; t++) {
                if (!md->Topics[t].Name || strcmp(md->Topics[t].Name, r->topic) != 0) continue;
                for (int32_t p = 0; p < md->Topics[t].PartitionsCount; p++)
                    if (md->Topics[t].Partitions[p].PartitionIndex == r->partition &&
                        md->Topics[t].Partitions[p].LeaderId == br->NodeId)
                        idx[n++] = i;
            }
        }
        struct ctl_kafka c;
        if (n == 0 || ctl_kafka_connect(br->Host, br->Port, timeout_ms, &c) != 0) {
            free(idx);
            continue;
        }
        int64_t kinds[3] = {-2, -1, ts};
        for (int k = 0; k < (ts >= 0 ? 3 : 2); k++) {
            struct ListOffsetsRequest rq;
            gr_proto_init_struct(&gr_desc_ListOffsetsRequest, &rq);
            rq.ReplicaId = -1;
            rq.TopicsCount = n; /* one topic entry per row: simple and valid */
            rq.Topics = gr_arena_alloc(&a, (size_t)n * sizeof *rq.Topics);
            for (int j = 0; j < n; j++) {
                struct ListOffsetsRequest_ListOffsetsTopic *t = &rq.Topics[j];
                gr_proto_init_struct(&gr_desc_ListOffsetsRequest_ListOffsetsTopic, t);
                t->Name = (char *)rows->v[idx[j]].topic;
                t->PartitionsCount = 1;
                t->Partitions = gr_arena_alloc(&a, sizeof *t->Partitions);
                gr_proto_init_struct(&gr_desc_ListOffsetsRequest_ListOffsetsPartition, t->Partitions);
                t->Partitions[0].PartitionIndex = rows->v[idx[j]].partition;
                t->Partitions[0].Timestamp = kinds[k];
            }
            struct ListOffsetsResponse *r = ctl_kafka_call(&c, GR_API_LIST_OFFSETS, 1, &rq, &a);
            for (int32_t t = 0; r && t < r->TopicsCount; t++)
                for (int32_t p = 0; p < r->Topics[t].PartitionsCount; p++) {
                    const struct ListOffsetsResponse_ListOffsetsPartitionResponse *pr = &r->Topics[t].Partitions[p];
                    struct row *x = rows_find(rows, r->Topics[t].Name, pr->PartitionIndex);
                    if (!x || pr->ErrorCode != GR_KERR_NONE) continue;
                    if (k == 0)
                        x->start = pr->Offset;
                    else if (k == 1)
                        x->end = pr->Offset;
                    else
                        x->at_time = pr->Offset;
                }
        }
        ctl_kafka_close(&c);
        free(idx);
    }
out:
    gr_arena_free(&a);
}

/* ---- consumer protocol ---- */

static uint16_t be16(const uint8_t *p) {
    return (uint16_t)(p[0] << 8 | p[1]);
}
static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* Adds a row per partition of a ConsumerProtocolAssignment (int16 version, [topic, [int32]]);
 * returns how many. */
static int add_assignment(struct rows *rows, struct gr_arena *a, const struct gr_bytes *asg, const char *member,
                          const char *host, const char *client) {
    const uint8_t *m = asg->p;
    size_t len = asg->len > 0 ? (size_t)asg->len : 0, off = 6;
    int added = 0;
    if (len < 6) return 0;
    uint32_t nt = be32(m + 2);
    for (uint32_t t = 0; t < nt; t++) {
        if (off + 2 > len) break;
        uint16_t sl = be16(m + off);
        off += 2;
        if (off + sl + 4 > len) break;
        char *topic = gr_arena_alloc(a, (size_t)sl + 1);
        memcpy(topic, m + off, sl);
        topic[sl] = 0;
        off += sl;
        uint32_t np = be32(m + off);
        off += 4;
        for (uint32_t p = 0; p < np && off + 4 <= len; p++, off += 4) {
            struct row *r = rows_add(rows, topic, (int32_t)be32(m + off));
            r->member = member, r->host = host, r->client = client;
            added++;
        }
    }
    return added;
}

/* ---- describe ---- */

struct group_info {
    int16_t error;
    const char *state, *protocol, *protocol_type;
    int32_t coordinator;
    char coord_addr[300];
    struct DescribeGroupsResponse_DescribedGroup *g;
};

static int describe_group(struct ctl_kafka *boot, const char *group, int timeout_ms, struct gr_arena *a,
                          struct group_info *gi) {
    struct DescribeGroupsRequest rq;
    gr_proto_init_struct(&gr_desc_DescribeGroupsRequest, &rq);
    rq.GroupsCount = 1;
    rq.Groups = (char **)&group;
    struct DescribeGroupsResponse *r =
        call_group(boot, group, timeout_ms, GR_API_DESCRIBE_GROUPS, 4, &rq, a, describe_err, &gi->coordinator,
                   gi->coord_addr, sizeof gi->coord_addr);
    if (!r || r->GroupsCount < 1) return 1;
    gi->g = &r->Groups[0];
    gi->error = gi->g->ErrorCode;
    gi->state = gi->g->GroupState ? gi->g->GroupState : "";
    gi->protocol = gi->g->ProtocolData ? gi->g->ProtocolData : "";
    gi->protocol_type = gi->g->ProtocolType ? gi->g->ProtocolType : "";
    return 0;
}

/* Committed offsets of group (all partitions) into rows: existing rows get theirs, others are
 * added without a member. */
static int fetch_committed(struct ctl_kafka *boot, const char *group, int timeout_ms, struct gr_arena *a,
                           struct rows *rows) {
    struct OffsetFetchRequest rq;
    gr_proto_init_struct(&gr_desc_OffsetFetchRequest, &rq);
    rq.GroupId = (char *)group;
    rq.TopicsCount = -1;
    struct OffsetFetchResponse *r =
        call_group(boot, group, timeout_ms, GR_API_OFFSET_FETCH, 5, &rq, a, offset_fetch_err, NULL, NULL, 0);
    if (!r) return 1;
    if (r->ErrorCode != GR_KERR_NONE) {
        print_error("fetching the offsets of group '%s' failed: %s", group, gr_kerr_name(r->ErrorCode));
        return 1;
    }
    for (int32_t t = 0; t < r->TopicsCount; t++)
        for (int32_t p = 0; p < r->Topics[t].PartitionsCount; p++) {
            const struct OffsetFetchResponse_OffsetFetchResponsePartition *pp = &r->Topics[t].Partitions[p];
            if (pp->ErrorCode != GR_KERR_NONE || pp->CommittedOffset < 0) continue;
            struct row *x = rows_find(rows, r->Topics[t].Name, pp->PartitionIndex);
            if (!x) x = rows_add(rows, r->Topics[t].Name, pp->PartitionIndex);
            x->committed = pp->CommittedOffset;
        }
    return 0;
}

static int cmp_row(const void *a, const void *b) {
    const struct row *x = a, *y = b;
    int c = strcmp(x->topic ? x->topic : "", y->topic ? y->topic : "");
    return c ? c : (x->partition > y->partition) - (x->partition < y->partition);
}

static const char *num(char *buf, size_t len, int64_t v) {
    if (v < 0) return MISSING;
    snprintf(buf, len, "%lld", (long long)v);
    return buf;
}

static size_t maxlen(size_t cur, const char *s) {
    return GR_MAX(cur, strlen(s ? s : MISSING));
}

/* kafka-consumer-groups.sh's shouldPrintMemberState. */
static bool print_state_note(const char *group, const struct group_info *gi) {
    if (gi->error == GR_KERR_GROUP_ID_NOT_FOUND || strcmp(gi->state, "Dead") == 0) {
        print_error("Consumer group '%s' does not exist.", group);
        return false;
    }
    if (strcmp(gi->state, "Empty") == 0)
        fprintf(stderr, "\nConsumer group '%s' has no active members.\n", group);
    else if (strcmp(gi->state, "PreparingRebalance") == 0 || strcmp(gi->state, "CompletingRebalance") == 0)
        fprintf(stderr, "\nWarning: Consumer group '%s' is rebalancing.\n", group);
    return true;
}

static void print_offsets(const char *group, struct rows *rows) {
    size_t gl = maxlen(15, group), tl = 15, cl = 15, hl = 15;
    for (int i = 0; i < rows->n; i++) {
        tl = maxlen(tl, rows->v[i].topic);
        cl = maxlen(cl, rows->v[i].member);
        hl = maxlen(hl, rows->v[i].host);
    }
    printf("\n%-*s %-*s %-10s %-15s %-15s %-15s %-*s %-*s %s\n", (int)gl, "GROUP", (int)tl, "TOPIC", "PARTITION",
           "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", (int)cl, "CONSUMER-ID", (int)hl, "HOST", "CLIENT-ID");
    for (int i = 0; i < rows->n; i++) {
        const struct row *r = &rows->v[i];
        char p[16], c[24], e[24], l[24];
        /* Kafka 2.7's getLag: end - committed, not clamped (a committed offset past the log end,
         * e.g. after a truncation, shows a negative lag) */
        bool has_lag = r->topic && r->committed >= 0 && r->end >= 0;
        if (has_lag) snprintf(l, sizeof l, "%lld", (long long)(r->end - r->committed));
        printf("%-*s %-*s %-10s %-15s %-15s %-15s %-*s %-*s %s\n", (int)gl, group, (int)tl,
               r->topic ? r->topic : MISSING, r->topic ? num(p, sizeof p, r->partition) : MISSING,
               num(c, sizeof c, r->committed), num(e, sizeof e, r->end), has_lag ? l : MISSING, (int)cl,
               r->member ? r->member : MISSING, (int)hl, r->host ? r->host : MISSING, r->client ? r->client : MISSING);
    }
}

static void print_members(const char *group, const struct group_info *gi, const int *counts) {
    size_t gl = maxlen(15, group), cl = 15, hl = 15, il = 15, gil = 17;
    bool with_instance = false;
    for (int32_t i = 0; i < gi->g->MembersCount; i++) {
        const struct DescribeGroupsResponse_DescribedGroupMember *m = &gi->g->Members[i];
        cl = maxlen(cl, m->MemberId);
        hl = maxlen(hl, m->ClientHost);
        il = maxlen(il, m->ClientId);
        gil = maxlen(gil, m->GroupInstanceId ? m->GroupInstanceId : "");
        with_instance |= m->GroupInstanceId && m->GroupInstanceId[0];
    }
    if (with_instance)
        printf("\n%-*s %-*s %-*s %-*s %-*s %-15s \n", (int)gl, "GROUP", (int)cl, "CONSUMER-ID", (int)gil,
               "GROUP-INSTANCE-ID", (int)hl, "HOST", (int)il, "CLIENT-ID", "#PARTITIONS");
    else
        printf("\n%-*s %-*s %-*s %-*s %-15s \n", (int)gl, "GROUP", (int)cl, "CONSUMER-ID", (int)hl, "HOST", (int)il,
               "CLIENT-ID", "#PARTITIONS");
    for (int32_t i = 0; i < gi->g->MembersCount; i++) {
        const struct DescribeGroupsResponse_DescribedGroupMember *m = &gi->g->Members[i];
        if (with_instance)
            printf("%-*s %-*s %-*s %-*s %-*s %-15d \n", (int)gl, group, (int)cl, m->MemberId, (int)gil,
                   m->GroupInstanceId ? m->GroupInstanceId : "", (int)hl, m->ClientHost, (int)il, m->ClientId,
                   counts[i]);
        else
            printf("%-*s %-*s %-*s %-*s %-15d \n", (int)gl, group, (int)cl, m->MemberId, (int)hl, m->ClientHost,
                   (int)il, m->ClientId, counts[i]);
    }
}

static void print_state(const char *group, const struct group_info *gi) {
    char coord[340];
    snprintf(coord, sizeof coord, "%s (%d)", gi->coord_addr, gi->coordinator);
    int cl = (int)maxlen(25, coord); /* Kafka sizes the GROUP column by the coordinator's width */
    printf("\n%-*s %-25s %-20s %-15s %s", cl, "GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS");
    printf("\n%-*s %-25s %-20s %-15s %d\n", cl, group, coord, gi->protocol, gi->state, gi->g->MembersCount);
}

static int describe_one(struct ctl_kafka *boot, const struct gargs *ga, const char *group, int timeout_ms) {
    struct gr_arena a;
    gr_arena_init(&a);
    struct group_info gi = {0};
    struct rows rows = {0};
    int rc = 1;
    if (describe_group(boot, group, timeout_ms, &a, &gi) != 0) goto out;
    if (gi.error != GR_KERR_NONE && gi.error != GR_KERR_GROUP_ID_NOT_FOUND) {
        print_error("describing group '%s' failed: %s", group, gr_kerr_name(gi.error));
        goto out;
    }
    if (!print_state_note(group, &gi)) goto out;
    if (ga->state) {
        print_state(group, &gi);
        rc = 0;
        goto out;
    }
    int *counts = gr_calloc((size_t)gi.g->MembersCount + 1, sizeof *counts);
    for (int32_t i = 0; i < gi.g->MembersCount; i++) {
        const struct DescribeGroupsResponse_DescribedGroupMember *m = &gi.g->Members[i];
        int before = rows.n;
        counts[i] = strcmp(gi.protocol_type, "consumer") == 0
                        ? add_assignment(&rows, &a, &m->MemberAssignment, m->MemberId, m->ClientHost, m->ClientId)
                        : 0;
        qsort(rows.v + before, (size_t)(rows.n - before), sizeof *rows.v, cmp_row);
        if (counts[i] == 0 && !ga->members) {
            struct row *r = rows_add(&rows, NULL, -1);
            r->member = m->MemberId, r->host = m->ClientHost, r->client = m->ClientId;
        }
    }
    if (ga->members) {
        if (gi.g->MembersCount > 0) print_members(group, &gi, counts); /* Kafka prints no empty table */
        free(counts);
        rc = 0;
        goto out;
    }
    free(counts);
    int assigned = rows.n;
    if (fetch_committed(boot, group, timeout_ms, &a, &rows) != 0) goto out;
    qsort(rows.v + assigned, (size_t)(rows.n - assigned), sizeof *rows.v, cmp_row);
    list_log_offsets(boot, &rows, -1, timeout_ms);
    if (rows.n > 0) print_offsets(group, &rows);
    rc = 0;
out:
    free(rows.v);
    gr_arena_free(&a);
    return rc;
}

/* ---- list ---- */

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every consumer group (protocol type "consumer" or none) of every broker, sorted. */
static int list_groups(struct ctl_kafka *boot, int timeout_ms, struct gr_arena *a, char ***out, int *n) {
    struct MetadataResponse *md = ctl_kafka_metadata(boot, NULL, 0, a);
    if (!md) return 1;
    int cap = 16, rc = 0;
    *n = 0;
    *out = gr_arena_alloc(a, (size_t)cap * sizeof **out);
    for (int32_t b = 0; b < md->BrokersCount; b++) {
        struct ctl_kafka c;
        if (ctl_kafka_connect(md->Brokers[b].Host, md->Brokers[b].Port, timeout_ms, &c) != 0) {
            rc = 1;
            continue;
        }
        struct ListGroupsRequest rq;
        gr_proto_init_struct(&gr_desc_ListGroupsRequest, &rq);
        struct ListGroupsResponse *r = ctl_kafka_call(&c, GR_API_LIST_GROUPS, 3, &rq, a);
        ctl_kafka_close(&c);
        if (!r || r->ErrorCode != GR_KERR_NONE) {
            if (r)
                print_error("listing the groups of broker %d failed: %s", md->Brokers[b].NodeId,
                            gr_kerr_name(r->ErrorCode));
            rc = 1;
            continue;
        }
        for (int32_t i = 0; i < r->GroupsCount; i++) {
            const char *pt = r->Groups[i].ProtocolType ? r->Groups[i].ProtocolType : "";
            if (pt[0] && strcmp(pt, "consumer") != 0) continue;
            if (*n == cap) {
                char **bigger = gr_arena_alloc(a, (size_t)cap * 2 * sizeof **out);
                memcpy(bigger, *out, (size_t)cap * sizeof **out);
                *out = bigger;
                cap *= 2;
            }
            (*out)[(*n)++] = r->Groups[i].GroupId;
        }
    }
    qsort(*out, (size_t)*n, sizeof **out, cmp_str);
    return rc;
}

/* ---- reset-offsets ---- */

/* The rows a reset works on: --topic selections (every partition from Metadata when none are
 * given) or --all-topics (the committed partitions). */
static int reset_rows(struct ctl_kafka *boot, const struct gargs *ga, const char *group, int timeout_ms,
                      struct gr_arena *a, struct rows *rows) {
    struct rows committed = {0};
    if (fetch_committed(boot, group, timeout_ms, a, &committed) != 0) return 1;
    if (ga->all_topics) {
        *rows = committed;
        return 0;
    }
    for (int t = 0; t < ga->n_topics; t++) {
        const struct tsel *s = &ga->topics[t];
        if (s->n > 0) {
            for (int i = 0; i < s->n; i++) rows_add(rows, s->topic, s->parts[i]);
            continue;
        }
        const char *name = s->topic;
        struct MetadataResponse *md = ctl_kafka_metadata(boot, &name, 1, a);
        if (!md || md->TopicsCount != 1 || md->Topics[0].ErrorCode != GR_KERR_NONE) {
            print_error("topic '%s' does not exist", s->topic);
            free(committed.v);
            return 1;
        }
        for (int32_t p = 0; p < md->Topics[0].PartitionsCount; p++)
            rows_add(rows, s->topic, md->Topics[0].Partitions[p].PartitionIndex);
    }
    for (int i = 0; i < rows->n; i++) {
        struct row *c = rows_find(&committed, rows->v[i].topic, rows->v[i].partition);
        if (c) rows->v[i].committed = c->committed;
    }
    free(committed.v);
    return 0;
}

static int64_t target_of(const struct gargs *ga, const struct row *r) {
    int64_t t;
    switch (ga->mode) {
    case R_EARLIEST: return r->start;
    case R_LATEST: return r->end;
    case R_OFFSET: t = ga->value; break;
    case R_SHIFT: t = (r->committed >= 0 ? r->committed : r->end) + ga->value; break;
    case R_DATETIME: return r->at_time >= 0 ? r->at_time : r->end;
    default: return -1;
    }
    if (r->start >= 0 && t < r->start) t = r->start;
    if (r->end >= 0 && t > r->end) t = r->end;
    return t;
}

static int commit_rows(struct ctl_kafka *boot, const char *group, struct rows *rows, int timeout_ms,
                       struct gr_arena *a) {
    struct OffsetCommitRequest rq;
    gr_proto_init_struct(&gr_desc_OffsetCommitRequest, &rq);
    rq.GroupId = (char *)group;
    rq.GenerationIdOrMemberEpoch = -1;
    rq.MemberId = "";
    rq.RetentionTimeMs = -1;
    rq.TopicsCount = rows->n;
    rq.Topics = gr_arena_alloc(a, (size_t)(rows->n + 1) * sizeof *rq.Topics);
    for (int i = 0; i < rows->n; i++) {
        struct OffsetCommitRequest_OffsetCommitRequestTopic *t = &rq.Topics[i];
        gr_proto_init_struct(&gr_desc_OffsetCommitRequest_OffsetCommitRequestTopic, t);
        t->Name = (char *)rows->v[i].topic;
        t->PartitionsCount = 1;
        t->Partitions = gr_arena_alloc(a, sizeof *t->Partitions);
        gr_proto_init_struct(&gr_desc_OffsetCommitRequest_OffsetCommitRequestPartition, t->Partitions);
        t->Partitions[0].PartitionIndex = rows->v[i].partition;
        t->Partitions[0].CommittedOffset = rows->v[i].target;
        t->Partitions[0].CommittedMetadata = "";
    }
    struct OffsetCommitResponse *r =
        call_group(boot, group, timeout_ms, GR_API_OFFSET_COMMIT, 2, &rq, a, commit_err, NULL, NULL, 0);
    if (!r) return 1;
    int rc = 0;
    for (int32_t t = 0; t < r->TopicsCount; t++)
        for (int32_t p = 0; p < r->Topics[t].PartitionsCount; p++)
            if (r->Topics[t].Partitions[p].ErrorCode != GR_KERR_NONE) {
                print_error("committing %s-%d failed: %s", r->Topics[t].Name, r->Topics[t].Partitions[p].PartitionIndex,
                            gr_kerr_name(r->Topics[t].Partitions[p].ErrorCode));
                rc = 1;
            }
    return rc;
}

static int reset_offsets(struct ctl_kafka *boot, const struct gargs *ga, const char *group, int timeout_ms) {
    if (ga->mode == R_NONE) {
        fprintf(stderr, "Error: one of --to-earliest, --to-latest, --to-offset, --to-datetime, --shift-by is "
                        "required\n");
        return 2;
    }
    if (!ga->all_topics && ga->n_topics == 0) {
        fprintf(stderr, "Error: --topic or --all-topics is required\n");
        return 2;
    }
    if (ga->execute && ga->dry_run) {
        fprintf(stderr, "Option --reset-offsets only accepts one of --execute and --dry-run\n");
        return 2;
    }
    if (!ga->execute && !ga->dry_run)
        fprintf(stderr, "WARN: No action will be performed as the --execute option is missing.In a future major "
                        "release, the default behavior of this command will be to prompt the user before executing "
                        "the reset rather than doing a dry run. You should add the --dry-run option explicitly if "
                        "you are scripting this command and want to keep the current default behavior without "
                        "prompting.\n");
    struct gr_arena a;
    gr_arena_init(&a);
    struct group_info gi = {0};
    struct rows rows = {0};
    int rc = 1;
    if (describe_group(boot, group, timeout_ms, &a, &gi) != 0) goto out;
    if (gi.error == GR_KERR_NONE && strcmp(gi.state, "Empty") != 0 && strcmp(gi.state, "Dead") != 0) {
        print_error("Assignments can only be reset if the group '%s' is inactive, but the current state "
                    "is %s.",
                    group, gi.state);
        goto out;
    }
    if (reset_rows(boot, ga, group, timeout_ms, &a, &rows) != 0) goto out;
    qsort(rows.v, (size_t)rows.n, sizeof *rows.v, cmp_row);
    list_log_offsets(boot, &rows, ga->mode == R_DATETIME ? ga->value : -1, timeout_ms);
    for (int i = 0; i < rows.n; i++) {
        rows.v[i].target = target_of(ga, &rows.v[i]);
        if (rows.v[i].target < 0) {
            print_error("no offsets known for %s-%d (no leader?)", rows.v[i].topic, rows.v[i].partition);
            goto out;
        }
    }
    if (ga->execute && commit_rows(boot, group, &rows, timeout_ms, &a) != 0) goto out;
    if (rows.n > 0) printf("\n%-30s %-30s %-10s %-15s\n", "GROUP", "TOPIC", "PARTITION", "NEW-OFFSET");
    for (int i = 0; i < rows.n; i++)
        printf("%-30s %-30s %-10d %-15lld\n", group, rows.v[i].topic, rows.v[i].partition, (long long)rows.v[i].target);
    rc = 0;
out:
    free(rows.v);
    gr_arena_free(&a);
    return rc;
}

/* ---- delete, delete-offsets ---- */

static int delete_groups(struct ctl_kafka *boot, const struct gargs *ga, int timeout_ms) {
    int failed = 0;
    struct gr_arena a;
    gr_arena_init(&a);
    int16_t *errs = gr_calloc((size_t)ga->n_groups + 1, sizeof *errs);
    for (int i = 0; i < ga->n_groups; i++) {
        struct DeleteGroupsRequest rq;
        gr_proto_init_struct(&gr_desc_DeleteGroupsRequest, &rq);
        rq.GroupsNamesCount = 1;
        rq.GroupsNames = (char **)&ga->groups[i];
        struct DeleteGroupsResponse *r =
            call_group(boot, ga->groups[i], timeout_ms, GR_API_DELETE_GROUPS, 1, &rq, &a, delete_err, NULL, NULL, 0);
        errs[i] = !r ? GR_KERR_UNKNOWN_SERVER_ERROR : r->ResultsCount > 0 ? r->Results[0].ErrorCode : GR_KERR_NONE;
        failed += errs[i] != GR_KERR_NONE;
    }
    if (!failed) {
        printf("Deletion of requested consumer groups (");
        for (int i = 0; i < ga->n_groups; i++) printf("%s'%s'", i ? ", " : "", ga->groups[i]);
        printf(") was successful.\n");
    } else {
        print_error("Deletion of some consumer groups failed:");
        for (int i = 0; i < ga->n_groups; i++)
            if (errs[i] != GR_KERR_NONE)
                printf("* Group '%s' could not be deleted due to: %s\n", ga->groups[i], gr_kerr_name(errs[i]));
        if (failed < ga->n_groups) {
            printf("\nThese consumer groups were deleted successfully: ");
            for (int i = 0, k = 0; i < ga->n_groups; i++)
                if (errs[i] == GR_KERR_NONE) printf("%s'%s'", k++ ? ", " : "", ga->groups[i]);
            printf("\n");
        }
    }
    free(errs);
    gr_arena_free(&a);
    return failed ? 1 : 0;
}

static int delete_offsets(struct ctl_kafka *boot, const struct gargs *ga, const char *group, int timeout_ms) {
    if (ga->n_topics == 0) {
        fprintf(stderr, "Error: --topic is required\n");
        return 2;
    }
    struct gr_arena a;
    gr_arena_init(&a);
    struct rows rows = {0};
    int rc = 1;
    struct gargs sel = *ga;
    sel.all_topics = false;
    if (reset_rows(boot, &sel, group, timeout_ms, &a, &rows) != 0) goto out;
    struct OffsetDeleteRequest rq;
    gr_proto_init_struct(&gr_desc_OffsetDeleteRequest, &rq);
    rq.GroupId = (char *)group;
    rq.TopicsCount = rows.n;
    rq.Topics = gr_arena_alloc(&a, (size_t)(rows.n + 1) * sizeof *rq.Topics);
    for (int i = 0; i < rows.n; i++) {
        rq.Topics[i].Name = (char *)rows.v[i].topic;
        rq.Topics[i].PartitionsCount = 1;
        rq.Topics[i].Partitions = gr_arena_alloc(&a, sizeof *rq.Topics[i].Partitions);
        rq.Topics[i].Partitions[0].PartitionIndex = rows.v[i].partition;
    }
    struct OffsetDeleteResponse *r =
        call_group(boot, group, timeout_ms, GR_API_OFFSET_DELETE, 0, &rq, &a, offset_delete_err, NULL, NULL, 0);
    if (!r) goto out;
    /* As Kafka's admin client: a partition-level error fails the whole request. */
    int16_t top = r->ErrorCode;
    for (int32_t t = 0; top == GR_KERR_NONE && t < r->TopicsCount; t++)
        for (int32_t p = 0; p < r->Topics[t].PartitionsCount; p++)
            if (r->Topics[t].Partitions[p].ErrorCode != GR_KERR_NONE) top = r->Topics[t].Partitions[p].ErrorCode;
    if (top == GR_KERR_NONE) {
        printf("Request succeed for deleting offsets with topic ");
        for (int t = 0; t < ga->n_topics; t++) printf("%s%s", t ? ", " : "", ga->topics[t].topic);
        printf(" group %s\n", group);
    } else if (top == GR_KERR_INVALID_GROUP_ID) {
        print_error("'%s' is not valid.", group);
    } else if (top == GR_KERR_GROUP_ID_NOT_FOUND) {
        print_error("'%s' does not exist.", group);
    } else if (top == GR_KERR_NON_EMPTY_GROUP) {
        print_error("Deleting offsets of a consumer group '%s' is forbidden if the group is not empty.", group);
    } else if (top == GR_KERR_GROUP_SUBSCRIBED_TO_TOPIC || top == GR_KERR_UNKNOWN_TOPIC_OR_PARTITION) {
        print_error("Encounter some partition level error, see the follow-up details:");
    } else {
        print_error("Encounter some unknown error: %s", gr_kerr_name(top));
    }
    rc = top == GR_KERR_NONE ? 0 : 1;
    printf("\n%-30s %-15s %-15s\n", "TOPIC", "PARTITION", "STATUS");
    /* the request's partitions (rows, sorted by topic and partition) with their results */
    qsort(rows.v, (size_t)rows.n, sizeof *rows.v, cmp_row);
    for (int i = 0; r->ErrorCode == GR_KERR_NONE && i < rows.n; i++) {
        int16_t e = GR_KERR_NONE;
        for (int32_t t = 0; t < r->TopicsCount; t++)
            for (int32_t p = 0; p < r->Topics[t].PartitionsCount; p++)
                if (strcmp(r->Topics[t].Name, rows.v[i].topic) == 0 &&
                    r->Topics[t].Partitions[p].PartitionIndex == rows.v[i].partition)
                    e = r->Topics[t].Partitions[p].ErrorCode;
        char status[160];
        if (e == GR_KERR_NONE)
            snprintf(status, sizeof status, "Successful");
        else
            snprintf(status, sizeof status, "Error: %s", gr_kerr_name(e));
        printf("%-30s %-15d %-15s\n", rows.v[i].topic, rows.v[i].partition, status);
    }
out:
    free(rows.v);
    gr_arena_free(&a);
    return rc;
}

/* ---- main ---- */

static int run(struct ctl_kafka *boot, struct gargs *ga, int timeout_ms, struct gr_arena *a) {
    const char *act = ga->action;
    if (strcmp(act, "list") == 0) {
        char **ids;
        int n;
        int rc = list_groups(boot, timeout_ms, a, &ids, &n);
        for (int i = 0; i < n; i++) printf("%s\n", ids[i]);
        return rc;
    }
    if (strcmp(act, "describe") == 0 && ga->all_groups) {
        char **ids;
        int n;
        if (list_groups(boot, timeout_ms, a, &ids, &n) != 0) return 1;
        ga->groups = gr_realloc(ga->groups, (size_t)(n + 1) * sizeof *ga->groups);
        for (int i = 0; i < n; i++) ga->groups[i] = ids[i];
        ga->n_groups = n;
    }
    if (ga->n_groups == 0) {
        fprintf(stderr, "Error: --group is required\n");
        return 2;
    }
    if (strcmp(act, "delete") == 0) return delete_groups(boot, ga, timeout_ms);
    int rc = 0;
    for (int i = 0; i < ga->n_groups; i++) {
        int r;
        if (strcmp(act, "describe") == 0)
            r = describe_one(boot, ga, ga->groups[i], timeout_ms);
        else if (strcmp(act, "reset-offsets") == 0)
            r = reset_offsets(boot, ga, ga->groups[i], timeout_ms);
        else
            r = delete_offsets(boot, ga, ga->groups[i], timeout_ms);
        rc = GR_MAX(rc, r);
    }
    return rc;
}

int ctl_groups_main(const struct ctl_opts *o, int argc, char **argv) {
    struct gargs ga = {0};
    int rc = parse_args(argc, argv, &ga);
    if (rc == 0 && !o->bootstrap_server) {
        fprintf(stderr, "Error: --bootstrap-server is required\n");
        rc = 2;
    }
    struct ctl_kafka boot;
    if (rc == 0 && ctl_kafka_connect_str(o->bootstrap_server, o->timeout_ms, &boot) != 0)
        rc = 1;
    else if (rc == 0) {
        struct gr_arena a;
        gr_arena_init(&a);
        rc = run(&boot, &ga, o->timeout_ms, &a);
        gr_arena_free(&a);
        ctl_kafka_close(&boot);
    }
    for (int i = 0; i < ga.n_topics; i++) {
        free(ga.topics[i].topic);
        free(ga.topics[i].parts);
    }
    free(ga.topics);
    free(ga.groups);
    return rc;
}
