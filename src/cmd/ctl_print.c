/* Output helpers shared by gregorctl's subcommands; see ctl_print.h. */
#include "cmd/ctl_print.h"
#include "common/kerr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ctl_print_ids(const int32_t *v, int32_t n)
{
    for (int32_t i = 0; i < n; i++)
        printf("%s%d", i ? "," : "", v[i]);
}

json_t *ctl_json_ids(const int32_t *v, int32_t n)
{
    json_t *a = json_array();
    for (int32_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer(v[i]));
    return a;
}

void ctl_print_json(json_t *j)
{
    char *s = json_dumps(j, JSON_COMPACT);
    printf("%s\n", s ? s : "null");
    free(s);
    json_decref(j);
}

int ctl_cmp_md_topic(const void *a, const void *b)
{
    const struct MetadataResponse_MetadataResponseTopic *x = a, *y = b;
    return strcmp(x->Name ? x->Name : "", y->Name ? y->Name : "");
}

int ctl_cmp_md_partition(const void *a, const void *b)
{
    const struct MetadataResponse_MetadataResponsePartition *x = a, *y = b;
    return (x->PartitionIndex > y->PartitionIndex) - (x->PartitionIndex < y->PartitionIndex);
}

void ctl_print_partition_line(const char *topic, const struct MetadataResponse_MetadataResponsePartition *pp)
{
    printf("\tTopic: %s\tPartition: %d\tLeader: ", topic, pp->PartitionIndex);
    if (pp->LeaderId >= 0)
        printf("%d", pp->LeaderId);
    else
        printf("none");
    printf("\tReplicas: ");
    ctl_print_ids(pp->ReplicaNodes, pp->ReplicaNodesCount);
    printf("\tIsr: ");
    ctl_print_ids(pp->IsrNodes, pp->IsrNodesCount);
    if (pp->OfflineReplicasCount > 0) {
        printf("\tOffline: ");
        ctl_print_ids(pp->OfflineReplicas, pp->OfflineReplicasCount);
    }
    printf("\n");
}

#define ERRORS_PKG "org.apache.kafka.common.errors."
static const struct {
    int16_t code;
    const char *cls, *msg;
} java_errors[] = {
    {GR_KERR_UNKNOWN_SERVER_ERROR, ERRORS_PKG "UnknownServerException",
     "The server experienced an unexpected error when processing the request."},
    {GR_KERR_OFFSET_OUT_OF_RANGE, ERRORS_PKG "OffsetOutOfRangeException",
     "The requested offset is not within the range of offsets maintained by the server."},
    {GR_KERR_UNKNOWN_TOPIC_OR_PARTITION, ERRORS_PKG "UnknownTopicOrPartitionException",
     "This server does not host this topic-partition."},
    {GR_KERR_LEADER_NOT_AVAILABLE, ERRORS_PKG "LeaderNotAvailableException",
     "There is no leader for this topic-partition as we are in the middle of a leadership election."},
    {GR_KERR_NOT_LEADER_OR_FOLLOWER, ERRORS_PKG "NotLeaderOrFollowerException",
     "For requests intended only for the leader, this error indicates that the broker is not the current leader. "
     "For requests intended for any replica, this error indicates that the broker is not a replica of the topic "
     "partition."},
    {GR_KERR_REQUEST_TIMED_OUT, ERRORS_PKG "TimeoutException", "The request timed out."},
    {GR_KERR_TOPIC_AUTHORIZATION_FAILED, ERRORS_PKG "TopicAuthorizationException", "Topic authorization failed."},
    {GR_KERR_CLUSTER_AUTHORIZATION_FAILED, ERRORS_PKG "ClusterAuthorizationException", "Cluster authorization failed."},
    {GR_KERR_POLICY_VIOLATION, ERRORS_PKG "PolicyViolationException",
     "Request parameters do not satisfy the configured policy."},
    {GR_KERR_KAFKA_STORAGE_ERROR, ERRORS_PKG "KafkaStorageException",
     "Disk error when trying to access log file on the disk."},
    {GR_KERR_COORDINATOR_LOAD_IN_PROGRESS, ERRORS_PKG "CoordinatorLoadInProgressException",
     "The coordinator is loading and hence can't process requests."},
    {GR_KERR_COORDINATOR_NOT_AVAILABLE, ERRORS_PKG "CoordinatorNotAvailableException",
     "The coordinator is not available."},
    {GR_KERR_NOT_COORDINATOR, ERRORS_PKG "NotCoordinatorException", "This is not the correct coordinator."},
    {GR_KERR_INVALID_PRODUCER_EPOCH, ERRORS_PKG "InvalidProducerEpochException",
     "Producer attempted to produce with an old epoch."},
    {GR_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ERRORS_PKG "TransactionalIdAuthorizationException",
     "Transactional Id authorization failed."},
    {GR_KERR_TRANSACTIONAL_ID_NOT_FOUND, ERRORS_PKG "TransactionalIdNotFoundException",
     "The transactionalId could not be found."},
};

const char *ctl_java_exception(int16_t code) {
    for (size_t i = 0; i < sizeof java_errors / sizeof java_errors[0]; i++)
        if (java_errors[i].code == code) return java_errors[i].cls;
    return gr_kerr_name(code);
}

const char *ctl_java_message(int16_t code) {
    for (size_t i = 0; i < sizeof java_errors / sizeof java_errors[0]; i++)
        if (java_errors[i].code == code) return java_errors[i].msg;
    return NULL;
}
