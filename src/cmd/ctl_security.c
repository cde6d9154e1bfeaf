/* gregorctl --command-config and user-scram: see ctl_security.h. */
#include "cmd/ctl_security.h"

#include <ctype.h>
#include <errno.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/ctl.h"
#include "cmd/ctl_kafka.h"
#include "common/kerr.h"
#include "common/util.h"
#include "net/kafka_client.h"
#include "protocol/codec.h"
#include "security/sasl_server.h"
#include "security/scram.h"
#include "security/ssl_ctx.h"

/* ---- --command-config ---- */

struct props {
    int n;
    char *keys[128], *values[128];
};

static const char *props_get(void *ctx, const char *key) {
    struct props *p = ctx;
    for (int i = 0; i < p->n; i++)
        if (strcmp(p->keys[i], key) == 0) return p->values[i];
    return NULL;
}

static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
    return s;
}

int ctl_command_config(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "cannot open --command-config %s: %s\n", path, strerror(errno));
        return -1;
    }
    struct props p = {0};
    char line[8192];
    while (fgets(line, sizeof line, f) && p.n < 128) {
        char *s = trim(line);
        if (!*s || *s == '#' || *s == '!') continue;
        size_t kl = strcspn(s, "=:");
        if (!s[kl]) continue;
        s[kl] = 0;
        p.keys[p.n] = gr_strdup(trim(s));
        p.values[p.n] = gr_strdup(trim(s + kl + 1));
        p.n++;
    }
    fclose(f);
    const char *proto = props_get(&p, "security.protocol");
    struct gr_client_security sec = {.protocol = proto ? proto : "PLAINTEXT"};
    int rc = 0;
    char *user = NULL, *pass = NULL;
    if (strcmp(sec.protocol, "SSL") == 0 || strcmp(sec.protocol, "SASL_SSL") == 0) {
        char err[512];
        sec.ssl_ctx = gr_ssl_ctx_new(false, props_get, &p, &sec.verify_hostname, err, sizeof err);
        if (!sec.ssl_ctx) {
            fprintf(stderr, "--command-config %s: %s\n", path, err);
            rc = -1;
        }
    } else if (strcmp(sec.protocol, "PLAINTEXT") != 0 && strcmp(sec.protocol, "SASL_PLAINTEXT") != 0) {
        fprintf(stderr, "--command-config %s: unknown security.protocol %s\n", path, sec.protocol);
        rc = -1;
    }
    if (rc == 0 && strncmp(sec.protocol, "SASL_", 5) == 0) {
        sec.sasl_mechanism = props_get(&p, "sasl.mechanism") ? props_get(&p, "sasl.mechanism") : "GSSAPI";
        const char *jaas = props_get(&p, "sasl.jaas.config");
        user = jaas ? gr_jaas_option(jaas, "username") : NULL;
        pass = jaas ? gr_jaas_option(jaas, "password") : NULL;
        if (!user && props_get(&p, "sasl.username")) user = gr_strdup(props_get(&p, "sasl.username"));
        if (!pass && props_get(&p, "sasl.password")) pass = gr_strdup(props_get(&p, "sasl.password"));
        sec.sasl_username = user;
        sec.sasl_password = pass;
    }
    if (rc == 0) gr_kafka_client_set_default_security(&sec);
    SSL_CTX_free(sec.ssl_ctx);
    free(user);
    free(pass);
    for (int i = 0; i < p.n; i++) {
        free(p.keys[i]);
        free(p.values[i]);
    }
    return rc;
}

/* ---- user-scram ---- */

