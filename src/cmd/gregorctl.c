/* gregorctl: Gregor's admin tool.
 *
 *   gregorctl [--zookeeper HOST:PORT[/chroot]] [--bootstrap-server HOST:PORT[,HOST:PORT...]]
 *             [--timeout-ms N] SUBCOMMAND [ARGS...]
 *
 * --bootstrap-server is a comma-separated list, as for Kafka's tools: the first address that
 * accepts a connection is used; a malformed address is an error naming it (exit 1).
 * Global options may also follow the subcommand name. Subcommands are listed in the table below;
 * each is implemented in src/cmd/ctl_<name>.c (see ctl.h). Exit codes: 0 ok, 1 failure,
 * 2 usage error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/ctl.h"
#include "cmd/ctl_kafka.h"
#include "cmd/ctl_reassign.h"
#include "cmd/ctl_security.h"
#include "common/log.h"

struct subcommand {
    const char *name;
    int (*main)(const struct ctl_opts *o, int argc, char **argv);
    const char *help;
};

static const struct subcommand subcommands[] = {
    {"reassign", ctl_reassign_main,
     "reassign generate|execute|verify|cancel|list [--topics-to-move-json-file F --broker-list 1,2] "
     "[--reassignment-json-file F] [--additional]  (needs --bootstrap-server)"},
    {"elect-leaders", ctl_elect_main,
     "elect-leaders --election-type preferred|unclean (--all-topic-partitions | --topic T --partition P | "
     "--path-to-json-file F)  (needs --bootstrap-server)"},
    {"acls", ctl_acls_main,
     "acls add|remove|list [--topic T] [--group G] [--cluster] [--transactional-id X] [--resource-pattern-type "
     "literal|prefixed|any|match]\n    [--allow-principal P] [--deny-principal P] [--allow-host H] [--deny-host H] "
     "[--operation OP] [--producer] [--consumer] [--principal P]  (kafka-acls.sh; needs --bootstrap-server)"},
    {"consumer-groups", ctl_groups_main,
     "consumer-groups list | describe (--group G|--all-groups) [--members|--state] | reset-offsets --group G\n"
     "    (--topic T[:P,P]|--all-topics) (--to-earliest|--to-latest|--to-offset N|--to-datetime DT|--shift-by N)\n"
     "    [--dry-run|--execute] | delete --group G | delete-offsets --group G --topic T[:P]  (needs "
     "--bootstrap-server;\n"
     "    kafka-consumer-groups.sh's output)"},
    {"log-dirs", ctl_logdirs_main,
     "log-dirs describe [--broker-list 1,2] [--topic-list t1,t2]  (needs --bootstrap-server; kafka-log-dirs.sh's "
     "output)"},
    {"configs", ctl_configs_main,
     "configs --describe|--alter --entity-type topics|brokers|clients|users [--entity-name N|--entity-default] "
     "[--all]\n    [--add-config k=v,k2=[a,b]] [--delete-config k,k2]   as kafka-configs.sh (needs --bootstrap-server)"},
    {"delete-records", ctl_delete_records_main,
     "delete-records --offset-json-file F   F: {\"partitions\":[{\"topic\":T,\"partition\":P,\"offset\":O}]} "
     "(O = -1: the high watermark; needs --bootstrap-server)"},
    {"transactions", ctl_transactions_main,
     "transactions list [--duration-filter MS] | describe --transactional-id ID | describe-producers --topic T\n"
     "    --partition P [--broker-id B] | abort --topic T --partition P (--start-offset O | --producer-id I\n"
     "    --producer-epoch E --coordinator-epoch C) | find-hanging (--broker-id B | --topic T [--partition P])\n"
     "    [--max-transaction-timeout MINUTES]  (kafka-transactions.sh's output; needs --bootstrap-server)"},
    {"cluster", ctl_cluster_main, "cluster [--json]   cluster id, controller, live brokers (needs --zookeeper)"},
    {"topics", ctl_topics_main,
     "topics create|list|describe|delete|alter [--topic T] [--partitions N] [--replication-factor R] "
     "[--no-wait] [--under-replicated-partitions|--unavailable-partitions|--under-min-isr-partitions|"
     "--at-min-isr-partitions] [--json]  (needs --bootstrap-server;\n"
     "    create waits until the new topic's leaders are visible, and describe --topic while a topic is being\n"
     "    created, within --timeout-ms; --no-wait: create returns once the controller accepted it)"},
    {"user-scram", ctl_user_scram_main,
     "user-scram --describe [--entity-name U] | --alter --entity-name U (--add-config "
     "'SCRAM-SHA-512=[iterations=N,password=P]' | --delete-config SCRAM-SHA-512)  (needs --bootstrap-server)"},
};

static const char *command_config; /* --command-config FILE */

static void usage(FILE *f) {
    fprintf(f, "usage: gregorctl [--zookeeper HOST:PORT[/chroot]] [--bootstrap-server HOST:PORT[,HOST:PORT...]] "
               "[--timeout-ms N] SUBCOMMAND [ARGS...]\n\n"
               "  --bootstrap-server  brokers to bootstrap from, comma-separated; each is tried in turn until one\n"
               "                      accepts a connection\n"
               "  --timeout-ms        bound for connecting, for each request and for waits (default 10000)\n"
               "  --command-config    Kafka client properties for the connections: security.protocol, ssl.*,\n"
               "                      sasl.mechanism, sasl.jaas.config (docs/SECURITY.md)\n"
               "\nsubcommands:\n");
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++) fprintf(f, "  %s\n", subcommands[i].help);
}

/* Consumes a global option at argv[*i] if there is one. Returns 1 if consumed, 0 if not an
 * option of ours, -1 on a missing value. */
static int global_option(struct ctl_opts *o, int argc, char **argv, int *i) {
    const char *a = argv[*i];
    const char **slot = NULL;
    if (strcmp(a, "--zookeeper") == 0) slot = &o->zookeeper;
    else if (strcmp(a, "--bootstrap-server") == 0) slot = &o->bootstrap_server;
    else if (strcmp(a, "--command-config") == 0) slot = &command_config;
    else if (strcmp(a, "--timeout-ms") != 0) return 0;
    if (*i + 1 >= argc) return -1;
    const char *v = argv[++*i];
    if (slot) *slot = v;
    else o->timeout_ms = atoi(v);
    return 1;
}

int main(int argc, char **argv) {
    struct ctl_opts o = {.timeout_ms = 10000};
    gr_log_set_level(GR_LOG_WARN);
    /* Split argv into global options and the subcommand's own arguments. */
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    int nrest = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            free(rest);
            return 0;
        }
        int g = global_option(&o, argc, argv, &i);
        if (g < 0) {
            fprintf(stderr, "gregorctl: %s needs a value\n", argv[i]);
            free(rest);
            return 2;
        }
        if (g == 0) rest[nrest++] = argv[i];
    }
    if (command_config && ctl_command_config(command_config) != 0) {
        free(rest);
        return 1;
    }
    if (nrest == 0) {
        usage(stderr);
        free(rest);
        return 2;
    }
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++) {
        if (strcmp(rest[0], subcommands[i].name) == 0) {
            int rc = subcommands[i].main(&o, nrest, rest);
            free(rest);
            return rc;
        }
    }
    fprintf(stderr, "gregorctl: unknown subcommand '%s'\n", rest[0]);
    usage(stderr);
    free(rest);
    return 2;
}
