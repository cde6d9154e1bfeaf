/* Feature versioning on the controller: /feature at failover and UpdateFeatures. See the header. */
#include "controller/feature_versioning.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "controller/event_manager.h"
#include "zk/kzk.h"

#define LOGGER "controller.features"

static bool same_features(const struct gr_kzk_feature *a, int na, const struct gr_kzk_feature *b, int nb) {
    if (na != nb) return false;
    for (int i = 0; i < na; i++) {
        bool found = false;
        for (int j = 0; j < nb && !found; j++)
            found = strcmp(a[i].name, b[j].name) == 0 && a[i].min_version == b[j].min_version &&
                    a[i].max_version == b[j].max_version;
        if (!found) return false;
    }
    return true;
}

int gr_ctrl_feature_versioning_setup(struct gr_kzk *kzk, bool enabled) {
    struct gr_kzk_feature_znode cur;
    int32_t version = -1;
    int rc = gr_kzk_get_feature_znode(kzk, false, &cur, &version);
    if (rc != 0 && rc != GR_KZK_ENONODE) return rc;
    bool absent = rc == GR_KZK_ENONODE;
    struct gr_kzk_feature_znode want = {.status = enabled ? 1 : 0};
    if (!absent) {
        if (cur.status == 0 && cur.n_features > 0)
            gr_warn(LOGGER, "/feature is disabled but holds %d finalized features; they are dropped", cur.n_features);
        if (enabled && cur.status == 1) { /* an enabled node keeps its finalized features */
            gr_kzk_feature_znode_release(&cur);
            return 0;
        }
        bool same = cur.status == want.status && cur.n_features == 0;
        gr_kzk_feature_znode_release(&cur);
        if (same) return 0;
    }
    gr_info(LOGGER, "%s /feature with status %s and no finalized features", absent ? "creating" : "updating",
            enabled ? "enabled" : "disabled");
    return gr_kzk_set_feature_znode(kzk, &want);
}

static void fail(struct gr_ctrl_feature_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct gr_ctrl_feature_result *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    r->error = GR_KERR_INVALID_REQUEST;
    vsnprintf(r->message, sizeof r->message, fmt, ap);
    va_end(ap);
}

static int find(const struct gr_kzk_feature *f, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(f[i].name, name) == 0) return i;
    return -1;
}

/* newFinalizedVersionRangeOrIncompatibilityError: an add or upgrade needs a supported feature whose
 * minimum is at most the requested level. On success *range is [supported min, level]. */
static bool new_range(const struct gr_kzk_feature *supported, int n_supported, const struct gr_ctrl_feature_update *u,
                      struct gr_ctrl_feature_result *r, struct gr_kzk_feature *range) {
    int s = find(supported, n_supported, u->feature);
    if (s < 0) {
        fail(r, "Could not apply finalized feature update because the provided feature is not supported.");
        return false;
    }
    if (u->max_version_level < supported[s].min_version) {
        fail(r, "Could not apply finalized feature update because the provided maxVersionLevel:%d is lower than the "
                "supported minVersion:%d.", u->max_version_level, supported[s].min_version);
        return false;
    }
    range->min_version = supported[s].min_version;
    range->max_version = u->max_version_level;
    return true;
}

/* validateFeatureUpdate. Returns 1 for "set *range", 0 for "delete", -1 for an error in *r. */
static int validate(const struct gr_kzk_feature *supported, int n_supported, const struct gr_kzk_feature *existing,
                    const struct gr_ctrl_feature_update *u, struct gr_ctrl_feature_result *r,
                    struct gr_kzk_feature *range) {
    if (!u->feature || !*u->feature) return fail(r, "Feature name can not be empty."), -1;
    if (u->upgrade_type < GR_CTRL_UPGRADE || u->upgrade_type > GR_CTRL_UNSAFE_DOWNGRADE)
        return fail(r, "Received unknown upgrade type."), -1;
    bool safe_down = u->upgrade_type == GR_CTRL_SAFE_DOWNGRADE;
    bool del = u->upgrade_type != GR_CTRL_UPGRADE && u->max_version_level < 1;
    if (del) {
        if (!existing) return fail(r, "Can not delete non-existing finalized feature."), -1;
        return 0;
    }
    if (u->max_version_level < 1)
        return fail(r, "Can not provide versionLevel: %d less than 1 without setting the SAFE downgradeType in the "
                       "request.", u->max_version_level), -1;
    if (existing) {
        int16_t max = existing->max_version;
        if (u->max_version_level == max)
            return fail(r, "Can not %s a finalized feature from existing versionLevel:%d to the same value.",
                        safe_down ? "downgrade" : "upgrade", max), -1;
        if (u->max_version_level < max && !safe_down)
            return fail(r, "Can not downgrade finalized feature from existing versionLevel:%d to provided "
                           "versionLevel:%d without setting the downgradeType to SAFE in the request.",
                        max, u->max_version_level), -1;
        if (u->upgrade_type != GR_CTRL_UPGRADE && u->max_version_level > max)
            return fail(r, "When the downgradeType is set to SAFE in the request, the provided versionLevel:%d can not "
                           "be greater than existing versionLevel:%d.", u->max_version_level, max), -1;
        if (u->max_version_level < existing->min_version)
            return fail(r, "Can not downgrade finalized feature to maxVersionLevel:%d because it's lower than the "
                           "existing minVersionLevel:%d.", u->max_version_level, existing->min_version), -1;
    }
    return new_range(supported, n_supported, u, r, range) ? 1 : -1;
}

