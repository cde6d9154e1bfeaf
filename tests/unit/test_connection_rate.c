/* KIP-612 connection creation rates (net/connection_rate.h): broker-wide and per-listener limits
 * (the protected listener exempt from the broker-wide one only), per-IP quotas with <default>,
 * a refused connection not counted, idle per-IP sensors removed, address normalization. */
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "net/connection_rate.h"
#include "support/check.h"

int test_failures;

#define NONE GR_CONN_RATE_NONE

static void test_broker_and_listener(void) {
    /* 2 windows of 1 s: the rate is the count over >= 1 s */
    int lr[2] = {NONE, 3};
    struct gr_conn_rate *r = gr_conn_rate_new(2, 0, 2, lr, 2, 1000);
    int64_t t = 100000;
    /* listener 0 is protected: the broker-wide limit (2) does not apply to it */
    for (int i = 0; i < 5; i++) CHECK(gr_conn_rate_accept(r, 0, t) == 0);
    /* listener 1: the broker-wide 2/s applies (its own 3 too) */
    CHECK(gr_conn_rate_accept(r, 1, t) == 0);
    CHECK(gr_conn_rate_accept(r, 1, t) == 0);
    int64_t w = gr_conn_rate_accept(r, 1, t); /* 3 > 2: (3-2)/2 * 1000 */
    CHECK(w == 500);
    for (int i = 0; i < 20; i++) w = gr_conn_rate_accept(r, 1, t);
    CHECK(w == 1000); /* at most one window */
    gr_conn_rate_free(r);
    /* unset listener rates: each listener gets the broker-wide value, the protected one too */
    r = gr_conn_rate_new(2, 0, 1, NULL, 2, 1000);
    CHECK(gr_conn_rate_accept(r, 0, t) == 0);
    CHECK(gr_conn_rate_accept(r, 0, t) > 0);
    gr_conn_rate_free(r);
}

static void test_ip_quotas(void) {
    struct gr_conn_rate *r = gr_conn_rate_new(1, -1, NONE, NULL, 2, 1000);
    int64_t t = 100000;
    CHECK(gr_conn_rate_ip(r, "10.0.0.1", t) == 0); /* no quota: no sensor */
    CHECK(gr_conn_rate_ip_sensors(r) == 0);
    const char *ips[] = {"::ffff:10.0.0.1", "not-an-ip"};
    double rates[] = {2, 5};
    gr_conn_rate_set_ip_quotas(r, 1, ips, rates, 2);
    CHECK(gr_conn_rate_ip(r, "10.0.0.1", t) == 0);
    CHECK(gr_conn_rate_ip(r, "10.0.0.1", t) == 0);
    CHECK(gr_conn_rate_ip(r, "10.0.0.1", t) == 500); /* (3-2)/2 s */
    CHECK(gr_conn_rate_ip(r, "10.0.0.1", t) == 500); /* the refused one was not counted */
    CHECK(gr_conn_rate_ip(r, "10.0.0.2", t) == 0);   /* <default> 1/s */
    CHECK(gr_conn_rate_ip(r, "10.0.0.2", t) == 1000);
    /* many addresses under <default>: sensors dropped an hour after their last connection */
    char ip[32];
    for (int i = 0; i < 3000; i++) {
        snprintf(ip, sizeof ip, "10.1.%d.%d", i / 256, i % 256);
        gr_conn_rate_ip(r, ip, t + 1);
    }
    CHECK(gr_conn_rate_ip_sensors(r) == 3002);
    gr_conn_rate_ip(r, "10.0.0.1", t + 1800 * 1000LL);
    CHECK(gr_conn_rate_ip_sensors(r) == 3002);
    gr_conn_rate_ip(r, "10.0.0.9", t + 3700 * 1000LL);
    CHECK(gr_conn_rate_ip_sensors(r) == 2); /* 10.0.0.1 (half an hour ago) and 10.0.0.9 */
    /* the quotas go: no more limits, sensors dropped at the next sweep */
    gr_conn_rate_set_ip_quotas(r, -1, NULL, NULL, 0);
    CHECK(gr_conn_rate_ip(r, "10.0.0.1", t + 3800 * 1000LL) == 0);
    CHECK(gr_conn_rate_ip_sensors(r) == 0);
    gr_conn_rate_free(r);
}

static void test_normalize(void) {
    char out[64];
    CHECK(gr_conn_rate_normalize_ip("::ffff:1.2.3.4", out, sizeof out) && strcmp(out, "1.2.3.4") == 0);
    CHECK(gr_conn_rate_normalize_ip("0:0:0:0:0:0:0:1", out, sizeof out) && strcmp(out, "::1") == 0);
    CHECK(gr_conn_rate_normalize_ip("1.2.3.4", out, sizeof out) && strcmp(out, "1.2.3.4") == 0);
    CHECK(!gr_conn_rate_normalize_ip("host.example", out, sizeof out));
}

int main(void) {
    gr_log_set_level(GR_LOG_ERROR);
    test_broker_and_listener();
    test_ip_quotas();
    test_normalize();
    if (test_failures) fprintf(stderr, "%d failure(s)\n", test_failures);
    return test_failures ? 1 : 0;
}
