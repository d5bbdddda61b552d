/* server.c -- a read-only static file server for one PerfDisplay folder, on libmicrohttpd.
 *
 * Design: libmicrohttpd runs its own threads (a small pool polling with epoll or poll);
 * each request is answered on its first callback, with the file handed to the library
 * as a descriptor, so it streams a 2 GB raw trace with sendfile() and never copies it into
 * memory. Paths go through site.c; the library's own %-decoding is switched off (a no-op
 * unescape callback) so that site.c sees the bytes that were sent and can refuse encoded
 * tricks like %2f or %00 instead of receiving them already decoded. Cost per request: one
 * realpath(), one stat(), one open().
 *
 * Every answer this file makes (files, refusals, HEAD) carries headers that keep the page
 * and its data inert elsewhere: a Content-Type, nosniff, Cross-Origin-Resource-Policy
 * same-origin (a page of another origin -- another loopback address or port, a file://
 * page -- that includes data.js with <script>, or fetches report.json, gets nothing: the
 * Host check cannot tell, its request names 127.0.0.1 too), a Content-Security-Policy
 * allowing only this folder's own scripts, and no framing. Behind CORP, a request a
 * browser marks as another origin's (Sec-Fetch-Site) is refused unless it navigates.
 * What the library answers itself, to a request it cannot parse (400, 414, 431, 505), is
 * its own fixed sentence without these headers: no hook reaches it, and it holds no data.
 *
 * Slow clients (slowloris). libmicrohttpd's timeout counts idleness, so a client sending
 * one byte every few seconds would keep its slot forever, and enough of them would fill
 * every slot. So the server tracks its connections itself (the library's connection
 * notifications): a request's head must arrive within REQUEST_DEADLINE_S of the
 * connection opening or of the previous answer, or a watchdog thread shuts the socket
 * down; and once three quarters of the slots are taken, each new connection shuts down
 * the oldest one still waiting for its request head, so newcomers always get in. The
 * library calls the closed-notification before it closes the socket, and both paths hold
 * one lock, so the watchdog never shuts down a descriptor that was reused. Answers in
 * progress (a 2 GB raw trace to a slow reader) are bounded by the idle timeout only. */
#define _POSIX_C_SOURCE 200809L
#include "display/server.h"
#include "display/site.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#ifdef PT_HAVE_MICROHTTPD

#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNECTIONS 256u
#define EVICT_AT (MAX_CONNECTIONS * 3 / 4)
#define REQUEST_DEADLINE_S 10
#define IDLE_TIMEOUT_S 10u
#define NS_PER_S 1000000000LL

typedef struct tracked_connection {
    int fd;           /* -1: a free slot */
    int64_t since_ns; /* when it opened, or when its last answer ended */
    bool answering;   /* its request head arrived; the deadline does not apply */
    bool shut;        /* shut down already; waiting for the library to close it */
} tracked_connection;

struct pt_display_server {
    struct MHD_Daemon *daemon;
    pt_display_site site;
    bool loopback_only; /* bound to loopback: refuse requests for other Host names */
    char bind[64];
    uint16_t port;
    pthread_mutex_t lock; /* guards what follows */
    pthread_cond_t wake;
    bool stopping, watchdog_started;
    pthread_t watchdog;
    size_t live;
    tracked_connection connections[MAX_CONNECTIONS];
    char library_error[256]; /* libmicrohttpd's last complaint, for our own message */
};

/* Scripts and styles from the folder only; ECharts sets inline styles on its tooltip. */
static const char content_security_policy[] =
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'";

bool pt_display_available(void) { return true; }

static void add_common_headers(struct MHD_Response *response)
{
    MHD_add_response_header(response, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(response, "Cross-Origin-Resource-Policy", "same-origin");
    MHD_add_response_header(response, "Content-Security-Policy", content_security_policy);
    MHD_add_response_header(response, "X-Frame-Options", "DENY");
    MHD_add_response_header(response, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(response, "Cache-Control", "no-cache");
}

static enum MHD_Result answer_error(struct MHD_Connection *connection, unsigned int status)
{
    const char *text = status == 400 ? "400 Bad Request\n"
                     : status == 403 ? "403 Forbidden\n"
                     : status == 404 ? "404 Not Found\n"
                     : status == 405 ? "405 Method Not Allowed: only GET and HEAD\n"
                                     : "500 Internal Server Error\n";
    struct MHD_Response *response =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
    if (!response)
        return MHD_NO;
    add_common_headers(response);
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    if (status == 405)
        MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    enum MHD_Result ok = MHD_queue_response(connection, status, response);
    MHD_destroy_response(response);
    return ok;
}

static enum MHD_Result answer_file(struct MHD_Connection *connection, const char *file)
{
    int fd = open(file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0)
        return answer_error(connection, 404);
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return answer_error(connection, 404);
    }
    struct MHD_Response *response = MHD_create_response_from_fd((size_t)st.st_size, fd);
    if (!response) {
        close(fd);
        return answer_error(connection, 500);
    }
    add_common_headers(response);
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, pt_display_content_type(file));
    enum MHD_Result ok = MHD_queue_response(connection, MHD_HTTP_OK, response);
    MHD_destroy_response(response);
    return ok;
}

