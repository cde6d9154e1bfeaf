/* The AlterIsr API (key 56, v0) on the broker that may be the controller: the request handler
 * only checks that this broker is the active controller and enqueues an AlterIsrReceived event
 * (payload: struct gr_ctrl_alter_isr_payload, flows.h); the controller's event thread answers it
 * with gr_ctrl_alter_isr_complete (or gr_ctrl_alter_isr_fail(NOT_CONTROLLER) when it is not
 * active). An event dropped unprocessed (preempted, manager closed) answers NOT_CONTROLLER
 * through its payload_free. */
#ifndef GR_CONTROLLER_ALTER_ISR_API_H
#define GR_CONTROLLER_ALTER_ISR_API_H

/* Registers the AlterIsr handler in the broker's API registry (api/apis.h). Call once at
 * start-up, before the network server starts. Returns 0 or -EINVAL. */
int gr_ctrl_alter_isr_register_api(void);

#endif
