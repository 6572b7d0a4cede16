/*
 * keyplane from a C packet loop: a flow table mapping IPv4 5-tuples to an
 * output port, looked up a burst at a time as a DPDK/VPP worker would
 * (rte_eth_rx_burst → parse → one batched lookup → forward).
 *
 *   keyplane build --generate 100000 --gen-key-type fivetuple -l 8 -O filtered=8 \
 *       --dump-keys flows.tsv --out flows.kpl
 *   cc -O2 -Icrates/keyplane-capi/include examples/c/packet_loop.c \
 *       target/release/libkeyplane_c.a -lpthread -ldl -lm -o packet_loop
 *   ./packet_loop flows.kpl flows.tsv
 *
 * flows.tsv holds `HEX-5-TUPLE<TAB>PORT` lines; the program replays them
 * as a packet stream, checks every forwarding decision and prints the rate.
 * Updates: a control thread calls kp_table_apply(table, delta, len) with the
 * bytes of `keyplane update` (or Python's insert/remove) while this loop
 * keeps running — lookups never block on it.
 */
#define _POSIX_C_SOURCE 199309L
#include "keyplane.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KEY_LEN 13 /* src(4) dst(4) sport(2) dport(2) proto(1) */
#define BURST 32

struct packet { uint8_t five_tuple[KEY_LEN]; uint8_t expected_port; };

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static unsigned char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); exit(2); }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(n > 0 ? (size_t)n : 1);
    if (!b || fread(b, 1, (size_t)n, f) != (size_t)n) { perror(path); exit(2); }
    fclose(f);
    *len = (size_t)n;
    return b;
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: %s TABLE.kpl FLOWS.tsv\n", argv[0]); return 2; }
    size_t blen;
    unsigned char *blob = slurp(argv[1], &blen);
    kp_table *table = NULL;
    kp_status s = kp_table_from_bytes(blob, blen, &table);
    free(blob);
    if (s != KP_OK) {
        fprintf(stderr, "%s: %s: %s\n", argv[1], kp_status_str(s), kp_last_error());
        return 1;
    }

    /* Load the flows as packets. */
    FILE *f = fopen(argv[2], "r");
    if (!f) { perror(argv[2]); return 2; }
    size_t cap = 1024, n = 0;
    struct packet *pk = malloc(cap * sizeof *pk);
    char line[256];
    while (fgets(line, sizeof line, f)) {
        if (strlen(line) < 2 * KEY_LEN + 2) continue;
        if (n == cap) pk = realloc(pk, (cap *= 2) * sizeof *pk);
        for (int i = 0; i < KEY_LEN; i++)
            pk[n].five_tuple[i] = (uint8_t)(hexval(line[2 * i]) << 4 | hexval(line[2 * i + 1]));
        pk[n].expected_port = (uint8_t)atoi(line + 2 * KEY_LEN + 1);
        n++;
    }
    fclose(f);

    /* The loop: gather a burst of keys back to back, one batched lookup. */
    uint8_t burst[BURST * KEY_LEN];
    uint64_t port[BURST];
    uint8_t hit[BURST];
    uint64_t per_port[256] = {0}, dropped = 0, wrong = 0;
    const int rounds = 20;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int r = 0; r < rounds; r++) {
        for (size_t i = 0; i < n; i += BURST) {
            size_t m = n - i < BURST ? n - i : BURST;
            for (size_t j = 0; j < m; j++) memcpy(burst + j * KEY_LEN, pk[i + j].five_tuple, KEY_LEN);
            kp_table_get_batch_fixed(table, burst, KEY_LEN, m, port, hit, NULL);
            for (size_t j = 0; j < m; j++) {
                if (!hit[j]) { dropped++; continue; }  /* unknown flow: to the slow path */
                per_port[port[j] & 0xff]++;            /* tx_burst(port[j], ...) */
                if (port[j] != pk[i + j].expected_port) wrong++;
            }
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    double pkts = (double)n * rounds;
    int ports = 0;
    for (int p = 0; p < 256; p++) ports += per_port[p] > 0;
    printf("packet loop: %zu flows x %d rounds, %.1f Mpps (%.1f ns/packet) on one core, %d output ports used, "
           "%llu dropped, %llu wrong\n",
           n, rounds, pkts / secs / 1e6, secs * 1e9 / pkts, ports, (unsigned long long)dropped,
           (unsigned long long)wrong);
    kp_table_free(table);
    free(pk);
    return (wrong == 0 && dropped == 0) ? 0 : 1;
}
