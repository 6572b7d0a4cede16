/*
 * C test program for the keyplane C API, run by crates/keyplane-capi/tests/run.sh
 * (which scripts/test.sh calls). Arguments: a blob built from keys
 * "key0".."key999" with value (i*7) % 256, fingerprints and emptiness on,
 * and a delta stream that sets key1000..key1099 to i % 256 and removes
 * key0..key9.
 */
#include "keyplane.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int passed = 0, failed = 0;

#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (cond) {                                                           \
            passed++;                                                         \
        } else {                                                              \
            failed++;                                                         \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);   \
            fprintf(stderr, __VA_ARGS__);                                     \
            fprintf(stderr, " (last error: %s)\n", kp_last_error());          \
        }                                                                     \
    } while (0)

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

static kp_status get(const kp_table *t, int i, uint64_t *v) {
    char k[32];
    int n = snprintf(k, sizeof k, "key%d", i);
    return kp_table_get(t, (const uint8_t *)k, (size_t)n, v);
}

static kp_status rget(const kp_reader *r, int i, uint64_t *v) {
    char k[32];
    int n = snprintf(k, sizeof k, "key%d", i);
    return kp_reader_get(r, (const uint8_t *)k, (size_t)n, v);
}

/* kp_table_get_u64 / kp_reader_get_u64 on a table of 8-byte keys (a keys
 * file of HEXKEY<TAB>VALUE lines, as `keyplane build --dump-keys` writes):
 * every key's value, and the same answer as kp_table_get on the key's 8
 * little-endian bytes for present and absent keys. */
