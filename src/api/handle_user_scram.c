/* DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), v0 (KIP-554), as Kafka
 * 2.7's AdminManager does them over ZooKeeper: the credentials live in /config/users/<user>
 * under the keys SCRAM-SHA-256 / SCRAM-SHA-512 (scram.h's credential string), and every change
 * is followed by a config change notification (users/<user>). Alter is served by the active
 * controller only (NOT_CONTROLLER elsewhere), as in 2.7. Authorization as Kafka 2.7: Describe needs
 * Cluster DESCRIBE (a top-level CLUSTER_AUTHORIZATION_FAILED), Alter Cluster ALTER (per user). ZooKeeper calls block the I/O thread for one
 * round trip per user, as Kafka's handlers do. */
#include "api/handle_sasl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/authorize.h"
#include "broker/broker.h"
#include "common/kerr.h"
#include "common/log.h"
#include "common/util.h"
#include "security/sasl_server.h"
#include "security/scram.h"
#include "zk/backend.h"
#include "zk/kzk.h"

#define LOGGER "kafka.server.AdminManager"

static const enum gr_scram_mech mechs[] = {GR_SCRAM_SHA_256, GR_SCRAM_SHA_512};

/* The user's credential infos into res (allocating in the request). 0, or -ENOENT when none. */
static int describe_one(struct gr_broker *b, struct gr_api_req *req, const char *user,
                        struct DescribeUserScramCredentialsResponse_DescribeUserScramCredentialsResult *res) {
    char *name = gr_sanitize_user(user);
    struct gr_kzk_config c;
    memset(&c, 0, sizeof c);
    int rc = gr_kzk_get_entity_config(b->zk, "users", name, &c);
    free(name);
    res->User = gr_api_strdup(req, user);
    res->CredentialInfos = gr_api_alloc(req, sizeof(*res->CredentialInfos) * 2);
    res->CredentialInfosCount = 0;
    for (size_t i = 0; rc == 0 && i < GR_ARRAY_LEN(mechs); i++) {
        struct gr_scram_cred cred;
        const char *v = gr_kzk_config_get(&c, gr_scram_mech_name(mechs[i]));
        if (!v || gr_scram_cred_parse(mechs[i], v, &cred) != 0) continue;
        res->CredentialInfos[res->CredentialInfosCount].Mechanism = (int8_t)mechs[i];
        res->CredentialInfos[res->CredentialInfosCount].Iterations = cred.iterations;
        res->CredentialInfosCount++;
    }
    gr_kzk_config_release(&c);
    if (rc != 0) {
        res->ErrorCode = GR_KERR_UNKNOWN_SERVER_ERROR;
        res->ErrorMessage = gr_api_strdup(req, "cannot read the credentials from ZooKeeper");
        return 0;
    }
    return res->CredentialInfosCount ? 0 : -1;
}