/* ------------------------------------------------------------ slow clients */

/* Caller holds the lock. */
static void shut_down(tracked_connection *c)
{
    if (!c->shut)
        shutdown(c->fd, SHUT_RDWR); /* the library sees end-of-file and closes it */
    c->shut = true;
}

/* Caller holds the lock: the connection that has waited longest for its request head. */
static void evict_oldest_waiting(pt_display_server *server)
{
    tracked_connection *oldest = NULL;
    for (size_t i = 0; i < MAX_CONNECTIONS; i++) {
        tracked_connection *c = &server->connections[i];
        if (c->fd >= 0 && !c->answering && !c->shut && (!oldest || c->since_ns < oldest->since_ns))
            oldest = c;
    }
    if (oldest)
        shut_down(oldest);
}

static void on_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    pt_display_server *server = cls;
    pthread_mutex_lock(&server->lock);
    tracked_connection *c = *socket_context;
    if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        if (c) {
            c->fd = -1;
            server->live--;
        }
        *socket_context = NULL;
    } else if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (server->live >= EVICT_AT)
            evict_oldest_waiting(server);
        for (size_t i = 0; info && i < MAX_CONNECTIONS; i++) {
            c = &server->connections[i];
            if (c->fd < 0) {
                *c = (tracked_connection){info->connect_fd, pt_now_ns(), false, false};
                *socket_context = c;
                server->live++;
                break;
            }
        }
    }
    pthread_mutex_unlock(&server->lock);
}

static void set_answering(pt_display_server *server, struct MHD_Connection *connection, bool answering)
{
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    pthread_mutex_lock(&server->lock);
    tracked_connection *c = info ? info->socket_context : NULL;
    if (c && c->fd >= 0) {
        c->answering = answering;
        c->since_ns = pt_now_ns();
    }
    pthread_mutex_unlock(&server->lock);
}

static void on_request_done(void *cls, struct MHD_Connection *connection, void **request_state,
                            enum MHD_RequestTerminationCode toe)
{
    (void)request_state, (void)toe;
    set_answering(cls, connection, false); /* a kept-alive connection's next head is due from now */
}

static void *watchdog_main(void *arg)
{
    pt_display_server *server = arg;
    pthread_mutex_lock(&server->lock);
    while (!server->stopping) {
        int64_t now = pt_now_ns();
        for (size_t i = 0; i < MAX_CONNECTIONS; i++) {
            tracked_connection *c = &server->connections[i];
            if (c->fd >= 0 && !c->answering && now - c->since_ns > REQUEST_DEADLINE_S * NS_PER_S)
                shut_down(c);
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 1;
        pthread_cond_timedwait(&server->wake, &server->lock, &until);
    }
    pthread_mutex_unlock(&server->lock);
    return NULL;
}

/* ------------------------------------------------------------ requests */

static enum MHD_Result handle_request(void *cls, struct MHD_Connection *connection,
                                      const char *url, const char *method, const char *version,
                                      const char *upload_data, size_t *upload_data_size,
                                      void **request_state)
{
    (void)version, (void)upload_data, (void)upload_data_size, (void)request_state;
    pt_display_server *server = cls;
    set_answering(server, connection, true);
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return answer_error(connection, 405);
    if (server->loopback_only &&
        !pt_display_host_is_loopback(MHD_lookup_connection_value(connection, MHD_HEADER_KIND,
                                                                 MHD_HTTP_HEADER_HOST)))
        return answer_error(connection, 403);
    if (pt_display_fetch_is_foreign(MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "Sec-Fetch-Site"),
                                    MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "Sec-Fetch-Mode")))
        return answer_error(connection, 403);
    char file[PATH_MAX];
    pt_display_status status = pt_display_resolve(&server->site, url, file);
    if (status != PT_DISPLAY_OK)
        return answer_error(connection, (unsigned int)status);
    return answer_file(connection, file); /* HEAD: the library sends the headers only */
}

/* Keeps the path exactly as sent; site.c decodes it once, and strictly. */
static size_t keep_escapes(void *cls, struct MHD_Connection *connection, char *s)
{
    (void)cls, (void)connection;
    return strlen(s);
}

