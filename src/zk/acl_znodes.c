/* ACL znodes: see acl_znodes.h. */
#include "zk/acl_znodes.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "zk/backend.h"
#include "zk/kzk.h"

#define LOGGER "kafka.zk.KafkaZkClient"
#define LITERAL_ROOT "/kafka-acl"
#define EXTENDED_ROOT "/kafka-acl-extended"
#define MAX_ATTEMPTS 5

/* ---- codecs ---- */

void gr_acl_entries_free(struct gr_acl_entry *e, int n) {
    for (int i = 0; i < n; i++) gr_acl_entry_release(&e[i]);
    free(e);
}

char *gr_acl_znode_encode(const struct gr_acl_entry *e, int n, size_t *len) {
    json_t *root = json_object(), *arr = json_array();
    json_object_set_new(root, "version", json_integer(1));
    for (int i = 0; i < n; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "principal", json_string(e[i].principal));
        json_object_set_new(o, "permissionType", json_string(gr_acl_perm_name(e[i].perm)));
        json_object_set_new(o, "operation", json_string(gr_acl_op_name(e[i].op)));
        json_object_set_new(o, "host", json_string(e[i].host));
        json_array_append_new(arr, o);
    }
    json_object_set_new(root, "acls", arr);
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (!s) abort();
    if (len) *len = strlen(s);
    return s;
}

