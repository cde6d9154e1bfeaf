/* placeholder, replaced below */
#include "api/handlers.h"
#include "common/kerr.h"
void gr_handle_describe_client_quotas(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr, void *body)
{
    (void)b, (void)hdr, (void)body;
    struct DescribeClientQuotasResponse *resp = gr_api_new_response(req);
    resp->EntriesCount = 0;
    gr_api_respond(req, resp);
}
void gr_handle_alter_client_quotas(struct gr_broker *b, struct gr_api_req *req, const struct gr_req_header *hdr, void *body)
{
    (void)b, (void)hdr, (void)body;
    struct AlterClientQuotasResponse *resp = gr_api_new_response(req);
    resp->EntriesCount = 0;
    gr_api_respond(req, resp);
}
