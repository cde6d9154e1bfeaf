/* inter.broker.protocol.version (src/common/metadata_version.c): Kafka's version strings and what
 * each allows (topic ids, control request versions). */
#include "common/metadata_version.h"
#include "support/check.h"

int test_failures;

int main(void) {
    int32_t v;
    CHECK(gr_ibp_parse("2.7-IV2", &v) == 0 && v == GR_IBP(2, 7, 2));
    CHECK(gr_ibp_parse("2.8", &v) == 0 && v == GR_IBP(2, 8, 99));
    CHECK(gr_ibp_parse("3.9-IV0", &v) == 0 && v == GR_IBP_LATEST);
    CHECK(gr_ibp_parse("2.7.0", &v) == 0 && v == GR_IBP(2, 7, 99));
    CHECK(gr_ibp_parse("0.10.2", &v) == 0 && v < GR_IBP(1, 0, 0));
    const char *bad[] = {"", "2", "2.", "x.y", "2.7-IV", "2.7-IVx", "2.7 ", "2.7-iv1", "2.7.0.1", "100.1"};
    for (unsigned i = 0; i < sizeof bad / sizeof *bad; i++) CHECKF(gr_ibp_parse(bad[i], &v) != 0, "%s", bad[i]);
    CHECK(gr_ibp_parse(NULL, &v) != 0);
    struct gr_ibp_features f;
    gr_ibp_features("2.7-IV2", &f);
    CHECK(!f.topic_ids && f.leader_and_isr_version == 4 && f.update_metadata_version == 6 && f.stop_replica_version == 3);
    gr_ibp_features("2.8-IV0", &f); /* ids, but LeaderAndIsr v5 only from 2.8-IV1 (Kafka's table) */
    CHECK(f.topic_ids && f.leader_and_isr_version == 4 && f.update_metadata_version == 6);
    gr_ibp_features("2.8", &f);
    CHECK(f.topic_ids && f.leader_and_isr_version == 5 && f.update_metadata_version == 7 && f.stop_replica_version == 3);
    gr_ibp_features("3.3-IV3", &f);
    CHECK(f.leader_and_isr_version == 5 && f.stop_replica_version == 3);
    gr_ibp_features("3.4-IV0", &f);
    CHECK(f.leader_and_isr_version == 7 && f.update_metadata_version == 8 && f.stop_replica_version == 4);
    gr_ibp_features(NULL, &f);
    CHECK(f.topic_ids && f.leader_and_isr_version == 7);
    /* AlterPartition: v0 (AlterIsr) up to 3.1, v1 from 3.2-IV0, v2 from 3.3-IV3, v3 from 3.5-IV1 */
    const struct {
        const char *ibp;
        int16_t v;
    } ap[] = {{"2.7-IV2", 0}, {"2.8", 0}, {"3.1", 0}, {"3.2-IV0", 1}, {"3.3-IV2", 1}, {"3.3-IV3", 2},
              {"3.4", 2},     {"3.5-IV0", 2}, {"3.5-IV1", 3}, {"3.9-IV0", 3}, {"3.9", 3}};
    for (unsigned i = 0; i < sizeof ap / sizeof *ap; i++) {
        gr_ibp_features(ap[i].ibp, &f);
        CHECKF(f.alter_partition_version == ap[i].v, "%s: %d", ap[i].ibp, f.alter_partition_version);
    }
    gr_ibp_features(NULL, &f);
    CHECK(f.alter_partition_version == 3);
    return test_failures != 0;
}
