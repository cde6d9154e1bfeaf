/* A lean Metadata probe for bench_failover.py: polls ONE broker's Metadata (v1, all topics) over
 * one kept connection, back to back, and reports each poll. The Python client's list_topics costs
 * 0.4-0.9 s per poll at 100k partitions (building Python objects), which blurs "when did the
 * broker first answer X" by a poll or two; this probe parses the raw answer in place, so its poll
 * is about what the broker needs to build and send it.
 *
 * Usage: md_probe HOST PORT VICTIM PREFIX TIMEOUT_S [GAP_MS]
 *   Prints "poll T1 T2 PARTS BAD" per poll (T1/T2: CLOCK_REALTIME seconds when the request was
 *   sent / the answer parsed; PARTS: partitions of topics whose name starts with PREFIX; BAD: of
 *   those, partitions whose leader is VICTIM or none), and "done MID" (the midpoint of the first
 *   poll with PARTS > 0 and BAD == 0) before exiting 0; exits 1 after TIMEOUT_S without it, 2 on
 *   an error. The same predicate as bench_failover.py's Python watcher (every partition of the
 *   bench's topics has a leader other than the stopped broker); it only reads the answer faster.
 *   GAP_MS (default 0): pause between polls, and at least as long as the last poll took, so
 *   that the probe keeps a broker building its (100k-partition) answers at most half the time
 *   of one thread: an all-topics answer costs the broker ~1 ms of CPU per 10k partitions
 *   (bench_md_cpu.py).
 * Built by CMake (target md_probe, build/bench/md_probe). Prints figures; not a test. */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_real(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int io_all(int fd, void *buf, size_t n, int writing) {
    char *p = buf;
    while (n > 0) {
        ssize_t r = writing ? write(fd, p, n) : read(fd, p, n);
        if (r <= 0) return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* A bounds-checked cursor over the answer; any overrun sets bad. */
struct cur {
    const unsigned char *p, *end;
    int bad;
};

static int32_t rd32(struct cur *c) {
    if (c->end - c->p < 4) { c->bad = 1; return 0; }
    int32_t v = (int32_t)((uint32_t)c->p[0] << 24 | (uint32_t)c->p[1] << 16 | (uint32_t)c->p[2] << 8 | c->p[3]);
    c->p += 4;
    return v;
}

static int16_t rd16(struct cur *c) {
    if (c->end - c->p < 2) { c->bad = 1; return 0; }
    int16_t v = (int16_t)((uint16_t)c->p[0] << 8 | c->p[1]);
    c->p += 2;
    return v;
}

static void skip(struct cur *c, long n) {
    if (n < 0 || c->end - c->p < n) { c->bad = 1; return; }
    c->p += n;
}

/* One Metadata v1 answer: counts the PREFIX topics' partitions and the bad ones. */
static int parse(const unsigned char *buf, size_t len, int32_t victim, const char *prefix, long *parts, long *bad) {
    struct cur c = {.p = buf, .end = buf + len};
    size_t plen = strlen(prefix);
    *parts = *bad = 0;
    rd32(&c); /* correlation id */
    int32_t nb = rd32(&c);
    for (int32_t i = 0; i < nb && !c.bad; i++) {
        rd32(&c);
        skip(&c, rd16(&c));
        rd32(&c);
        int16_t rack = rd16(&c);
        if (rack > 0) skip(&c, rack);
    }
    rd32(&c); /* controller id */
    int32_t nt = rd32(&c);
    for (int32_t t = 0; t < nt && !c.bad; t++) {
        rd16(&c);
        int16_t nl = rd16(&c);
        const unsigned char *name = c.p;
        skip(&c, nl);
        int ours = nl >= 0 && (size_t)nl >= plen && memcmp(name, prefix, plen) == 0;
        skip(&c, 1); /* is_internal */
        int32_t np = rd32(&c);
        for (int32_t p = 0; p < np && !c.bad; p++) {
            rd16(&c);
            rd32(&c);
            int32_t leader = rd32(&c);
            skip(&c, 4L * rd32(&c)); /* replicas */
            skip(&c, 4L * rd32(&c)); /* isr */
            if (ours) {
                (*parts)++;
                if (leader == victim || leader < 0) (*bad)++;
            }
        }
    }
    return c.bad ? -1 : 0;
}

int main(int argc, char **argv) {
    if (argc != 6 && argc != 7) {
        fprintf(stderr, "usage: %s HOST PORT VICTIM PREFIX TIMEOUT_S [GAP_MS]\n", argv[0]);
        return 2;
    }
    int32_t victim = atoi(argv[3]);
    const char *prefix = argv[4];
    double deadline = now_real() + atof(argv[5]);
    int gap_ms = argc == 7 ? atoi(argv[6]) : 0;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
    if (getaddrinfo(argv[1], argv[2], &hints, &ai) != 0) return 2;
    int fd = socket(ai->ai_family, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        perror("connect");
        return 2;
    }
    freeaddrinfo(ai);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    static const char client[] = "md_probe";
    unsigned char req[64];
    size_t rl = 4;
    req[rl++] = 0, req[rl++] = 3; /* api key Metadata */
    req[rl++] = 0, req[rl++] = 1; /* version 1 */
    size_t corr_at = rl;
    rl += 4;
    req[rl++] = 0, req[rl++] = (unsigned char)(sizeof client - 1);
    memcpy(req + rl, client, sizeof client - 1);
    rl += sizeof client - 1;
    req[rl++] = 0xff, req[rl++] = 0xff, req[rl++] = 0xff, req[rl++] = 0xff; /* topics: null = all */
    uint32_t sz = htonl((uint32_t)(rl - 4));
    memcpy(req, &sz, 4);
    unsigned char *buf = NULL;
    size_t cap = 0;
    for (uint32_t corr = 1; corr == 1 || now_real() < deadline; corr++) { /* at least one poll */
        uint32_t c = htonl(corr);
        memcpy(req + corr_at, &c, 4);
        double t1 = now_real();
        uint32_t n;
        if (io_all(fd, req, rl, 1) || io_all(fd, &n, 4, 0)) {
            fprintf(stderr, "md_probe: connection lost\n");
            return 2;
        }
        n = ntohl(n);
        if (n > cap) {
            cap = n;
            buf = realloc(buf, cap);
        }
        if (!buf || io_all(fd, buf, n, 0)) return 2;
        long parts, bad;
        if (parse(buf, n, victim, prefix, &parts, &bad)) {
            fprintf(stderr, "md_probe: cannot parse the answer\n");
            return 2;
        }
        double t2 = now_real();
        printf("poll %.6f %.6f %ld %ld\n", t1, t2, parts, bad);
        if (parts > 0 && bad == 0) {
            printf("done %.6f\n", (t1 + t2) / 2);
            fflush(stdout);
            return 0;
        }
        fflush(stdout);
        if (gap_ms > 0) {
            double gap = (double)gap_ms / 1e3;
            if (t2 - t1 > gap) gap = t2 - t1;
            usleep((useconds_t)(gap * 1e6));
        }
    }
    return 1;
}
