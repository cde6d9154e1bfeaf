/* Topic name validation; rules in topic_names.h. */
#include "admin/topic_names.h"

#include <stdio.h>
#include <string.h>

#include "common/kerr.h"

static bool legal_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == '-';
}

int16_t gr_topic_validate_name(const char *name, char *err, size_t errlen)
{
    const char *msg = NULL;
    char buf[96];
    if (!name || !*name) {
        msg = "Topic name is illegal, it can't be empty";
    } else if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
        msg = "Topic name cannot be \".\" or \"..\"";
    } else if (strlen(name) > GR_TOPIC_MAX_NAME_LEN) {
        snprintf(buf, sizeof(buf), "Topic name is illegal, it can't be longer than %d characters",
                 GR_TOPIC_MAX_NAME_LEN);
        msg = buf;
    } else {
        for (const char *p = name; *p; p++)
            if (!legal_char(*p)) {
                msg = "Topic name is illegal, it contains a character other than ASCII "
                      "alphanumerics, '.', '_' and '-'";
                break;
            }
    }
    if (!msg)
        return GR_KERR_NONE;
    if (err && errlen)
        snprintf(err, errlen, "%s", msg);
    return GR_KERR_INVALID_TOPIC_EXCEPTION;
}

bool gr_topic_has_collision_chars(const char *name)
{
    return strchr(name, '.') || strchr(name, '_');
}

bool gr_topic_collides(const char *a, const char *b)
{
    if (strcmp(a, b) == 0)
        return false;
    for (;; a++, b++) {
        char x = *a == '.' ? '_' : *a;
        char y = *b == '.' ? '_' : *b;
        if (x != y)
            return false;
        if (!x)
            return true;
    }
}

bool gr_topic_is_internal(const char *name)
{
    return name && (strcmp(name, GR_GROUP_METADATA_TOPIC) == 0 ||
                    strcmp(name, GR_TRANSACTION_STATE_TOPIC) == 0);
}
