/* gregorctl's security: --command-config FILE (Kafka client properties: security.protocol,
 * ssl.*, sasl.mechanism, sasl.jaas.config or sasl.username/sasl.password) and the user-scram
 * subcommand (kafka-configs.sh --entity-type users for SCRAM credentials, through
 * AlterUserScramCredentials / DescribeUserScramCredentials). */
#ifndef GR_CMD_CTL_SECURITY_H
#define GR_CMD_CTL_SECURITY_H

struct ctl_opts;

/* Reads FILE and makes it the security of every connection gregorctl opens. 0, or -1 with a
 * message on stderr. */
int ctl_command_config(const char *path);

/* gregorctl user-scram --describe [--entity-name U]
 * gregorctl user-scram --alter --entity-name U --add-config 'SCRAM-SHA-512=[iterations=8192,password=p],...'
 * gregorctl user-scram --alter --entity-name U --delete-config 'SCRAM-SHA-512[,SCRAM-SHA-256]' */
int ctl_user_scram_main(const struct ctl_opts *o, int argc, char **argv);

#endif