static int describe(struct ctl_kafka *k, const char *user) {
    struct gr_arena a;
    gr_arena_init(&a);
    struct DescribeUserScramCredentialsRequest rq;
    gr_proto_init_struct(&gr_desc_DescribeUserScramCredentialsRequest, &rq);
    struct DescribeUserScramCredentialsRequest_UserName un = {.Name = (char *)user};
    rq.UsersCount = user ? 1 : 0;
    rq.Users = user ? &un : NULL;
    struct DescribeUserScramCredentialsResponse *r =
        ctl_kafka_call(k, GR_API_DESCRIBE_USER_SCRAM_CREDENTIALS, 0, &rq, &a);
    int rc = r ? 0 : 1;
    if (r && r->ErrorCode) {
        fprintf(stderr, "error: %s%s%s\n", gr_kerr_name(r->ErrorCode), r->ErrorMessage ? ": " : "",
                r->ErrorMessage ? r->ErrorMessage : "");
        rc = 1;
    }
    for (int i = 0; r && !r->ErrorCode && i < r->ResultsCount; i++) {
        const struct DescribeUserScramCredentialsResponse_DescribeUserScramCredentialsResult *res = &r->Results[i];
        if (res->ErrorCode) {
            fprintf(stderr, "error for user %s: %s%s%s\n", res->User, gr_kerr_name(res->ErrorCode),
                    res->ErrorMessage ? ": " : "", res->ErrorMessage ? res->ErrorMessage : "");
            rc = 1;
            continue;
        }
        printf("SCRAM credential configs for user-principal '%s' are ", res->User);
        for (int j = 0; j < res->CredentialInfosCount; j++)
            printf("%s%s=iterations=%d", j ? ", " : "",
                   gr_scram_mech_name((enum gr_scram_mech)res->CredentialInfos[j].Mechanism),
                   res->CredentialInfos[j].Iterations);
        printf("\n");
    }
    gr_arena_free(&a);
    return rc;
}

