#!/usr/bin/python3
"""Generate src/protocol/messages.{h,c} from Apache Kafka's message JSON definitions.

Usage: /usr/bin/python3 tools/gen_protocol.py [--codec-schema FILE] [JSON_DIR] [OUT_DIR]
  JSON_DIR defaults to /tmp/kafka-msgs-3.9 (clients/src/main/resources/common/message of 3.9)
  OUT_DIR  defaults to src/protocol next to this script's repository root.

For every selected request/response pair the generator emits
  * a C struct per message and per nested struct (named <MessageName>_<StructName>),
  * a field-descriptor table (struct gr_struct_desc / gr_field_desc, see protocol/desc.h)
    that the table-driven runtime in codec.c walks to encode and decode,
  * the API table consumed by gr_proto_api() and GR_API_<NAME> constants.
With --codec-schema FILE it also writes the compact schema of EVERY request/response in JSON_DIR
(all API keys, not only SELECTED_KEYS) that tests/integration/kafka_codec.py reads
(tests/integration/kafka_messages.json; see write_codec_schema). Only the standard library is used. The JSON files contain // comments, which are stripped.
"""
import json
import os
import re
import sys

# API keys we generate: every API of Kafka 2.7 (0-57) and the 3.x APIs of a ZooKeeper-mode broker
# that clients and tools call: DescribeCluster (60), DescribeProducers (61), DescribeTransactions
# (65), ListTransactions (66). Which of them a broker serves, and up to which version, is decided by
# the API table in src/api/apis.c, not here.
SELECTED_KEYS = list(range(0, 58)) + [60, 61, 65, 66]

# Kafka's ApiKeys enum name, where it differs from the message name (none in 3.9).
API_NAME_OVERRIDE = {}

VMAX = 0x7FFF  # "N+" upper bound

PRIMS = {
    "bool": ("bool", "GR_FT_BOOL"),
    "int8": ("int8_t", "GR_FT_INT8"),
    "int16": ("int16_t", "GR_FT_INT16"),
    "uint16": ("uint16_t", "GR_FT_UINT16"),
    "int32": ("int32_t", "GR_FT_INT32"),
    "int64": ("int64_t", "GR_FT_INT64"),
    "float64": ("double", "GR_FT_FLOAT64"),
    "uuid": (None, "GR_FT_UUID"),
    "string": ("char *", "GR_FT_STRING"),
    "bytes": ("struct gr_bytes", "GR_FT_BYTES"),
    "records": ("struct gr_bytes", "GR_FT_RECORDS"),
}


class GenError(Exception):
    pass


def strip_comments(text):
    """Remove // line comments that are outside JSON strings."""
    out = []
    i, n = 0, len(text)
    in_str = False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_str = False
            i += 1
            continue
        if c == '"':
            in_str = True
            out.append(c)
            i += 1
            continue
        if c == "/" and i + 1 < n and text[i + 1] == "/":
            while i < n and text[i] != "\n":
                i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def parse_versions(s):
    """'0+', '3', '1-4', 'none' or None -> (lo, hi); an empty range is (VMAX, -1)."""
    if s is None or s == "" or s == "none":
        return (VMAX, -1)
    s = s.strip()
    if s.endswith("+"):
        return (int(s[:-1]), VMAX)
    if "-" in s:
        a, b = s.split("-", 1)
        return (int(a), int(b))
    return (int(s), int(s))


def cap(name):
    return name[0].upper() + name[1:]


def snake_upper(name):
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).upper()


class Field:
    pass


class Struct:
    def __init__(self, cname, fields):
        self.cname = cname      # C struct tag, e.g. MetadataResponse_MetadataResponseTopic
        self.fields = fields    # list of Field


