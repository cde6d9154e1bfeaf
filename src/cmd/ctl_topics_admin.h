/* gregorctl topics delete / alter / describe --under-replicated-partitions|--unavailable-partitions|
 * --under-min-isr-partitions|--at-min-isr-partitions
 * (ctl_topics_admin.c). ctl_topics.c hands these forms over; same contract as the other ctl_*_main
 * functions (cmd/ctl.h): argv[0] is "topics", returns the exit code. */
#ifndef GR_CMD_CTL_TOPICS_ADMIN_H
#define GR_CMD_CTL_TOPICS_ADMIN_H

#include <stdbool.h>

struct ctl_opts;

/* True when argv (argv[0] = "topics") is one of the forms handled here. */
bool ctl_topics_admin_handles(int argc, char **argv);
int ctl_topics_admin_main(const struct ctl_opts *o, int argc, char **argv);

/* min.insync.replicas of topics[0..n) into out[] (ctl_min_isr.c): DescribeConfigs when the broker
 * serves it, else ZooKeeper (--zookeeper). -1 where unknown. 0, 1 (error printed), 2 (usage). */
#include <stdint.h>
struct ctl_kafka;
int ctl_topics_min_isr(struct ctl_kafka *k, const struct ctl_opts *o, const char *const *topics, int n, int32_t *out);

#endif
