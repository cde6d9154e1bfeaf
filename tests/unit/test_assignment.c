/* Replica assignment: Kafka 2.7 AdminUtils outputs for fixed start index / shift, rack-aware
 * assignment, argument errors, explicit-assignment validation, add-partitions start index. */
#include <stdio.h>
#include <string.h>

#include "admin/assignment.h"
#include "common/kerr.h"
#include "support/check.h"

static void check_rows(const char *what, const int32_t *got, const int32_t *want, int rows, int rf)
{
    for (int i = 0; i < rows; i++) {
        if (memcmp(got + i * rf, want + i * rf, sizeof(int32_t) * (size_t)rf) != 0) {
            fprintf(stderr, "%s: partition row %d: got [", what, i);
            for (int j = 0; j < rf; j++)
                fprintf(stderr, "%s%d", j ? "," : "", got[i * rf + j]);
            fprintf(stderr, "] want [");
            for (int j = 0; j < rf; j++)
                fprintf(stderr, "%s%d", j ? "," : "", want[i * rf + j]);
            fprintf(stderr, "]\n");
            test_failures++;
        }
    }
}

/* Kafka's AdminUtilsTest.testReplicaAssignment: brokers 0..4, 10 partitions, RF 3, fixed 0. */
static void test_unaware_kafka_vector(void)
{
    struct gr_broker_meta b[5];
    for (int i = 0; i < 5; i++)
        b[i] = (struct gr_broker_meta){ 4 - i, NULL }; /* unsorted on purpose */
    int32_t out[30];
    static const int32_t want[30] = { 0, 1, 2, 1, 2, 3, 2, 3, 4, 3, 4, 0, 4, 0, 1,
                                      0, 2, 3, 1, 3, 4, 2, 4, 0, 3, 0, 1, 4, 1, 2 };
    CHECK(gr_assign_replicas(b, 5, 10, 3, 0, 0, out, NULL, 0) == GR_KERR_NONE);
    check_rows("unaware 5x10x3", out, want, 10, 3);
}

/* Hand-computed from the algorithm: brokers 10,20,30,40; RF 3; start = shift = 2; 6
 * partitions. The shift increments at p = 4. */
static void test_unaware_shift(void)
{
    struct gr_broker_meta b[4] = { { 10, NULL }, { 20, NULL }, { 30, NULL }, { 40, NULL } };
    int32_t out[18];
    static const int32_t want[18] = { 30, 20, 40, 40, 30, 10, 10, 40, 20,
                                      20, 10, 30, 30, 40, 10, 40, 10, 20 };
    CHECK(gr_assign_replicas(b, 4, 6, 3, 2, 0, out, NULL, 0) == GR_KERR_NONE);
    check_rows("unaware shift", out, want, 6, 3);

    /* The same through the lower-level entry point. */
    int32_t ids[4] = { 10, 20, 30, 40 };
    int32_t out2[18];
    gr_assign_rack_unaware(ids, 4, 6, 3, 2, 2, 0, out2);
    check_rows("rack_unaware direct", out2, want, 6, 3);
}

/* Start partition > 0 (adding partitions): brokers 1,2,3; RF 2; fixed 1; start partition 3. */
static void test_unaware_start_partition(void)
{
    struct gr_broker_meta b[3] = { { 1, NULL }, { 2, NULL }, { 3, NULL } };
    int32_t out[6];
    static const int32_t want[6] = { 2, 3, 3, 1, 1, 2 };
    CHECK(gr_assign_replicas(b, 3, 3, 2, 1, 3, out, NULL, 0) == GR_KERR_NONE);
    check_rows("start partition 3", out, want, 3, 2);
    /* RF 1: only the leader walk. */
    int32_t one[4];
    static const int32_t want1[4] = { 2, 3, 1, 2 };
    CHECK(gr_assign_replicas(b, 3, 4, 1, 1, 0, one, NULL, 0) == GR_KERR_NONE);
    check_rows("rf1", one, want1, 4, 1);
}

/* Kafka's AdminRackAwareTest vector. */
static void test_rack_aware(void)
{
    struct gr_broker_meta b[6] = { { 0, "rack1" }, { 1, "rack3" }, { 2, "rack3" },
                                   { 3, "rack2" }, { 4, "rack2" }, { 5, "rack1" } };
    int32_t list[6];
    static const int32_t want_list[6] = { 0, 3, 1, 5, 4, 2 };
    gr_assign_rack_alternated_list(b, 6, list);
    check_rows("alternated list", list, want_list, 1, 6);
    int32_t list5[5];
    static const int32_t want_list5[5] = { 0, 3, 1, 4, 2 };
    gr_assign_rack_alternated_list(b, 5, list5);
    check_rows("alternated list without 5", list5, want_list5, 1, 5);

    int32_t out[21];
    static const int32_t want[21] = { 0, 3, 1, 3, 1, 5, 1, 5, 4, 5, 4, 2,
                                      4, 2, 0, 2, 0, 3, 0, 4, 2 };
    CHECK(gr_assign_replicas(b, 6, 7, 3, 0, 0, out, NULL, 0) == GR_KERR_NONE);
    check_rows("rack aware", out, want, 7, 3);

    /* Random start: every partition still spans 3 racks. */
    for (int iter = 0; iter < 20; iter++) {
        CHECK(gr_assign_replicas(b, 6, 7, 3, -1, 0, out, NULL, 0) == GR_KERR_NONE);
        for (int p = 0; p < 7; p++) {
            const char *r[3];
            for (int j = 0; j < 3; j++)
                for (int k = 0; k < 6; k++)
                    if (b[k].id == out[p * 3 + j])
                        r[j] = b[k].rack;
            CHECK(strcmp(r[0], r[1]) && strcmp(r[1], r[2]) && strcmp(r[0], r[2]));
        }
    }
}