static void check_u64_table(const char *blob_path, const char *keys_path) {
    size_t blen = 0;
    unsigned char *blob = slurp(blob_path, &blen);
    kp_table *t = NULL;
    kp_status s = kp_table_from_bytes(blob, blen, &t);
    CHECK(s == KP_OK && t != NULL, "u64 table %s: %s", blob_path, kp_status_str(s));
    if (!t) { free(blob); return; }
    kp_reader *r = NULL;
    CHECK(kp_reader_new(t, &r) == KP_OK, "u64 reader_new");
    FILE *f = fopen(keys_path, "r");
    CHECK(f != NULL, "open %s", keys_path);
    if (!f) { kp_reader_free(r); kp_table_free(t); free(blob); return; }
    char hex[64];
    unsigned long long want;
    int n = 0, wrong = 0, differ = 0;
    /* Every key and its absent neighbour, for the batch check below. */
    size_t cap = 1024, nk = 0;
    uint64_t *all = malloc(cap * sizeof *all);
    CHECK(all != NULL, "malloc");
    if (!all) { fclose(f); kp_reader_free(r); kp_table_free(t); free(blob); return; }
    while (fscanf(f, "%63s %llu", hex, &want) == 2) {
        unsigned char b[8] = {0};
        for (int i = 0; i < 8 && hex[2 * i] && hex[2 * i + 1]; i++) {
            unsigned x = 0;
            sscanf(hex + 2 * i, "%2x", &x);
            b[i] = (unsigned char)x;
        }
        uint64_t key = 0;
        for (int i = 7; i >= 0; i--) key = (key << 8) | b[i];
        uint64_t v1 = 0, v2 = 0, v3 = 0;
        kp_status s1 = kp_table_get_u64(t, key, &v1);
        kp_status s2 = kp_reader_get_u64(r, key, &v2);
        if (s1 != KP_OK || v1 != want || s2 != KP_OK || v2 != want) wrong++;
        /* An absent neighbour: same status and value as the byte path. */
        uint64_t alien = key ^ 0x5bd1e9955bd1e995ULL;
        unsigned char ab[8];
        for (int i = 0; i < 8; i++) ab[i] = (unsigned char)(alien >> (8 * i));
        v1 = v2 = v3 = 0;
        s1 = kp_table_get_u64(t, alien, &v1);
        s2 = kp_reader_get_u64(r, alien, &v2);
        kp_status s3 = kp_table_get(t, ab, 8, &v3);
        if (s1 != s3 || s2 != s3 || v1 != v3 || v2 != v3) differ++;
        n++;
        if (nk + 2 > cap) {
            uint64_t *more = realloc(all, 2 * cap * sizeof *all);
            CHECK(more != NULL, "realloc");
            if (!more) break;
            all = more;
            cap *= 2;
        }
        all[nk++] = key;
        all[nk++] = alien;
    }
    fclose(f);
    /* kp_table_get_batch_u64 / kp_reader_get_batch_u64: the same status
     * and value as kp_table_get_u64 for every key, present or absent, at
     * every batch length up to a few chunks (and odd offsets into the keys). */
    uint64_t *bv = calloc(nk + 1, sizeof *bv), *rv = calloc(nk + 1, sizeof *rv);
    uint8_t *bf = calloc(nk + 1, 1), *rf = calloc(nk + 1, 1);
    CHECK(bv && rv && bf && rf, "calloc");
    int batch_differ = 0;
    size_t lens[] = {1, 7, 16, 17, 33, 100, nk};
    for (size_t li = 0; bv && rv && bf && rf && li < sizeof lens / sizeof lens[0]; li++) {
        for (size_t at = 0; at < nk; at += lens[li]) {
            size_t m = nk - at < lens[li] ? nk - at : lens[li];
            size_t h1 = 12345, h2 = 12345, want_hits = 0;
            CHECK(kp_table_get_batch_u64(t, all + at, m, bv, bf, &h1) == KP_OK, "get_batch_u64");
            CHECK(kp_reader_get_batch_u64(r, all + at, m, rv, rf, &h2) == KP_OK, "reader_get_batch_u64");
            for (size_t j = 0; j < m; j++) {
                uint64_t v1 = 0;
                kp_status s1 = kp_table_get_u64(t, all[at + j], &v1);
                uint64_t want_v = s1 == KP_OK ? v1 : 0;
                uint8_t want_f = s1 == KP_OK;
                want_hits += want_f;
                if (bv[j] != want_v || bf[j] != want_f || rv[j] != want_v || rf[j] != want_f) batch_differ++;
            }
            if (h1 != want_hits || h2 != want_hits) batch_differ++;
        }
    }
    CHECK(batch_differ == 0, "%s: %d batch answers differ from get_u64", blob_path, batch_differ);
    /* Without `found` and `hits`; n = 0; NULL and misaligned arrays. */
    if (bv && nk > 0) {
        CHECK(kp_table_get_batch_u64(t, all, nk, bv, NULL, NULL) == KP_OK, "get_batch_u64 without found");
        uint64_t v1 = 0;
        kp_status s1 = kp_table_get_u64(t, all[nk - 1], &v1);
        CHECK(bv[nk - 1] == (s1 == KP_OK ? v1 : 0), "get_batch_u64 without found: last value");
    }
    size_t hz = 99;
    CHECK(kp_table_get_batch_u64(t, NULL, 0, NULL, NULL, &hz) == KP_OK && hz == 0, "get_batch_u64 n = 0");
    CHECK(kp_table_get_batch_u64(NULL, all, 1, bv, NULL, NULL) == KP_ERR_NULL, "get_batch_u64(NULL table)");
    CHECK(kp_table_get_batch_u64(t, NULL, 1, bv, NULL, NULL) == KP_ERR_NULL, "get_batch_u64(NULL keys)");
    CHECK(kp_table_get_batch_u64(t, all, 1, NULL, NULL, NULL) == KP_ERR_NULL, "get_batch_u64(NULL values)");
    CHECK(kp_reader_get_batch_u64(NULL, all, 1, bv, NULL, NULL) == KP_ERR_NULL, "reader_get_batch_u64(NULL)");
    CHECK(kp_reader_get_batch_u64(r, NULL, 1, bv, NULL, NULL) == KP_ERR_NULL, "reader_get_batch_u64(NULL keys)");
    if (bv && nk > 0) {
        uint64_t *odd = (uint64_t *)((char *)bv + 1);
        CHECK(kp_table_get_batch_u64(t, all, 1, odd, NULL, NULL) == KP_ERR_INVALID, "get_batch_u64(misaligned)");
    }
    free(bv);
    free(rv);
    free(bf);
    free(rf);
    free(all);
    /* A Bloom forwarder answers inserted keys with false positives of
     * other ports (thesis eq. 3.7), and partial-key cuckoo gives the first
     * slot whose fingerprint matches (another key's, rarely): for them only
     * the agreement with the byte path is checked. */
    const char *st = kp_table_structure(t);
    int exact = strcmp(st, "bfw") != 0 && strcmp(st, "cuckoo-partial") != 0;
    CHECK(n > 0 && (wrong == 0 || !exact), "%s: %d of %d keys wrong on the u64 path", blob_path, wrong, n);
    CHECK(differ == 0, "%s: %d absent keys answered differently by get_u64 and get", blob_path, differ);
    uint64_t v = 0;
    CHECK(kp_table_get_u64(NULL, 1, &v) == KP_ERR_NULL, "get_u64(NULL table)");
    CHECK(kp_table_get_u64(t, 1, NULL) == KP_ERR_NULL, "get_u64(NULL value)");
    CHECK(kp_reader_get_u64(NULL, 1, &v) == KP_ERR_NULL, "reader_get_u64(NULL)");
    kp_reader_free(r);
    kp_table_free(t);
    free(blob);
}

