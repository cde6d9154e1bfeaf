/* The broker's view of the cluster's finalized features (KIP-584): Kafka 2.7's
 * FinalizedFeatureCache fed by its FinalizedFeatureChangeListener.
 *
 * A thread of its own reads /feature (an exists-watch armed each time, so creation, change and
 * deletion wake it) and keeps the finalized features and their epoch (the znode's data version).
 * An absent node, a disabled one, or one that cannot be parsed empties the cache (epoch -1), as
 * Kafka's cache does. ApiVersions v3 answers from it (FinalizedFeaturesEpoch, FinalizedFeatures);
 * the supported-feature list of a Gregor broker is empty, as a Kafka 2.7 broker's is.
 *
 * Threading and lifetime: gr_finalized_features_start registers a node handler in `watches` and
 * starts the thread; the watch handler only wakes it (ZooKeeper reads never run on the ZooKeeper
 * callback thread). gr_finalized_features_get may be called from any thread. kzk and watches are
 * borrowed and must outlive the cache; gr_finalized_features_stop unregisters, joins and frees. */
#ifndef GR_BROKER_FINALIZED_FEATURES_H
#define GR_BROKER_FINALIZED_FEATURES_H

#include <stdint.h>

struct gr_kzk;
struct gr_zk_watches;
struct gr_arena;
struct gr_finalized_features;

/* One finalized feature as ApiVersions reports it. */
struct gr_finalized_feature {
    char *name;
    int16_t min_version_level, max_version_level;
};

struct gr_finalized_features *gr_finalized_features_start(struct gr_kzk *kzk, struct gr_zk_watches *watches);
/* The same without a thread (tests): the owner calls gr_finalized_features_refresh. */
struct gr_finalized_features *gr_finalized_features_new(struct gr_kzk *kzk, struct gr_zk_watches *watches);
void gr_finalized_features_stop(struct gr_finalized_features *ff);

/* Copies the cache into arena memory: *epoch (-1 when empty), *n and *out (allocated in arena).
 * ff may be NULL (nothing known yet: epoch -1, no features). */
void gr_finalized_features_get(struct gr_finalized_features *ff, struct gr_arena *arena, int64_t *epoch, int *n,
                               struct gr_finalized_feature **out);

/* Reads /feature now, re-arming the watch (the thread does this on every wake-up). */
void gr_finalized_features_refresh(struct gr_finalized_features *ff);

#endif
