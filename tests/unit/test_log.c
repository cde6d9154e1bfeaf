/* The logger (src/common/log.c): lines from many threads in a burst arrive whole, in each
 * thread's order, with far fewer write(2) calls than lines; an isolated line is written at once. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "support/check.h"

#define THREADS 4
#define LINES 5000

static void *burst(void *arg) {
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < LINES; i++)
        gr_info("state.change.logger", "[Controller id=1 epoch=2] thread %d line %d %s", id, i,
                "Partition t-1 state changed to (Leader:-1,ISR:[3],LeaderEpoch:4,ControllerEpoch:2)");
    return NULL;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    CHECK(fread(s, 1, (size_t)n, f) == (size_t)n);
    s[n] = 0;
    fclose(f);
    return s;
}

int main(void) {
    char path[] = "/tmp/gregor-test-log-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    CHECK(gr_log_open(path) == 0);

    /* an isolated line is in the file as soon as the call returns */
    usleep(5000);
    gr_info("test", "isolated line");
    char *s = slurp(path);
    CHECK(strstr(s, "INFO isolated line (test)\n") != NULL);
    free(s);

    long w0 = gr_log_write_count();
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) CHECK(pthread_create(&t[i], NULL, burst, (void *)(intptr_t)i) == 0);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    gr_log_flush();
    long writes = gr_log_write_count() - w0;
    printf("%d lines in %ld write(2) calls\n", THREADS * LINES, writes);
    CHECK(writes < THREADS * LINES / 20);

    /* an error in a burst is in the file as soon as the call returns, after the lines before it */
    for (int i = 0; i < 100; i++) gr_info("test", "burst before the error %d", i);
    gr_error("test", "the error");
    s = slurp(path);
    char *e = strstr(s, "ERROR the error (test)\n");
    CHECK(e != NULL);
    CHECK(e && strstr(s, "burst before the error 99 (test)\n") != NULL &&
          strstr(s, "burst before the error 99 (test)\n") < e);
    free(s);

    s = slurp(path);
    int next[THREADS] = {0}, lines = 0;
    for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n")) {
        int id, i;
        const char *m = strstr(line, "thread ");
        if (!m) continue;
        CHECK(sscanf(m, "thread %d line %d", &id, &i) == 2);
        CHECK(id >= 0 && id < THREADS && i == next[id]); /* each thread's lines whole and in order */
        next[id]++;
        CHECK(line[0] == '[' && strstr(line, "] INFO [Controller id=1 epoch=2] thread ") != NULL);
        CHECK(strstr(line, "ControllerEpoch:2) (state.change.logger)") != NULL);
        lines++;
    }
    CHECK(lines == THREADS * LINES);
    free(s);
    unlink(path);
    if (test_failures) {
        fprintf(stderr, "test_log: %d check(s) failed\n", test_failures);
        return 1;
    }
    printf("test_log: ok\n");
    return 0;
}
