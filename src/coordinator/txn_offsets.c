/* Pending transactional offsets: see txn_offsets.h. */
#include "coordinator/txn_offsets.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct gr_txn_offset *head, **tail = &head;

static void entry_free(struct gr_txn_offset *o) {
    free(o->group);
    free(o->topic);
    free(o->metadata);
    free(o);
}

static void fix_tail(void) {
    tail = &head;
    while (*tail) tail = &(*tail)->next;
}

void gr_txn_offsets_add(int64_t pid, int32_t op, const char *group, const char *topic, int32_t partition,
                        int64_t offset, int32_t leader_epoch, const char *metadata, int64_t append_offset) {
    struct gr_txn_offset *o = gr_calloc(1, sizeof *o);
    o->producer_id = pid;
    o->offsets_partition = op;
    o->group = gr_strdup(group);
    o->topic = gr_strdup(topic);
    o->metadata = gr_strdup(metadata ? metadata : "");
    o->partition = partition;
    o->leader_epoch = leader_epoch;
    o->offset = offset;
    o->append_offset = append_offset;
    pthread_mutex_lock(&mu);
    for (struct gr_txn_offset **pp = &head; *pp; pp = &(*pp)->next) {
        struct gr_txn_offset *d = *pp;
        if (d->producer_id == pid && d->partition == partition && strcmp(d->group, group) == 0 &&
            strcmp(d->topic, topic) == 0) {
            *pp = d->next;
            entry_free(d);
            break;
        }
    }
    fix_tail();
    *tail = o;
    tail = &o->next;
    pthread_mutex_unlock(&mu);
}

struct gr_txn_offset *gr_txn_offsets_take(int64_t pid, int32_t op) {
    struct gr_txn_offset *out = NULL, **ot = &out;
    pthread_mutex_lock(&mu);
    for (struct gr_txn_offset **pp = &head; *pp;) {
        struct gr_txn_offset *o = *pp;
        if (o->producer_id == pid && o->offsets_partition == op) {
            *pp = o->next;
            o->next = NULL;
            *ot = o;
            ot = &o->next;
        } else {
            pp = &o->next;
        }
    }
    fix_tail();
    pthread_mutex_unlock(&mu);
    return out;
}

void gr_txn_offsets_free(struct gr_txn_offset *l) {
    while (l) {
        struct gr_txn_offset *n = l->next;
        entry_free(l);
        l = n;
    }
}

bool gr_txn_offsets_pending_for(const char *group, const char *topic, int32_t partition) {
    bool found = false;
    pthread_mutex_lock(&mu);
    for (struct gr_txn_offset *o = head; o && !found; o = o->next)
        found = o->partition == partition && strcmp(o->group, group) == 0 && strcmp(o->topic, topic) == 0;
    pthread_mutex_unlock(&mu);
    return found;
}

int gr_txn_offsets_count(void) {
    int n = 0;
    pthread_mutex_lock(&mu);
    for (struct gr_txn_offset *o = head; o; o = o->next) n++;
    pthread_mutex_unlock(&mu);
    return n;
}

void gr_txn_offsets_drop_partition(int32_t op) {
    struct gr_txn_offset *gone = NULL;
    pthread_mutex_lock(&mu);
    for (struct gr_txn_offset **pp = &head; *pp;) {
        struct gr_txn_offset *o = *pp;
        if (o->offsets_partition == op) {
            *pp = o->next;
            o->next = gone;
            gone = o;
        } else {
            pp = &o->next;
        }
    }
    fix_tail();
    pthread_mutex_unlock(&mu);
    gr_txn_offsets_free(gone);
}