class Message:
    def __init__(self, js):
        self.js = js
        self.name = js["name"]
        self.api_key = js["apiKey"]
        self.kind = js["type"]
        self.valid = parse_versions(js.get("validVersions"))
        self.flex = parse_versions(js.get("flexibleVersions", "none"))
        if self.flex[0] != VMAX and self.flex[1] != VMAX:
            raise GenError("%s: flexibleVersions must be open-ended" % self.name)
        self.structs = []       # in definition order (dependencies first)
        self.by_name = {}       # Kafka struct name -> Struct
        self.common = {cs["name"]: cs for cs in js.get("commonStructs", [])}
        self.top = self.build_struct(self.name, js["fields"], top=True)

    def struct_cname(self, kname):
        return "%s_%s" % (self.name, kname)

    def build_struct(self, kname, jfields, top=False):
        cname = self.name if top else self.struct_cname(kname)
        if not top and kname in self.by_name:
            return self.by_name[kname]
        fields = [self.build_field(jf) for jf in jfields]
        members = set()
        for f in fields:
            for m in ([f.cname, f.cname + "Count"] if f.is_array else [f.cname]):
                if m in members:
                    raise GenError("%s: member name collision on %s" % (cname, m))
                members.add(m)
        st = Struct(cname, fields)
        if not top:
            self.by_name[kname] = st
        self.structs.append(st)
        return st

    def build_field(self, jf):
        f = Field()
        f.kname = jf["name"]
        f.cname = cap(jf["name"])
        t = jf["type"]
        f.is_array = t.startswith("[]")
        base = t[2:] if f.is_array else t
        f.versions = parse_versions(jf.get("versions"))
        f.nullable = parse_versions(jf.get("nullableVersions"))
        f.tag = jf.get("tag", -1)
        if f.tag is None:
            f.tag = -1
        if f.tag >= 0:
            tv = parse_versions(jf.get("taggedVersions"))
            if tv != f.versions and not (tv[0] == f.versions[0] and tv[1] == VMAX):
                raise GenError("%s: taggedVersions %s must match versions %s"
                               % (f.kname, tv, f.versions))
        elif "taggedVersions" in jf:
            raise GenError("%s: taggedVersions without tag" % f.kname)
        f.sub = None
        if base in PRIMS:
            f.base = base
            if base == "uuid" and f.is_array:
                raise GenError("%s: arrays of uuid are not supported" % f.kname)
        else:
            f.base = "struct"
            if "fields" in jf:
                f.sub = self.build_struct(base, jf["fields"])
            elif base in self.common:
                f.sub = self.build_struct(base, self.common[base]["fields"])
            elif base in self.by_name:
                f.sub = self.by_name[base]
            else:
                raise GenError("%s: unknown type %s" % (f.kname, t))
        f.default = jf.get("default")
        return f


