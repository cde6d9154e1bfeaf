/* The restart gap after an unclean death: see unclean_restart.h. */
#include "broker/unclean_restart.h"

#include <ctype.h>
#include <dirent.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/config.h"
#include "common/log.h"
#include "common/util.h"
#include "zk/kzk.h"

#define LOGGER "kafka.server.KafkaServer"
#define POLL_MS 100

/* The (topic, partition) of every "<topic>-<partition>" directory in the log dirs (deleted,
 * future and other suffixed directories are skipped: their names do not end in digits). */
static int local_partitions(const struct gr_config *cfg, struct gr_kzk_tp **out) {
    int n = 0, cap = 0;
    *out = NULL;
    for (int d = 0; d < cfg->num_log_dirs; d++) {
        DIR *dir = opendir(cfg->log_dirs[d]);
        if (!dir) continue;
        struct dirent *e;
        while ((e = readdir(dir)) != NULL) {
            const char *dash = strrchr(e->d_name, '-');
            if (!dash || dash == e->d_name || !dash[1]) continue;
            bool digits = true;
            for (const char *c = dash + 1; *c; c++) digits = digits && isdigit((unsigned char)*c);
            if (!digits || strlen(dash + 1) > 9) continue;
            if (n == cap) {
                cap = cap ? 2 * cap : 64;
                *out = gr_realloc(*out, (size_t)cap * sizeof **out);
            }
            (*out)[n].topic = gr_strndup(e->d_name, (size_t)(dash - e->d_name));
            (*out)[n].partition = atoi(dash + 1);
            n++;
        }
        closedir(dir);
    }
    return n;
}

/* How many of tps[0..n) have this broker in an ISR of two or more (-1: cannot read). A state
 * whose read failed (gr_kzk_get_partition_states answers 0 unless every read failed) may list
 * it: -1 too, not "not listed". Absent (topic deleted) or unparsable states list nobody. */
static int still_listed(struct gr_kzk *kzk, const struct gr_kzk_tp *tps, int n, int32_t id) {
    struct gr_kzk_state_result *res = gr_calloc((size_t)(n ? n : 1), sizeof *res);
    int rc = gr_kzk_get_partition_states(kzk, tps, n, res);
    int listed = 0;
    bool unknown = rc != 0;
    for (int i = 0; i < n; i++) {
        if (rc == 0 && res[i].rc != 0 && res[i].rc != GR_KZK_ENONODE && res[i].rc != GR_ECORRUPT) unknown = true;
        if (rc == 0 && res[i].rc == 0 && res[i].lai.n_isr > 1)
            for (int j = 0; j < res[i].lai.n_isr; j++)
                if (res[i].lai.isr[j] == id) listed++;
        gr_kzk_leader_and_isr_release(&res[i].lai);
    }
    free(res);
    return unknown ? -1 : listed;
}

int gr_unclean_restart_wait(struct gr_kzk *kzk, const struct gr_config *cfg, int32_t broker_id, int64_t timeout_ms) {
    int32_t *ids = NULL;
    int nids = 0;
    if (gr_kzk_get_broker_ids(kzk, false, &ids, &nids) != 0) nids = 0;
    bool others = false;
    for (int i = 0; i < nids; i++) others = others || ids[i] != broker_id;
    free(ids);
    struct gr_kzk_tp *tps = NULL;
    int n = others ? local_partitions(cfg, &tps) : 0;
    int listed = n > 0 ? still_listed(kzk, tps, n, broker_id) : 0;
    int64_t t0 = gr_mono_ms();
    if (listed != 0)
        gr_info(LOGGER, "[KafkaServer id=%d] Waiting (at most %lld ms) for the controller to take this broker's "
                        "previous run out of the ISRs of %d partition(s) before registering",
                broker_id, (long long)timeout_ms, listed);
    while (listed != 0 && gr_mono_ms() - t0 < timeout_ms) {
        struct timespec ts = {0, POLL_MS * 1000000L};
        nanosleep(&ts, NULL);
        listed = still_listed(kzk, tps, n, broker_id);
    }
    if (listed > 0)
        gr_warn(LOGGER, "[KafkaServer id=%d] %d partition(s) still list this broker's previous run in their ISR after "
                        "%lld ms; registering anyway",
                broker_id, listed, (long long)(gr_mono_ms() - t0));
    else if (listed < 0)
        gr_warn(LOGGER, "[KafkaServer id=%d] Cannot read the partition states of this broker's logs for %lld ms; "
                        "registering anyway",
                broker_id, (long long)(gr_mono_ms() - t0));
    else if (n > 0 && gr_mono_ms() - t0 >= POLL_MS)
        gr_info(LOGGER, "[KafkaServer id=%d] The controller handled this broker's previous run after %lld ms",
                broker_id, (long long)(gr_mono_ms() - t0));
    if (n > 0) gr_kzk_tps_release(tps, n);
    return listed > 0 ? listed : 0;
}
