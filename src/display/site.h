/* site.h -- what a PerfDisplay server may publish, the one function that maps a request
 * path onto it, and the checks of who asks (Host, Sec-Fetch-*).
 *
 * Both servers (app.py and `perftracker display`) apply the same rules, documented in
 * docs/perfdisplay.md: a request path is percent-decoded exactly once; NUL, control bytes,
 * backslashes, encoded separators (%2f, %5c), empty, "." and ".." segments and dotfiles are
 * refused; the result must resolve (realpath, so symlinks are followed) to a regular file
 * inside the published folder. The one exception is raw_trace/: when the folder has no
 * raw_trace/ of its own but its parent does (the layout `<out>/PerfDisplay` beside
 * `<out>/raw_trace`, which the seed's workflow writes), /raw_trace/... maps there, with
 * the same containment check against that folder; that raw_trace/ must itself be a real
 * folder inside `<out>` (a symlink there is ignored, so `ln -s /etc raw_trace` publishes
 * nothing). */
#ifndef PT_DISPLAY_SITE_H
#define PT_DISPLAY_SITE_H

#include "util/common.h"

#include <limits.h>
#include <stdbool.h>

typedef struct pt_display_site {
    char root[PATH_MAX];      /* realpath of the PerfDisplay folder */
    char raw_trace[PATH_MAX]; /* realpath of the sibling raw_trace/, or "" */
} pt_display_site;

typedef enum pt_display_status {
    PT_DISPLAY_OK = 200,
    PT_DISPLAY_BAD_REQUEST = 400, /* malformed: bad escape, NUL, control byte, "//" */
    PT_DISPLAY_FORBIDDEN = 403,   /* an attempt to leave the folder, or a dotfile */
    PT_DISPLAY_NOT_FOUND = 404    /* inside the folder, but no such regular file */
} pt_display_status;

/* Resolves dir (which must be a directory holding index.html) and its sibling raw_trace/.
 * 0 or -1 with err. */
int pt_display_site_open(pt_display_site *site, const char *dir, pt_error *err);

/* Maps a request path as sent on the wire (undecoded, without the query string) to the
 * real path of the file to serve, written to file (PATH_MAX bytes). "/" and any path
 * ending in "/" mean that folder's index.html. */
pt_display_status pt_display_resolve(const pt_display_site *site, const char *request_path,
                                     char file[PATH_MAX]);

/* The Content-Type for a file name, by its extension (text types carry charset=utf-8). */
const char *pt_display_content_type(const char *file_name);

/* Whether a Host header names this machine's loopback interface (127.0.0.1, localhost,
 * [::1], with any port). Servers bound to loopback refuse other hosts, so that a web page
 * elsewhere cannot read the report through DNS rebinding. A missing header is refused. */
bool pt_display_host_is_loopback(const char *host);

/* Whether a browser says a page of another origin asked for this other than by navigating
 * to it: Sec-Fetch-Site "cross-site" (another address, a file:// page) or "same-site"
 * (another port of this address), with a Sec-Fetch-Mode other than "navigate" -- a
 * <script>, <img> or fetch() of the report from someone else's page. Both servers refuse
 * it (403) as a second wall behind Cross-Origin-Resource-Policy. A link followed to the
 * report (navigate) and a request without these headers (curl, an older browser) pass;
 * either header may be NULL. */
bool pt_display_fetch_is_foreign(const char *fetch_site, const char *fetch_mode);

#endif
