/* The sampler's host CPU utilization from /proc/stat text a test writes (the thread reads
 * the real file, whose counters no test controls): every one of the eight tick fields
 * counts in the total, idle and iowait are not busy, and the first reading or one whose
 * counters did not advance gives no sample; and the network counters it reads (nic.h)
 * from a fake sysfs tree in a folder of the test's own. The expected values are worked
 * out by hand below, not by the code under test. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdint.h>

#include "collect/nic.h"
#include "collect/sampler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* user nice system idle iowait irq softirq steal guest guest_nice; cpu0 must not be read. */
static const char FIRST[] = "cpu  1000 200 300 4000 500 60 70 80 9 9\ncpu0 1 1 1 1 1 1 1 1 0 0\nintr 5\n";
/* +10 +5 +15 +40 +10 +5 +5 +10: 100 ticks, 50 of them busy (idle 40 and iowait 10 are not). */
static const char SECOND[] = "cpu  1010 205 315 4040 510 65 75 90 9 9\ncpu0 2 2 2 2 2 2 2 2 0 0\nintr 6\n";
/* +0 user, +100 idle: 0% busy. */
static const char THIRD[] = "cpu  1010 205 315 4140 510 65 75 90 9 9\n";

static void busy_share_of_every_field(void **state)
{
    (void)state;
    pt_cpu_jiffies prev = {0, 0};
    assert_true(pt_host_cpu_percent(FIRST, &prev) < 0); /* nothing to compare with yet */
    /* 6210 ticks in all, 4500 idle + iowait. */
    assert_int_equal(prev.total, 6210);
    assert_int_equal(prev.busy, 1710);
    assert_float_equal(pt_host_cpu_percent(SECOND, &prev), 50.0, 1e-9);
    assert_int_equal(prev.total, 6310);
    assert_int_equal(prev.busy, 1760);
    assert_float_equal(pt_host_cpu_percent(THIRD, &prev), 0.0, 1e-9);
}

static void counters_that_do_not_advance_give_no_sample(void **state)
{
    (void)state;
    pt_cpu_jiffies prev = {0, 0};
    pt_host_cpu_percent(SECOND, &prev);
    assert_true(pt_host_cpu_percent(SECOND, &prev) < 0); /* 0 of 0 ticks: no 0/0 */
    assert_true(pt_host_cpu_percent(FIRST, &prev) < 0);  /* counters going back (a reset) */
    /* The going-back reading is the new reference: from FIRST to SECOND is 50% again. */
    assert_float_equal(pt_host_cpu_percent(SECOND, &prev), 50.0, 1e-9);
}

static void text_without_a_cpu_line(void **state)
{
    (void)state;
    pt_cpu_jiffies prev = {1710, 6210};
    assert_true(pt_host_cpu_percent("intr 5\n", &prev) < 0);
    assert_int_equal(prev.total, 0); /* and the next reading starts afresh */
    assert_true(pt_host_cpu_percent(SECOND, &prev) < 0);
}

/* ------------------------------------------------------------ network counters */

/* A file of a fake sysfs tree under root, its folders made on the way. */
static void put(const char *root, const char *rel, const char *text)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    for (char *p = path + strlen(root) + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0700);
            *p = '/';
        }
    if (!text) { /* a folder */
        assert_int_equal(mkdir(path, 0700), 0);
        return;
    }
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static char *fake_sys(void)
{
    const char *tmp = getenv("TMPDIR");
    char *root = malloc(4096);
    snprintf(root, 4096, "%s/pt-nic-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    assert_non_null(mkdtemp(root));
    return root;
}

static void remove_tree(char *root)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
    free(root);
}

/* RDMA ports count 4-byte words, and where there are any, the interfaces are not read
 * (RoCE's traffic would be counted twice): 250 + 1000 words are 5000 bytes. */
static void rdma_ports_count_words(void **state)
{
    (void)state;
    char *root = fake_sys();
    put(root, "class/infiniband/mlx5_0/ports/1/counters/port_xmit_data", "250\n");
    put(root, "class/infiniband/mlx5_1/ports/1/counters/port_xmit_data", "1000\n");
    put(root, "class/net/eth0/device", NULL);
    put(root, "class/net/eth0/statistics/tx_bytes", "999\n");
    pt_nic_counters *c = pt_nic_counters_open(root);
    assert_non_null(c);
    assert_int_equal(pt_nic_counters_count(c), 2);
    assert_true(pt_nic_counters_rdma(c));
    uint64_t bytes = 0;
    assert_true(pt_nic_counters_read(c, &bytes));
    assert_int_equal(bytes, 5000);
    pt_nic_counters_close(c);
    remove_tree(root);
}

/* Without RDMA ports: the interfaces with a device behind them (eth0), not lo or a
 * bridge; read again after they move on; a counter that reads empty fails the reading. */
static void physical_interfaces_only(void **state)
{
    (void)state;
    char *root = fake_sys();
    put(root, "class/net/lo/statistics/tx_bytes", "777\n");
    put(root, "class/net/br0/statistics/tx_bytes", "5\n");
    put(root, "class/net/eth0/device", NULL);
    put(root, "class/net/eth0/statistics/tx_bytes", "1048576\n");
    pt_nic_counters *c = pt_nic_counters_open(root);
    assert_non_null(c);
    assert_int_equal(pt_nic_counters_count(c), 1);
    assert_false(pt_nic_counters_rdma(c));
    uint64_t before = 0, after = 0;
    assert_true(pt_nic_counters_read(c, &before));
    assert_int_equal(before, 1048576);
    put(root, "class/net/eth0/statistics/tx_bytes", "3145728\n"); /* the same inode, rewritten */
    assert_true(pt_nic_counters_read(c, &after));
    assert_int_equal(after, 3145728);
    /* 2 MiB in half a second. */
    assert_float_equal(pt_nic_rate_mibps(before, after, 500000000), 4.0, 1e-12);
    put(root, "class/net/eth0/statistics/tx_bytes", "");
    assert_false(pt_nic_counters_read(c, &after));
    pt_nic_counters_close(c);
    remove_tree(root);
}

/* No counters: no reader; a rate needs time to pass and counters that do not go back. */
static void no_counters_and_no_rate(void **state)
{
    (void)state;
    char *root = fake_sys();
    put(root, "class/net/lo/statistics/tx_bytes", "777\n");
    assert_null(pt_nic_counters_open(root));
    remove_tree(root);
    assert_true(pt_nic_rate_mibps(10, 5, 1000000000) < 0);
    assert_true(pt_nic_rate_mibps(5, 10, 0) < 0);
    assert_float_equal(pt_nic_rate_mibps(5, 5, 1000), 0.0, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(busy_share_of_every_field),
        cmocka_unit_test(counters_that_do_not_advance_give_no_sample),
        cmocka_unit_test(text_without_a_cpu_line),
        cmocka_unit_test(rdma_ports_count_words),
        cmocka_unit_test(physical_interfaces_only),
        cmocka_unit_test(no_counters_and_no_rate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
