/* Kafka topic name rules: legal characters, length, "." and "..", '.'/'_' collisions. */
#include <stdio.h>
#include <string.h>

#include "admin/topic_names.h"
#include "common/kerr.h"
#include "support/check.h"

int main(void)
{
    char err[128];
    static const char *const good[] = { "a", "valid", "TOPIC", "with.dots", "with_under",
                                        "with-dash", "0123456789", "...", "__consumer_offsets" };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        CHECK(gr_topic_validate_name(good[i], err, sizeof(err)) == GR_KERR_NONE);

    static const char *const bad[] = { "", ".", "..", "with space", "slash/name", "colon:x",
                                       "ünïcode", "tab\t", "star*", "comma," };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK(gr_topic_validate_name(bad[i], err, sizeof(err)) == GR_KERR_INVALID_TOPIC_EXCEPTION);
    CHECK(gr_topic_validate_name(NULL, NULL, 0) == GR_KERR_INVALID_TOPIC_EXCEPTION);

    char name[300];
    memset(name, 'x', 249);
    name[249] = '\0';
    CHECK(gr_topic_validate_name(name, err, sizeof(err)) == GR_KERR_NONE);
    name[249] = 'x';
    name[250] = '\0';
    CHECK(gr_topic_validate_name(name, err, sizeof(err)) == GR_KERR_INVALID_TOPIC_EXCEPTION);
    CHECK(strstr(err, "249") != NULL);

    CHECK(gr_topic_has_collision_chars("a.b"));
    CHECK(gr_topic_has_collision_chars("a_b"));
    CHECK(!gr_topic_has_collision_chars("a-b"));
    CHECK(gr_topic_collides("a.b", "a_b"));
    CHECK(gr_topic_collides("a_b", "a.b"));
    CHECK(gr_topic_collides("x.y_z", "x_y.z"));
    CHECK(!gr_topic_collides("a.b", "a.b"));
    CHECK(!gr_topic_collides("a.b", "a-b"));
    CHECK(!gr_topic_collides("a.b", "a_bc"));
    CHECK(gr_topic_is_internal("__consumer_offsets"));
    CHECK(gr_topic_is_internal("__transaction_state"));
    CHECK(!gr_topic_is_internal("consumer_offsets"));

    if (test_failures) {
        fprintf(stderr, "test_topic_names: %d failure(s)\n", test_failures);
        return 1;
    }
    printf("test_topic_names: ok\n");
    return 0;
}