/* 'SCRAM-SHA-512=[iterations=8192,password=p],SCRAM-SHA-256=[password=q]' */
static int parse_add_config(const char *s, struct gr_arena *a, struct AlterUserScramCredentialsRequest_ScramCredentialUpsertion *ups,
                            int *n, const char *user) {
    *n = 0;
    for (const char *p = s; *p && *n < 2;) {
        while (*p == ',' || *p == ' ') p++;
        if (!*p) break;
        const char *eq = strchr(p, '=');
        if (!eq || eq[1] != '[') return -1;
        char mech[32];
        snprintf(mech, sizeof mech, "%.*s", (int)GR_MIN((size_t)(eq - p), sizeof mech - 1), p);
        enum gr_scram_mech m = gr_scram_mech_parse(mech);
        const char *end = strchr(eq + 2, ']');
        if (m == GR_SCRAM_NONE || !end) return -1;
        char *body = gr_strndup(eq + 2, (size_t)(end - eq - 2));
        char *pw = NULL;
        int iters = GR_SCRAM_MIN_ITERATIONS;
        for (char *save = NULL, *kv = strtok_r(body, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
            if (strncmp(kv, "password=", 9) == 0) pw = kv + 9;
            else if (strncmp(kv, "iterations=", 11) == 0) iters = atoi(kv + 11);
        }
        if (!pw) {
            free(body);
            return -1;
        }
        uint8_t *salt = gr_arena_alloc(a, 32), *salted = gr_arena_alloc(a, 64);
        if (RAND_bytes(salt, 32) != 1 || gr_scram_salted_password(m, pw, salt, 32, iters, salted) != 0) {
            free(body);
            return -1;
        }
        free(body);
        ups[*n] = (struct AlterUserScramCredentialsRequest_ScramCredentialUpsertion){
            .Name = (char *)user, .Mechanism = (int8_t)m, .Iterations = iters,
            .Salt = {.p = salt, .len = 32}, .SaltedPassword = {.p = salted, .len = m == GR_SCRAM_SHA_256 ? 32 : 64}};
        (*n)++;
        p = end + 1;
    }
    return *n ? 0 : -1;
}

static bool alter_retry(const void *resp) {
    const struct AlterUserScramCredentialsResponse *r = resp;
    for (int i = 0; i < r->ResultsCount; i++)
        if (r->Results[i].ErrorCode == GR_KERR_NOT_CONTROLLER) return true;
    return false;
}

static int alter(struct ctl_kafka *k, int timeout_ms, const char *user, const char *add, const char *del) {
    struct gr_arena a;
    gr_arena_init(&a);
    struct AlterUserScramCredentialsRequest rq;
    gr_proto_init_struct(&gr_desc_AlterUserScramCredentialsRequest, &rq);
    struct AlterUserScramCredentialsRequest_ScramCredentialUpsertion ups[2];
    struct AlterUserScramCredentialsRequest_ScramCredentialDeletion dels[2];
    int nu = 0, nd = 0, rc = 1;
    if (add && parse_add_config(add, &a, ups, &nu, user) != 0) {
        /* not echoed: it holds a password */
        fprintf(stderr, "invalid --add-config (expected SCRAM-SHA-512=[iterations=N,password=P],...)\n");
        gr_arena_free(&a);
        return 2;
    }
    for (const char *p = del; p && *p && nd < 2;) {
        while (*p == ',' || *p == ' ') p++;
        size_t l = strcspn(p, ",");
        char mech[32];
        snprintf(mech, sizeof mech, "%.*s", (int)GR_MIN(l, sizeof mech - 1), p);
        dels[nd].Name = (char *)user;
        dels[nd].Mechanism = (int8_t)gr_scram_mech_parse(mech);
        if (!dels[nd].Mechanism) {
            fprintf(stderr, "invalid --delete-config '%s'\n", del);
            gr_arena_free(&a);
            return 2;
        }
        nd++;
        p += l;
    }
    rq.UpsertionsCount = nu;
    rq.Upsertions = ups;
    rq.DeletionsCount = nd;
    rq.Deletions = dels;
    const struct AlterUserScramCredentialsResponse *r =
        ctl_kafka_call_controller(k, timeout_ms, 10, GR_API_ALTER_USER_SCRAM_CREDENTIALS, 0, &rq, &a, alter_retry);
    if (r) {
        rc = 0;
        for (int i = 0; i < r->ResultsCount; i++)
            if (r->Results[i].ErrorCode) {
                fprintf(stderr, "error for user %s: %s%s%s\n", r->Results[i].User, gr_kerr_name(r->Results[i].ErrorCode),
                        r->Results[i].ErrorMessage ? ": " : "", r->Results[i].ErrorMessage ? r->Results[i].ErrorMessage : "");
                rc = 1;
            }
        if (!rc) printf("Completed updating config for user %s.\n", user);
    }
    gr_arena_free(&a);
    return rc;
}

int ctl_user_scram_main(const struct ctl_opts *o, int argc, char **argv) {
    const char *user = NULL, *add = NULL, *del = NULL;
    bool do_alter = false, do_describe = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--alter") == 0) do_alter = true;
        else if (strcmp(argv[i], "--describe") == 0) do_describe = true;
        else if (strcmp(argv[i], "--entity-name") == 0 && i + 1 < argc) user = argv[++i];
        else if (strcmp(argv[i], "--add-config") == 0 && i + 1 < argc) add = argv[++i];
        else if (strcmp(argv[i], "--delete-config") == 0 && i + 1 < argc) del = argv[++i];
        else if (strcmp(argv[i], "--entity-type") == 0 && i + 1 < argc) i++; /* users, as kafka-configs */
        else {
            fprintf(stderr, "user-scram: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (do_alter == do_describe || (do_alter && (!user || (!add && !del))) || !o->bootstrap_server) {
        fprintf(stderr, "usage: gregorctl --bootstrap-server H:P [--command-config F] user-scram --describe "
                        "[--entity-name U] | --alter --entity-name U (--add-config 'SCRAM-SHA-512=[password=P]' | "
                        "--delete-config SCRAM-SHA-512)\n");
        return 2;
    }
    struct ctl_kafka k;
    if (ctl_kafka_connect_str(o->bootstrap_server, o->timeout_ms, &k) != 0) return 1;
    int rc = do_describe ? describe(&k, user) : alter(&k, o->timeout_ms, user, add, del);
    ctl_kafka_close(&k);
    return rc;
}