void gr_handle_describe_user_scram_credentials(struct gr_broker *b, struct gr_api_req *req,
                                               const struct gr_req_header *hdr, void *body) {
    (void)hdr;
    const struct DescribeUserScramCredentialsRequest *rq = body;
    struct DescribeUserScramCredentialsResponse *resp = gr_api_new_response(req);
    if (!gr_api_authorized_cluster(req, GR_ACL_OP_DESCRIBE)) {
        resp->ErrorCode = GR_KERR_CLUSTER_AUTHORIZATION_FAILED;
        gr_api_respond(req, resp);
        return;
    }
    if (!b->zk) {
        resp->ErrorCode = GR_KERR_UNKNOWN_SERVER_ERROR;
        gr_api_respond(req, resp);
        return;
    }
    struct gr_zstrings all = {0, NULL};
    int n = rq->UsersCount > 0 ? rq->UsersCount : 0;
    if (n == 0 && gr_kzk_get_entity_names(b->zk, "users", &all) == 0) n = all.count;
    resp->Results = gr_api_alloc(req, sizeof(*resp->Results) * (size_t)(n ? n : 1));
    int out = 0;
    for (int i = 0; i < n; i++) {
        struct DescribeUserScramCredentialsResponse_DescribeUserScramCredentialsResult *res = &resp->Results[out];
        if (rq->UsersCount > 0) {
            const char *u = rq->Users[i].Name ? rq->Users[i].Name : "";
            bool dup = false;
            for (int j = 0; j < rq->UsersCount; j++)
                if (j != i && rq->Users[j].Name && strcmp(rq->Users[j].Name, u) == 0) dup = true;
            if (dup) {
                res->User = gr_api_strdup(req, u);
                res->ErrorCode = GR_KERR_DUPLICATE_RESOURCE;
                res->ErrorMessage = gr_api_strdup(req, "Cannot describe SCRAM credentials for the same user twice in a single request");
            } else if (describe_one(b, req, u, res) != 0) {
                res->ErrorCode = GR_KERR_RESOURCE_NOT_FOUND;
                char *m = gr_asprintf("Attempt to describe a user credential that does not exist: %s", u);
                res->ErrorMessage = gr_api_strdup(req, m);
                free(m);
            }
            out++;
        } else {
            char *u = gr_desanitize_user(all.names[i]);
            if (describe_one(b, req, u, res) == 0) out++; /* users without SCRAM credentials are left out */
            else memset(res, 0, sizeof *res);
            free(u);
        }
    }
    resp->ResultsCount = out;
    gr_zstrings_free(&all);
    gr_api_respond(req, resp);
}

/* One alteration, flattened. */
struct alteration {
    const char *user;
    int8_t mech;
    bool upsert;
    int32_t iterations;
    const struct gr_bytes *salt, *salted;
};

static int16_t check_one(const struct alteration *a, const struct alteration *all, int n, const char **msg) {
    if (!a->user || !a->user[0]) return *msg = "Username must not be empty", GR_KERR_UNACCEPTABLE_CREDENTIAL;
    if (a->mech != GR_SCRAM_SHA_256 && a->mech != GR_SCRAM_SHA_512)
        return *msg = "Unknown SCRAM mechanism", GR_KERR_UNSUPPORTED_SASL_MECHANISM;
    for (int j = 0; j < n; j++)
        if (&all[j] != a && all[j].user && strcmp(all[j].user, a->user) == 0 && all[j].mech == a->mech)
            return *msg = "A user credential cannot be altered twice in the same request", GR_KERR_DUPLICATE_RESOURCE;
    if (a->upsert && a->iterations < GR_SCRAM_MIN_ITERATIONS)
        return *msg = "Too few iterations", GR_KERR_UNACCEPTABLE_CREDENTIAL;
    if (a->upsert && a->iterations > GR_SCRAM_MAX_ITERATIONS)
        return *msg = "Too many iterations", GR_KERR_UNACCEPTABLE_CREDENTIAL;
    if (a->upsert && (a->salt->len <= 0 || a->salt->len > 128 ||
                      a->salted->len != (a->mech == GR_SCRAM_SHA_256 ? 32 : 64)))
        return *msg = "Invalid salt or salted password", GR_KERR_UNACCEPTABLE_CREDENTIAL;
    return GR_KERR_NONE;
}