/* Fills addr from a numeric address or "localhost". Returns its length, 0 if invalid. */
static socklen_t parse_bind_address(const char *bind, uint16_t port, struct sockaddr_storage *addr,
                                    bool *loopback)
{
    memset(addr, 0, sizeof *addr);
    struct sockaddr_in *v4 = (struct sockaddr_in *)addr;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)addr;
    if (strcmp(bind, "localhost") == 0)
        bind = "127.0.0.1";
    if (inet_pton(AF_INET, bind, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(port);
        *loopback = (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
        return sizeof *v4;
    }
    if (inet_pton(AF_INET6, bind, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(port);
        *loopback = IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr);
        return sizeof *v6;
    }
    return 0;
}

/* The library's error lines go into our message instead of straight to stderr, where
 * they would come before, and contradict, the one that says what to do. */
static void keep_library_error(void *ctx, const char *fmt, va_list ap)
{
    pt_display_server *server = ctx;
    vsnprintf(server->library_error, sizeof server->library_error, fmt, ap);
    size_t n = strlen(server->library_error);
    while (n && (server->library_error[n - 1] == '\n' || server->library_error[n - 1] == '.'))
        server->library_error[--n] = '\0';
}

/* Whether another program already listens on the address: a bind of our own (with the
 * SO_REUSEADDR libmicrohttpd sets too) says so with EADDRINUSE, which the library's
 * failure does not tell its caller. */
static bool address_taken(const struct sockaddr_storage *addr, socklen_t len)
{
    int fd = socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    bool taken = bind(fd, (const struct sockaddr *)addr, len) != 0 && errno == EADDRINUSE;
    close(fd);
    return taken;
}

static void free_server(pt_display_server *server)
{
    if (server->watchdog_started) {
        pthread_mutex_lock(&server->lock);
        server->stopping = true;
        pthread_cond_signal(&server->wake);
        pthread_mutex_unlock(&server->lock);
        pthread_join(server->watchdog, NULL);
    }
    if (server->daemon)
        MHD_stop_daemon(server->daemon); /* its closed-notifications still find the lock */
    pthread_cond_destroy(&server->wake);
    pthread_mutex_destroy(&server->lock);
    free(server);
}

pt_display_server *pt_display_start(const pt_display_options *options, pt_error *err)
{
    pt_display_server *server = pt_xcalloc(1, sizeof *server);
    pthread_mutex_init(&server->lock, NULL);
    pthread_cond_init(&server->wake, NULL);
    for (size_t i = 0; i < MAX_CONNECTIONS; i++)
        server->connections[i].fd = -1;
    const char *bind = options->bind ? options->bind : "127.0.0.1";
    struct sockaddr_storage addr;
    if (pt_display_site_open(&server->site, options->dir, err) != 0)
        goto fail;
    socklen_t addr_len = parse_bind_address(bind, options->port, &addr, &server->loopback_only);
    if (!addr_len) {
        pt_error_set(err, "--bind %s: not a numeric IPv4/IPv6 address", bind);
        goto fail;
    }
    if (options->port != 0 && address_taken(&addr, addr_len)) {
        pt_error_set(err, "port %u on %s is taken: another program listens there. Pick another port with --port N "
                     "(--port 0 takes any free one)", (unsigned)options->port, bind);
        goto fail;
    }
    snprintf(server->bind, sizeof server->bind, "%s", bind);
    if (pthread_create(&server->watchdog, NULL, watchdog_main, server) != 0) {
        pt_error_set(err, "cannot start the server's watchdog thread");
        goto fail;
    }
    server->watchdog_started = true;
    unsigned int flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
    if (addr.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    server->daemon = MHD_start_daemon(
        flags, options->port, NULL, NULL, handle_request, server,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
        MHD_OPTION_UNESCAPE_CALLBACK, keep_escapes, NULL,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, server,
        MHD_OPTION_NOTIFY_COMPLETED, on_request_done, server,
        MHD_OPTION_THREAD_POOL_SIZE, 4u,
        MHD_OPTION_CONNECTION_LIMIT, MAX_CONNECTIONS,
        MHD_OPTION_CONNECTION_TIMEOUT, IDLE_TIMEOUT_S,
        MHD_OPTION_EXTERNAL_LOGGER, keep_library_error, server,
        MHD_OPTION_END);
    if (!server->daemon) {
        pt_error_set(err, "cannot listen on %s port %u (%s): is it an address of this machine? --bind and --port "
                     "choose another", bind, (unsigned)options->port,
                     server->library_error[0] ? server->library_error : "the HTTP library refused it");
        goto fail;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(server->daemon, MHD_DAEMON_INFO_BIND_PORT);
    server->port = info && info->port ? info->port : options->port;
    return server;
fail:
    free_server(server);
    return NULL;
}

uint16_t pt_display_port(const pt_display_server *server) { return server->port; }

const char *pt_display_bind_address(const pt_display_server *server) { return server->bind; }

void pt_display_stop(pt_display_server *server)
{
    if (server)
        free_server(server);
}

#else /* built without libmicrohttpd: the writer still works; serving says why it cannot */

struct pt_display_server {
    int unused;
};

bool pt_display_available(void) { return false; }

pt_display_server *pt_display_start(const pt_display_options *options, pt_error *err)
{
    (void)options;
    pt_error_set(err, "this perftracker was built without libmicrohttpd; serve the folder with "
                      "`python3 app.py` inside it instead");
    return NULL;
}

uint16_t pt_display_port(const pt_display_server *server) { (void)server; return 0; }

const char *pt_display_bind_address(const pt_display_server *server) { (void)server; return ""; }

void pt_display_stop(pt_display_server *server) { (void)server; }

#endif
