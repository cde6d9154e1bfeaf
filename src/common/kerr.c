#include "common/kerr.h"

const char *gr_kerr_name(int16_t code) {
    switch (code) {
#define GR_KERR_CASE(name, val) \
    case (val):                 \
        return #name;
        GR_KERR_LIST(GR_KERR_CASE)
#undef GR_KERR_CASE
    }
    return "UNKNOWN_ERROR_CODE";
}
