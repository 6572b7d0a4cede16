// SPDX-License-Identifier: GPL-2.0 OR MIT
// keyplane lb: decapsulation for backends (XDP), as Katran ships its decap
// program. Strips an outer IPv4 or IPv6 header carrying IPv4 (protocol 4)
// or IPv6 (protocol 41) and passes the inner packet up the stack, where the
// VIP on `lo` accepts it. Everything else passes untouched.
//
//   clang -O2 -g -target bpf -c decap.c -o decap.o
//   ip link set dev eth0 xdp obj decap.o sec xdp      (or xdpgeneric)
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int decap(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct ethhdr copy;
	int outer;
	__u8 inner;

	if ((void *)(eth + 1) > end)
		return XDP_PASS;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > end || ip->ihl != 5)
			return XDP_PASS;
		if (ip->protocol != IPPROTO_IPIP && ip->protocol != IPPROTO_IPV6)
			return XDP_PASS;
		if (ip->frag_off & bpf_htons(0x3fff))
			return XDP_PASS;
		outer = sizeof(struct iphdr);
		inner = ip->protocol;
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > end)
			return XDP_PASS;
		if (ip6->nexthdr != IPPROTO_IPIP && ip6->nexthdr != IPPROTO_IPV6)
			return XDP_PASS;
		outer = sizeof(struct ipv6hdr);
		inner = ip6->nexthdr;
	} else {
		return XDP_PASS;
	}
	__builtin_memcpy(&copy, eth, sizeof(copy));
	copy.h_proto = inner == IPPROTO_IPIP ? bpf_htons(ETH_P_IP) : bpf_htons(ETH_P_IPV6);
	if (bpf_xdp_adjust_head(ctx, outer))
		return XDP_DROP;
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	eth = data;
	if ((void *)(eth + 1) > end)
		return XDP_DROP;
	__builtin_memcpy(eth, &copy, sizeof(copy));
	return XDP_PASS;
}

char _license[] SEC("license") = "Dual MIT/GPL";
