/* Output helpers shared by gregorctl's subcommands; see ctl_print.h. */
#include "cmd/ctl_print.h"

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
