/* The KIP-599 token buckets (broker/controller_mutation_quota.c): strict refusal once in debt,
 * permissive recording; a bucket that refilled to its burst is forgotten, so a client cycling
 * through client ids (one sensor each under a <default> client-id quota) does not grow memory,
 * NaN-rate buckets included;
 * a tiny rate's throttle time is capped, not an overflowed llround. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker/broker.h"
#include "broker/controller_mutation_quota.h"
#include "common/kerr.h"
#include "common/util.h"
#include "support/check.h"

int test_failures;

static int16_t record(struct gr_cmq *q, const char *sensor, double rate, bool strict, double permits,
                      int64_t *throttle_ms) {
    struct gr_cmq_req r = {.q = q, .sensor = gr_strdup(sensor), .rate = rate, .strict = strict};
    int16_t e = gr_cmq_record(&r, permits);
    *throttle_ms = r.throttle_ms;
    free(r.sensor);
    return e;
}

int main(void) {
    struct gr_broker b;
    memset(&b, 0, sizeof b); /* no cfg: 11 windows of 1 s */
    struct gr_cmq *q = gr_cmq_new(&b);
    int64_t t;

    /* rate 1/s: burst 11; 1000 permits put it in debt for ~1000 s; strict then refuses without
     * taking any */
    CHECK(record(q, "u\nc", 1.0, true, 1000, &t) == GR_KERR_NONE && t > 0);
    CHECK(record(q, "u\nc", 1.0, true, 1, &t) == GR_KERR_THROTTLING_QUOTA_EXCEEDED);
    CHECK(record(q, "u\nc", 1.0, false, 1, &t) == GR_KERR_NONE && t > 0); /* permissive: recorded */

    /* 2000 client ids, each one mutation at a rate that refills it within a millisecond */
    char name[64];
    for (int i = 0; i < 2000; i++) {
        snprintf(name, sizeof name, "\nclient-%d", i);
        CHECK(record(q, name, 1e9, false, 1, &t) == GR_KERR_NONE);
    }
    for (int i = 0; i < 100; i++) { /* controller_mutation_rate=NaN (a double AlterClientQuotas takes) */
        snprintf(name, sizeof name, "\nnan-%d", i);
        CHECK(record(q, name, NAN, false, 1, &t) == GR_KERR_NONE);
    }
    usleep(5000); /* past the millisecond clock's next tick: every one of them is full again */
    CHECK(record(q, "\nclient-last", 1e9, false, 1, &t) == GR_KERR_NONE);
    /* the debtor at 1/s stays, the refilled ones are gone, the newest one is there */
    CHECK(gr_cmq_num_buckets(q) <= 3);
    CHECK(record(q, "u\nc", 1.0, true, 1, &t) == GR_KERR_THROTTLING_QUOTA_EXCEEDED); /* still in debt */

    /* a tiny rate: the throttle is capped at INT32_MAX ms, not an out-of-range llround */
    CHECK(record(q, "tiny\n", 1e-300, false, 1e6, &t) == GR_KERR_NONE);
    CHECK(t == INT32_MAX);

    gr_cmq_free(q);
    if (test_failures) fprintf(stderr, "%d check(s) failed\n", test_failures);
    else printf("test_controller_mutation_quota: ok\n");
    return test_failures ? 1 : 0;
}
