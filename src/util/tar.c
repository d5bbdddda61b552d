/* tar.c -- ustar archives (see tar.h).
 *
 * The header is the POSIX ustar block: name[100] mode[8] uid[8] gid[8] size[12] mtime[12]
 * chksum[8] typeflag[1] linkname[100] magic[6] version[2] uname[32] gname[32]
 * devmajor[8] devminor[8] prefix[155], padded to 512 bytes. Numbers are octal text; the
 * checksum is the sum of the header's bytes with its own field read as spaces. GNU tar's
 * magic ("ustar  \0") is read too, so an archive a user made with tar(1) lists; its
 * base-256 sizes (files over 8 GiB) are refused, as no summary is that large. */
#define _GNU_SOURCE
#include "tar.h"
#include "input.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

enum {
    NAME_AT = 0, MODE_AT = 100, UID_AT = 108, GID_AT = 116, SIZE_AT = 124, MTIME_AT = 136, CHKSUM_AT = 148,
    TYPE_AT = 156, MAGIC_AT = 257, VERSION_AT = 263,
    SIZE_LEN = 12, CHKSUM_LEN = 8,
};

static void put_octal(unsigned char *field, size_t width, uint64_t value)
{
    /* width - 1 digits and a NUL, as tar(1) writes them */
    field[width - 1] = '\0';
    for (size_t i = width - 1; i-- > 0; value >>= 3)
        field[i] = (unsigned char)('0' + (value & 7));
}

static unsigned checksum(const unsigned char *block)
{
    unsigned sum = 0;
    for (size_t i = 0; i < PT_TAR_BLOCK; i++)
        sum += i >= CHKSUM_AT && i < CHKSUM_AT + CHKSUM_LEN ? ' ' : block[i];
    return sum;
}

static void fill_header(unsigned char *h, const char *name, size_t len, int mode, int64_t mtime)
{
    memset(h, 0, PT_TAR_BLOCK);
    memcpy(h + NAME_AT, name, strlen(name));
    put_octal(h + MODE_AT, 8, (uint64_t)mode & 07777);
    put_octal(h + UID_AT, 8, 0);
    put_octal(h + GID_AT, 8, 0);
    put_octal(h + SIZE_AT, SIZE_LEN, len);
    put_octal(h + MTIME_AT, 12, mtime > 0 ? (uint64_t)mtime : 0);
    h[TYPE_AT] = '0';
    memcpy(h + MAGIC_AT, "ustar", 6);
    memcpy(h + VERSION_AT, "00", 2);
    /* six digits, a NUL and a space: the field's customary form */
    unsigned sum = checksum(h);
    snprintf((char *)h + CHKSUM_AT, CHKSUM_LEN, "%06o", sum & 0777777);
    h[CHKSUM_AT + 7] = ' ';
}

static uint64_t padding_of(uint64_t len)
{
    return (PT_TAR_BLOCK - len % PT_TAR_BLOCK) % PT_TAR_BLOCK;
}

/* pwritev until everything is written; false on an error (errno set). */
static bool write_all_at(int fd, struct iovec *iov, int count, uint64_t at)
{
    while (count > 0) {
        ssize_t n = pwritev(fd, iov, count, (off_t)at);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = ENOSPC;
            return false;
        }
        at += (uint64_t)n;
        size_t left = (size_t)n;
        while (count > 0 && left >= iov->iov_len) /* the pieces written whole */
            left -= iov->iov_len, iov++, count--;
        if (count > 0) {
            iov->iov_base = (char *)iov->iov_base + left;
            iov->iov_len -= left;
        }
    }
    return true;
}

int pt_tar_append(int fd, uint64_t *end, const char *name, const void *data, size_t len, int mode, int64_t mtime,
                  pt_error *err)
{
    size_t name_len = strlen(name);
    if (name_len == 0 || name_len > PT_TAR_NAME_MAX || strchr(name, '/')) {
        pt_error_set(err, "cannot store %.120s in an archive: a member's name is one component of 1 to %d bytes",
                     name, PT_TAR_NAME_MAX);
        return -1;
    }
    if ((uint64_t)len >= (1ull << 33)) { /* 11 octal digits */
        pt_error_set(err, "cannot store %s in an archive: %zu bytes is over tar's 8 GiB", name, len);
        return -1;
    }
    unsigned char header[PT_TAR_BLOCK];
    static const unsigned char zeros[PT_TAR_BLOCK];
    fill_header(header, name, len, mode, mtime);
    struct iovec iov[3] = {{header, sizeof header}, {(void *)data, len}, {(void *)zeros, padding_of(len)}};
    if (!write_all_at(fd, iov, 3, *end)) {
        int saved = errno;
        int cut = ftruncate(fd, (off_t)*end); /* what was there before stays the archive */
        (void)cut;
        pt_error_set(err, "cannot append %s to the archive: %s", name, strerror(saved));
        return -1;
    }
    *end += PT_TAR_BLOCK + len + padding_of(len);
    return 0;
}

