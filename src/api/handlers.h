/* The request handlers of src/api/handle_*.c, one per line of the API table (apis.c). Private
 * to src/api (and to tests that call a handler directly); the contract is gr_api_handler_fn in
 * apis.h. */
#ifndef GR_API_HANDLERS_H
#define GR_API_HANDLERS_H

#include "api/apis.h"

#define GR_API_HANDLER(name) \
    void name(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr, void *body)

/* handle_api_versions.c, handle_metadata.c */
GR_API_HANDLER(gr_handle_api_versions);
GR_API_HANDLER(gr_handle_metadata);
/* handle_describe_cluster.c */
GR_API_HANDLER(gr_handle_describe_cluster);
/* handle_control.c: requests from the controller */
GR_API_HANDLER(gr_handle_leader_and_isr);
GR_API_HANDLER(gr_handle_stop_replica);
GR_API_HANDLER(gr_handle_update_metadata);
/* handle_produce.c, handle_fetch.c, handle_list_offsets.c, handle_offsets_for_leader_epoch.c */
GR_API_HANDLER(gr_handle_produce);
GR_API_HANDLER(gr_handle_fetch);
GR_API_HANDLER(gr_handle_list_offsets);
GR_API_HANDLER(gr_handle_offsets_for_leader_epoch);
/* handle_delete_records.c */
GR_API_HANDLER(gr_handle_delete_records);
/* handle_groups.c */
GR_API_HANDLER(gr_handle_find_coordinator);
GR_API_HANDLER(gr_handle_join_group);
GR_API_HANDLER(gr_handle_heartbeat);
GR_API_HANDLER(gr_handle_leave_group);
GR_API_HANDLER(gr_handle_sync_group);
GR_API_HANDLER(gr_handle_offset_commit);
GR_API_HANDLER(gr_handle_offset_fetch);
GR_API_HANDLER(gr_handle_describe_groups);
GR_API_HANDLER(gr_handle_list_groups);
GR_API_HANDLER(gr_handle_delete_groups);
GR_API_HANDLER(gr_handle_offset_delete);
GR_API_HANDLER(gr_handle_describe_log_dirs);
/* handle_create_topics.c, handle_delete_topics.c */
GR_API_HANDLER(gr_handle_create_topics);
GR_API_HANDLER(gr_handle_create_partitions);
GR_API_HANDLER(gr_handle_delete_topics);
/* handle_init_producer_id.c: uses b->producer_id_manager */
GR_API_HANDLER(gr_handle_init_producer_id);
GR_API_HANDLER(gr_handle_add_partitions_to_txn);
GR_API_HANDLER(gr_handle_add_offsets_to_txn);
GR_API_HANDLER(gr_handle_end_txn);
GR_API_HANDLER(gr_handle_write_txn_markers);
GR_API_HANDLER(gr_handle_txn_offset_commit);
/* handle_txn.c: InitProducerId with a transactional id */
struct InitProducerIdRequest;
void gr_txn_handle_init_producer_id(struct gr_broker *b, struct gr_api_req *req, const struct InitProducerIdRequest *r);
/* requests to the controller, through controller/requests.h: handle_controlled_shutdown.c,
 * handle_alter_partition.c, handle_elect_leaders.c, handle_reassignments.c */
GR_API_HANDLER(gr_handle_controlled_shutdown);
GR_API_HANDLER(gr_handle_alter_partition);
GR_API_HANDLER(gr_handle_elect_leaders);
GR_API_HANDLER(gr_handle_update_features);
GR_API_HANDLER(gr_handle_alter_partition_reassignments);
GR_API_HANDLER(gr_handle_list_partition_reassignments);

/* handle_delegation_tokens.c: token authentication disabled, as Kafka 2.7 answers it */
GR_API_HANDLER(gr_handle_create_delegation_token);
GR_API_HANDLER(gr_handle_renew_delegation_token);
GR_API_HANDLER(gr_handle_expire_delegation_token);
GR_API_HANDLER(gr_handle_describe_delegation_token);
/* handle_alter_replica_log_dirs.c */
GR_API_HANDLER(gr_handle_alter_replica_log_dirs);

/* handle_acls.c */
GR_API_HANDLER(gr_handle_describe_acls);
GR_API_HANDLER(gr_handle_create_acls);
GR_API_HANDLER(gr_handle_delete_acls);
/* handle_configs.c */
GR_API_HANDLER(gr_handle_describe_configs);
GR_API_HANDLER(gr_handle_alter_configs);
GR_API_HANDLER(gr_handle_incremental_alter_configs);
/* The configs of a topic CreateTopics v5 created (or validated) with overrides names/values:
 * every topic config with its value and source, into r->Configs (request arena). */
void gr_configs_fill_created_topic(struct gr_broker *b, struct gr_api_req *req, int n, const char *const *names,
                                   const char *const *values, struct CreateTopicsResponse_CreatableTopicResult *r);
/* handle_client_quotas.c */
GR_API_HANDLER(gr_handle_describe_client_quotas);
GR_API_HANDLER(gr_handle_alter_client_quotas);

/* KIP-664 (handle_describe_producers.c, handle_describe_transactions.c, handle_list_transactions.c) */
GR_API_HANDLER(gr_handle_describe_producers);
GR_API_HANDLER(gr_handle_describe_transactions);
GR_API_HANDLER(gr_handle_list_transactions);

/* DeleteTopics requests of broker b still waiting for their topics to disappear are answered
 * (REQUEST_TIMED_OUT for topics still cached). Call at shut-down after the network server
 * stopped, before b is freed. */
void gr_delete_topics_abort_waits(struct gr_broker *b);

#endif
