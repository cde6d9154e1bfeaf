/* Producer id manager (Kafka 2.7's coordinator/transaction/ProducerIdManager): hands out
 * producer ids for InitProducerId from a block of 1000 this broker owns in ZooKeeper.
 *
 * /latest_producer_id_block holds the last block any broker claimed, as Kafka's JSON
 * {"version":1,"broker":B,"block_start":"S","block_end":"E"} (ends inclusive). Claim loop
 * (unbounded, as Kafka): read data + zkVersion; the next block is [E+1, E+1000] ([0, 999] when the
 * znode is empty); write it with setData conditional on that version. BADVERSION means another
 * broker won the race -- unless the znode now holds exactly our block (a retried write that had
 * landed before the connection dropped), which counts as success; otherwise loop. A missing
 * znode is created empty and the loop goes on. E > INT64_MAX - 1000 is fatal (-EOVERFLOW,
 * logged). So ids are unique across brokers, restarts and concurrent claims.
 *
 * Ownership and threading: gr_pidm_new borrows the kzk (it must outlive the manager). Every call
 * may come from any thread; one mutex serialises them, and is held across the ZooKeeper round
 * trips of a claim (callers wanting ids wait for the claim, as in Kafka's synchronized method). */
#ifndef GR_COORDINATOR_PRODUCER_ID_MANAGER_H
#define GR_COORDINATOR_PRODUCER_ID_MANAGER_H

#include <stdint.h>

#define GR_PIDM_BLOCK_SIZE 1000

struct gr_kzk;
struct gr_pidm;

/* No ZooKeeper access yet: the first block is claimed by gr_pidm_claim or the first generate. */
struct gr_pidm *gr_pidm_new(struct gr_kzk *zk, int32_t broker_id);
void gr_pidm_free(struct gr_pidm *m);

/* Claims the next block now (Kafka does this when the coordinator starts). 0 or an error (kzk
 * codes, -EOVERFLOW when the id space is exhausted). */
int gr_pidm_claim(struct gr_pidm *m);

/* The next producer id: ids of the current block in order, then a new block. 0 or an error
 * (as gr_pidm_claim). */
int gr_pidm_generate(struct gr_pidm *m, int64_t *producer_id);

/* The block currently owned: *start, *end (inclusive); both -1 before the first claim. */
void gr_pidm_current_block(struct gr_pidm *m, int64_t *start, int64_t *end);

#endif
