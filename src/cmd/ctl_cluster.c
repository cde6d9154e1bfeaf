/* gregorctl cluster [--json]: what ZooKeeper says about the cluster.
 *
 * Text:
 *   Cluster ID: <id>
 *   Controller: <id> (epoch <epoch>)          or "Controller: none (epoch N)"
 *   Broker <id> epoch <czxid> <endpoint> [<endpoint>...] [rack <rack>]
 * JSON:
 *   {"cluster_id":"..","controller":{"id":1,"epoch":3},"controller_epoch":3,
 *    "brokers":[{"id":1,"epoch":4294967300,"endpoints":["PLAINTEXT://127.0.0.1:9092"],
 *                "host":"127.0.0.1","port":9092,"rack":null}]}
 * Reads only (though connecting creates a missing chroot path, as every client here does). */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/ctl.h"
#include "common/util.h"
#include "zk/backend.h"
#include "zk/kzk.h"

static char *endpoint_str(const struct gr_kzk_endpoint *ep) {
    bool v6 = ep->host && strchr(ep->host, ':');
    return gr_asprintf("%s://%s%s%s:%d", ep->listener, v6 ? "[" : "", ep->host ? ep->host : "", v6 ? "]" : "", ep->port);
}

int ctl_cluster_main(const struct ctl_opts *o, int argc, char **argv) {
    bool as_json = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            as_json = true;
        } else {
            fprintf(stderr, "gregorctl cluster: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (!o->zookeeper) {
        fprintf(stderr, "gregorctl cluster: --zookeeper HOST:PORT[/chroot] is required\n");
        return 2;
    }
    struct gr_zk_real_config zc = {
        .connect = o->zookeeper,
        .session_timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 10000,
        .connection_timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 10000,
    };
    struct gr_zk_backend *b = NULL;
    int zrc = gr_zk_real_open(&zc, &b);
    if (zrc != GR_ZOK) {
        fprintf(stderr, "gregorctl: cannot connect to ZooKeeper at %s: %s\n", o->zookeeper, gr_zrc_name(zrc));
        return 1;
    }
    struct gr_kzk *k = gr_kzk_new(b);
    int ret = 1;

    char cluster_id[64] = "";
    char *data = NULL;
    int len = 0;
    zrc = gr_zkb_get(b, "/cluster/id", false, &data, &len, NULL);
    if (zrc == GR_ZOK) {
        if (gr_kzk_cluster_id_decode(data, (size_t)len, cluster_id) != 0) snprintf(cluster_id, sizeof cluster_id, "?");
    } else if (zrc != GR_ZNONODE) {
        fprintf(stderr, "gregorctl: cannot read /cluster/id: %s\n", gr_zrc_name(zrc));
        free(data);
        goto out;
    }
    free(data);

    int32_t controller = -1, epoch = -1, epoch_version = -1;
    int rc = gr_kzk_get_controller_id(k, false, &controller);
    if (rc == 0) {
        rc = gr_kzk_get_controller_epoch(k, false, &epoch, &epoch_version);
        if (rc == GR_KZK_ENONODE) rc = 0;
    }
    struct gr_kzk_broker *brokers = NULL;
    int n = 0;
    if (rc == 0) rc = gr_kzk_get_all_brokers(k, false, false, &brokers, &n);
    if (rc != 0) {
        fprintf(stderr, "gregorctl: cannot read the cluster from ZooKeeper: %s\n", gr_kzk_strerror(rc));
        goto out;
    }

    if (as_json) {
        json_t *root = json_object();
        json_object_set_new(root, "cluster_id", cluster_id[0] ? json_string(cluster_id) : json_null());
        json_t *c = json_object();
        json_object_set_new(c, "id", controller >= 0 ? json_integer(controller) : json_null());
        json_object_set_new(c, "epoch", epoch >= 0 ? json_integer(epoch) : json_null());
        json_object_set_new(root, "controller", c);
        json_object_set_new(root, "controller_epoch", epoch >= 0 ? json_integer(epoch) : json_null());
        json_t *arr = json_array();
        for (int i = 0; i < n; i++) {
            json_t *e = json_object();
            json_object_set_new(e, "id", json_integer(brokers[i].id));
            json_object_set_new(e, "epoch", json_integer(brokers[i].epoch));
            json_t *eps = json_array();
            for (int j = 0; j < brokers[i].n_endpoints; j++) {
                char *s = endpoint_str(&brokers[i].endpoints[j]);
                json_array_append_new(eps, json_string(s));
                free(s);
            }
            json_object_set_new(e, "endpoints", eps);
            if (brokers[i].n_endpoints > 0) {
                json_object_set_new(e, "host", json_string(brokers[i].endpoints[0].host ? brokers[i].endpoints[0].host : ""));
                json_object_set_new(e, "port", json_integer(brokers[i].endpoints[0].port));
            }
            json_object_set_new(e, "rack", brokers[i].rack ? json_string(brokers[i].rack) : json_null());
            json_array_append_new(arr, e);
        }
        json_object_set_new(root, "brokers", arr);
        char *s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        printf("%s\n", s);
        free(s);
        json_decref(root);
    } else {
        printf("Cluster ID: %s\n", cluster_id[0] ? cluster_id : "(none)");
        if (controller >= 0) printf("Controller: %d (epoch %d)\n", controller, epoch);
        else if (epoch >= 0) printf("Controller: none (epoch %d)\n", epoch);
        else printf("Controller: none\n");
        for (int i = 0; i < n; i++) {
            printf("Broker %d epoch %" PRId64, brokers[i].id, brokers[i].epoch);
            for (int j = 0; j < brokers[i].n_endpoints; j++) {
                char *s = endpoint_str(&brokers[i].endpoints[j]);
                printf(" %s", s);
                free(s);
            }
            if (brokers[i].rack) printf(" rack %s", brokers[i].rack);
            printf("\n");
        }
    }
    gr_kzk_brokers_free(brokers, n);
    ret = 0;
out:
    gr_kzk_free(k);
    gr_zkb_destroy(b);
    return ret;
}
