/* Delayed-operation purgatory: requests that wait for something to happen (acks=all Produce
 * waiting for the ISR, long-poll Fetch waiting for bytes) park here instead of blocking an I/O
 * thread, in the spirit of Kafka's DelayedOperationPurgatory.
 *
 * An operation watches one or more 64-bit keys (the replica manager uses one key per partition).
 * Whoever changes something a waiting operation may care about (an append, a high-watermark
 * move, a follower fetch, a leadership change) calls gr_purgatory_check(key); every operation
 * watching that key is re-evaluated with its try_complete callback. An operation that does not
 * complete in time is expired by the purgatory's reaper thread.
 *
 * Lifetime rules (numbered so other code can cite them)
 * 1. The creator embeds struct gr_delayed_op in its own struct, calls gr_delayed_op_init, then
 *    hands it to gr_purgatory_submit, which takes ownership: the creator must not touch the op
 *    after submit returns (it may already be completed and freed).
 * 2. on_complete runs exactly once per operation, with expired = true only when the deadline
 *    passed first. It runs on whichever thread completed the op (the submitter, a checker or the
 *    reaper), never with a purgatory lock or the op's lock held. It typically encodes and sends
 *    the response (gr_net_respond from any thread is allowed by the network layer).
 * 3. try_complete runs with the op's own lock held, so at most one thread evaluates a given op at
 *    a time; it must not block and must not call into the purgatory. It returns true when the op
 *    should complete now (on_complete then follows, with expired = false).
 * 4. destroy runs once, after on_complete, when no thread references the op any more.
 * 5. Keys are opaque: two different partitions may share a key by accident (e.g. a reused
 *    pointer); that only costs a spurious try_complete.
 * 6. gr_purgatory_free expires every waiting op (rule 2, expired = true) and joins the reaper.
 *
 * Threading: every function may be called from any thread, but the caller of gr_purgatory_check
 * and gr_purgatory_submit must not hold locks that a try_complete callback takes. */
#ifndef GR_BROKER_PURGATORY_H
#define GR_BROKER_PURGATORY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gr_purgatory;
struct gr_delayed_op;

struct gr_delayed_op_vt {
    bool (*try_complete)(struct gr_delayed_op *op);
    void (*on_complete)(struct gr_delayed_op *op, bool expired);
    void (*destroy)(struct gr_delayed_op *op);
};

#define GR_DELAYED_OP_INLINE_KEYS 4

/* Embedded in the user's struct; fields are private to purgatory.c except where noted. */
struct gr_delayed_op {
    const struct gr_delayed_op_vt *vt;
    int64_t deadline_ms;          /* gr_mono_ms() deadline; read-only for the user */
    atomic_int completed;         /* 0 waiting, 1 claimed by a completer */
    atomic_int refs;
    pthread_mutex_t lock;         /* held around try_complete */
    bool registered;              /* in the heap and the watch lists (purgatory lock) */
    size_t heap_idx;
    uint64_t *keys;
    int nkeys;
    uint64_t inline_keys[GR_DELAYED_OP_INLINE_KEYS];
    /* Set (op lock held) for each try_complete: the key whose gr_purgatory_check runs it, or 0
     * from gr_purgatory_submit (evaluate everything). An op watching many keys may then look at
     * that key's state only: everything else was found not ready before and any change to it
     * comes with its own check (a follower's fetch watches every partition it follows, and a
     * full evaluation per check made N checks cost O(N^2)). */
    uint64_t woken_key;
    /* With woken_key 0 from gr_purgatory_check_many: the keys that woke it, sorted ascending
     * (n_woken > 0; valid during try_complete only). n_woken 0: evaluate everything. */
    const uint64_t *woken_keys;
    int n_woken;
    uint64_t check_stamp; /* private: gr_purgatory_check_many's de-duplication (purgatory lock) */
    int check_idx;
};

/* Creates a purgatory named `name` (for logs and the reaper thread's name) and starts its reaper
 * thread. Returns NULL only if the thread cannot be created (logged). */
struct gr_purgatory *gr_purgatory_new(const char *name);

/* Expires every waiting operation (rule 6), stops the reaper and frees the purgatory. NULL is
 * ignored. Must not be called while other threads may still call submit/check on it. */
void gr_purgatory_free(struct gr_purgatory *p);

/* Prepares op: vt callbacks, a timeout (ms from now, clamped at >= 0). Does not allocate. */
void gr_delayed_op_init(struct gr_delayed_op *op, const struct gr_delayed_op_vt *vt, int64_t timeout_ms);

/* Takes ownership of op (rule 1). Tries to complete it at once; if it cannot, watches keys[0..n)
 * (copied) and arms its deadline, then tries once more so that an event that raced with the
 * registration is not lost. Returns true if the op completed during this call. */
bool gr_purgatory_submit(struct gr_purgatory *p, struct gr_delayed_op *op, const uint64_t *keys, int nkeys);

/* Re-evaluates every operation watching key; completes those whose try_complete says so.
 * Returns how many completed. */
int gr_purgatory_check(struct gr_purgatory *p, uint64_t key);

/* gr_purgatory_check for many keys at once (a LeaderAndIsr changes thousands of partitions):
 * every operation watching any of the keys is evaluated once, with woken_key = its key when
 * only one of them concerns it, else woken_key 0 and woken_keys / n_woken = the ones that do.
 * Returns how many completed. */
int gr_purgatory_check_many(struct gr_purgatory *p, const uint64_t *keys, int nkeys);

/* Operations currently waiting (watched and not completed). */
int64_t gr_purgatory_waiting(struct gr_purgatory *p);

/* There is deliberately no "complete these now" call: callers change state first (e.g. "no
 * longer the leader") and then call gr_purgatory_check, so try_complete sees the change and the
 * op answers with the right error. */

#endif
