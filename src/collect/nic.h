/* nic.h -- the bytes this host has sent over its network links, from the kernel's
 * counters in sysfs, which the sampler turns into host.nic_tx_mibps: the rate the links
 * really reached, by which the analysis times a collective's transfer (an all-reduce
 * waits for its last rank, then moves its bytes at that rate).
 *
 * RDMA ports first (InfiniBand, RoCE: SYS/class/infiniband/DEV/ports/N/counters/
 * port_xmit_data, in 4-byte words: the traffic NCCL sends there), else every physical
 * network interface's SYS/class/net/IF/statistics/tx_bytes (one with a device behind
 * it: not lo, a bridge or a veth). Each counter file is opened once and read from its
 * start with pread, about a microsecond a file; at most PT_NIC_MAX of them. */
#ifndef PT_COLLECT_NIC_H
#define PT_COLLECT_NIC_H

#include <stdbool.h>
#include <stdint.h>

#define PT_NIC_MAX 64

typedef struct pt_nic_counters pt_nic_counters;

/* The counters under sys_root ("/sys"), or NULL when the host has none. */
pt_nic_counters *pt_nic_counters_open(const char *sys_root);
void pt_nic_counters_close(pt_nic_counters *c);
/* How many counter files it reads, and whether they are RDMA ports'. */
int pt_nic_counters_count(const pt_nic_counters *c);
bool pt_nic_counters_rdma(const pt_nic_counters *c);
/* Bytes sent so far over every counter; false when one could not be read. */
bool pt_nic_counters_read(pt_nic_counters *c, uint64_t *bytes);
/* The rate between two readings ns apart, in MiB/s; -1 when no time passed or the
 * counters went back (a reset, a port gone). */
double pt_nic_rate_mibps(uint64_t before, uint64_t after, int64_t ns);

#endif
