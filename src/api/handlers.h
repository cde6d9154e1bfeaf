/* Request handlers implemented in src/broker/handle_*.c (private to the broker module; the
 * contract is gr_api_handler_fn in apis.h). */
#ifndef GR_BROKER_HANDLERS_H
#define GR_BROKER_HANDLERS_H

#include "api/apis.h"

void gr_handle_api_versions(struct gr_broker *b, struct gr_api_req *req,
                            const struct gr_req_header *hdr, void *body);
void gr_handle_metadata(struct gr_broker *b, struct gr_api_req *req,
                        const struct gr_req_header *hdr, void *body);
void gr_handle_create_topics(struct gr_broker *b, struct gr_api_req *req,
                             const struct gr_req_header *hdr, void *body);
void gr_handle_create_partitions(struct gr_broker *b, struct gr_api_req *req,
                                 const struct gr_req_header *hdr, void *body);
void gr_handle_leader_and_isr(struct gr_broker *b, struct gr_api_req *req,
                              const struct gr_req_header *hdr, void *body);
void gr_handle_stop_replica(struct gr_broker *b, struct gr_api_req *req,
                            const struct gr_req_header *hdr, void *body);
void gr_handle_update_metadata(struct gr_broker *b, struct gr_api_req *req,
                               const struct gr_req_header *hdr, void *body);
/* InitProducerId (handle_init_producer_id.c); uses b->producer_id_manager. */
void gr_handle_init_producer_id(struct gr_broker *b, struct gr_api_req *req,
                                const struct gr_req_header *hdr, void *body);

#endif
