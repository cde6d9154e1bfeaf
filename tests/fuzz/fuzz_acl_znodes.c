/* libFuzzer target: the ACL znode decoders of src/zk/acl_znodes.c (ACL lists, literal and
 * extended change notifications) on arbitrary bytes. They must return 0 or GR_ECORRUPT, never
 * crash or leak; a decoded ACL list re-encodes to bytes that decode to the same entries. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "zk/acl_znodes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond) {
    if (!cond) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *s = (const char *)data;
    struct gr_acl_entry *e = NULL;
    int n = 0;
    int rc = gr_acl_znode_decode(s, size, &e, &n);
    check(rc == 0 || rc == GR_ECORRUPT);
    if (rc == 0) {
        size_t len;
        char *enc = gr_acl_znode_encode(e, n, &len);
        struct gr_acl_entry *e2 = NULL;
        int n2 = 0;
        check(gr_acl_znode_decode(enc, len, &e2, &n2) == 0 && n2 == n);
        for (int i = 0; i < n; i++) check(gr_acl_entry_equal(&e[i], &e2[i]));
        gr_acl_entries_free(e2, n2);
        free(enc);
        gr_acl_entries_free(e, n);
    }
    for (int ext = 0; ext < 2; ext++) {
        int type, pattern;
        char *name = NULL;
        rc = gr_acl_change_decode(s, size, ext, &type, &pattern, &name);
        check(rc == 0 || rc == GR_ECORRUPT);
        if (rc == 0) check(name != NULL && type > GR_ACL_RES_ANY);
        free(name);
    }
    return 0;
}