/* Applies every alteration of `user` (all already checked) to its znode. */
static int16_t apply_user(struct gr_broker *b, const char *user, const struct alteration *all, int n,
                          const char **msg) {
    char *name = gr_sanitize_user(user);
    struct gr_kzk_config c;
    memset(&c, 0, sizeof c);
    int16_t err = GR_KERR_NONE;
    if (gr_kzk_get_entity_config(b->zk, "users", name, &c) != 0) {
        err = GR_KERR_UNKNOWN_SERVER_ERROR;
        *msg = "cannot read the user's configuration";
    }
    for (int i = 0; err == GR_KERR_NONE && i < n; i++) {
        const struct alteration *a = &all[i];
        if (strcmp(a->user, user) != 0) continue;
        const char *key = gr_scram_mech_name((enum gr_scram_mech)a->mech);
        if (!a->upsert) {
            if (!gr_kzk_config_get(&c, key)) {
                err = GR_KERR_RESOURCE_NOT_FOUND;
                *msg = "Attempt to delete a user credential that does not exist";
                break;
            }
            /* remove key: rebuild without it */
            struct gr_kzk_config d;
            memset(&d, 0, sizeof d);
            for (int k = 0; k < c.n; k++)
                if (strcmp(c.keys[k], key) != 0) gr_kzk_config_set(&d, c.keys[k], c.values[k]);
            gr_kzk_config_release(&c);
            c = d;
            continue;
        }
        struct gr_scram_cred cred;
        if (gr_scram_cred_from_salted((enum gr_scram_mech)a->mech, a->salt->p, a->salt->len, a->salted->p,
                                      a->salted->len, a->iterations, &cred) != 0) {
            err = GR_KERR_UNACCEPTABLE_CREDENTIAL;
            *msg = "Invalid salt or salted password";
            break;
        }
        char *v = gr_scram_cred_format(&cred);
        gr_kzk_config_set(&c, key, v);
        free(v);
    }
    if (err == GR_KERR_NONE && gr_kzk_set_entity_config(b->zk, "users", name, &c) != 0) {
        err = GR_KERR_UNKNOWN_SERVER_ERROR;
        *msg = "cannot write the user's configuration";
    }
    if (err == GR_KERR_NONE) gr_info(LOGGER, "SCRAM credentials of user %s altered", user);
    gr_kzk_config_release(&c);
    free(name);
    return err;
}

void gr_handle_alter_user_scram_credentials(struct gr_broker *b, struct gr_api_req *req,
                                            const struct gr_req_header *hdr, void *body) {
    (void)hdr;
    const struct AlterUserScramCredentialsRequest *rq = body;
    struct AlterUserScramCredentialsResponse *resp = gr_api_new_response(req);
    int nd = GR_MAX(0, rq->DeletionsCount), nu = GR_MAX(0, rq->UpsertionsCount), n = nd + nu;
    struct alteration *all = gr_api_alloc(req, sizeof(*all) * (size_t)(n ? n : 1));
    for (int i = 0; i < nd; i++)
        all[i] = (struct alteration){rq->Deletions[i].Name, rq->Deletions[i].Mechanism, false, 0, NULL, NULL};
    for (int i = 0; i < nu; i++) {
        const struct AlterUserScramCredentialsRequest_ScramCredentialUpsertion *u = &rq->Upsertions[i];
        all[nd + i] = (struct alteration){u->Name, u->Mechanism, true, u->Iterations, &u->Salt, &u->SaltedPassword};
    }
    /* one result per distinct user, in request order */
    resp->Results = gr_api_alloc(req, sizeof(*resp->Results) * (size_t)(n ? n : 1));
    int nr = 0;
    bool controller = b->controller && gr_broker_is_controller(b) && b->zk;
    bool allowed = gr_api_authorized_cluster(req, GR_ACL_OP_ALTER);
    for (int i = 0; i < n; i++) {
        const char *user = all[i].user ? all[i].user : "";
        bool seen = false;
        for (int j = 0; j < i; j++)
            if (strcmp(all[j].user ? all[j].user : "", user) == 0) seen = true;
        if (seen) continue;
        struct AlterUserScramCredentialsResponse_AlterUserScramCredentialsResult *res = &resp->Results[nr++];
        res->User = gr_api_strdup(req, user);
        const char *msg = NULL;
        /* Kafka 2.7: NOT_CONTROLLER, then Cluster ALTER, then validation */
        int16_t err = !controller ? GR_KERR_NOT_CONTROLLER : !allowed ? GR_KERR_CLUSTER_AUTHORIZATION_FAILED : GR_KERR_NONE;
        for (int j = i; j < n && err == GR_KERR_NONE; j++)
            if (strcmp(all[j].user ? all[j].user : "", user) == 0) err = check_one(&all[j], all, n, &msg);
        if (err == GR_KERR_NONE) err = apply_user(b, user, all, n, &msg);
        res->ErrorCode = err;
        res->ErrorMessage = msg ? gr_api_strdup(req, msg) : NULL;
    }
    resp->ResultsCount = nr;
    gr_api_respond(req, resp);
}
