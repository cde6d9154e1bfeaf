/* gregorctl reassign (ctl_reassign.c) and elect-leaders (ctl_elect.c): kafka-reassign-partitions
 * and kafka-leader-election over the Kafka protocol (--bootstrap-server). Same contract as the
 * other ctl_*_main functions in cmd/ctl.h (argv[0] is the subcommand name; exit 0 ok, 1 failure,
 * 2 usage). Single-threaded (the CLI's main thread). */
#ifndef GR_CMD_CTL_REASSIGN_H
#define GR_CMD_CTL_REASSIGN_H

#include "protocol/arena.h"

struct ctl_opts;
struct ctl_kafka;

int ctl_reassign_main(const struct ctl_opts *o, int argc, char **argv);
int ctl_elect_main(const struct ctl_opts *o, int argc, char **argv);

#endif
