/* Replica assignment for new topics and new partitions: Kafka 2.7's AdminUtils algorithms
 * (rack-unaware and rack-aware) and the checks AdminZkClient applies to explicit assignments.
 *
 * Pure functions: no I/O, no locks, callable from any thread. Results are Kafka error codes
 * (int16_t, GR_KERR_*), with a human-readable message written into err when err != NULL.
 *
 * Output layout: `out` holds n_partitions * rf broker ids, partition i's replicas at
 * out[i * rf .. i * rf + rf), the first being the preferred leader. The partition id of entry i
 * is start_partition_id + i (start_partition_id < 0 counts as 0). */
#ifndef GR_BROKER_ASSIGNMENT_H
#define GR_BROKER_ASSIGNMENT_H

#include <stddef.h>
#include <stdint.h>

/* A broker as the assignment sees it. rack NULL = no rack. */
struct gr_broker_meta {
    int32_t id;
    const char *rack;
};

/* Kafka's assignReplicasToBrokers. brokers may come in any order (sorted by id here, as
 * AdminZkClient.getBrokerMetadatas does). fixed_start_index >= 0 fixes both the start index and
 * the initial replica shift (tests, adding partitions); < 0 draws both at random.
 *   - n_partitions <= 0            -> INVALID_PARTITIONS
 *   - rf <= 0 or rf > n_brokers    -> INVALID_REPLICATION_FACTOR
 *   - some but not all have a rack -> UNKNOWN_SERVER_ERROR (Kafka throws AdminOperationException
 *                                     "Not all brokers have rack information ...", which is no
 *                                     ApiException and so reaches clients as UNKNOWN_SERVER_ERROR;
 *                                     callers in Kafka's "Safe" mode drop the racks instead)
 * Every broker has a rack -> rack-aware algorithm; none -> rack-unaware. */
int16_t gr_assign_replicas(const struct gr_broker_meta *brokers, int n_brokers, int n_partitions,
                           int rf, int fixed_start_index, int start_partition_id, int32_t *out,
                           char *err, size_t errlen);

/* The rack-unaware algorithm on ids already sorted ascending (no argument checks beyond
 * 0 < rf <= n). Exposed for tests. */
void gr_assign_rack_unaware(const int32_t *sorted_ids, int n, int n_partitions, int rf,
                            int start_index, int shift, int start_partition_id, int32_t *out);

/* Kafka's getRackAlternatedBrokerList: racks sorted by name, brokers of each rack sorted by id,
 * then one broker from each rack in turn. out has n entries. Exposed for tests. */
void gr_assign_rack_alternated_list(const struct gr_broker_meta *brokers, int n, int32_t *out);

/* Validation of an explicit assignment for a NEW topic (AdminZkClient.validateTopicCreate):
 * partition_ids[i] with replica list replicas[i] (n_replicas[i] entries):
 *   all partitions must have the same number of replicas (> 0),
 *   no duplicate broker within a partition,
 *   partition ids must be exactly 0..n-1 (no duplicates).
 * Returns NONE or INVALID_REPLICA_ASSIGNMENT. Unknown brokers are NOT an error (Kafka). */
int16_t gr_assign_validate_new_topic(int n, const int32_t *partition_ids,
                                     const int32_t *const *replicas, const int *n_replicas,
                                     char *err, size_t errlen);

/* Validation of explicit assignments for ADDED partitions (AdminZkClient
 * .validateReplicaAssignment): non-empty, no duplicates, every broker in live_ids (else
 * BROKER_NOT_AVAILABLE), every partition with expected_rf replicas (else
 * INVALID_REPLICA_ASSIGNMENT). */
int16_t gr_assign_validate_added(int n, const int32_t *const *replicas, const int *n_replicas,
                                 int expected_rf, const int32_t *live_ids, int n_live, char *err,
                                 size_t errlen);

/* Start index Kafka uses when adding partitions: the index (in ascending id order) of the first
 * broker whose id >= first_replica_of_p0, or 0 if none. */
int gr_assign_add_partitions_start_index(const struct gr_broker_meta *brokers, int n,
                                         int32_t first_replica_of_p0);

#endif
