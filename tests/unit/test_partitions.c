/* The broker's partition registry (replication/partitions.h): sorted lookups, removal, copies,
 * and (issue 14) the registry's entries of one topic sharing one name. */
#include <stdio.h>
#include <string.h>

#include "replication/partitions.h"
#include "support/check.h"

int main(void) {
    struct gr_partitions *r = gr_partitions_new();
    gr_partitions_lock(r);
    /* interleaved topics and orders; a caller's buffer reused for every name */
    const char *topics[] = {"b", "a", "c", "a", "b"};
    char buf[16];
    for (int round = 0; round < 5; round++)
        for (int p = 9; p >= 0; p--) {
            snprintf(buf, sizeof buf, "%s", topics[round]);
            struct gr_partition_state *s = gr_partitions_get_or_create_locked(r, buf, p);
            CHECK(s && strcmp(s->topic, topics[round]) == 0 && s->partition == p && s->leader == -1);
            memset(buf, 'x', sizeof buf - 1);
        }
    CHECK(gr_partitions_count_locked(r) == 30);
    /* one name per topic, shared by its entries */
    for (int i = 1; i < 30; i++) {
        struct gr_partition_state *a = gr_partitions_at_locked(r, i - 1), *b = gr_partitions_at_locked(r, i);
        CHECK(strcmp(a->topic, b->topic) < 0 || (strcmp(a->topic, b->topic) == 0 && a->partition < b->partition));
        if (strcmp(a->topic, b->topic) == 0) CHECK(a->topic == b->topic);
    }
    /* removing every partition of "a" but one, then the last; "b" and "c" keep theirs */
    for (int p = 0; p < 9; p++) gr_partitions_remove_locked(r, "a", p);
    struct gr_partition_state *last = gr_partitions_get_locked(r, "a", 9);
    CHECK(last && strcmp(last->topic, "a") == 0);
    gr_partitions_remove_locked(r, last->topic, 9); /* the entry's own name as the key */
    CHECK(gr_partitions_get_locked(r, "a", 9) == NULL && gr_partitions_count_locked(r) == 20);
    struct gr_partition_state *s = gr_partitions_get_or_create_locked(r, "a", 3); /* a fresh name */
    CHECK(s && strcmp(s->topic, "a") == 0);
    gr_partitions_unlock(r);
    struct gr_partition_state copy;
    CHECK(gr_partitions_get(r, "c", 4, &copy) && strcmp(copy.topic, "c") == 0 && copy.partition == 4);
    gr_partition_state_release(&copy); /* the copy owns its name */
    CHECK(!gr_partitions_get(r, "a", 4, &copy));
    gr_partitions_free(r);
    if (test_failures) fprintf(stderr, "test_partitions: %d failures\n", test_failures);
    else printf("test_partitions: ok\n");
    return test_failures ? 1 : 0;
}
