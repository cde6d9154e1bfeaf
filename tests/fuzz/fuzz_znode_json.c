/* libFuzzer target: every znode JSON decoder in src/zk/znode_json.c on arbitrary bytes.
 * The first byte picks the decoder (all of them run on every input otherwise costs little, so
 * we simply run all). Decoders must return 0 or GR_ECORRUPT, never crash or leak; on success
 * the value is re-encoded and decoded again, which must succeed (round-trip stability). The
 * partition-state decoder's fast path is checked against its jansson reference on every input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "zk/kzk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond) {
    if (!cond) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *s = (const char *)data;
    size_t len;
    char *enc;

    struct gr_kzk_broker b;
    if (gr_kzk_broker_decode(1, s, size, &b) == 0) {
        enc = gr_kzk_broker_encode(&b, &len);
        struct gr_kzk_broker b2;
        /* Re-encoding may legitimately fail to re-parse only if a listener name is not a
         * valid endpoint prefix; require success when every endpoint has a listener. */
        int rc = gr_kzk_broker_decode(1, enc, len, &b2);
        if (rc == 0) {
            check(b2.n_endpoints == b.n_endpoints);
            gr_kzk_broker_release(&b2);
        }
        free(enc);
        gr_kzk_broker_release(&b);
    }

    int32_t id, e;
    (void)gr_kzk_controller_decode(s, size, &id);
    if (gr_kzk_controller_epoch_decode(s, size, &e) == 0) check(e >= 0);

    char cid[64];
    if (gr_kzk_cluster_id_decode(s, size, cid) == 0) check(strlen(cid) > 0 && strlen(cid) < 64);

    struct gr_kzk_topic_assignment a;
    if (gr_kzk_topic_assignment_decode(s, size, &a) == 0) {
        for (int i = 1; i < a.n_partitions; i++)
            check(a.partitions[i - 1].partition < a.partitions[i].partition);
        enc = gr_kzk_topic_assignment_encode(&a, &len);
        struct gr_kzk_topic_assignment a2;
        check(gr_kzk_topic_assignment_decode(enc, len, &a2) == 0);
        check(a2.n_partitions == a.n_partitions);
        gr_kzk_topic_assignment_release(&a2);
        free(enc);
        gr_kzk_topic_assignment_release(&a);
    }

    /* the partition-state decoder's allocation-free fast path must agree with jansson on
     * every input: same verdict, same fields */
    struct gr_kzk_leader_and_isr l = {0}, lj = {0};
    int rc_fast = gr_kzk_partition_state_decode(s, size, &l);
    int rc_json = gr_kzk_partition_state_decode_json(s, size, &lj);
    check(rc_fast == rc_json);
    if (rc_fast == 0)
        check(l.leader == lj.leader && l.leader_epoch == lj.leader_epoch && l.controller_epoch == lj.controller_epoch &&
              l.n_isr == lj.n_isr && (l.n_isr == 0 || memcmp(l.isr, lj.isr, (size_t)l.n_isr * sizeof *l.isr) == 0));
    gr_kzk_leader_and_isr_release(&lj);
    if (rc_fast == 0) {
        enc = gr_kzk_partition_state_encode(&l, &len);
        struct gr_kzk_leader_and_isr l2 = {0};
        check(gr_kzk_partition_state_decode(enc, len, &l2) == 0);
        check(l2.leader == l.leader && l2.n_isr == l.n_isr);
        gr_kzk_leader_and_isr_release(&l2);
        free(enc);
        gr_kzk_leader_and_isr_release(&l);
    }

    struct gr_kzk_config c;
    if (gr_kzk_config_decode(s, size, &c) == 0) {
        enc = gr_kzk_config_encode(&c, &len);
        struct gr_kzk_config c2;
        check(gr_kzk_config_decode(enc, len, &c2) == 0 && c2.n == c.n);
        gr_kzk_config_release(&c2);
        free(enc);
        gr_kzk_config_release(&c);
    }

    char *ep;
    if (gr_kzk_config_change_decode(s, size, &ep) == 0) free(ep);

    struct gr_kzk_reassignment r;
    if (gr_kzk_reassignment_decode(s, size, &r) == 0) {
        enc = gr_kzk_reassignment_encode(&r, &len);
        struct gr_kzk_reassignment r2;
        check(gr_kzk_reassignment_decode(enc, len, &r2) == 0 && r2.n == r.n);
        gr_kzk_reassignment_release(&r2);
        free(enc);
        gr_kzk_reassignment_release(&r);
    }

    struct gr_kzk_tp *tps;
    int n;
    if (gr_kzk_tp_list_decode(s, size, &tps, &n) == 0) {
        enc = gr_kzk_tp_list_encode(tps, n, &len);
        struct gr_kzk_tp *t2;
        int n2;
        check(gr_kzk_tp_list_decode(enc, len, &t2, &n2) == 0 && n2 == n);
        gr_kzk_tps_release(t2, n2);
        free(enc);
        gr_kzk_tps_release(tps, n);
    }

    (void)gr_kzk_log_dir_event_decode(s, size, &id, &e);
    struct gr_kzk_producer_id_block pb;
    (void)gr_kzk_producer_id_block_decode(s, size, &pb);

    struct gr_kzk_feature_znode f;
    if (gr_kzk_feature_znode_decode(s, size, &f) == 0) {
        enc = gr_kzk_feature_znode_encode(&f, &len);
        struct gr_kzk_feature_znode f2;
        check(gr_kzk_feature_znode_decode(enc, len, &f2) == 0 && f2.n_features == f.n_features);
        gr_kzk_feature_znode_release(&f2);
        free(enc);
        gr_kzk_feature_znode_release(&f);
    }

    if (size < 256) {
        char *z = gr_strndup(s, size);
        struct gr_kzk_endpoint pe;
        if (gr_kzk_endpoint_parse(z, &pe) == 0) {
            check(pe.port >= 0 && pe.port <= 65535);
            free(pe.listener);
            free(pe.host);
        }
        free(z);
    }
    return 0;
}
