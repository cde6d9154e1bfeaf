/* Field-descriptor tables that drive the Kafka wire codec.
 *
 * tools/gen_protocol.py turns each Kafka message JSON definition into a C struct plus one
 * gr_struct_desc per struct; codec.c walks these tables to encode, decode, default-fill and
 * (in tests) compare messages. Nothing here is hand-written per message or per version.
 * The tables are immutable and may be read from any thread. */
#ifndef GR_PROTOCOL_DESC_H
#define GR_PROTOCOL_DESC_H

#include <stdbool.h>
#include <stdint.h>

/* bytes and records fields: a view INTO the decoded input buffer (zero copy), or into memory
 * owned by whoever fills the struct for encoding. len == -1 means null. */
struct gr_bytes {
    const uint8_t *p;
    int32_t len;
};

/* Wire type of a field (of each element, for arrays). */
enum gr_ftype {
    GR_FT_BOOL,
    GR_FT_INT8,
    GR_FT_INT16,
    GR_FT_UINT16,
    GR_FT_INT32,
    GR_FT_INT64,
    GR_FT_FLOAT64,
    GR_FT_UUID,    /* uint8_t[16] */
    GR_FT_STRING,  /* char *, NUL-terminated, NULL = null */
    GR_FT_BYTES,   /* struct gr_bytes */
    GR_FT_RECORDS, /* struct gr_bytes (a record batch set, opaque to the codec) */
    GR_FT_STRUCT,  /* nested struct described by sub */
};

/* Upper bound of an open-ended version range ("3+"). An empty range has min > max. */
#define GR_VMAX 0x7FFF

struct gr_struct_desc;

/* One field of a struct. Arrays are stored as `int32_t <Name>Count; T *<Name>;` where T is the
 * element's C type (int32_t, char *, struct X, ...); Count is -1 for a null array. */
struct gr_field_desc {
    const char *name;                 /* C member name (Kafka's name, first letter upper) */
    const struct gr_struct_desc *sub; /* element/struct descriptor for GR_FT_STRUCT */
    const char *def_str;              /* default of a string field (NULL = null) */
    int64_t def_int;                  /* default of an integer or bool field */
    double def_f64;                   /* default of a float64 field */
    uint32_t offset;                  /* offsetof the value (the element pointer for arrays) */
    uint32_t count_offset;            /* offsetof the int32_t Count (arrays only) */
    int32_t tag;                      /* tag number if this is a tagged field, else -1 */
    int16_t ver_min, ver_max;         /* versions in which the field exists */
    int16_t null_min, null_max;       /* versions in which it may be null (empty if min > max) */
    uint8_t type;                     /* enum gr_ftype of the value or of each element */
    uint8_t is_array;
    uint8_t def_null; /* default is null (arrays, bytes; strings use def_str == NULL) */
};

/* A struct: the regular fields come first (wire order), then the tagged fields sorted by tag. */
struct gr_struct_desc {
    const char *name; /* C struct tag */
    uint32_t size;    /* sizeof the C struct */
    uint16_t nfields;
    uint16_t nregular; /* fields[0..nregular) are untagged; the rest are tagged */
    const struct gr_field_desc *fields;
};

/* One API: both messages share validVersions and flexibleVersions. */
struct gr_api_desc {
    const char *name;    /* "Metadata" */
    int16_t key;         /* 3 */
    int16_t min_version; /* validVersions of the Kafka 3.9 schema (not what the broker serves) */
    int16_t max_version;
    int16_t flex_version; /* first flexible version, -1 if none */
    const struct gr_struct_desc *request;
    const struct gr_struct_desc *response;
};

#endif
