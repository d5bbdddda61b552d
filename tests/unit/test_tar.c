/* util/tar.c: members written one at a time read back whole, at the offsets the format
 * puts them (computed here from the ustar layout, not from the writer); an archive whose
 * writer stopped reads to its last whole member; hostile headers (bad checksum, sizes past
 * the end, links, dot names, too many members) are refused or skipped, never followed. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/tar.h"

static int scratch_file(void)
{
    char path[] = "/tmp/pt-test-tar-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    return fd;
}

static size_t padded(size_t n)
{
    return (n + 511) / 512 * 512;
}

static const size_t sizes[] = {0, 1, 511, 512, 513, 3400, 70000};

/* Appends one member per size, its bytes a pattern of its index; returns the end. */
static uint64_t write_members(int fd)
{
    uint64_t end = 0;
    pt_error err;
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        char name[64];
        snprintf(name, sizeof name, "node%zu_0_%zu.ptsum", i, 100 + i);
        unsigned char *data = malloc(sizes[i] + 1);
        for (size_t k = 0; k < sizes[i]; k++)
            data[k] = (unsigned char)(i * 31 + k);
        assert_int_equal(pt_tar_append(fd, &end, name, data, sizes[i], 0644, 1700000000, &err), 0);
        free(data);
    }
    return end;
}

static void check_members(int fd, const pt_tar_listing *l, size_t expected)
{
    assert_int_equal(l->count, expected);
    uint64_t at = 0;
    for (size_t i = 0; i < expected; i++) {
        char name[64];
        snprintf(name, sizeof name, "node%zu_0_%zu.ptsum", i, 100 + i);
        assert_string_equal(l->members[i].name, name);
        assert_int_equal(l->members[i].offset, at + 512); /* after its 512-byte header */
        assert_int_equal(l->members[i].size, sizes[i]);
        unsigned char *got = malloc(sizes[i] + 1);
        assert_int_equal(pread(fd, got, sizes[i], (off_t)l->members[i].offset), (ssize_t)sizes[i]);
        for (size_t k = 0; k < sizes[i]; k++)
            assert_int_equal(got[k], (unsigned char)(i * 31 + k));
        free(got);
        at += 512 + padded(sizes[i]);
    }
}

