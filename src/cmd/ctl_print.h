/* Output helpers shared by gregorctl's subcommands (text in kafka-*.sh's formats, compact JSON).
 * Single-threaded (the CLI's main thread). */
#ifndef GR_CMD_CTL_PRINT_H
#define GR_CMD_CTL_PRINT_H

#include <jansson.h>
#include <stdint.h>

#include "protocol/messages.h"

/* Prints v[0..n) as "1,2,3" (no newline) on stdout. */
void ctl_print_ids(const int32_t *v, int32_t n);
/* A new JSON array of v[0..n). */
json_t *ctl_json_ids(const int32_t *v, int32_t n);
/* Prints j compactly and a newline on stdout, then releases j. */
void ctl_print_json(json_t *j);
/* qsort comparators: Metadata topics by name (NULL as ""), partitions by index. */
int ctl_cmp_md_topic(const void *a, const void *b);
int ctl_cmp_md_partition(const void *a, const void *b);
/* kafka-topics' partition line on stdout:
 *   <TAB>Topic: t<TAB>Partition: 0<TAB>Leader: 1|none<TAB>Replicas: 1,2<TAB>Isr: 1,2[<TAB>Offline: 3] */
void ctl_print_partition_line(const char *topic, const struct MetadataResponse_MetadataResponsePartition *pp);
/* The Java exception Kafka 2.7's clients raise for an error code (Errors.java), for the tools
 * that print it: the class name ("org.apache.kafka.common.errors.OffsetOutOfRangeException") and
 * its default message. Codes outside the table give the error's name and NULL. */
const char *ctl_java_exception(int16_t code);
const char *ctl_java_message(int16_t code);

#endif
