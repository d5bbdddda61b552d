/* control_test_util.h -- what the in-process control tests (test_rounds.c, test_trust.c)
 * share: raw protocol peers, another user's connection, and the report checks they make.
 * Nothing here asserts: each returns what it saw, for the caller's cmocka assertions. */
#ifndef PT_TESTS_CONTROL_TEST_UTIL_H
#define PT_TESTS_CONTROL_TEST_UTIL_H

#include "control/auth.h"
#include "control/net.h"
#include "util/json.h"

#include <stdbool.h>

/* The agent key PERFTRACKER_SECRET=secret gives (the variable is then set to restore). */
pt_key ctl_test_agent_key(const char *secret, const char *restore);
/* The next message on c, reading as needed for up to 5 s: 1, 0 (none came) or -1 (closed,
 * or a bad frame). */
int ctl_test_next_msg(pt_conn *c, pt_ctl_msg *m);
/* Queues m and writes it out: 0, or -1. */
int ctl_test_send_now(pt_conn *c, const pt_ctl_msg *m);
/* In a child process: become uid/gid 65534 and connect to the abstract socket `name`
 * ("@..."): 0 when it was closed with nothing sent, 1 when something came, 2 or 3 when
 * it could not become that user or connect. */
int ctl_test_connect_as_nobody(const char *name);
/* Whether some warning of the report holds a (and b, unless NULL). */
bool ctl_test_warning_contains(const pt_json *report, const char *a, const char *b);
/* rm -rf path: 0, or the shell's status. */
int ctl_test_remove_tree(const char *path);

#endif
