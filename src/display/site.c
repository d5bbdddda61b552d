/* site.c -- request path -> file inside the published folder, or a refusal.
 *
 * Design: decode and validate the path lexically first (cheap, and it catches every
 * encoded trick before the file system sees the name), then let realpath() resolve
 * symlinks and check containment on the result. The lexical pass alone could not catch a
 * symlink that points outside; the realpath check alone would turn "/../x" into a 404 or
 * a wrong file instead of a clear refusal. Cost: one realpath() and one stat() per
 * request, which is nothing next to sending the file.
 *
 * What is left: a file swapped for a symlink between the check and the open. The server
 * opens the resolved path with O_NOFOLLOW, which closes that for the last component. */
#define _XOPEN_SOURCE 700
#include "display/site.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

static const char raw_trace_dir[] = "raw_trace";

static bool is_directory(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_inside(const char *real, const char *base);

/* The round folder's raw_trace/ beside the published folder, served only when it is a real
 * folder of the round: a symlink there (`ln -s /etc raw_trace`) would publish whatever it
 * points to, so it is ignored and /raw_trace/ maps into the folder itself (404). */
static void find_sibling_raw_trace(pt_display_site *site)
{
    char up[PATH_MAX + 16], round[PATH_MAX], sibling[PATH_MAX + 16], real[PATH_MAX];
    snprintf(up, sizeof up, "%s/..", site->root);
    if (!realpath(up, round))
        return;
    snprintf(sibling, sizeof sibling, "%s/%s", strcmp(round, "/") == 0 ? "" : round, raw_trace_dir);
    struct stat st;
    if (lstat(sibling, &st) != 0 || !S_ISDIR(st.st_mode) || !realpath(sibling, real) ||
        !is_inside(real, strcmp(round, "/") == 0 ? "" : round))
        return;
    memcpy(site->raw_trace, real, strlen(real) + 1);
}

int pt_display_site_open(pt_display_site *site, const char *dir, pt_error *err)
{
    memset(site, 0, sizeof *site);
    if (!realpath(dir, site->root) || !is_directory(site->root)) {
        pt_error_set(err, "%s: not a directory", dir);
        return -1;
    }
    char index[PATH_MAX + 16];
    snprintf(index, sizeof index, "%s/index.html", site->root);
    struct stat st;
    if (stat(index, &st) != 0 || !S_ISREG(st.st_mode)) {
        pt_error_set(err, "%s: no index.html (is this a PerfDisplay folder?)", dir);
        return -1;
    }
    char own[PATH_MAX + 16];
    snprintf(own, sizeof own, "%s/%s", site->root, raw_trace_dir);
    if (!is_directory(own))
        find_sibling_raw_trace(site);
    return 0;
}

/* Percent-decodes path into out (size PATH_MAX), refusing what no PerfDisplay file name
 * contains: NUL, control bytes, backslashes, and separators hidden in escapes. */
static pt_display_status decode_path(const char *path, char *out)
{
    size_t n = 0;
    for (const char *p = path; *p; p++) {
        unsigned char c = (unsigned char)*p;
        bool escaped = false;
        if (c == '%') {
            int hi = pt_hex_digit(p[1]), lo = hi < 0 ? -1 : pt_hex_digit(p[2]);
            if (lo < 0)
                return PT_DISPLAY_BAD_REQUEST;
            c = (unsigned char)(hi * 16 + lo);
            p += 2;
            escaped = true;
        }
        if (c < 0x20 || c == 0x7f || c == '\\')
            return PT_DISPLAY_BAD_REQUEST;
        if (c == '/' && escaped)
            return PT_DISPLAY_FORBIDDEN;
        if (n + 1 >= PATH_MAX)
            return PT_DISPLAY_BAD_REQUEST;
        out[n++] = (char)c;
    }
    out[n] = '\0';
    return PT_DISPLAY_OK;
}

/* Checks each segment of a decoded path that starts with '/'. The last may be empty (a
 * trailing slash: the folder's index.html); no other may. */
static pt_display_status check_segments(const char *path)
{
    const char *seg = path + 1;
    for (;;) {
        const char *end = strchr(seg, '/');
        size_t len = end ? (size_t)(end - seg) : strlen(seg);
        if (len == 0 && end)
            return PT_DISPLAY_BAD_REQUEST;
        if (len > 0 && seg[0] == '.')
            return PT_DISPLAY_FORBIDDEN; /* ".", "..", and dotfiles */
        if (!end)
            return PT_DISPLAY_OK;
        seg = end + 1;
    }
}

static bool is_inside(const char *real, const char *base)
{
    size_t n = strlen(base);
    return strncmp(real, base, n) == 0 && real[n] == '/';
}

pt_display_status pt_display_resolve(const pt_display_site *site, const char *request_path,
                                     char file[PATH_MAX])
{
    char decoded[PATH_MAX];
    if (request_path[0] != '/')
        return PT_DISPLAY_BAD_REQUEST;
    pt_display_status status = decode_path(request_path, decoded);
    if (status == PT_DISPLAY_OK)
        status = check_segments(decoded);
    if (status != PT_DISPLAY_OK)
        return status;

    const char *base = site->root, *rest = decoded + 1;
    size_t prefix = sizeof raw_trace_dir - 1;
    if (site->raw_trace[0] && strncmp(rest, raw_trace_dir, prefix) == 0 && rest[prefix] == '/') {
        base = site->raw_trace;
        rest += prefix + 1;
    }
    size_t rest_len = strlen(rest);
    bool wants_index = rest_len == 0 || rest[rest_len - 1] == '/';
    char candidate[2 * PATH_MAX + 16];
    snprintf(candidate, sizeof candidate, "%s/%s%s", base, rest, wants_index ? "index.html" : "");
    if (strlen(candidate) >= PATH_MAX)
        return PT_DISPLAY_BAD_REQUEST;

    char real[PATH_MAX];
    if (!realpath(candidate, real))
        return errno == ENOENT || errno == ENOTDIR ? PT_DISPLAY_NOT_FOUND : PT_DISPLAY_FORBIDDEN;
    if (!is_inside(real, base))
        return PT_DISPLAY_FORBIDDEN; /* a symlink pointing out of the folder */
    struct stat st;
    if (stat(real, &st) != 0 || !S_ISREG(st.st_mode))
        return PT_DISPLAY_NOT_FOUND;
    memcpy(file, real, strlen(real) + 1);
    return PT_DISPLAY_OK;
}

const char *pt_display_content_type(const char *file_name)
{
    static const struct { const char *ext, *type; } types[] = {
        {".html", "text/html; charset=utf-8"},
        {".js", "text/javascript; charset=utf-8"},
        {".mjs", "text/javascript; charset=utf-8"},
        {".css", "text/css; charset=utf-8"},
        {".json", "application/json"},
        {".svg", "image/svg+xml"},
        {".png", "image/png"},
        {".ico", "image/x-icon"},
        {".txt", "text/plain; charset=utf-8"},
        {".md", "text/plain; charset=utf-8"},
        {".py", "text/plain; charset=utf-8"},
        {".gz", "application/gzip"},
        {".zst", "application/zstd"},
    };
    const char *dot = strrchr(pt_basename(file_name), '.');
    if (dot)
        for (size_t i = 0; i < PT_ARRAY_LEN(types); i++)
            if (strcasecmp(dot, types[i].ext) == 0)
                return types[i].type;
    return "application/octet-stream";
}

bool pt_display_host_is_loopback(const char *host)
{
    static const char *const names[] = {"127.0.0.1", "localhost", "[::1]"};
    if (!host)
        return false;
    for (size_t i = 0; i < PT_ARRAY_LEN(names); i++) {
        size_t n = strlen(names[i]);
        if (strncasecmp(host, names[i], n) != 0)
            continue;
        const char *port = host + n;
        if (*port == '\0')
            return true;
        if (*port++ != ':' || !*port)
            continue;
        while (*port >= '0' && *port <= '9')
            port++;
        if (*port == '\0')
            return true;
    }
    return false;
}

bool pt_display_fetch_is_foreign(const char *fetch_site, const char *fetch_mode)
{
    if (!fetch_site || (strcmp(fetch_site, "cross-site") != 0 && strcmp(fetch_site, "same-site") != 0))
        return false;
    return !fetch_mode || strcmp(fetch_mode, "navigate") != 0;
}
