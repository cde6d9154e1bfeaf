/* Per-logger log levels changed at runtime, as Kafka's Log4jController does for KIP-412
 * (DescribeConfigs / IncrementalAlterConfigs on the BROKER_LOGGER resource).
 *
 * A logger is the name gr_log() is called with (its LOGGER, e.g. "kafka.server.KafkaApis"); it
 * exists once it has been called with it at any level, whether or not the line was printed, so
 * the set grows only with the names in the code (at most GR_LOG_MAX_LOGGERS; later ones cannot be
 * set and follow root). "root" always exists: its level is gr_log_set_level's. A logger without a
 * level of its own logs at root's level (as log4j shows it: Log4jController.loggers reports root's
 * level for it). Levels are Kafka's names TRACE, DEBUG, INFO, WARN, ERROR, FATAL (upper case);
 * Gregor prints no TRACE or FATAL lines, so TRACE acts as DEBUG and FATAL as ERROR, but the name
 * set is the name described.
 *
 * Lifetime: the logger name given to gr_log() must live as long as the process (a string literal,
 * as every LOGGER is): its pointer is remembered as the logger's key.
 * Threading: any thread. gr_log_logger_level is lock-free once a logger's name pointer is known
 * (a pointer-keyed table filled under a mutex); setting levels takes the mutex. Levels are not
 * persisted: a restart starts from the configured level, as Kafka. */
#ifndef GR_LOG_CONTROLLER_H
#define GR_LOG_CONTROLLER_H

#include <stdbool.h>

#define GR_LOG_ROOT_LOGGER "root"
#define GR_LOG_MAX_LOGGERS 1024

/* For gr_log: registers logger (the first time its pointer is seen) and returns the level its
 * lines must reach (enum gr_log_level), or -1 for root's level. */
int gr_log_logger_level(const char *logger);
/* The lowest level any logger has (gr_log_enabled's answer must cover all of them), -1 none. */
int gr_log_lowest_override(void);

struct gr_log_logger_info {
    char name[256];
    char level[8]; /* the level name it logs at */
};
/* Fills out[0..max) with root then every existing logger (by name); returns the total count. */
int gr_log_loggers(struct gr_log_logger_info *out, int max);
/* Whether a logger called name exists (root included). */
bool gr_log_logger_exists(const char *name);
/* Whether level is one of Kafka's level names. */
bool gr_log_valid_level(const char *level);
/* Sets the level of an existing logger (root: the global level). Returns 0, or -1 when the
 * logger does not exist or the level is not valid. */
int gr_log_set_logger_level(const char *name, const char *level);
/* Removes a logger's own level (it follows root again). Returns 0, or -1 for root or a logger
 * that does not exist. */
int gr_log_unset_logger_level(const char *name);

#endif
