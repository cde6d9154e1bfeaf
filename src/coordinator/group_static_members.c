/* Static group membership (KIP-345) as Kafka 2.7's GroupMetadata keeps it: a member that joins
 * with a group.instance.id is "static"; the group maps each instance id to the member id that
 * currently holds it. Here the map is the members list itself (a member's instance_id), so it
 * can never disagree with the members.
 *
 * The rebalance decisions (a known instance rejoining with an unknown member id) are
 * group_coordinator.c's; this file only holds the lookups, the fencing rule and Kafka's
 * replaceGroupInstance.
 *
 * Locking: every function runs under gc->mu (group_internal.h rule 1). */
#include <stdlib.h>

#include "common/kerr.h"
#include "common/log.h"
#include "coordinator/group_internal.h"

struct member *gc_static_member(struct group *g, const char *instance_id) {
    if (!instance_id) return NULL;
    for (struct member *m = g->members; m; m = m->next)
        if (streq(m->instance_id, instance_id)) return m;
    return NULL;
}

bool gc_static_fenced(struct group *g, const char *member_id, const char *instance_id, const char *op) {
    struct member *m = gc_static_member(g, instance_id);
    if (!m || streq(m->id, member_id ? member_id : "")) return false;
    gr_error(LOGGER, "given member.id %s is identified as a known static member %s, but not matching the expected "
                     "member.id %s during %s, will respond with instance fenced error",
             member_id ? member_id : "", instance_id, m->id, op);
    return true;
}

void gc_static_replace(struct group *g, struct member *m, const char *new_id, struct dq *q) {
    /* fence a duplicate still waiting on the old id */
    if (m->join_cb) gc_invoke_join_error(q, g, m, m->id, GR_KERR_FENCED_INSTANCE_ID);
    if (m->sync_cb) {
        gc_push_sync(q, m->sync_cb, m->sync_ctx, NULL, NULL, GR_KERR_FENCED_INSTANCE_ID);
        m->sync_cb = NULL;
        m->sync_ctx = NULL;
    }
    bool leader = streq(g->leader_id, m->id);
    free(m->id);
    m->id = gr_strdup(new_id);
    if (leader) gc_set_leader(g, new_id);
}
