/* server.h -- `perftracker display`: serve a PerfDisplay folder over HTTP (libmicrohttpd).
 *
 * The server answers GET and HEAD for files inside the folder (see site.h for the path
 * rules) and 405 for every other method. It binds 127.0.0.1 unless told otherwise, and
 * while bound to loopback it refuses requests whose Host is not a loopback name. Pages of
 * other origins cannot read what it serves (Cross-Origin-Resource-Policy, and a refusal
 * of what a browser marks as their request; see server.c). It runs on its own threads:
 * pt_display_start returns once it listens, pt_display_stop ends it. */
#ifndef PT_DISPLAY_SERVER_H
#define PT_DISPLAY_SERVER_H

#include "util/common.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct pt_display_options {
    const char *dir;  /* the PerfDisplay folder */
    const char *bind; /* numeric IPv4/IPv6 address or "localhost"; NULL = 127.0.0.1 */
    uint16_t port;    /* 0 = any free port (pt_display_port tells which) */
} pt_display_options;

typedef struct pt_display_server pt_display_server;

/* Whether this binary was built with libmicrohttpd. */
bool pt_display_available(void);

pt_display_server *pt_display_start(const pt_display_options *options, pt_error *err);
uint16_t pt_display_port(const pt_display_server *server);
/* The address it listens on, as given (e.g. "127.0.0.1", "::1"). */
const char *pt_display_bind_address(const pt_display_server *server);
/* Stops accepting, finishes the requests in flight, frees the server. */
void pt_display_stop(pt_display_server *server);

#endif
