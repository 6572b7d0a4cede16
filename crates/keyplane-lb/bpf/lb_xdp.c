// SPDX-License-Identifier: MIT OR Apache-2.0
//
// keyplane lb --io xdp: the Concury lookup in the kernel (XDP), bit for bit
// like keyplane::lb's `VipPlane::lookup`, forwarding as the user-space path
// does (crates/keyplane-lb/src/dataplane.rs, encap.rs):
//
//   Ethernet (no VLAN tag) / IPv4 (no options, not a fragment) or IPv6 (no
//   extension header) / TCP or UDP, unicast to the port's MAC
//   -> VIP (hash map: generation, family, protocol, port, address)
//   -> state key (source address, source port, destination port, protocol:
//      9 bytes IPv4, 21 bytes IPv6), XXH3 under the VIP's BAS seed
//   -> two BAS slots (Lemire reduction of the hash's halves), XOR, XOR the
//      key's whitening, mask -> Dcode -> DIP row -> backend
//   -> DSR (MACs rewritten) or IP-in-IP / IP6-in-IP6 / 4in6 / 6in4 (outer
//      header written as encap.rs's `outer_header`), XDP_TX.
//
// Everything else is XDP_PASS, so the kernel (ARP/ND for the port, health
// checks) and the LB's user-space path (AF_PACKET: neighbour resolution,
// fragments, malformed frames, unresolved backends, too-big frames, VLAN
// tags, IPv4 options, IPv6 extension headers, frames the XDP program has no
// data for) see it exactly as without the program. Side effects (flow
// cache, new-flow report, counters) happen only for frames transmitted here.
//
// Maps are created by the loader in Rust (crates/keyplane-lb/src/xdp/) from
// the `maps` section below (type, key size, value size, max entries, flags;
// the loader may raise max_entries); the data plane is multi-buffered:
// every record names absolute offsets inside one generation's part of the
// maps, the VIP hash map's key carries the generation, and `kp_ctl.gen`
// selects the generation a packet reads (read once, at the start). Each run
// of the program is bracketed by two atomic increments of a per-CPU
// counter (`kp_epoch`: odd while a run is in progress), so the loader knows
// when no run can still be reading a generation it flipped away from.
//
// Build: clang -O2 -g -target bpf -c lb_xdp.c (build.rs does it).

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct kp_map {
	__u32 type, key_size, value_size, max_entries, flags;
};
#define MAP(n, t, k, v, m, f) \
	struct kp_map n __attribute__((section("maps"), used)) = { t, k, v, m, f }

#define F_MMAP 1024 /* BPF_F_MMAPABLE */

struct ctl {
	__u32 gen;
	__u32 has_v4;
	__u8 v4[4];
	__u32 has_v6;
	__u8 v6[16];
	__u8 mac[6];
	__u8 pad[2];
	__u8 pad2[24];
}; /* 64 bytes */

struct vipkey {
	__u8 gen, family, proto, pad;
	__u16 port; /* network order */
	__u16 pad2;
	__u8 addr[16];
}; /* 24 bytes */

struct vip_rec {
	__u64 seed;
	__u32 ma, mb;
	__u32 a_off, b_off, row_off; /* word offsets in kp_heap */
	__u32 bk_off, nbk;           /* entries in kp_bk */
	__u32 vip_id;                /* the engine's VIP index */
	__u32 dmask;
	__u8 dbits, method; /* method: 0 DSR, 1 IP-in-IP */
	__u8 pad[18];
}; /* 64 bytes */

struct bk {
	__u8 addr[16];
	__u8 mac[6];
	__u8 family;   /* 4 or 6 */
	__u8 resolved; /* next-hop MAC known */
	__u16 port;
	__u16 pad;
	__u32 ctr; /* index in kp_stats */
}; /* 32 bytes */

struct report {
	__u32 vip_id;
	__u8 event; /* 0 new, 1 confirmed, 2 ended */
	__u8 keylen;
	__u8 bfamily;
	__u8 pad;
	__u8 key[24];
	__u8 baddr[16];
	__u16 bport;
	__u8 pad2[6];
}; /* 56 bytes */

struct stats {
	__u64 packets, bytes, new_conns;
};

