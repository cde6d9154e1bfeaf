/* partition.metadata: see partition_metadata.h. */
#include "storage/partition_metadata.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"
#include "storage/checkpoint.h"

#define MAX_BYTES 512 /* a valid file is ~45 bytes */

/* One line "<key>:<white space><value>" from *p (advanced past its '\n'): value copied into val. */
static int read_line(const char **p, const char *key, char *val, size_t cap) {
    const char *s = *p;
    const char *nl = strchr(s, '\n');
    const char *end = nl ? nl : s + strlen(s);
    size_t klen = strlen(key);
    if ((size_t)(end - s) <= klen + 1 || strncmp(s, key, klen) != 0 || s[klen] != ':') return GR_ECORRUPT;
    const char *v = s + klen + 1;
    if (!isspace((unsigned char)*v)) return GR_ECORRUPT; /* Kafka splits on ":\s+" */
    while (v < end && isspace((unsigned char)*v)) v++;
    const char *ve = end;
    while (ve > v && isspace((unsigned char)ve[-1])) ve--; /* a '\r' of an edited file */
    if (ve == v || (size_t)(ve - v) >= cap) return GR_ECORRUPT;
    memcpy(val, v, (size_t)(ve - v));
    val[ve - v] = 0;
    *p = nl ? nl + 1 : end;
    return 0;
}

int gr_partition_metadata_read(const char *dir, struct gr_uuid *out) {
    char *path = gr_asprintf("%s/%s", dir, GR_PARTITION_METADATA_FILE);
    struct stat st;
    int rc = stat(path, &st) < 0 ? -errno : 0;
    if (rc == 0 && st.st_size > MAX_BYTES) rc = GR_ECORRUPT;
    char *text = NULL;
    if (rc == 0) rc = gr_checkpoint_read_file(path, &text, NULL);
    free(path);
    if (rc != 0) return rc;
    const char *p = text;
    char version[16], id[32];
    rc = read_line(&p, "version", version, sizeof version);
    if (rc == 0) {
        char *e = NULL;
        errno = 0;
        long v = strtol(version, &e, 10);
        if (errno || *e || v < 0 || v > INT32_MAX) rc = GR_ECORRUPT; /* any version >= 0: downgrades */
    }
    if (rc == 0) rc = read_line(&p, "topic_id", id, sizeof id);
    if (rc == 0 && (gr_uuid_parse(id, out) != 0 || gr_uuid_is_zero(out))) rc = GR_ECORRUPT;
    free(text);
    return rc;
}

int gr_partition_metadata_write(const char *dir, const struct gr_uuid *id) {
    char idtext[GR_UUID_STR_LEN + 1], text[64];
    int n = snprintf(text, sizeof text, "version: 0\ntopic_id: %s\n", gr_uuid_to_string(id, idtext));
    char *path = gr_asprintf("%s/%s", dir, GR_PARTITION_METADATA_FILE);
    int rc = gr_checkpoint_write_atomic(path, text, (size_t)n);
    free(path);
    return rc;
}
