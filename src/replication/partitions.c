/* Partition registry: see partitions.h. Entries live in an array sorted by (topic, partition)
 * with binary search; a broker hosts at most a few thousand partitions. */
#include "replication/partitions.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

struct gr_partitions {
    pthread_mutex_t lock;
    int32_t controller_epoch;
    int n, cap;
    struct gr_partition_state **v;
};

/* An entry's topic name, shared by the registry's entries of that topic (they are adjacent in
 * the sorted array; issue 14: a copy per partition cost ~32 B). Copies handed out
 * (gr_partition_state_copy) own a plain strdup'd name. */
struct reg_name {
    int refs;
    char s[];
};

static struct reg_name *reg_name_of(char *topic)
{
    return (struct reg_name *)(topic - offsetof(struct reg_name, s));
}

/* A reference to topic's name for a new entry at index i: a neighbour's if it has the same. */
static char *reg_name_ref(struct gr_partitions *r, int i, const char *topic)
{
    for (int j = i - 1; j <= i; j++)
        if (j >= 0 && j < r->n && strcmp(r->v[j]->topic, topic) == 0) {
            reg_name_of(r->v[j]->topic)->refs++;
            return r->v[j]->topic;
        }
    size_t len = strlen(topic);
    struct reg_name *n = gr_malloc(sizeof(*n) + len + 1);
    n->refs = 1;
    memcpy(n->s, topic, len + 1);
    return n->s;
}

/* Frees a registry entry (its arrays, its name reference, itself). */
static void entry_free(struct gr_partition_state *s)
{
    struct reg_name *n = reg_name_of(s->topic);
    s->topic = NULL;
    gr_partition_state_release(s);
    if (--n->refs == 0)
        free(n);
    free(s);
}

struct gr_partitions *gr_partitions_new(void)
{
    struct gr_partitions *r = gr_calloc(1, sizeof(*r));
    pthread_mutex_init(&r->lock, NULL);
    return r;
}

void gr_partition_state_release(struct gr_partition_state *s)
{
    free(s->topic);
    free(s->isr);
    free(s->replicas);
    free(s->adding);
    free(s->removing);
    memset(s, 0, sizeof(*s));
}

static int32_t *dup_ids(const int32_t *v, int n)
{
    if (n <= 0)
        return NULL;
    int32_t *r = gr_malloc(sizeof(int32_t) * (size_t)n);
    memcpy(r, v, sizeof(int32_t) * (size_t)n);
    return r;
}

void gr_partition_state_copy(struct gr_partition_state *dst, const struct gr_partition_state *src)
{
    *dst = *src;
    dst->topic = src->topic ? gr_strdup(src->topic) : NULL;
    dst->isr = dup_ids(src->isr, src->n_isr);
    dst->replicas = dup_ids(src->replicas, src->n_replicas);
    dst->adding = dup_ids(src->adding, src->n_adding);
    dst->removing = dup_ids(src->removing, src->n_removing);
}

void gr_partitions_free(struct gr_partitions *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->n; i++)
        entry_free(r->v[i]);
    free(r->v);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

void gr_partitions_lock(struct gr_partitions *r) { pthread_mutex_lock(&r->lock); }
void gr_partitions_unlock(struct gr_partitions *r) { pthread_mutex_unlock(&r->lock); }

int32_t gr_partitions_controller_epoch_locked(const struct gr_partitions *r)
{
    return r->controller_epoch;
}

void gr_partitions_set_controller_epoch_locked(struct gr_partitions *r, int32_t epoch)
{
    r->controller_epoch = epoch;
}

static int cmp_key(const struct gr_partition_state *s, const char *topic, int32_t p)
{
    int c = strcmp(s->topic, topic);
    if (c)
        return c;
    return (s->partition > p) - (s->partition < p);
}

static int search(const struct gr_partitions *r, const char *topic, int32_t p)
{
    int lo = 0, hi = r->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = cmp_key(r->v[mid], topic, p);
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -lo - 1;
}

struct gr_partition_state *gr_partitions_get_locked(struct gr_partitions *r, const char *topic,
                                                    int32_t partition)
{
    if (!topic)
        return NULL;
    int i = search(r, topic, partition);
    return i >= 0 ? r->v[i] : NULL;
}

struct gr_partition_state *gr_partitions_get_or_create_locked(struct gr_partitions *r,
                                                              const char *topic,
                                                              int32_t partition)
{
    int i = search(r, topic, partition);
    if (i >= 0)
        return r->v[i];
    i = -i - 1;
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 64;
        r->v = gr_realloc(r->v, sizeof(*r->v) * (size_t)r->cap);
    }
    char *name = reg_name_ref(r, i, topic);
    memmove(&r->v[i + 1], &r->v[i], sizeof(*r->v) * (size_t)(r->n - i));
    struct gr_partition_state *s = gr_calloc(1, sizeof(*s));
    s->topic = name;
    s->partition = partition;
    s->leader = -1;
    s->leader_epoch = -1;
    s->controller_epoch = -1;
    s->zk_version = -1;
    r->v[i] = s;
    r->n++;
    return s;
}

void gr_partitions_remove_locked(struct gr_partitions *r, const char *topic, int32_t partition)
{
    int i = search(r, topic, partition);
    if (i < 0)
        return;
    entry_free(r->v[i]);
    memmove(&r->v[i], &r->v[i + 1], sizeof(*r->v) * (size_t)(r->n - i - 1));
    r->n--;
}

int gr_partitions_count_locked(const struct gr_partitions *r) { return r->n; }

struct gr_partition_state *gr_partitions_at_locked(struct gr_partitions *r, int i)
{
    return (i >= 0 && i < r->n) ? r->v[i] : NULL;
}

bool gr_partitions_get(struct gr_partitions *r, const char *topic, int32_t partition,
                       struct gr_partition_state *out)
{
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&r->lock);
    struct gr_partition_state *s = gr_partitions_get_locked(r, topic, partition);
    if (s)
        gr_partition_state_copy(out, s);
    pthread_mutex_unlock(&r->lock);
    return s != NULL;
}
