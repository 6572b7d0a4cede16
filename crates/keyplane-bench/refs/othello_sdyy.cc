// Reference harness for issue #20: sdyy1990/Othello's `queryInt` on
// keyplane's `single_get` key stream (crates/keyplane/examples/single_get.rs):
// keys mix64(i ^ 1<<40), 8-bit values mix64(i ^ 0x5eed) & 0xff, queries
// keys[reduce64(mix64(i ^ 3), n)], a loop of independent lookups summed into
// an accumulator. After the build it checks every key, then answers each
// line on stdin with one JSON line: the median of REPS passes in thread CPU
// time and wall time per lookup. Only this file is ours; the Othello source
// is fetched and patched by build.sh, outside the repository.
//
// usage: othello_sdyy N QUERIES REPS   (then "go" lines on stdin)
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <string>
#include <vector>
#include "othello.h"

static uint64_t mix64(uint64_t x) {
  x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27; x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
static uint64_t reduce64(uint64_t x, uint64_t n) { return (uint64_t)(((__uint128_t)x * n) >> 64); }
static double cpu_ns() {
  timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}
static double wall_ns() {
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int main(int argc, char **argv) {
  if (argc < 4) { fprintf(stderr, "usage: othello_sdyy N QUERIES REPS\n"); return 2; }
  uint64_t n = strtoull(argv[1], 0, 10), qn = strtoull(argv[2], 0, 10);
  int reps = atoi(argv[3]);
  std::vector<uint64_t> keys(n), q(qn);
  std::vector<uint8_t> vals(n);
  for (uint64_t i = 0; i < n; i++) { keys[i] = mix64(i ^ (1ULL << 40)); vals[i] = mix64(i ^ 0x5eed) & 0xff; }
  for (uint64_t i = 0; i < qn; i++) q[i] = keys[reduce64(mix64(i ^ 3), n)];
  double b0 = wall_ns();
  // allowed_conflicts = 0: every key must be stored (the setting).
  Othello<uint64_t> o(8, keys.data(), (uint32_t)n, false, vals.data(), 1, 0);
  double build_s = (wall_ns() - b0) / 1e9;
  uint64_t bad = 0;
  for (uint64_t i = 0; i < n; i++) bad += (o.queryInt(keys[i]) & 0xff) != vals[i];
  std::string line;
  uint64_t acc = 0;
  while (std::getline(std::cin, line)) {
    std::vector<double> c, w;
    for (int r = 0; r < reps; r++) {
      double c0 = cpu_ns(), w0 = wall_ns();
      for (uint64_t i = 0; i < qn; i++) acc += o.queryInt(q[i]);
      c.push_back((cpu_ns() - c0) / qn); w.push_back((wall_ns() - w0) / qn);
    }
    std::sort(c.begin(), c.end()); std::sort(w.begin(), w.end());
    printf("{\"impl\": \"sdyy1990/Othello query\", \"n\": %llu, \"ma\": %u, \"mb\": %u, \"bad\": %llu, "
           "\"build_s\": %.3f, \"get_cpu_ns\": %.3f, \"get_wall_ns\": %.3f, \"acc\": %llu}\n",
           (unsigned long long)n, o.ma, o.mb, (unsigned long long)bad, build_s, c[c.size() / 2], w[w.size() / 2],
           (unsigned long long)(acc & 0xffff));
    fflush(stdout);
  }
  return 0;
}
