/* Client quotas and replication throttle rates: see quota_manager.h. */
#include "broker/quota_manager.h"

#include <stdlib.h>

#include "common/util.h"

struct gr_quota_manager {
    struct gr_broker *b;
};

struct gr_quota_manager *gr_quota_manager_new(struct gr_broker *b)
{
    struct gr_quota_manager *q = gr_calloc(1, sizeof *q);
    q->b = b;
    return q;
}

void gr_quota_manager_free(struct gr_quota_manager *q) { free(q); }
void gr_quota_manager_reload(struct gr_quota_manager *q) { (void)q; }
void gr_quota_manager_reload_replication(struct gr_quota_manager *q) { (void)q; }

int32_t gr_quota_record(struct gr_quota_manager *q, enum gr_quota_type type, const char *user,
                        const char *client_id, double value)
{
    (void)q, (void)type, (void)user, (void)client_id, (void)value;
    return 0;
}

double gr_quota_bound(struct gr_quota_manager *q, enum gr_quota_type type, const char *user, const char *client_id)
{
    (void)q, (void)type, (void)user, (void)client_id;
    return -1;
}

int64_t gr_quota_replication_rate(struct gr_quota_manager *q, bool leader)
{
    (void)q, (void)leader;
    return INT64_MAX;
}
