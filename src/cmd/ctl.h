/* gregorctl's subcommands: each lives in its own src/cmd/ctl_<name>.c and is listed in the table
 * in gregorctl.c. A subcommand gets the global options and its own arguments (argv[0] is the
 * subcommand name) and returns the process exit code (0 ok, 1 failure, 2 usage error). */
#ifndef GR_CMD_CTL_H
#define GR_CMD_CTL_H

#include <stdbool.h>

struct ctl_opts {
    const char *zookeeper;        /* --zookeeper HOST:PORT[/chroot], or NULL */
    const char *bootstrap_server; /* --bootstrap-server HOST:PORT (Kafka protocol), or NULL */
    int timeout_ms;               /* --timeout-ms (default 10000) */
};

/* gregorctl cluster [--json]: cluster id, controller and epoch, live brokers (ZooKeeper). */
int ctl_cluster_main(const struct ctl_opts *o, int argc, char **argv);
/* gregorctl consumer-groups list|describe|reset-offsets|delete|delete-offsets (ctl_groups.c). */
int ctl_groups_main(const struct ctl_opts *o, int argc, char **argv);
/* gregorctl log-dirs describe (ctl_logdirs.c). */
int ctl_logdirs_main(const struct ctl_opts *o, int argc, char **argv);

/* gregorctl acls add|remove|list (kafka-acls.sh; ctl_acls.c; needs --bootstrap-server). */
int ctl_acls_main(const struct ctl_opts *o, int argc, char **argv);

/* gregorctl configs --describe|--alter ... (kafka-configs.sh; ctl_configs.c). */
int ctl_configs_main(const struct ctl_opts *o, int argc, char **argv);

/* gregorctl delete-records --offset-json-file F (ctl_delete_records.c). */
int ctl_delete_records_main(const struct ctl_opts *o, int argc, char **argv);

/* gregorctl transactions list|describe|describe-producers|abort|find-hanging
 * (kafka-transactions.sh, KIP-664; ctl_transactions.c; needs --bootstrap-server). */
int ctl_transactions_main(const struct ctl_opts *o, int argc, char **argv);

#endif
