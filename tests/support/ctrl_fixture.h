/* The fixture of the controller state-machine unit tests (test_state_machines.c,
 * test_topic_deletion.c): the state machines (struct gr_ctrl_sm) over an in-memory ZooKeeper
 * (memzk.h) and a recording sender, with controller 1 at epoch 2 and brokers 1..3 live.
 *
 * The fixture is one set of globals: setup() builds it, teardown() frees it; a test calls
 * setup() first and teardown() last. Single-threaded. */
#ifndef GR_TESTS_SUPPORT_CTRL_FIXTURE_H
#define GR_TESTS_SUPPORT_CTRL_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/metrics.h"
#include "controller/context.h"
#include "controller/event_manager.h"
#include "controller/sender.h"
#include "controller/states.h"
#include "protocol/messages.h"
#include "support/check.h"
#include "support/memzk.h"
#include "zk/kzk.h"

/* ---- recording sender: every send is kept (request and completion event owned here) ---- */

struct sent {
    int32_t broker;
    int16_t api_key;
    void *req;
    void (*req_free)(void *);
    struct gr_ctrl_event *ev;
};
#define MAXSENT 256
extern struct sent sent[MAXSENT];
extern int n_sent;
/* Channel changes in order: "+<id>" for add_broker, "-<id>" for remove_broker. */
extern char chan_log[512];
extern const struct gr_ctrl_sender_ops rec_ops;

/* Frees every recorded request and event; empties sent[] and chan_log. */
void clear_sent(void);
/* How many recorded requests have api_key and go to broker (broker < 0: any). */
int count_sent(int16_t api_key, int32_t broker);
/* The LeaderAndIsr partition state for t-p sent to broker, or NULL (borrowed from sent[]). */
const struct LeaderAndIsrRequest_LeaderAndIsrPartitionState *sent_lai(int32_t broker, const char *t, int32_t p);

/* ---- the fixture ---- */

extern struct memzk *zk;
extern struct gr_kzk *kzk;
extern struct gr_ctrl_context ctx;
extern struct gr_ctrl_sm sm;
extern struct gr_metrics *metrics;

/* A registration of broker id (id < 8) with one PLAINTEXT endpoint localhost:9090+id. The
 * endpoint is static storage shared by all calls for the same id. */
struct gr_kzk_broker mkbroker(int32_t id, int64_t epoch);
/* Adds broker id to the context's live brokers. */
void add_live(int32_t id, int64_t epoch);
/* Creates /brokers/topics/<name> (np partitions, rf replicas each from reps, row by row) and
 * puts the assignment into the context. */
void create_topic(const char *name, int np, const int32_t *reps, int rf);
/* Reads t-p's state znode into *out (caller releases it); 0 or the kzk / ZooKeeper code. */
int read_state(const char *t, int32_t p, struct gr_kzk_leader_and_isr *out);
/* True if l's ISR is exactly want[0..n) in order. */
bool isr_is(const struct gr_kzk_leader_and_isr *l, const int32_t *want, int n);
void setup(void);
void teardown(void);

#endif
