/* nic.c -- the host's network bytes sent, from sysfs (see nic.h for which counters). */
#define _GNU_SOURCE
#include "collect/nic.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct pt_nic_counters {
    int fds[PT_NIC_MAX];
    int count;
    bool rdma; /* port_xmit_data counts 4-byte words */
};

static void add_counter(pt_nic_counters *c, const char *path)
{
    if (c->count == PT_NIC_MAX)
        return;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0)
        c->fds[c->count++] = fd;
}

/* Each entry of dir but "." and "..", in the order the directory lists them. */
static void each_entry(const char *dir, void (*visit)(pt_nic_counters *, const char *, const char *),
                       pt_nic_counters *c)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) && c->count < PT_NIC_MAX)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            visit(c, dir, e->d_name);
    closedir(d);
}

static void rdma_port(pt_nic_counters *c, const char *ports, const char *port)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s/counters/port_xmit_data", ports, port) < (int)sizeof path)
        add_counter(c, path);
}

static void rdma_device(pt_nic_counters *c, const char *root, const char *device)
{
    char ports[4096];
    if (snprintf(ports, sizeof ports, "%s/%s/ports", root, device) < (int)sizeof ports)
        each_entry(ports, rdma_port, c);
}

/* An interface with a device behind it (a physical port), not lo, a bridge or a veth. */
static void net_interface(pt_nic_counters *c, const char *root, const char *name)
{
    char path[4096];
    struct stat st;
    if (snprintf(path, sizeof path, "%s/%s/device", root, name) >= (int)sizeof path || stat(path, &st) != 0)
        return;
    if (snprintf(path, sizeof path, "%s/%s/statistics/tx_bytes", root, name) < (int)sizeof path)
        add_counter(c, path);
}

pt_nic_counters *pt_nic_counters_open(const char *sys_root)
{
    pt_nic_counters *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/class/infiniband", sys_root);
    each_entry(dir, rdma_device, c);
    c->rdma = c->count > 0;
    if (!c->rdma) {
        snprintf(dir, sizeof dir, "%s/class/net", sys_root);
        each_entry(dir, net_interface, c);
    }
    if (!c->count) {
        free(c);
        return NULL;
    }
    return c;
}

void pt_nic_counters_close(pt_nic_counters *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->count; i++)
        close(c->fds[i]);
    free(c);
}

int pt_nic_counters_count(const pt_nic_counters *c)
{
    return c ? c->count : 0;
}

bool pt_nic_counters_rdma(const pt_nic_counters *c)
{
    return c && c->rdma;
}

bool pt_nic_counters_read(pt_nic_counters *c, uint64_t *bytes)
{
    uint64_t sum = 0;
    for (int i = 0; i < c->count; i++) {
        char buf[32];
        ssize_t n = pread(c->fds[i], buf, sizeof buf - 1, 0);
        if (n <= 0)
            return false;
        buf[n] = '\0';
        char *end;
        unsigned long long v = strtoull(buf, &end, 10);
        if (end == buf)
            return false;
        sum += c->rdma ? 4 * (uint64_t)v : (uint64_t)v;
    }
    *bytes = sum;
    return true;
}

double pt_nic_rate_mibps(uint64_t before, uint64_t after, int64_t ns)
{
    if (ns <= 0 || after < before)
        return -1;
    return (double)(after - before) / (1024.0 * 1024.0) / ((double)ns / 1e9);
}
