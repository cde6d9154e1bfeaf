/* Feature versioning (KIP-584) on the controller side, as Kafka 2.7's KafkaController does it:
 * the `/feature` znode set up at failover (maybeSetupFeatureVersioning) and the UpdateFeatures
 * request (processFeatureUpdatesWithActiveController).
 *
 *   /feature   {"version":1,"status":1,"features":{"<name>":{"min_version_level":a,"max_version_level":b}}}
 *              status 1 = enabled, 0 = disabled (format in src/zk/znode_json.c)
 *
 * Gregor speaks inter-broker protocol 2.7, so versioning is always enabled: at failover an absent
 * node is created enabled with no finalized features (Kafka 2.7's brokers support no feature, so
 * its default finalized set is empty), a disabled node is switched to enabled with its features
 * dropped, an enabled node is left alone. Unlike Kafka, the controller does not wait for its own
 * broker's finalized-feature cache to catch up (the controller never reaches into broker code);
 * brokers learn the new version through their /feature watch (src/broker/finalized_features.h).
 *
 * Threading: every function runs on the controller's event thread (they read and write ZooKeeper
 * through kzk). Nothing here keeps state between calls. */
#ifndef GR_CONTROLLER_FEATURE_VERSIONING_H
#define GR_CONTROLLER_FEATURE_VERSIONING_H

#include <stdbool.h>
#include <stdint.h>

struct gr_kzk;
struct gr_kzk_feature;

/* Kafka's enableFeatureVersioning (enabled) or disableFeatureVersioning. Writes /feature only if
 * it must change. 0, or a negative kzk error. */
int gr_ctrl_feature_versioning_setup(struct gr_kzk *kzk, bool enabled);

/* FeatureUpdate.UpgradeType (Kafka 3.9): UpdateFeatures v1's UpgradeType; v0's AllowDowngrade
 * false/true is UPGRADE/SAFE_DOWNGRADE. Any other code is UNKNOWN (refused). */
enum gr_ctrl_upgrade_type {
    GR_CTRL_UPGRADE_UNKNOWN = 0, GR_CTRL_UPGRADE = 1, GR_CTRL_SAFE_DOWNGRADE = 2, GR_CTRL_UNSAFE_DOWNGRADE = 3,
};

/* One FeatureUpdateKey of an UpdateFeatures request (the strings are borrowed). */
struct gr_ctrl_feature_update {
    const char *feature;
    int16_t max_version_level; /* < 1 with a downgrade type: delete the feature */
    int8_t upgrade_type;       /* enum gr_ctrl_upgrade_type */
};

/* The answer for one update: a Kafka error code and, when it is not NONE, Kafka's message. */
struct gr_ctrl_feature_result {
    int16_t error;
    char message[200];
};

/* Validates every update (Kafka 3.9's validateFeatureUpdate) against the finalized features in /feature and against the features
 * the features this broker supports (supported[0..n_supported); Kafka 2.7 supports none, so every
 * add or upgrade answers INVALID_REQUEST "not supported"), then writes /feature once if the
 * finalized set changed. Kafka also checks the live brokers' supported ranges; with no supported
 * feature that check can never be reached, so it is not implemented. out[i] answers updates[i]. If /feature cannot be read or written, the
 * updates that were valid answer FEATURE_UPDATE_FAILED and the function returns the kzk error.
 * validate_only (UpdateFeatures v1): answer as if applied, never write. Kafka 3.9's ZooKeeper
 * controller ignores the flag and writes; Gregor does not, since a "validate" that deletes a
 * finalized feature is not what the caller asked for. */
int gr_ctrl_feature_updates_apply(struct gr_kzk *kzk, const struct gr_kzk_feature *supported, int n_supported,
                                  const struct gr_ctrl_feature_update *updates, int n, bool validate_only,
                                  struct gr_ctrl_feature_result *out);

/* ---- the UpdateFeatures event (GR_EV_UPDATE_FEATURES) ---- */

struct gr_ctrl_event;

/* Called exactly once with one result per update (in order), or with top_error NOT_CONTROLLER
 * (and no results) when this broker is not the active controller or the event was drained. */
typedef void (*gr_ctrl_feature_updates_done_fn)(void *arg, int16_t top_error,
                                                const struct gr_ctrl_feature_result *results, int n);

/* An event carrying a copy of updates[0..n). */
struct gr_ctrl_event *gr_ctrl_feature_updates_event_new(const struct gr_ctrl_feature_update *updates, int n,
                                                        bool validate_only, gr_ctrl_feature_updates_done_fn done,
                                                        void *arg);
/* processFeatureUpdates: NOT_CONTROLLER when !active, else validate and write. Returns the kzk
 * error of a failed /feature write (the controller's usual ZooKeeper-failure path), else 0. */
int gr_ctrl_feature_updates_process(struct gr_kzk *kzk, struct gr_ctrl_event *ev, bool active);

#endif