int main(int argc, char **argv) {
    if (argc < 4 || argc % 2 != 0) {
        fprintf(stderr, "usage: %s BLOB DELTAS OTHER_BLOB [U64_BLOB U64_KEYS]...\n", argv[0]);
        return 2;
    }
    for (int i = 4; i + 1 < argc; i += 2) check_u64_table(argv[i], argv[i + 1]);
    size_t blen, dlen;
    unsigned char *blob = slurp(argv[1], &blen);
    unsigned char *deltas = slurp(argv[2], &dlen);
    printf("keyplane C API %s\n", kp_version());

    kp_table *t = NULL;
    kp_status s = kp_table_from_bytes(blob, blen, &t);
    CHECK(s == KP_OK && t != NULL, "from_bytes: %s", kp_status_str(s));
    if (!t) return 1;
    CHECK(strcmp(kp_table_structure(t), "othello") == 0, "structure %s", kp_table_structure(t));
    CHECK(kp_table_value_bits(t) == 8, "value bits %u", kp_table_value_bits(t));
    CHECK(kp_table_kind(t) == 0x0101, "kind %#x", kp_table_kind(t));
    CHECK(kp_table_memory_bytes(t) > 0, "memory");
    CHECK(kp_table_detects_absent(t) == 1, "detects absent");

    /* Every key reads its value. */
    int wrong = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t v = 999;
        if (get(t, i, &v) != KP_OK || v != (uint64_t)((i * 7) % 256)) wrong++;
    }
    CHECK(wrong == 0, "%d of 1000 keys wrong after load", wrong);

    /* A per-thread read handle gives the same answers. */
    kp_reader *r = NULL;
    s = kp_reader_new(t, &r);
    CHECK(s == KP_OK && r != NULL, "reader_new: %s", kp_status_str(s));
    if (!r) return 1;
    wrong = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t v = 999;
        if (rget(r, i, &v) != KP_OK || v != (uint64_t)((i * 7) % 256)) wrong++;
    }
    for (int i = 5000; i < 6000; i++) {
        uint64_t v1 = 0, v2 = 0;
        if (get(t, i, &v1) != rget(r, i, &v2) || v1 != v2) wrong++;
    }
    CHECK(wrong == 0, "%d reader answers differ from the table's", wrong);
    CHECK(kp_reader_new(NULL, &r) == KP_ERR_NULL, "reader_new(NULL table)");
    CHECK(kp_reader_new(t, NULL) == KP_ERR_NULL, "reader_new(NULL out)");
    CHECK(kp_reader_get(NULL, (const uint8_t *)"k", 1, NULL) == KP_ERR_NULL, "reader_get(NULL)");

    /* Absent keys: fingerprints + emptiness reject nearly all of them. */
    int alien_found = 0;
    for (int i = 5000; i < 6000; i++) {
        uint64_t v;
        if (get(t, i, &v) == KP_OK) alien_found++;
    }
    CHECK(alien_found < 50, "%d of 1000 absent keys reported present", alien_found);

    /* Batch lookups (pointer + length arrays). */
    enum { B = 100 };
    char kb[B][32];
    const uint8_t *keys[B];
    size_t lens[B];
    uint64_t vals[B];
    uint8_t found[B];
    for (int i = 0; i < B; i++) {
        lens[i] = (size_t)snprintf(kb[i], sizeof kb[i], "key%d", i * 3);
        keys[i] = (const uint8_t *)kb[i];
    }
    size_t hits = 0;
    s = kp_table_get_batch(t, keys, lens, B, vals, found, &hits);
    CHECK(s == KP_OK && hits == B, "batch: %s hits %zu", kp_status_str(s), hits);
    wrong = 0;
    for (int i = 0; i < B; i++)
        if (!found[i] || vals[i] != (uint64_t)((i * 3 * 7) % 256)) wrong++;
    CHECK(wrong == 0, "%d batch answers wrong", wrong);

    /* Fixed-width batch: "key100".."key199" are 6 bytes each. */
    char fixed[100 * 6 + 1];
    for (int i = 0; i < 100; i++) snprintf(fixed + i * 6, 7, "key%d", 100 + i);
    s = kp_table_get_batch_fixed(t, (const uint8_t *)fixed, 6, 100, vals, NULL, &hits);
    CHECK(s == KP_OK && hits == 100, "fixed batch: %s hits %zu", kp_status_str(s), hits);
    wrong = 0;
    for (int i = 0; i < 100; i++)
        if (vals[i] != (uint64_t)(((100 + i) * 7) % 256)) wrong++;
    CHECK(wrong == 0, "%d fixed batch answers wrong", wrong);

    /* Another table of the same structure, options and keys refuses the
       deltas (table identity) and keeps its answers. */
    {
        size_t olen;
        unsigned char *oblob = slurp(argv[3], &olen);
        kp_table *o = NULL;
        s = kp_table_from_bytes(oblob, olen, &o);
        CHECK(s == KP_OK && o != NULL, "other from_bytes: %s", kp_status_str(s));
        s = kp_table_apply(o, deltas, dlen);
        CHECK(s == KP_ERR_DELTA_MISMATCH, "foreign delta: %s", kp_status_str(s));
        CHECK(strstr(kp_last_error(), "belongs to table") != NULL, "foreign delta message: %s", kp_last_error());
        uint64_t v = 0;
        CHECK(get(o, 5, &v) == KP_OK && v == 35, "other table changed by a refused delta");
        kp_table_free(o);
        free(oblob);
    }

    /* Apply the delta stream, then check changed, new and removed keys. */
    s = kp_table_apply(t, deltas, dlen);
    CHECK(s == KP_OK, "apply: %s", kp_status_str(s));
    wrong = 0;
    for (int i = 10; i < 1000; i++) {
        uint64_t v;
        if (get(t, i, &v) != KP_OK || v != (uint64_t)((i * 7) % 256)) wrong++;
    }
    for (int i = 1000; i < 1100; i++) {
        uint64_t v;
        if (get(t, i, &v) != KP_OK || v != (uint64_t)(i % 256)) wrong++;
    }
    CHECK(wrong == 0, "%d keys wrong after apply", wrong);

    /* The reader made before the deltas sees them. */
    wrong = 0;
    for (int i = 1000; i < 1100; i++) {
        uint64_t v;
        if (rget(r, i, &v) != KP_OK || v != (uint64_t)(i % 256)) wrong++;
    }
    CHECK(wrong == 0, "%d reader answers wrong after apply", wrong);

    /* Applying the same deltas again is refused: sequence numbers. */
    s = kp_table_apply(t, deltas, dlen);
    CHECK(s == KP_ERR_DELTA_MISMATCH, "re-apply: %s", kp_status_str(s));
    CHECK(strlen(kp_last_error()) > 0, "re-apply has a message");

    /* Round trip through kp_table_to_bytes. */
    uint8_t *out = NULL;
    size_t olen = 0;
    s = kp_table_to_bytes(t, &out, &olen);
    CHECK(s == KP_OK && olen > 0, "to_bytes: %s", kp_status_str(s));
    kp_table *t2 = NULL;
    s = kp_table_from_bytes(out, olen, &t2);
    CHECK(s == KP_OK, "from_bytes(to_bytes): %s", kp_status_str(s));
    uint64_t v = 0;
    CHECK(t2 && get(t2, 1050, &v) == KP_OK && v == 1050 % 256, "round-trip value %llu", (unsigned long long)v);
    kp_bytes_free(out, olen);
    kp_table_free(t2);

    /* Bad input: every truncation and a flipped byte are errors, never crashes. */
    int ok_trunc = 1;
    for (size_t n = 0; n < blen; n += (blen / 97) + 1) {
        kp_table *x = NULL;
        if (kp_table_from_bytes(blob, n, &x) != KP_ERR_CORRUPT || x != NULL) ok_trunc = 0;
    }
    CHECK(ok_trunc, "truncated blobs are KP_ERR_CORRUPT");
    blob[blen / 2] ^= 0x40;
    kp_table *bad = NULL;
    s = kp_table_from_bytes(blob, blen, &bad);
    CHECK(s == KP_ERR_CORRUPT && bad == NULL, "flipped byte: %s", kp_status_str(s));
    CHECK(strstr(kp_last_error(), "checksum") != NULL, "message names the checksum: %s", kp_last_error());
    blob[blen / 2] ^= 0x40;
    uint64_t first = 0; /* length of the first delta frame: header(16) + payload + checksum(8) */
    for (int i = 7; i >= 0; i--) first = first << 8 | deltas[8 + i];
    s = kp_table_from_bytes(deltas, (size_t)first + 24, &bad);
    CHECK(s == KP_ERR_WRONG_KIND, "delta as blob: %s", kp_status_str(s));
    s = kp_table_from_bytes(deltas, dlen, &bad);
    CHECK(s == KP_ERR_CORRUPT, "delta stream as blob: %s", kp_status_str(s));
    s = kp_table_from_bytes((const uint8_t *)"hello world, not a blob", 23, &bad);
    CHECK(s == KP_ERR_CORRUPT, "garbage: %s", kp_status_str(s));
    s = kp_table_apply(t, blob, blen);
    CHECK(s == KP_ERR_WRONG_KIND, "blob as delta: %s", kp_status_str(s));
    s = kp_table_apply(t, deltas, dlen - 3);
    CHECK(s == KP_ERR_CORRUPT, "truncated delta stream: %s", kp_status_str(s));

    /* NULL arguments. */
    CHECK(kp_table_from_bytes(NULL, 10, &bad) == KP_ERR_NULL, "NULL data");
    CHECK(kp_table_from_bytes(blob, blen, NULL) == KP_ERR_NULL, "NULL out");
    CHECK(kp_table_get(NULL, (const uint8_t *)"k", 1, &v) == KP_ERR_NULL, "NULL table");
    CHECK(kp_table_get(t, (const uint8_t *)"k", 1, NULL) == KP_ERR_NULL, "NULL value");
    CHECK(kp_table_get_batch(t, NULL, lens, 3, vals, NULL, NULL) == KP_ERR_NULL, "NULL keys");
    CHECK(kp_table_apply(NULL, deltas, dlen) == KP_ERR_NULL, "NULL apply table");
    CHECK(strcmp(kp_status_str(KP_ERR_DELTA_MISMATCH), "KP_ERR_DELTA_MISMATCH") == 0, "status names");
    kp_table_free(NULL);

    kp_table_free(t);
    /* The reader keeps the table alive: still answers after kp_table_free. */
    {
        uint64_t v = 0;
        CHECK(rget(r, 1050, &v) == KP_OK && v == 1050 % 256, "reader after table_free: %llu", (unsigned long long)v);
    }
    kp_reader_free(r);
    kp_reader_free(NULL);
    free(blob);
    free(deltas);
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