MAP(kp_ctl, BPF_MAP_TYPE_ARRAY, 4, sizeof(struct ctl), 1, F_MMAP);
MAP(kp_vipmap, BPF_MAP_TYPE_HASH, sizeof(struct vipkey), 4, 8192, 0);
MAP(kp_vips, BPF_MAP_TYPE_ARRAY, 4, sizeof(struct vip_rec), 2048, F_MMAP);
MAP(kp_heap, BPF_MAP_TYPE_ARRAY, 4, 8, 1 << 16, F_MMAP);
MAP(kp_bk, BPF_MAP_TYPE_ARRAY, 4, sizeof(struct bk), 1 << 14, F_MMAP);
MAP(kp_flows, BPF_MAP_TYPE_ARRAY, 4, 8, 1 << 16, 0);
MAP(kp_stats, BPF_MAP_TYPE_PERCPU_ARRAY, 4, sizeof(struct stats), 1 << 14, 0);
MAP(kp_cnt, BPF_MAP_TYPE_PERCPU_ARRAY, 4, 8, 16, 0);
MAP(kp_reports, BPF_MAP_TYPE_RINGBUF, 0, 0, 1 << 22, 0);
MAP(kp_epoch, BPF_MAP_TYPE_PERCPU_ARRAY, 4, 8, 1, 0);

/* kp_cnt indices */
#define CNT_TX 0       /* transmitted here */
#define CNT_PASS 1     /* not a VIP packet this program handles */
#define CNT_SLOW 2     /* a VIP packet left to the user-space path */
#define CNT_RING_FULL 3 /* new-flow report lost: ring buffer full */
#define CNT_REPORTS 4  /* reports written */
#define CNT_NO_ROOM 5  /* dropped: the frame could not be grown for the outer header */

#define FLOW_CACHE 65536
#define FRAME_MAX 2048

#define BE16(x) ((__u16)((((x) & 0xff) << 8) | (((x) >> 8) & 0xff)))

static __always_inline void count(__u32 i)
{
	__u64 *v = bpf_map_lookup_elem(&kp_cnt, &i);
	if (v)
		*v += 1;
}

static __always_inline int pass(__u32 why)
{
	count(why);
	return XDP_PASS;
}

/* High 64 bits of a 64x64 product from 32-bit pieces (BPF has no 128-bit multiply). */
static __always_inline __u64 mulhi(__u64 a, __u64 b)
{
	__u64 al = a & 0xffffffff, ah = a >> 32, bl = b & 0xffffffff, bh = b >> 32;
	__u64 ll = al * bl, lh = al * bh, hl = ah * bl, hh = ah * bh;
	__u64 cross = (ll >> 32) + (lh & 0xffffffff) + hl;
	return hh + (lh >> 32) + (cross >> 32);
}

/* XXH3's mul128_fold64. */
static __always_inline __u64 fold(__u64 a, __u64 b)
{
	return (a * b) ^ mulhi(a, b);
}

static __always_inline __u64 avalanche(__u64 h)
{
	h ^= h >> 37;
	h *= 0x165667919E3779F9ULL;
	return h ^ (h >> 32);
}

/* keyplane::hash::mix64 */
static __always_inline __u64 mix64(__u64 x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static __always_inline __u64 rotl(__u64 x, int r)
{
	return (x << r) | (x >> (64 - r));
}

/* keyplane::lb::whitening's multiply of two folded words */
static __always_inline __u32 white_words(__u64 first, __u64 last)
{
	return (__u32)(((first ^ last) * 0x9e3779b97f4a7c15ULL) >> 48);
}

/* XXH3 secret words and the 9..16-byte flips (XXH3_LO / XXH3_HI). */
#define S0 0xbe4ba423396cfeb8ULL
#define S1 0x1cad21f72c81017cULL
#define S2 0xdb979083e96dd4deULL
#define S3 0x1f67b3b7a4a44072ULL
#define XXH3_LO 0x6782737bea4239b9ULL
#define XXH3_HI 0xaf56bc3b0996523aULL
#define PRIME64_1 0x9E3779B185EBCA87ULL

/* A little-endian word of the key buffer (8-byte aligned words). */
static __always_inline __u64 lew(const __u8 *k)
{
	return (__u64)k[0] | (__u64)k[1] << 8 | (__u64)k[2] << 16 | (__u64)k[3] << 24 | (__u64)k[4] << 32 |
	       (__u64)k[5] << 40 | (__u64)k[6] << 48 | (__u64)k[7] << 56;
}

/* The dbits-bit slot starting at bit `bit` of a BAS image at word `off` (bits above garbage). */
static __always_inline int slot(__u32 off, __u64 bit, __u64 *out)
{
	__u32 k = off + (__u32)(bit >> 6);
	__u64 *w0 = bpf_map_lookup_elem(&kp_heap, &k);
	if (!w0)
		return -1;
	k += 1;
	__u64 *w1 = bpf_map_lookup_elem(&kp_heap, &k);
	if (!w1)
		return -1;
	__u32 sh = bit & 63;
	*out = sh ? (*w0 >> sh) | (*w1 << (64 - sh)) : *w0;
	return 0;
}

static __always_inline int mac_eq(const __u8 *a, const __u8 *b)
{
	return a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3] && a[4] == b[4] && a[5] == b[5];
}