static void test_round_trip(void **state)
{
    (void)state;
    int fd = scratch_file();
    uint64_t end = write_members(fd), expected_end = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        expected_end += 512 + padded(sizes[i]);
    assert_int_equal(end, expected_end);
    pt_error err;
    assert_int_equal(pt_tar_finish(fd, end, &err), 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal((uint64_t)st.st_size, end + 1024); /* two zero blocks end it */

    /* the first header as the standard lays it out: magic, octal size, checksum */
    unsigned char h[512];
    assert_int_equal(pread(fd, h, 512, 0), 512);
    assert_memory_equal(h + 257, "ustar\0" "00", 8);
    assert_int_equal(h[156], '0');
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += i >= 148 && i < 156 ? ' ' : h[i];
    assert_int_equal(strtoul((const char *)h + 148, NULL, 8), sum);

    pt_tar_listing l;
    assert_int_equal(pt_tar_list(fd, 100, &l, &err), 0);
    assert_false(l.unfinished);
    assert_false(l.damaged);
    assert_int_equal(l.skipped, 0);
    check_members(fd, &l, sizeof sizes / sizeof *sizes);
    pt_tar_listing_free(&l);
    close(fd);
}

/* A writer that died: no end marker, or its last member cut short. */
static void test_unfinished(void **state)
{
    (void)state;
    int fd = scratch_file();
    uint64_t end = write_members(fd);
    pt_error err;
    pt_tar_listing l;
    assert_int_equal(pt_tar_list(fd, 100, &l, &err), 0);
    assert_true(l.unfinished);
    check_members(fd, &l, sizeof sizes / sizeof *sizes);
    pt_tar_listing_free(&l);

    assert_int_equal(ftruncate(fd, (off_t)(end - 1000)), 0); /* into the last member's data, not its padding */
    assert_int_equal(pt_tar_list(fd, 100, &l, &err), 0);
    assert_true(l.unfinished);
    assert_int_equal(l.skipped, 1);
    check_members(fd, &l, sizeof sizes / sizeof *sizes - 1);
    pt_tar_listing_free(&l);
    close(fd);
}

static void put_header(int fd, uint64_t at, const char *name, char type, const char *size_octal, bool fix_sum)
{
    unsigned char h[512] = {0};
    memcpy(h, name, strlen(name));
    memcpy(h + 100, "0000644", 7);
    memcpy(h + 124, size_octal, strlen(size_octal));
    h[156] = (unsigned char)type;
    memcpy(h + 257, "ustar\0" "00", 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += i >= 148 && i < 156 ? ' ' : h[i];
    snprintf((char *)h + 148, 8, "%06o", fix_sum ? sum : sum + 1);
    assert_int_equal(pwrite(fd, h, 512, (off_t)at), 512);
}

static void test_hostile_headers(void **state)
{
    (void)state;
    pt_error err;
    pt_tar_listing l;

    int fd = scratch_file(); /* a bad checksum first: no archive */
    put_header(fd, 0, "a.ptsum", '0', "00000000000", false);
    assert_int_equal(pt_tar_list(fd, 100, &l, &err), -1);
    assert_non_null(strstr(err.message, "checksum"));
    close(fd);

    fd = scratch_file(); /* one good member, then a bad header: the good one is kept */
    put_header(fd, 0, "a.ptsum", '0', "00000000005", true);
    assert_int_equal(pwrite(fd, "hello", 5, 512), 5);
    put_header(fd, 1024, "b.ptsum", '0', "00000000005", false);
    assert_int_equal(pt_tar_list(fd, 100, &l, &err), 0);
    assert_true(l.damaged);
    assert_non_null(strstr(l.damage, "byte 1024"));
    assert_int_equal(l.count, 1);
    assert_string_equal(l.members[0].name, "a.ptsum");
    pt_tar_listing_free(&l);
    close(fd);

    fd = scratch_file(); /* links, folders, dot names and paths: only plain members are listed */
    uint64_t at = 0;
    put_header(fd, at, "evil.ptsum", '2', "00000000000", true), at += 512;  /* a symlink */
    put_header(fd, at, "summaries/", '5', "00000000000", true), at += 512;  /* a folder */
    put_header(fd, at, "../..", '0', "00000000000", true), at += 512;       /* no name to show */
    put_header(fd, at, "summaries/x.ptsum", '0', "00000000000", true), at += 512;
    put_header(fd, at, "big.ptsum", '0', "77777777777", true), at += 512;  /* past the end */
    assert_int_equal(pt_tar_list(fd, 100, &l, &err), 0);
    assert_int_equal(l.count, 1);
    assert_string_equal(l.members[0].name, "x.ptsum");
    assert_int_equal(l.skipped, 3); /* the link, the dot name, the member cut short */
    assert_true(l.unfinished);
    pt_tar_listing_free(&l);
    close(fd);

    fd = scratch_file(); /* a size that is not octal ends the listing */
    put_header(fd, 0, "a.ptsum", '0', "00000000000", true);
    put_header(fd, 512, "b.ptsum", '0', "0000000009x", true);
    assert_int_equal(pt_tar_list(fd, 100, &l, &err), 0);
    assert_true(l.damaged);
    assert_int_equal(l.count, 1);
    pt_tar_listing_free(&l);
    close(fd);

    fd = scratch_file(); /* more members than the reader allows */
    uint64_t end = write_members(fd);
    assert_int_equal(pt_tar_finish(fd, end, &err), 0);
    assert_int_equal(pt_tar_list(fd, 3, &l, &err), -1);
    assert_non_null(strstr(err.message, "more than 3"));
    close(fd);
}

static void test_append_refusals(void **state)
{
    (void)state;
    int fd = scratch_file();
    uint64_t end = 0;
    pt_error err;
    char long_name[160];
    memset(long_name, 'a', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    assert_int_equal(pt_tar_append(fd, &end, long_name, "x", 1, 0644, 0, &err), -1);
    assert_int_equal(pt_tar_append(fd, &end, "a/b.ptsum", "x", 1, 0644, 0, &err), -1);
    assert_int_equal(pt_tar_append(fd, &end, "", "x", 1, 0644, 0, &err), -1);
    assert_int_equal(end, 0);
    assert_int_equal(pt_tar_append(fd, &end, "ok.ptsum", "x", 1, 0644, 0, &err), 0);
    int read_only = open("/proc/self/exe", O_RDONLY); /* a write that fails leaves end alone */
    uint64_t other = 7;
    assert_int_equal(pt_tar_append(read_only, &other, "ok.ptsum", "x", 1, 0644, 0, &err), -1);
    assert_int_equal(other, 7);
    close(read_only);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_unfinished),
        cmocka_unit_test(test_hostile_headers),
        cmocka_unit_test(test_append_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