int gr_ctrl_feature_updates_apply(struct gr_kzk *kzk, const struct gr_kzk_feature *supported, int n_supported,
                                  const struct gr_ctrl_feature_update *updates, int n, bool validate_only,
                                  struct gr_ctrl_feature_result *out) {
    struct gr_kzk_feature_znode cur;
    int rc = gr_kzk_get_feature_znode(kzk, false, &cur, NULL);
    if (rc == GR_KZK_ENONODE) {
        memset(&cur, 0, sizeof cur);
        rc = 0;
    }
    if (rc != 0) {
        for (int i = 0; i < n; i++) {
            out[i].error = GR_KERR_FEATURE_UPDATE_FAILED;
            snprintf(out[i].message, sizeof out[i].message, "cannot read /feature");
        }
        return rc;
    }
    const struct gr_kzk_feature *existing = cur.status == 1 ? cur.features : NULL;
    int n_existing = cur.status == 1 ? cur.n_features : 0;
    /* The target set starts as the finalized one; names stay borrowed from cur and updates. */
    struct gr_kzk_feature *target = gr_calloc((size_t)(n_existing + n) + 1, sizeof *target);
    int n_target = 0;
    for (int i = 0; i < n_existing; i++) target[n_target++] = existing[i];
    for (int i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        int e = updates[i].feature ? find(existing, n_existing, updates[i].feature) : -1;
        struct gr_kzk_feature range = {0};
        int v = validate(supported, n_supported, e >= 0 ? &existing[e] : NULL, &updates[i], &out[i], &range);
        if (v < 0) continue;
        int t = find(target, n_target, updates[i].feature);
        if (v == 0) {
            if (t >= 0) target[t] = target[--n_target];
        } else {
            range.name = (char *)updates[i].feature;
            if (t >= 0) target[t] = range;
            else target[n_target++] = range;
        }
    }
    if (!validate_only && !same_features(existing, n_existing, target, n_target)) {
        struct gr_kzk_feature_znode next = {.status = 1, .n_features = n_target, .features = target};
        rc = gr_kzk_set_feature_znode(kzk, &next);
        if (rc != 0)
            for (int i = 0; i < n; i++)
                if (out[i].error == GR_KERR_NONE) {
                    out[i].error = GR_KERR_FEATURE_UPDATE_FAILED;
                    snprintf(out[i].message, sizeof out[i].message, "cannot write /feature");
                }
    }
    free(target);
    gr_kzk_feature_znode_release(&cur);
    return rc;
}

/* ---- the event ---- */

struct payload {
    struct gr_ctrl_feature_update *updates; /* feature strings owned */
    int n;
    bool validate_only;
    gr_ctrl_feature_updates_done_fn done;
    void *arg;
    bool answered;
};

static void answer(struct payload *pl, int16_t top, const struct gr_ctrl_feature_result *r, int n) {
    if (!pl || pl->answered) return;
    pl->answered = true;
    pl->done(pl->arg, top, r, n);
}

static void payload_free(void *p) {
    struct payload *pl = p;
    if (!pl) return;
    answer(pl, GR_KERR_NOT_CONTROLLER, NULL, 0);
    for (int i = 0; i < pl->n; i++) free((char *)pl->updates[i].feature);
    free(pl->updates);
    free(pl);
}

static void preempt(struct gr_ctrl_event *ev) { answer(ev->payload, GR_KERR_NOT_CONTROLLER, NULL, 0); }

struct gr_ctrl_event *gr_ctrl_feature_updates_event_new(const struct gr_ctrl_feature_update *updates, int n,
                                                        bool validate_only, gr_ctrl_feature_updates_done_fn done,
                                                        void *arg) {
    struct payload *pl = gr_calloc(1, sizeof *pl);
    pl->n = n > 0 ? n : 0;
    pl->updates = gr_calloc((size_t)pl->n + 1, sizeof *pl->updates);
    for (int i = 0; i < pl->n; i++) {
        pl->updates[i] = updates[i];
        pl->updates[i].feature = gr_strdup(updates[i].feature ? updates[i].feature : "");
    }
    pl->validate_only = validate_only;
    pl->done = done;
    pl->arg = arg;
    struct gr_ctrl_event *ev = gr_ctrl_event_new(GR_EV_UPDATE_FEATURES);
    ev->payload = pl;
    ev->payload_free = payload_free;
    ev->preempt = preempt;
    return ev;
}

int gr_ctrl_feature_updates_process(struct gr_kzk *kzk, struct gr_ctrl_event *ev, bool active) {
    struct payload *pl = ev->payload;
    if (!active) {
        answer(pl, GR_KERR_NOT_CONTROLLER, NULL, 0);
        return 0;
    }
    struct gr_ctrl_feature_result *r = gr_calloc((size_t)pl->n + 1, sizeof *r);
    /* A Gregor broker, like a Kafka 2.7 one, supports no feature. */
    int rc = gr_ctrl_feature_updates_apply(kzk, NULL, 0, pl->updates, pl->n, pl->validate_only, r);
    answer(pl, GR_KERR_NONE, r, pl->n);
    free(r);
    return rc;
}