static __always_inline __u16 csum20(const __u16 *h)
{
	__u32 s = 0;
#pragma unroll
	for (int i = 0; i < 10; i++)
		s += h[i];
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (__u16)~s;
}

static __always_inline int lb(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 zero = 0;
	struct ctl *c = bpf_map_lookup_elem(&kp_ctl, &zero);
	if (!c)
		return XDP_PASS;
	__u8 *eth = data;
	if (data + 14 > end)
		return pass(CNT_PASS);
	if (!mac_eq(eth, c->mac) || mac_eq(eth + 6, c->mac))
		return pass(CNT_PASS);
	__u64 flen = (__u64)(end - data);
	__u16 et = *(__u16 *)(eth + 12);
	__u8 key[24] = {};
	struct vipkey vk = {};
	__u32 klen, inner_len;
	__u8 proto, tos, flags = 0, family;
	__u8 *ip = eth + 14;
	vk.gen = (__u8)c->gen;
	if (et == BE16(0x0800)) {
		if ((void *)(ip + 20) > end)
			return pass(CNT_PASS);
		if (ip[0] != 0x45)
			return pass(CNT_PASS);
		__u32 tot = (__u32)ip[2] << 8 | ip[3];
		if (tot < 20 || tot + 14 > flen)
			return pass(CNT_PASS);
		if ((ip[6] & 0x3f) || ip[7])
			return pass(CNT_PASS);
		proto = ip[9];
		__u8 *l4 = ip + 20;
		if (proto == 6) {
			if (tot < 40 || (void *)(l4 + 20) > end)
				return pass(CNT_PASS);
			__u32 hl = (__u32)(l4[12] >> 4) * 4;
			if (hl < 20 || 20 + hl > tot)
				return pass(CNT_PASS);
			flags = l4[13];
		} else if (proto == 17) {
			if (tot < 28 || (void *)(l4 + 8) > end)
				return pass(CNT_PASS);
			__u32 ul = (__u32)l4[4] << 8 | l4[5];
			if (ul < 8 || 20 + ul > tot)
				return pass(CNT_PASS);
		} else {
			return pass(CNT_PASS);
		}
		tos = ip[1];
		inner_len = tot;
		family = 4;
		vk.family = 4;
		vk.proto = proto;
		vk.port = *(__u16 *)(l4 + 2);
		__builtin_memcpy(vk.addr, ip + 16, 4);
		__builtin_memcpy(key, ip + 12, 4);
		__builtin_memcpy(key + 4, l4, 4);
		key[8] = proto;
		klen = 9;
	} else if (et == BE16(0x86dd)) {
		if ((void *)(ip + 40) > end)
			return pass(CNT_PASS);
		if ((ip[0] >> 4) != 6)
			return pass(CNT_PASS);
		__u32 plen = (__u32)ip[4] << 8 | ip[5];
		if (plen + 54 > flen)
			return pass(CNT_PASS);
		proto = ip[6];
		__u8 *l4 = ip + 40;
		if (proto == 6) {
			if (plen < 20 || (void *)(l4 + 20) > end)
				return pass(CNT_PASS);
			__u32 hl = (__u32)(l4[12] >> 4) * 4;
			if (hl < 20 || hl > plen)
				return pass(CNT_PASS);
			flags = l4[13];
		} else if (proto == 17) {
			if (plen < 8 || (void *)(l4 + 8) > end)
				return pass(CNT_PASS);
			__u32 ul = (__u32)l4[4] << 8 | l4[5];
			if (ul < 8 || ul > plen)
				return pass(CNT_PASS);
		} else {
			return pass(CNT_PASS);
		}
		tos = (__u8)((((__u32)ip[0] << 8 | ip[1]) >> 4) & 0xff);
		inner_len = plen + 40;
		family = 6;
		vk.family = 6;
		vk.proto = proto;
		vk.port = *(__u16 *)(l4 + 2);
		__builtin_memcpy(vk.addr, ip + 24, 16);
		__builtin_memcpy(key, ip + 8, 16);
		__builtin_memcpy(key + 16, l4, 4);
		key[20] = proto;
		klen = 21;
	} else {
		return pass(CNT_PASS);
	}

	__u32 *vidx = bpf_map_lookup_elem(&kp_vipmap, &vk);
	if (!vidx)
		return pass(CNT_PASS);
	struct vip_rec *v = bpf_map_lookup_elem(&kp_vips, vidx);
	if (!v)
		return pass(CNT_SLOW);

	/* Step 2: the BAS hash (XXH3 with the VIP's seed), slots, whitening. */
	__u64 w0 = lew(key), w1 = lew(key + 8), w2 = lew(key + 16);
	__u64 seed = v->seed, h;
	__u32 white;
	if (klen == 9) {
		__u64 first = w0, last = (w0 >> 8) | (w1 << 56);
		__u64 lo = first ^ (XXH3_LO + seed), hi = last ^ (XXH3_HI - seed);
		__u64 acc = 9 + __builtin_bswap64(lo) + hi + fold(lo, hi);
		h = avalanche(acc);
		white = white_words(first, last);
	} else {
		__u64 x5 = (w0 >> 40) | (w1 << 24), x13 = (w1 >> 40) | (w2 << 24);
		__u64 acc = 21 * PRIME64_1;
		acc += fold(w0 ^ (S0 + seed), w1 ^ (S1 - seed));
		acc += fold(x5 ^ (S2 + seed), x13 ^ (S3 - seed));
		h = avalanche(acc);
		__u64 first = w0 ^ rotl(w1, 16);
		__u64 last = rotl(x5, 48) ^ rotl(x13, 32);
		white = white_words(first, last);
	}
	__u64 ia = ((h & 0xffffffff) * (__u64)v->ma) >> 32;
	__u64 ib = ((h >> 32) * (__u64)v->mb) >> 32;
	__u64 sa, sb;
	if (slot(v->a_off, ia * v->dbits, &sa) || slot(v->b_off, ib * v->dbits, &sb))
		return pass(CNT_SLOW);
	__u32 d = (__u32)(sa ^ sb ^ white) & v->dmask;

	/* Step 3: DIP row (four 16-bit entries a word), backend. */
	__u32 rk = v->row_off + (d >> 2);
	__u64 *rw = bpf_map_lookup_elem(&kp_heap, &rk);
	if (!rw)
		return pass(CNT_SLOW);
	__u32 bi = (__u32)(*rw >> ((d & 3) * 16)) & 0xffff;
	if (bi >= v->nbk)
		return pass(CNT_SLOW); /* empty pool: no_backend, counted by user space */
	__u32 bkk = v->bk_off + bi;
	struct bk *b = bpf_map_lookup_elem(&kp_bk, &bkk);
	if (!b || !b->resolved)
		return pass(CNT_SLOW); /* no_neighbor: user space resolves and counts */
	__u32 oh = 0;
	if (v->method == 1) {
		oh = b->family == 4 ? 20 : 40;
		if ((b->family == 4 && !c->has_v4) || (b->family == 6 && !c->has_v6))
			return pass(CNT_SLOW); /* no_source_address */
		if (14 + oh + inner_len > FRAME_MAX)
			return pass(CNT_SLOW); /* too_big */
	} else if (flen > FRAME_MAX) {
		return pass(CNT_SLOW);
	}

	/* IP-in-IP: cut Ethernet padding, grow the front by the outer header
	 * (before any side effect: a frame that cannot be grown is dropped and
	 * counted, and nothing else happened for it). */
	if (v->method == 1) {
		if (flen > 14 + inner_len && bpf_xdp_adjust_tail(ctx, (int)(14 + inner_len) - (int)flen))
			return pass(CNT_SLOW); /* unchanged frame */
		if (bpf_xdp_adjust_head(ctx, -(int)oh)) {
			count(CNT_NO_ROOM);
			return XDP_DROP; /* padding may be cut already */
		}
		data = (void *)(long)ctx->data;
		end = (void *)(long)ctx->data_end;
		eth = data;
		if (data + 14 + 40 > end && (oh == 40 || data + 14 + 20 > end)) {
			count(CNT_NO_ROOM);
			return XDP_DROP;
		}
	}

	/* Flow event (dataplane.rs `flow_event`): flow hash of (key, VIP). */
	__u64 fh = 0x9e3779b97f4a7c15ULL ^ (__u64)v->vip_id;
	fh = mix64(fh ^ w0);
	fh = mix64(fh ^ w1);
	if (klen == 21)
		fh = mix64(fh ^ w2);
	__u32 fk = (__u32)fh & (FLOW_CACHE - 1);
	__u64 *fs = bpf_map_lookup_elem(&kp_flows, &fk);
	int ev = -1;
	if (fs) {
		__u64 tag = fh | 3, nw = tag ^ 2, seen = tag ^ 1;
		if (proto == 6) {
			if (flags & 0x05) {
				if ((*fs | 3) == tag)
					*fs = 0;
				ev = 2;
			} else if ((flags & 0x12) == 0x02) {
				*fs = nw;
				ev = 0;
			} else if (*fs == nw) {
				*fs = seen;
				ev = 1;
			}
		} else if ((*fs | 3) != tag) {
			*fs = nw;
			ev = 0;
		} else if (*fs == nw) {
			*fs = seen;
			ev = 1;
		}
	}
	if (ev >= 0) {
		struct report *r = bpf_ringbuf_reserve(&kp_reports, sizeof(struct report), 0);
		if (r) {
			r->vip_id = v->vip_id;
			r->event = (__u8)ev;
			r->keylen = (__u8)klen;
			r->bfamily = b->family;
			r->pad = 0;
			__builtin_memcpy(r->key, key, 24);
			__builtin_memcpy(r->baddr, b->addr, 16);
			r->bport = b->port;
			bpf_ringbuf_submit(r, 0);
			count(CNT_REPORTS);
		} else {
			count(CNT_RING_FULL);
		}
	}
	__u32 ck = b->ctr;
	struct stats *st = bpf_map_lookup_elem(&kp_stats, &ck);
	if (st) {
		st->packets += 1;
		st->bytes += flen;
		st->new_conns += ev == 0;
	}
	__u8 mac[6];
	__builtin_memcpy(mac, b->mac, 6);

	if (v->method == 0) {
		__builtin_memcpy(eth, mac, 6);
		__builtin_memcpy(eth + 6, c->mac, 6);
		count(CNT_TX);
		return XDP_TX;
	}

	/* IP-in-IP: the frame was cut and grown above. */
	__u32 flow = (__u32)fh;
	__u8 bfam = b->family;
	__u8 baddr[16];
	__builtin_memcpy(baddr, b->addr, 16);
	__u8 nh = family == 4 ? 4 : 41;
	__builtin_memcpy(eth, mac, 6);
	__builtin_memcpy(eth + 6, c->mac, 6);
	__u8 *o = eth + 14;
	if (bfam == 4) {
		if (data + 14 + 20 > end)
			return XDP_DROP;
		eth[12] = 0x08;
		eth[13] = 0x00;
		__u32 len = 20 + inner_len;
		o[0] = 0x45;
		o[1] = tos;
		o[2] = len >> 8;
		o[3] = len & 0xff;
		o[4] = (flow >> 8) & 0xff;
		o[5] = flow & 0xff;
		o[6] = 0;
		o[7] = 0;
		o[8] = 64;
		o[9] = nh;
		o[10] = 0;
		o[11] = 0;
		__builtin_memcpy(o + 12, c->v4, 4);
		__builtin_memcpy(o + 16, baddr, 4);
		__u16 cs = csum20((const __u16 *)o);
		__builtin_memcpy(o + 10, &cs, 2);
	} else {
		if (data + 14 + 40 > end)
			return XDP_DROP;
		eth[12] = 0x86;
		eth[13] = 0xdd;
		__u32 w = (6u << 28) | ((__u32)tos << 20) | (flow & 0xfffff);
		o[0] = w >> 24;
		o[1] = (w >> 16) & 0xff;
		o[2] = (w >> 8) & 0xff;
		o[3] = w & 0xff;
		o[4] = inner_len >> 8;
		o[5] = inner_len & 0xff;
		o[6] = nh;
		o[7] = 64;
		__builtin_memcpy(o + 8, c->v6, 16);
		__builtin_memcpy(o + 24, baddr, 16);
	}
	count(CNT_TX);
	return XDP_TX;
}

SEC("xdp")
int kp_lb(struct xdp_md *ctx)
{
	__u32 zero = 0;
	__u64 *ep = bpf_map_lookup_elem(&kp_epoch, &zero);
	if (!ep)
		return XDP_PASS;
	/* Fetching atomics are full barriers: the odd count is visible before
	 * kp_ctl.gen is read, and every read of the data plane is done before
	 * the count turns even again. */
	__u64 e0 = __sync_fetch_and_add(ep, 1);
	int r = lb(ctx);
	__u64 e1 = __sync_fetch_and_add(ep, 1);
	/* Always true (runs on one CPU do not nest); using both results keeps
	 * them fetching atomics, which are full barriers on every JIT. */
	return e1 == e0 + 1 ? r : XDP_ABORTED;
}

char _license[] SEC("license") = "Dual MIT/GPL";
