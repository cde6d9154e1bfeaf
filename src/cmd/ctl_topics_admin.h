/* gregorctl topics delete / alter / describe --under-replicated-partitions|--unavailable-partitions
 * (ctl_topics_admin.c). ctl_topics.c hands these forms over; same contract as the other ctl_*_main
 * functions (cmd/ctl.h): argv[0] is "topics", returns the exit code. */
#ifndef GR_CMD_CTL_TOPICS_ADMIN_H
#define GR_CMD_CTL_TOPICS_ADMIN_H

#include <stdbool.h>

struct ctl_opts;

/* True when argv (argv[0] = "topics") is one of the forms handled here. */
bool ctl_topics_admin_handles(int argc, char **argv);
int ctl_topics_admin_main(const struct ctl_opts *o, int argc, char **argv);

#endif
