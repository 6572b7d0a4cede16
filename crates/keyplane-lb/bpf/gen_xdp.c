// SPDX-License-Identifier: MIT OR GPL-2.0
//
// The pps benchmark's traffic generator as an XDP program, run with
// BPF_PROG_TEST_RUN and BPF_F_TEST_XDP_LIVE_FRAMES on the client's veth:
// every run rewrites the frame (a template TCP frame: data_in) into frame
// `i` of the measured sample and returns XDP_TX, so the kernel transmits it
// with ndo_xdp_xmit on that device, as a NIC driver's XDP_TX would; the peer
// builds the skb from the page (full headroom, no copy at the LB's veth).
//
// Frame i (i counts runs, modulo `sample`) is the bench's flow
// f = i * base / sample (`sample_flow` in lb_service_bench.rs): source
// 198.19.0.0 + (f >> 10), source port 1024 + (f & 1023), to VIP
// 198.18.100.1 + (vips == 1 ? 0 : f % 64). The page pool initialises a
// frame from data_in once per page only, so every field that varies is
// written on every run: addresses, source port and both checksums. The
// checksums are the sums user space computed over the template with those
// fields (and the checksums) zero, plus the fields' 16-bit words.
//
// One generator thread runs the program (one CPU), so the counter lives in
// a plain array entry with the parameters.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct kp_map {
	__u32 type, key_size, value_size, max_entries, flags;
};

struct gen {
	__u64 i;       /* runs so far (the program counts) */
	__u32 sample;  /* frames in the measured sample (> 0) */
	__u32 base;    /* flows the sample is spread over */
	__u32 vips;    /* 1: all to VIP 0; else VIP f % 64 */
	__u32 ip_sum;  /* IPv4 header sum without addresses and checksum */
	__u32 tcp_sum; /* pseudo header + TCP sum without addresses, source port, checksum */
	__u32 pad;
}; /* 32 bytes */

struct kp_map kp_gen __attribute__((section("maps"), used)) = { BPF_MAP_TYPE_ARRAY, 4, sizeof(struct gen), 1, 0 };

static __always_inline __u16 fold(__u64 s)
{
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return ~s & 0xffff;
}

static __always_inline void put16(__u8 *p, __u16 v)
{
	p[0] = v >> 8;
	p[1] = v;
}

static __always_inline void put32(__u8 *p, __u32 v)
{
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
}

SEC("xdp")
int kp_gen_prog(struct xdp_md *ctx)
{
	__u8 *d = (__u8 *)(long)ctx->data;
	__u8 *end = (__u8 *)(long)ctx->data_end;
	if (d + 54 > end)
		return XDP_ABORTED;
	__u32 k = 0;
	struct gen *g = bpf_map_lookup_elem(&kp_gen, &k);
	if (!g || g->sample == 0)
		return XDP_ABORTED;
	__u64 i = g->i;
	g->i = i + 1;
	__u64 idx = i % g->sample;
	__u32 f = idx * g->base / g->sample;
	__u32 src = 0xc6130000u + (f >> 10);
	__u16 sport = 1024 + (f & 1023);
	__u32 dst = 0xc6126401u + (g->vips == 1 ? 0 : f % 64);
	__u64 a = (src >> 16) + (src & 0xffff) + (dst >> 16) + (dst & 0xffff);
	put32(d + 26, src);
	put32(d + 30, dst);
	put16(d + 34, sport);
	put16(d + 24, fold((__u64)g->ip_sum + a));
	put16(d + 50, fold((__u64)g->tcp_sum + a + sport));
	return XDP_TX;
}

char _license[] SEC("license") = "Dual MIT/GPL";