static const char *jstr(const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

int gr_acl_znode_decode(const char *data, size_t len, struct gr_acl_entry **out, int *n) {
    *out = NULL;
    *n = 0;
    if (!data || len == 0) return 0; /* no data: no ACLs, as Kafka */
    json_error_t jerr;
    json_t *root = json_loadb(data, len, JSON_REJECT_DUPLICATES, &jerr);
    const json_t *acls = root ? json_object_get(root, "acls") : NULL;
    const json_t *ver = root ? json_object_get(root, "version") : NULL;
    if (!json_is_object(root) || !json_is_integer(ver) || json_integer_value(ver) != 1 || !json_is_array(acls)) {
        json_decref(root);
        return GR_ECORRUPT;
    }
    size_t cnt = json_array_size(acls);
    struct gr_acl_entry *e = gr_calloc(cnt ? cnt : 1, sizeof *e);
    for (size_t i = 0; i < cnt; i++) {
        const json_t *o = json_array_get(acls, i);
        const char *p = jstr(o, "principal"), *h = jstr(o, "host");
        int op = gr_acl_op_parse(jstr(o, "operation")), perm = gr_acl_perm_parse(jstr(o, "permissionType"));
        if (!gr_acl_principal_valid(p) || !h || op <= GR_ACL_OP_ANY || perm < GR_ACL_PERM_DENY) {
            gr_acl_entries_free(e, (int)i);
            json_decref(root);
            return GR_ECORRUPT;
        }
        e[i] = (struct gr_acl_entry){.principal = gr_strdup(p), .host = gr_strdup(h), .op = (int8_t)op,
                                     .perm = (int8_t)perm};
    }
    json_decref(root);
    *out = e;
    *n = (int)cnt;
    return 0;
}

char *gr_acl_change_encode(int type, int pattern, const char *name, size_t *len) {
    char *s;
    if (pattern == GR_ACL_PAT_LITERAL) {
        s = gr_asprintf("%s:%s", gr_acl_resource_type_enum_name(type), name);
    } else {
        json_t *root = json_object();
        json_object_set_new(root, "version", json_integer(1));
        json_object_set_new(root, "resourceType", json_string(gr_acl_resource_type_enum_name(type)));
        json_object_set_new(root, "name", json_string(name));
        json_object_set_new(root, "patternType", json_string(gr_acl_pattern_name(pattern)));
        s = json_dumps(root, JSON_COMPACT);
        json_decref(root);
        if (!s) abort();
    }
    if (len) *len = strlen(s);
    return s;
}

int gr_acl_change_decode(const char *data, size_t len, int extended, int *type, int *pattern, char **name) {
    *name = NULL;
    if (!data || len == 0) return GR_ECORRUPT;
    if (!extended) {
        const char *colon = memchr(data, ':', len);
        if (!colon) return GR_ECORRUPT;
        char *t = gr_strndup(data, (size_t)(colon - data));
        *type = gr_acl_resource_type_parse(t);
        free(t);
        if (*type <= GR_ACL_RES_ANY) return GR_ECORRUPT;
        *pattern = GR_ACL_PAT_LITERAL;
        *name = gr_strndup(colon + 1, len - (size_t)(colon + 1 - data));
        return 0;
    }
    json_error_t jerr;
    json_t *root = json_loadb(data, len, 0, &jerr);
    const json_t *ver = root ? json_object_get(root, "version") : NULL;
    const char *t = root ? jstr(root, "resourceType") : NULL, *p = root ? jstr(root, "patternType") : NULL;
    const char *nm = root ? jstr(root, "name") : NULL;
    int rc = GR_ECORRUPT;
    if (json_is_integer(ver) && json_integer_value(ver) == 1 && t && p && nm) {
        *type = gr_acl_resource_type_parse(t);
        *pattern = gr_acl_pattern_parse(p);
        if (*type > GR_ACL_RES_ANY && (*pattern == GR_ACL_PAT_LITERAL || *pattern == GR_ACL_PAT_PREFIXED)) {
            *name = gr_strdup(nm);
            rc = 0;
        }
    }
    json_decref(root);
    return rc;
}

char *gr_acl_znode_path(int pattern, int type, const char *name) {
    const char *root = pattern == GR_ACL_PAT_LITERAL ? LITERAL_ROOT : EXTENDED_ROOT "/prefixed";
    if (!name) return gr_asprintf("%s/%s", root, gr_acl_resource_type_name(type));
    return gr_asprintf("%s/%s/%s", root, gr_acl_resource_type_name(type), name);
}

/* ---- ZooKeeper calls ---- */

static bool retryable(int zrc) { return zrc == GR_ZCONNECTIONLOSS || zrc == GR_ZOPERATIONTIMEOUT; }

static bool wait_retry(struct gr_kzk *k, int *attempt) {
    if (++*attempt >= MAX_ATTEMPTS) return false;
    struct gr_zk_backend *b = gr_kzk_backend(k);
    return gr_zkb_wait_connected(b, b->session_timeout_ms > 0 ? b->session_timeout_ms : 6000) == GR_ZOK;
}

#define RETRY(k, rc, expr)                                                                         \
    do {                                                                                           \
        int attempt_ = 0;                                                                          \
        do (rc) = (expr);                                                                          \
        while (retryable(rc) && wait_retry((k), &attempt_));                                       \
    } while (0)

static int zmap(const char *what, const char *path, int zrc) {
    int rc = gr_kzk_from_zrc(zrc);
    if (rc == GR_EZK) gr_error(LOGGER, "%s %s failed: %s", what, path, gr_zrc_name(zrc));
    return rc;
}

static int mkpath(struct gr_kzk *k, const char *path) {
    struct gr_zk_backend *b = gr_kzk_backend(k);
    int rc;
    RETRY(k, rc, gr_zkb_create(b, path, NULL, 0, 0, NULL));
    if (rc == GR_ZOK || rc == GR_ZNODEEXISTS) return 0;
    if (rc != GR_ZNONODE) return zmap("create", path, rc);
    char *parent = gr_strdup(path);
    char *slash = strrchr(parent, '/');
    int prc = GR_EZK;
    if (slash && slash != parent) {
        *slash = 0;
        prc = mkpath(k, parent);
    }
    free(parent);
    if (prc) return prc;
    RETRY(k, rc, gr_zkb_create(b, path, NULL, 0, 0, NULL));
    return rc == GR_ZOK || rc == GR_ZNODEEXISTS ? 0 : zmap("create", path, rc);
}

int gr_acl_znodes_ensure_paths(struct gr_kzk *k) {
    static const int pats[] = {GR_ACL_PAT_LITERAL, GR_ACL_PAT_PREFIXED};
    int rc = 0;
    for (size_t p = 0; p < GR_ARRAY_LEN(pats) && !rc; p++)
        for (int t = GR_ACL_RES_TOPIC; t <= GR_ACL_RES_LAST && !rc; t++) {
            char *path = gr_acl_znode_path(pats[p], t, NULL);
            rc = mkpath(k, path);
            free(path);
        }
    if (!rc) rc = mkpath(k, GR_ACL_CHANGES_LITERAL);
    if (!rc) rc = mkpath(k, GR_ACL_CHANGES_EXTENDED);
    return rc;
}

int gr_acl_znodes_list(struct gr_kzk *k, int pattern, int type, char ***names, int *n) {
    *names = NULL;
    *n = 0;
    char *path = gr_acl_znode_path(pattern, type, NULL);
    struct gr_zstrings s = {0};
    int zrc;
    RETRY(k, zrc, gr_zkb_get_children(gr_kzk_backend(k), path, false, &s));
    int rc = zrc == GR_ZOK ? 0 : zmap("get_children", path, zrc);
    free(path);
    if (rc == 0) {
        *names = s.names;
        *n = s.count;
    } else {
        gr_zstrings_free(&s);
    }
    return rc;
}

int gr_acl_znodes_read(struct gr_kzk *k, int pattern, int type, const char *name, struct gr_acl_entry **out,
                       int *n, int32_t *zk_version) {
    *out = NULL;
    *n = 0;
    char *path = gr_acl_znode_path(pattern, type, name);
    char *data = NULL;
    int len = 0, zrc;
    struct gr_zstat st;
    RETRY(k, zrc, gr_zkb_get(gr_kzk_backend(k), path, false, &data, &len, &st));
    int rc = zrc == GR_ZOK ? 0 : zmap("get", path, zrc);
    if (rc == 0) {
        rc = gr_acl_znode_decode(data, (size_t)len, out, n);
        if (rc) gr_error(LOGGER, "Cannot parse the ACLs in %s", path);
        *zk_version = st.version;
    }
    free(data);
    free(path);
    return rc;
}

int gr_acl_znodes_write(struct gr_kzk *k, int pattern, int type, const char *name, const struct gr_acl_entry *e,
                        int n, int32_t expected_version, int32_t *new_version) {
    char *path = gr_acl_znode_path(pattern, type, name);
    struct gr_zk_backend *b = gr_kzk_backend(k);
    int zrc;
    *new_version = 0;
    if (n == 0) {
        RETRY(k, zrc, gr_zkb_delete(b, path, expected_version < 0 ? GR_ZANY_VERSION : expected_version));
        if (zrc == GR_ZNONODE) zrc = GR_ZOK;
    } else {
        size_t len;
        char *json = gr_acl_znode_encode(e, n, &len);
        if (expected_version < 0) {
            RETRY(k, zrc, gr_zkb_create(b, path, json, (int)len, 0, NULL));
        } else {
            struct gr_zstat st = {0};
            RETRY(k, zrc, gr_zkb_set(b, path, json, (int)len, expected_version, &st));
            *new_version = st.version;
        }
        free(json);
    }
    int rc = zrc == GR_ZOK ? 0 : zmap("write", path, zrc);
    free(path);
    return rc;
}

int gr_acl_znodes_notify(struct gr_kzk *k, int pattern, int type, const char *name) {
    size_t len;
    char *data = gr_acl_change_encode(type, pattern, name, &len);
    const char *parent = pattern == GR_ACL_PAT_LITERAL ? GR_ACL_CHANGES_LITERAL : GR_ACL_CHANGES_EXTENDED;
    char *path = gr_asprintf("%s/" GR_ACL_CHANGE_PREFIX, parent);
    int zrc;
    RETRY(k, zrc, gr_zkb_create(gr_kzk_backend(k), path, data, (int)len, GR_ZSEQUENCE, NULL));
    int rc = zrc == GR_ZOK ? 0 : zmap("create", path, zrc);
    free(path);
    free(data);
    return rc;
}