def c_string(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def vtxt(r):
    lo, hi = r
    if lo > hi:
        return "none"
    if hi == VMAX:
        return "%d+" % lo
    if lo == hi:
        return "%d" % lo
    return "%d-%d" % (lo, hi)


def default_init(f):
    """Return (def_int, def_f64, def_str_c, def_null) for a field."""
    d = f.default
    def_int, def_f64, def_str, def_null = "0", "0.0", "NULL", "0"
    if f.is_array:
        if d is not None and str(d) == "null":
            def_null = "1"
        elif d not in (None, "", "[]"):
            raise GenError("%s: unsupported array default %r" % (f.kname, d))
        return def_int, def_f64, def_str, def_null
    if f.base in ("int8", "int16", "uint16", "int32", "int64"):
        if d is not None and str(d) != "":
            v = int(str(d), 0)
            def_int = str(v) if v != -(1 << 63) else "INT64_MIN"
            if v == -2147483648:
                def_int = "INT32_MIN"
    elif f.base == "bool":
        if d is not None and str(d).lower() == "true":
            def_int = "1"
    elif f.base == "float64":
        if d is not None and str(d) != "":
            def_f64 = repr(float(d))
    elif f.base == "string":
        if d is not None and str(d) != "null":
            def_str = c_string(str(d))
    elif f.base in ("bytes", "records"):
        if d is not None and str(d) == "null":
            def_null = "1"
    elif f.base in ("uuid", "struct"):
        if d not in (None, ""):
            raise GenError("%s: unsupported default %r" % (f.kname, d))
    return def_int, def_f64, def_str, def_null


def vnum(v):
    return "GR_VMAX" if v == VMAX else str(v)


def member_decl(f):
    if f.base == "struct":
        ctype = "struct %s" % f.sub.cname
    else:
        ctype = PRIMS[f.base][0]
    note = "v" + vtxt(f.versions)
    if f.nullable[0] <= f.nullable[1]:
        note += ", nullable v" + vtxt(f.nullable)
    if f.tag >= 0:
        note += ", tag %d" % f.tag
    if f.default is not None:
        note += ", default %s" % f.default
    lines = []
    if f.is_array:
        lines.append("    int32_t %sCount; /* -1 = null */" % f.cname)
        star = "*" if ctype.endswith("*") else " *"
        lines.append("    %s%s%s; /* %s */" % (ctype, star, f.cname, note))
    elif f.base == "uuid":
        lines.append("    uint8_t %s[16]; /* %s */" % (f.cname, note))
    else:
        sep = "" if ctype.endswith("*") else " "
        lines.append("    %s%s%s; /* %s */" % (ctype, sep, f.cname, note))
    return lines


def emit(msgs, apis, src_desc):
    h = []
    c = []
    banner = ("/* GENERATED FILE - do not edit.\n"
              " * Generated by tools/gen_protocol.py from Apache Kafka %s message definitions\n"
              " * (the JSON files under clients/src/main/resources/common/message). Field names keep Kafka's\n"
              " * spelling with the first letter capitalised; see docs/PROTOCOL.md. */\n" % src_desc)
    h.append(banner)
    h.append("#ifndef GR_PROTOCOL_MESSAGES_H\n#define GR_PROTOCOL_MESSAGES_H\n")
    h.append("#include <stdbool.h>\n#include <stdint.h>\n\n#include \"protocol/desc.h\"\n")
    h.append("/* API keys. */")
    for a in apis:
        h.append("#define GR_API_%s %d" % (snake_upper(a["name"]), a["key"]))
    h.append("#define GR_API_COUNT %d /* entries in the API table */\n" % len(apis))
    for m in msgs:
        h.append("/* ---- %s (api key %d, versions %s, flexible %s) ---- */\n"
                 % (m.name, m.api_key, vtxt(m.valid), vtxt(m.flex)))
        for st in m.structs:
            h.append("struct %s;" % st.cname)
        h.append("")
        for st in m.structs:
            h.append("struct %s {" % st.cname)
            if not st.fields:
                h.append("    char _unused; /* no fields */")
            for f in st.fields:
                h.extend(member_decl(f))
            h.append("};\n")
        for st in m.structs:
            h.append("extern const struct gr_struct_desc gr_desc_%s;" % st.cname)
        h.append("")
    h.append("/* The API table, sorted by key (used by gr_proto_api()). */")
    h.append("extern const struct gr_api_desc gr_proto_apis[GR_API_COUNT];\n")
    h.append("#endif")

    c.append(banner)
    c.append("#include <stddef.h>\n#include <stdint.h>\n\n#include \"protocol/messages.h\"\n")
    for m in msgs:
        c.append("/* ---- %s ---- */\n" % m.name)
        for st in m.structs:
            # regular fields in declaration order, then tagged fields sorted by tag
            reg = [f for f in st.fields if f.tag < 0]
            tagged = sorted([f for f in st.fields if f.tag >= 0], key=lambda f: f.tag)
            tags = [f.tag for f in tagged]
            if len(set(tags)) != len(tags):
                raise GenError("%s: duplicate tag" % st.cname)
            ordered = reg + tagged
            if ordered:
                c.append("static const struct gr_field_desc gr_fields_%s[] = {" % st.cname)
            for f in ordered:
                di, df, ds, dn = default_init(f)
                ft = "GR_FT_STRUCT" if f.base == "struct" else PRIMS[f.base][1]
                cnt = ("offsetof(struct %s, %sCount)" % (st.cname, f.cname)) if f.is_array else "0"
                sub = ("&gr_desc_%s" % f.sub.cname) if f.sub else "NULL"
                c.append("    { %s, %s, %s, %s, %s,\n"
                         "      offsetof(struct %s, %s), %s, %d,\n"
                         "      %s, %s, %s, %s, %s, %d, %s }," % (
                             c_string(f.cname), sub, ds, di, df,
                             st.cname, f.cname, cnt, f.tag,
                             vnum(f.versions[0]), vnum(f.versions[1]),
                             vnum(f.nullable[0]), vnum(f.nullable[1]),
                             ft, 1 if f.is_array else 0, dn))
            if ordered:
                c.append("};")
            c.append("const struct gr_struct_desc gr_desc_%s = {\n"
                     "    %s, sizeof(struct %s), %d, %d, %s,\n};\n" % (
                         st.cname, c_string(st.cname), st.cname, len(ordered), len(reg),
                         ("gr_fields_%s" % st.cname) if ordered else "NULL"))
    c.append("const struct gr_api_desc gr_proto_apis[GR_API_COUNT] = {")
    for a in apis:
        c.append("    { %s, %d, %d, %d, %d, &gr_desc_%s, &gr_desc_%s }," % (
            c_string(a["name"]), a["key"], a["min"], a["max"], a["flex"], a["req"], a["resp"]))
    c.append("};")
    return "\n".join(h) + "\n", "\n".join(c) + "\n"


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    src = sys.argv[1] if len(sys.argv) > 1 else "/tmp/kafka-msgs-3.9"
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(root, "src", "protocol")
    by_key = {}
    for fn in sorted(os.listdir(src)):
        if not fn.endswith(".json"):
            continue
        with open(os.path.join(src, fn), encoding="utf-8") as fh:
            js = json.loads(strip_comments(fh.read()))
        if js.get("type") not in ("request", "response"):
            continue
        if js["apiKey"] not in SELECTED_KEYS:
            continue
        by_key.setdefault(js["apiKey"], {})[js["type"]] = js
    msgs, apis = [], []
    for key in sorted(by_key):
        pair = by_key[key]
        if "request" not in pair or "response" not in pair:
            raise GenError("api %d lacks a request or response" % key)
        req, resp = Message(pair["request"]), Message(pair["response"])
        if req.valid != resp.valid or req.flex != resp.flex:
            raise GenError("api %d: request/response versions differ" % key)
        base = req.name[:-len("Request")]
        name = API_NAME_OVERRIDE.get(base, base)
        msgs += [req, resp]
        apis.append({"name": name, "key": key, "min": req.valid[0], "max": req.valid[1],
                     "flex": req.flex[0] if req.flex[0] <= req.flex[1] else -1,
                     "req": req.name, "resp": resp.name})
    missing = set(SELECTED_KEYS) - set(by_key)
    if missing:
        raise GenError("missing api keys: %s" % sorted(missing))
    hdr, body = emit(msgs, apis, "3.9")
    with open(os.path.join(out, "messages.h"), "w", encoding="utf-8") as fh:
        fh.write(hdr)
    with open(os.path.join(out, "messages.c"), "w", encoding="utf-8") as fh:
        fh.write(body)
    print("wrote %d messages, %d apis" % (len(msgs), len(apis)))
    return src


# Field attributes copied into the codec schema (facts only: no "about", "entityType", "mapKey").
CODEC_FIELD_KEYS = ("name", "type", "versions", "nullableVersions", "taggedVersions", "tag",
                    "default", "ignorable", "flexibleVersions")


def codec_fields(jfields, common, seen):
    """Kafka's field list with struct types resolved: every struct-typed field carries its "fields"
    (commonStructs and structs declared earlier in the message are inlined where used)."""
    out = []
    for jf in jfields:
        f = {k: jf[k] for k in CODEC_FIELD_KEYS if k in jf and jf[k] is not None}
        if "tag" in f:
            f["tag"] = int(f["tag"])  # a few files spell it as a string
        t = jf["type"]
        base = t[2:] if t.startswith("[]") else t
        if base not in PRIMS:
            if "fields" in jf:
                seen[base] = jf["fields"]
                f["fields"] = codec_fields(jf["fields"], common, seen)
            elif base in seen:
                f["fields"] = codec_fields(seen[base], common, seen)
            elif base in common:
                f["fields"] = codec_fields(common[base], common, seen)
            else:
                raise GenError("%s: unknown type %s" % (jf["name"], t))
        out.append(f)
    return out


def codec_message(js):
    common = {cs["name"]: cs["fields"] for cs in js.get("commonStructs", [])}
    m = {"name": js["name"], "validVersions": js["validVersions"],
         "flexibleVersions": js.get("flexibleVersions", "none")}
    if js.get("latestVersionUnstable"):
        m["latestVersionUnstable"] = True
    m["fields"] = codec_fields(js["fields"], common, {})
    return m


def write_codec_schema(src, path):
    """Write the schema of every API in src (and the request/response headers) to path as JSON:
    {"headers": {"RequestHeader": msg, "ResponseHeader": msg},
     "apis": {"<key>": {"name": ApiKeys name, "request": msg, "response": msg}}},
    msg = {"name", "validVersions", "flexibleVersions", "fields": [field]}, with version ranges in
    Kafka's own notation ("0+", "3-5", "none")."""
    apis, headers = {}, {}
    for fn in sorted(os.listdir(src)):
        if not fn.endswith(".json"):
            continue
        with open(os.path.join(src, fn), encoding="utf-8") as fh:
            js = json.loads(strip_comments(fh.read()))
        if js.get("type") == "header":
            headers[js["name"]] = codec_message(js)
        elif js.get("type") in ("request", "response"):
            apis.setdefault(js["apiKey"], {})[js["type"]] = codec_message(js)
    for key, pair in apis.items():
        if "request" not in pair or "response" not in pair:
            raise GenError("api %d lacks a request or response" % key)
        base = pair["request"]["name"][:-len("Request")]
        pair["name"] = API_NAME_OVERRIDE.get(base, base)
    if set(headers) != {"RequestHeader", "ResponseHeader"}:
        raise GenError("%s: RequestHeader.json or ResponseHeader.json missing" % src)
    doc = {"generatedBy": "tools/gen_protocol.py --codec-schema from %s" % os.path.basename(
        os.path.normpath(src)), "headers": headers,
           "apis": {str(k): {"name": apis[k]["name"], "request": apis[k]["request"],
                             "response": apis[k]["response"]} for k in sorted(apis)}}
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1)
        fh.write("\n")
    print("wrote %s: %d apis" % (path, len(apis)))


def take_option(argv, name):
    """Remove "name VALUE" from argv and return VALUE (None when absent)."""
    if name not in argv:
        return None
    i = argv.index(name)
    if i + 1 >= len(argv):
        raise GenError("%s needs a file name" % name)
    value = argv[i + 1]
    del argv[i:i + 2]
    return value


if __name__ == "__main__":
    try:
        codec_schema = take_option(sys.argv, "--codec-schema")
        json_dir = main()
        if codec_schema:
            write_codec_schema(json_dir, codec_schema)
    except GenError as e:
        sys.stderr.write("gen_protocol: %s\n" % e)
        sys.exit(1)
