/* inter.broker.protocol.version: see metadata_version.h. */
#include "common/metadata_version.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int num(const char **p, long *out) {
    char *e = NULL;
    if (**p < '0' || **p > '9') return -EINVAL;
    *out = strtol(*p, &e, 10);
    if (*out > 99) return -EINVAL;
    *p = e;
    return 0;
}

int gr_ibp_parse(const char *s, int32_t *out) {
    if (!s) return -EINVAL;
    const char *p = s;
    long major, minor, patch, iv = 99;
    if (num(&p, &major) || *p++ != '.' || num(&p, &minor)) return -EINVAL;
    if (*p == '.' && (p++, num(&p, &patch))) return -EINVAL;
    if (strncmp(p, "-IV", 3) == 0) {
        p += 3;
        if (num(&p, &iv)) return -EINVAL;
    }
    if (*p) return -EINVAL;
    if (major == 0) { /* 0.10.2 and friends: below anything Gregor distinguishes */
        *out = GR_IBP(0, (int)minor, 0);
        return 0;
    }
    *out = GR_IBP((int)major, (int)minor, (int)iv);
    return 0;
}

void gr_ibp_features(const char *ibp, struct gr_ibp_features *out) {
    int32_t v = GR_IBP_LATEST;
    if (gr_ibp_parse(ibp, &v) != 0) v = GR_IBP_LATEST;
    out->topic_ids = v >= GR_IBP(2, 8, 0);
    bool v34 = v >= GR_IBP(3, 4, 0), v28 = v >= GR_IBP(2, 8, 1);
    out->leader_and_isr_version = v34 ? 7 : v28 ? 5 : 4;
    out->update_metadata_version = v34 ? 8 : v28 ? 7 : 6;
    out->stop_replica_version = v34 ? 4 : 3;
    out->alter_partition_version = v >= GR_IBP(3, 5, 1)   ? 3
                                   : v >= GR_IBP(3, 3, 3) ? 2
                                   : v >= GR_IBP(3, 2, 0) ? 1
                                                          : 0;
}