int pt_tar_finish(int fd, uint64_t end, pt_error *err)
{
    static const unsigned char zeros[2 * PT_TAR_BLOCK];
    struct iovec iov = {(void *)zeros, sizeof zeros};
    if (!write_all_at(fd, &iov, 1, end)) {
        pt_error_set(err, "cannot end the archive: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- reading */

/* An octal field: digits, then NULs or spaces (leading spaces allowed, as old tars wrote). */
static bool read_octal(const unsigned char *field, size_t width, uint64_t *value)
{
    size_t i = 0;
    while (i < width && field[i] == ' ')
        i++;
    uint64_t v = 0;
    size_t digits = 0;
    for (; i < width && field[i] >= '0' && field[i] <= '7'; i++, digits++) {
        if (v >> 60)
            return false;
        v = v * 8 + (uint64_t)(field[i] - '0');
    }
    for (; i < width; i++)
        if (field[i] != ' ' && field[i] != '\0')
            return false;
    *value = v;
    return digits > 0;
}

static bool all_zero(const unsigned char *block)
{
    for (size_t i = 0; i < PT_TAR_BLOCK; i++)
        if (block[i])
            return false;
    return true;
}

/* Why the header at h is not one (NULL: it is one). */
static const char *header_problem(const unsigned char *h, uint64_t *size)
{
    bool posix = memcmp(h + MAGIC_AT, "ustar\0", 6) == 0, gnu = memcmp(h + MAGIC_AT, "ustar  \0", 8) == 0;
    uint64_t stated;
    if (!posix && !gnu)
        return "has no ustar magic";
    if (!read_octal(h + CHKSUM_AT, CHKSUM_LEN, &stated) || stated != checksum(h))
        return "fails its checksum";
    if (!read_octal(h + SIZE_AT, SIZE_LEN, size))
        return "states no octal size";
    return NULL;
}

/* The member's name: the last component of its name field (a prefix field only adds
 * folders), which must be a plain one (an
 * archive made with `tar cf x.tar summaries/` names its members summaries/<file>). false
 * when there is none fit to show and to read a rank from. */
static bool member_name(const unsigned char *h, char dst[PT_TAR_NAME_MAX + 1])
{
    char name[PT_TAR_NAME_MAX + 1];
    memcpy(name, h + NAME_AT, PT_TAR_NAME_MAX);
    name[PT_TAR_NAME_MAX] = '\0';
    const char *last = strrchr(name, '/');
    last = last ? last + 1 : name;
    if (!*last || last[0] == '.')
        return false;
    for (const char *p = last; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return false;
    snprintf(dst, PT_TAR_NAME_MAX + 1, "%s", last);
    return true;
}

static bool read_block(int fd, uint64_t at, unsigned char *block)
{
    return pt_pread_all(fd, block, PT_TAR_BLOCK, at) == PT_TAR_BLOCK;
}

int pt_tar_list(int fd, size_t max_members, pt_tar_listing *out, pt_error *err)
{
    memset(out, 0, sizeof *out);
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        pt_error_set(err, "not a regular file");
        return -1;
    }
    uint64_t file_size = (uint64_t)st.st_size, at = 0;
    size_t cap = 0;
    unsigned char h[PT_TAR_BLOCK];
    for (;;) {
        if (at + PT_TAR_BLOCK > file_size || !read_block(fd, at, h)) {
            out->unfinished = true;
            break;
        }
        if (all_zero(h))
            break;
        uint64_t size;
        const char *problem = header_problem(h, &size);
        if (problem && at == 0) {
            pt_error_set(err, "not a tar archive: its first header %s", problem);
            pt_tar_listing_free(out);
            return -1;
        }
        if (problem) {
            out->damaged = true;
            snprintf(out->damage, sizeof out->damage, "the header at byte %llu: %s", (unsigned long long)at, problem);
            break;
        }
        uint64_t data_at = at + PT_TAR_BLOCK;
        if (size > file_size - data_at) { /* cut short: its writer stopped mid-member */
            out->unfinished = true;
            out->skipped++;
            break;
        }
        char type = (char)h[TYPE_AT];
        pt_tar_member m;
        if ((type == '0' || type == '\0') && member_name(h, m.name)) {
            if (out->count == max_members) {
                pt_error_set(err, "holds more than %zu members", max_members);
                pt_tar_listing_free(out);
                return -1;
            }
            m.offset = data_at, m.size = size;
            PT_GROW(out->members, cap, out->count + 1);
            out->members[out->count++] = m;
        } else if (type != '5') { /* folders are only names; anything else is not read */
            out->skipped++;
        }
        at = data_at + size + padding_of(size);
    }
    return 0;
}

void pt_tar_listing_free(pt_tar_listing *l)
{
    free(l->members);
    l->members = NULL;
    l->count = 0;
}