static void test_errors(void)
{
    struct gr_broker_meta b[3] = { { 1, NULL }, { 2, NULL }, { 3, NULL } };
    int32_t out[64];
    char err[128];
    CHECK(gr_assign_replicas(b, 3, 0, 1, -1, 0, out, err, sizeof(err)) == GR_KERR_INVALID_PARTITIONS);
    CHECK(gr_assign_replicas(b, 3, 3, 0, -1, 0, out, err, sizeof(err)) ==
          GR_KERR_INVALID_REPLICATION_FACTOR);
    CHECK(gr_assign_replicas(b, 3, 3, 4, -1, 0, out, err, sizeof(err)) ==
          GR_KERR_INVALID_REPLICATION_FACTOR);
    CHECK(strstr(err, "larger than available brokers: 3") != NULL);
    struct gr_broker_meta mixed[3] = { { 1, "a" }, { 2, NULL }, { 3, "b" } };
    CHECK(gr_assign_replicas(mixed, 3, 3, 2, -1, 0, out, err, sizeof(err)) ==
          GR_KERR_UNKNOWN_SERVER_ERROR);
    CHECK(strstr(err, "rack information") != NULL);
    /* Random assignment is always a valid one: distinct replicas, leaders spread evenly. */
    int leaders[4] = { 0 };
    CHECK(gr_assign_replicas(b, 3, 6, 3, -1, 0, out, NULL, 0) == GR_KERR_NONE);
    for (int p = 0; p < 6; p++) {
        CHECK(out[p * 3] != out[p * 3 + 1] && out[p * 3] != out[p * 3 + 2] &&
              out[p * 3 + 1] != out[p * 3 + 2]);
        leaders[out[p * 3]]++;
    }
    CHECK(leaders[1] == 2 && leaders[2] == 2 && leaders[3] == 2);
}

static void test_validate(void)
{
    int32_t r0[] = { 1, 2 }, r1[] = { 2, 3 }, r2[] = { 3, 3 }, r3[] = { 1 };
    const int32_t *reps[] = { r0, r1 };
    int nreps[] = { 2, 2 };
    int32_t pids[] = { 1, 0 };
    CHECK(gr_assign_validate_new_topic(2, pids, reps, nreps, NULL, 0) == GR_KERR_NONE);
    int32_t bad_pids[] = { 0, 2 };
    CHECK(gr_assign_validate_new_topic(2, bad_pids, reps, nreps, NULL, 0) ==
          GR_KERR_INVALID_REPLICA_ASSIGNMENT);
    int32_t dup_pids[] = { 0, 0 };
    CHECK(gr_assign_validate_new_topic(2, dup_pids, reps, nreps, NULL, 0) ==
          GR_KERR_INVALID_REPLICA_ASSIGNMENT);
    const int32_t *dup[] = { r0, r2 };
    CHECK(gr_assign_validate_new_topic(2, pids, dup, nreps, NULL, 0) ==
          GR_KERR_INVALID_REPLICA_ASSIGNMENT);
    const int32_t *uneven[] = { r0, r3 };
    int nuneven[] = { 2, 1 };
    CHECK(gr_assign_validate_new_topic(2, pids, uneven, nuneven, NULL, 0) ==
          GR_KERR_INVALID_REPLICA_ASSIGNMENT);

    int32_t live[] = { 1, 2, 3 };
    CHECK(gr_assign_validate_added(2, reps, nreps, 2, live, 3, NULL, 0) == GR_KERR_NONE);
    CHECK(gr_assign_validate_added(2, reps, nreps, 3, live, 3, NULL, 0) ==
          GR_KERR_INVALID_REPLICA_ASSIGNMENT);
    CHECK(gr_assign_validate_added(2, reps, nreps, 2, live, 2, NULL, 0) ==
          GR_KERR_BROKER_NOT_AVAILABLE);
    CHECK(gr_assign_validate_added(2, dup, nreps, 2, live, 3, NULL, 0) ==
          GR_KERR_INVALID_REPLICA_ASSIGNMENT);
}

static void test_add_start_index(void)
{
    struct gr_broker_meta b[4] = { { 5, NULL }, { 1, NULL }, { 3, NULL }, { 7, NULL } };
    CHECK(gr_assign_add_partitions_start_index(b, 4, 1) == 0);
    CHECK(gr_assign_add_partitions_start_index(b, 4, 3) == 1);
    CHECK(gr_assign_add_partitions_start_index(b, 4, 4) == 2);
    CHECK(gr_assign_add_partitions_start_index(b, 4, 99) == 0);
}

int main(void)
{
    test_unaware_kafka_vector();
    test_unaware_shift();
    test_unaware_start_partition();
    test_rack_aware();
    test_errors();
    test_validate();
    test_add_start_index();
    if (test_failures) {
        fprintf(stderr, "test_assignment: %d failure(s)\n", test_failures);
        return 1;
    }
    printf("test_assignment: ok\n");
    return 0;
}
