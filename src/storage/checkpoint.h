/* Checkpoint files at the log dir root, in Kafka's text formats, and meta.properties.
 *
 * Offset checkpoint (`recovery-point-offset-checkpoint`, `replication-offset-checkpoint`,
 * also `log-start-offset-checkpoint` in Kafka): ASCII, '\n'-terminated lines
 *
 *   line 1     version            "0"
 *   line 2     entry count        decimal, N
 *   line 3..   N entries          "<topic> <partition> <offset>"  (single spaces)
 *
 * leader-epoch-checkpoint (one per partition dir; written by the log, see log.h):
 *
 *   line 1     version            "0"
 *   line 2     entry count        decimal, N
 *   line 3..   N entries          "<epoch> <startOffset>"  epochs and offsets strictly increasing
 *
 * meta.properties (Java properties, '#' comment lines ignored):
 *
 *   version=0
 *   broker.id=<int32 >= 0>
 *   cluster.id=<string>            (optional in Kafka; written when known)
 *
 * Every file is written atomically: "<path>.tmp" is written and fsynced, renamed over <path>,
 * and the directory is fsynced. Readers treat contents as hostile (GR_ECORRUPT on any
 * malformed line). Functions here touch only the files named; any thread may call them, but
 * two threads must not write the same path at once (the caller serialises, e.g. one
 * checkpoint thread per broker).
 *
 * COMPATIBILITY: these are Kafka's formats; Kafka 2.7 reads what we write and vice versa. */
#ifndef GR_STORAGE_CHECKPOINT_H
#define GR_STORAGE_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#define GR_RECOVERY_POINT_CHECKPOINT "recovery-point-offset-checkpoint"
#define GR_REPLICATION_CHECKPOINT "replication-offset-checkpoint"
#define GR_LOG_START_OFFSET_CHECKPOINT "log-start-offset-checkpoint"
#define GR_CLEANER_OFFSET_CHECKPOINT "cleaner-offset-checkpoint"
#define GR_META_PROPERTIES "meta.properties"

/* Storage-specific return codes (in addition to util.h's GR_E* and negative errno). */
enum {
    GR_EMETA_BROKER_ID = -1301,  /* meta.properties holds a different broker.id */
    GR_EMETA_CLUSTER_ID = -1302, /* meta.properties holds a different cluster.id */
};

/* Writes data[0..len) to path atomically (tmp + fsync + rename + dir fsync). 0 or -errno. */
int gr_checkpoint_write_atomic(const char *path, const void *data, size_t len);

/* Reads a whole (small, < 64 MiB) file into a NUL-terminated gr_malloc'd buffer the caller
 * frees. 0, -ENOENT when missing, -errno, or -EFBIG. */
int gr_checkpoint_read_file(const char *path, char **out, size_t *len_out);

struct gr_offset_checkpoint_entry {
    char *topic; /* owned by the array (freed by gr_offset_checkpoint_free) */
    int32_t partition;
    int64_t offset;
};

/* Writes entries[0..n) in the offset checkpoint format, atomically. Topics must not contain
 * whitespace (Kafka topic names never do). 0 or -errno. */
int gr_offset_checkpoint_write(const char *path, const struct gr_offset_checkpoint_entry *entries, size_t n);

/* Reads an offset checkpoint. On success *out is a gr_malloc'd array of *n entries (free with
 * gr_offset_checkpoint_free). A missing file gives 0 with *out = NULL, *n = 0 (Kafka treats a
 * missing checkpoint as empty). Malformed contents give GR_ECORRUPT. */
int gr_offset_checkpoint_read(const char *path, struct gr_offset_checkpoint_entry **out, size_t *n);
void gr_offset_checkpoint_free(struct gr_offset_checkpoint_entry *entries, size_t n);

/* Looks up (topic, partition) in entries; returns its offset or `dflt`. */
int64_t gr_offset_checkpoint_find(const struct gr_offset_checkpoint_entry *entries, size_t n,
                                  const char *topic, int32_t partition, int64_t dflt);
/* Sorts entries by (topic, partition) for gr_offset_checkpoint_find_sorted: a broker loading N
 * logs looks each up once (binary search instead of N linear scans). */
void gr_offset_checkpoint_sort(struct gr_offset_checkpoint_entry *entries, size_t n);
int64_t gr_offset_checkpoint_find_sorted(const struct gr_offset_checkpoint_entry *entries, size_t n,
                                         const char *topic, int32_t partition, int64_t dflt);

struct gr_meta_properties {
    int32_t version;   /* 0 */
    int32_t broker_id; /* -1 when absent */
    char cluster_id[128]; /* "" when absent */
};

/* Reads <log_dir>/meta.properties. 0, -ENOENT when missing, GR_ECORRUPT when malformed. */
int gr_meta_properties_read(const char *log_dir, struct gr_meta_properties *out);
/* Writes <log_dir>/meta.properties atomically. 0 or -errno. */
int gr_meta_properties_write(const char *log_dir, const struct gr_meta_properties *mp);

/* Start-up check for one log dir: if meta.properties is missing it is written with broker_id
 * and cluster_id; if present, broker.id must equal broker_id (else GR_EMETA_BROKER_ID) and,
 * when both the file's and the given cluster_id are non-empty, they must be equal (else
 * GR_EMETA_CLUSTER_ID); a file without cluster.id gets it added. An error message naming both
 * values is logged. Returns 0, one of those, GR_ECORRUPT or -errno. */
int gr_meta_properties_check(const char *log_dir, int32_t broker_id, const char *cluster_id);

#endif
