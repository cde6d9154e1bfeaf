/* Replica assignment (Kafka 2.7 AdminUtils.assignReplicasToBrokers and friends). See
 * assignment.h. The algorithms are restated here from the reference inventory:
 *
 *   brokers sorted by id, n of them
 *   start = fixed >= 0 ? fixed : rand(n);  shift = fixed >= 0 ? fixed : rand(n)
 *   p = max(0, startPartition)
 *   repeat nPartitions:
 *     if p > 0 && p % n == 0: shift++
 *     first = (p + start) % n
 *     replicas = [b[first]] + [b[(first + 1 + (shift + j) % (n - 1)) % n] for j in 0..rf-2]
 *     p++
 *
 * Rack-aware: the same walk over the rack-alternated list, with the shift scaled by the number
 * of racks, skipping brokers whose rack already holds a replica while some rack holds none, and
 * brokers already used while some broker is unused. */
#include "admin/assignment.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/kerr.h"
#include "common/util.h"

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* A per-thread xorshift generator seeded from the clock and the thread: assignment randomness
 * needs no quality, only independence between the two draws. */
static int rand_below(int n)
{
    static __thread uint64_t s;
    if (s == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        s = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ (uint64_t)(uintptr_t)&s;
        if (s == 0)
            s = 0x9E3779B97F4A7C15ULL;
    }
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return (int)(s % (uint64_t)n);
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int replica_index(int first, int shift, int j, int n)
{
    int s = 1 + (shift + j) % (n - 1);
    return (first + s) % n;
}

void gr_assign_rack_unaware(const int32_t *ids, int n, int n_partitions, int rf, int start_index,
                            int shift, int start_partition_id, int32_t *out)
{
    int p = start_partition_id > 0 ? start_partition_id : 0;
    for (int i = 0; i < n_partitions; i++, p++) {
        if (p > 0 && p % n == 0)
            shift++;
        int first = (p + start_index) % n;
        int32_t *r = out + (size_t)i * rf;
        r[0] = ids[first];
        for (int j = 0; j < rf - 1; j++)
            r[j + 1] = ids[replica_index(first, shift, j, n)];
    }
}

struct rack_entry {
    int32_t id;
    const char *rack;
};

static int cmp_rack_entry(const void *a, const void *b)
{
    const struct rack_entry *x = a, *y = b;
    int c = strcmp(x->rack, y->rack);
    if (c)
        return c;
    return (x->id > y->id) - (x->id < y->id);
}

void gr_assign_rack_alternated_list(const struct gr_broker_meta *brokers, int n, int32_t *out)
{
    struct rack_entry *e = gr_malloc(sizeof(*e) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) {
        e[i].id = brokers[i].id;
        e[i].rack = brokers[i].rack ? brokers[i].rack : "";
    }
    qsort(e, (size_t)n, sizeof(*e), cmp_rack_entry);
    /* Group boundaries: rack r occupies [start[r], start[r+1]). */
    int *start = gr_malloc(sizeof(int) * (size_t)(n + 1));
    int *pos = gr_malloc(sizeof(int) * (size_t)(n + 1));
    int nracks = 0;
    for (int i = 0; i < n; i++)
        if (i == 0 || strcmp(e[i].rack, e[i - 1].rack) != 0)
            start[nracks++] = i;
    start[nracks] = n;
    for (int r = 0; r < nracks; r++)
        pos[r] = start[r];
    int k = 0, r = 0;
    while (k < n) {
        if (pos[r] < start[r + 1])
            out[k++] = e[pos[r]++].id;
        r = (r + 1) % nracks;
    }
    free(pos);
    free(start);
    free(e);
}

static const char *rack_of(const struct gr_broker_meta *b, int n, int32_t id)
{
    for (int i = 0; i < n; i++)
        if (b[i].id == id)
            return b[i].rack;
    return "";
}

static void assign_rack_aware(const struct gr_broker_meta *brokers, int n, int n_partitions, int rf,
                              int fixed_start_index, int start_partition_id, int32_t *out)
{
    int32_t *list = gr_malloc(sizeof(int32_t) * (size_t)n);
    gr_assign_rack_alternated_list(brokers, n, list);
    const char **racks = gr_malloc(sizeof(char *) * (size_t)n); /* rack of list[i] */
    int nracks = 0;
    for (int i = 0; i < n; i++) {
        racks[i] = rack_of(brokers, n, list[i]);
        bool seen = false;
        for (int j = 0; j < i; j++)
            if (strcmp(racks[j], racks[i]) == 0) {
                seen = true;
                break;
            }
        if (!seen)
            nracks++;
    }
    int start_index = fixed_start_index >= 0 ? fixed_start_index : rand_below(n);
    int shift = fixed_start_index >= 0 ? fixed_start_index : rand_below(n);
    int p = start_partition_id > 0 ? start_partition_id : 0;
    bool *used_b = gr_malloc(sizeof(bool) * (size_t)n);     /* by list index */
    const char **used_r = gr_malloc(sizeof(char *) * (size_t)n);
    for (int i = 0; i < n_partitions; i++, p++) {
        if (p > 0 && p % n == 0)
            shift++;
        int first = (p + start_index) % n;
        int32_t *r = out + (size_t)i * rf;
        memset(used_b, 0, sizeof(bool) * (size_t)n);
        int nb = 0, nr = 0;
        r[0] = list[first];
        used_b[first] = true;
        nb = 1;
        used_r[nr++] = racks[first];
        int k = 0;
        for (int j = 0; j < rf - 1; j++) {
            for (;;) {
                int idx = replica_index(first, shift * nracks, k, n);
                k++;
                bool rack_has = false;
                for (int q = 0; q < nr; q++)
                    if (strcmp(used_r[q], racks[idx]) == 0) {
                        rack_has = true;
                        break;
                    }
                if ((!rack_has || nr == nracks) && (!used_b[idx] || nb == n)) {
                    r[j + 1] = list[idx];
                    if (!rack_has)
                        used_r[nr++] = racks[idx];
                    if (!used_b[idx]) {
                        used_b[idx] = true;
                        nb++;
                    }
                    break;
                }
            }
        }
    }
    free(used_r);
    free(used_b);
    free(racks);
    free(list);
}

int16_t gr_assign_replicas(const struct gr_broker_meta *brokers, int n_brokers, int n_partitions,
                           int rf, int fixed_start_index, int start_partition_id, int32_t *out,
                           char *err, size_t errlen)
{
    if (n_partitions <= 0) {
        set_err(err, errlen, "Number of partitions must be larger than 0.");
        return GR_KERR_INVALID_PARTITIONS;
    }
    if (rf <= 0) {
        set_err(err, errlen, "Replication factor must be larger than 0.");
        return GR_KERR_INVALID_REPLICATION_FACTOR;
    }
    if (rf > n_brokers) {
        set_err(err, errlen, "Replication factor: %d larger than available brokers: %d.", rf,
                n_brokers);
        return GR_KERR_INVALID_REPLICATION_FACTOR;
    }
    int with_rack = 0;
    for (int i = 0; i < n_brokers; i++)
        if (brokers[i].rack)
            with_rack++;
    if (with_rack == 0) {
        int32_t *ids = gr_malloc(sizeof(int32_t) * (size_t)n_brokers);
        for (int i = 0; i < n_brokers; i++)
            ids[i] = brokers[i].id;
        qsort(ids, (size_t)n_brokers, sizeof(int32_t), cmp_i32);
        int start = fixed_start_index >= 0 ? fixed_start_index : rand_below(n_brokers);
        int shift = fixed_start_index >= 0 ? fixed_start_index : rand_below(n_brokers);
        gr_assign_rack_unaware(ids, n_brokers, n_partitions, rf, start, shift,
                               start_partition_id, out);
        free(ids);
        return GR_KERR_NONE;
    }
    if (with_rack != n_brokers) {
        set_err(err, errlen,
                "Not all brokers have rack information for replica rack aware assignment.");
        return GR_KERR_UNKNOWN_SERVER_ERROR;
    }
    assign_rack_aware(brokers, n_brokers, n_partitions, rf, fixed_start_index,
                      start_partition_id, out);
    return GR_KERR_NONE;
}

static bool has_dup(const int32_t *r, int n)
{
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (r[i] == r[j])
                return true;
    return false;
}

int16_t gr_assign_validate_new_topic(int n, const int32_t *partition_ids,
                                     const int32_t *const *replicas, const int *n_replicas,
                                     char *err, size_t errlen)
{
    if (n <= 0) {
        set_err(err, errlen, "partitions should be a consecutive 0-based integer sequence");
        return GR_KERR_INVALID_REPLICA_ASSIGNMENT;
    }
    for (int i = 0; i < n; i++) {
        if (n_replicas[i] != n_replicas[0] || n_replicas[i] <= 0) {
            set_err(err, errlen, "All partitions should have the same number of replicas");
            return GR_KERR_INVALID_REPLICA_ASSIGNMENT;
        }
    }
    for (int i = 0; i < n; i++) {
        if (has_dup(replicas[i], n_replicas[i])) {
            set_err(err, errlen, "Duplicate replica assignment found for partition %d",
                    partition_ids[i]);
            return GR_KERR_INVALID_REPLICA_ASSIGNMENT;
        }
    }
    /* Partition ids must be exactly {0..n-1}. */
    bool *seen = gr_calloc((size_t)n, sizeof(bool));
    int16_t rc = GR_KERR_NONE;
    for (int i = 0; i < n; i++) {
        int32_t p = partition_ids[i];
        if (p < 0 || p >= n || seen[p]) {
            set_err(err, errlen, "partitions should be a consecutive 0-based integer sequence");
            rc = GR_KERR_INVALID_REPLICA_ASSIGNMENT;
            break;
        }
        seen[p] = true;
    }
    free(seen);
    return rc;
}

int16_t gr_assign_validate_added(int n, const int32_t *const *replicas, const int *n_replicas,
                                 int expected_rf, const int32_t *live_ids, int n_live, char *err,
                                 size_t errlen)
{
    for (int i = 0; i < n; i++) {
        if (n_replicas[i] <= 0) {
            set_err(err, errlen, "Cannot have replication factor of 0 for a new partition.");
            return GR_KERR_INVALID_REPLICA_ASSIGNMENT;
        }
        if (has_dup(replicas[i], n_replicas[i])) {
            set_err(err, errlen, "Duplicate brokers not allowed in replica assignment.");
            return GR_KERR_INVALID_REPLICA_ASSIGNMENT;
        }
        for (int j = 0; j < n_replicas[i]; j++) {
            bool found = false;
            for (int k = 0; k < n_live; k++)
                if (live_ids[k] == replicas[i][j]) {
                    found = true;
                    break;
                }
            if (!found) {
                set_err(err, errlen, "Some brokers specified for a new partition are not "
                                     "available (broker %d).", replicas[i][j]);
                return GR_KERR_BROKER_NOT_AVAILABLE;
            }
        }
    }
    for (int i = 0; i < n; i++) {
        if (n_replicas[i] != expected_rf) {
            set_err(err, errlen, "Inconsistent replication factor between partitions, "
                                 "partition 0 has %d while a new partition has %d.",
                    expected_rf, n_replicas[i]);
            return GR_KERR_INVALID_REPLICA_ASSIGNMENT;
        }
    }
    return GR_KERR_NONE;
}

int gr_assign_add_partitions_start_index(const struct gr_broker_meta *brokers, int n,
                                         int32_t first_replica_of_p0)
{
    int32_t *ids = gr_malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++)
        ids[i] = brokers[i].id;
    qsort(ids, (size_t)n, sizeof(int32_t), cmp_i32);
    int idx = 0;
    for (int i = 0; i < n; i++)
        if (ids[i] >= first_replica_of_p0) {
            idx = i;
            break;
        }
    free(ids);
    return idx;
}
