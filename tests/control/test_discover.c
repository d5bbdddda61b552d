/* test_discover.c -- what the CLI believes when it finds jobs (discover.c, jobfile.c).
 *
 * A job file says where to connect and which key to prove, so only regular, small,
 * well-formed files of this user's, in a directory of this user's that nobody else may
 * enter, are believed; everything else is skipped with a note naming it, and nothing
 * blocks (a FIFO) or follows a link. Each case plants one bad file beside a good one in a
 * private PERFTRACKER_KEY_DIR and checks that exactly the good job is listed. */
#define _GNU_SOURCE
#include "control/discover.h"

#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

typedef struct fixture {
    char top[64];
    char keys[128];
    pt_job_record good;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    snprintf(f->top, sizeof f->top, "/tmp/pt-test-discover-XXXXXX");
    assert_non_null(mkdtemp(f->top));
    snprintf(f->keys, sizeof f->keys, "%s/keys", f->top);
    setenv("PERFTRACKER_KEY_DIR", f->keys, 1);
    pt_job_env env = {0};
    env.world_size = 4;
    env.master_port = 29600;
    env.coordinator_port = 29601;
    snprintf(env.master_addr, sizeof env.master_addr, "127.0.0.1");
    snprintf(env.coordinator_host, sizeof env.coordinator_host, "127.0.0.1");
    pt_job_record_for_self(&f->good, &env);
    snprintf(f->good.connect_host, sizeof f->good.connect_host, "127.0.0.1");
    pt_error err;
    assert_int_equal(pt_job_file_write(&f->good, &err), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->top);
    assert_int_equal(system(cmd), 0);
    unsetenv("PERFTRACKER_KEY_DIR");
    free(f);
    return 0;
}

static void plant(const fixture *f, const char *name, const char *text, mode_t mode)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", f->keys, name);
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    chmod(path, mode);
}

/* A valid job file's text for this live process, with one line replaced. */
static void job_text(char *dst, size_t cap, const char *extra)
{
    snprintf(dst, cap, "perftracker-job 1\npid %d\nstarted 1\nworld_size 2\nmaster_port 29700\n"
                       "connect_host 127.0.0.1\nport 29701\n%s", (int)getpid(), extra);
}

/* Lists the jobs: exactly the good one, and the notes contain `said`. */
static void expect_only_good(const fixture *f, const char *said)
{
    pt_job_list jobs;
    pt_jobs_list(&jobs);
    assert_int_equal(jobs.count, 1);
    assert_int_equal(jobs.jobs[0].master_port, f->good.master_port);
    if (!strstr(jobs.notes, said))
        fail_msg("notes do not say \"%s\":\n%s", said, jobs.notes);
    pt_job_list_free(&jobs);
}

/* Nothing is said of our own files: a note may only name another user's job file
 * elsewhere on the machine (other users' jobs run on a shared CI machine too). */
static void expect_only_foreign_notes(const fixture *f, const char *notes)
{
    for (const char *line = notes; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char text[1024];
        snprintf(text, sizeof text, "%.*s", (int)PT_MIN(len, sizeof text - 1), line);
        bool foreign = (strncmp(text, "ignored /tmp/perftracker-", 25) == 0 && strstr(text, "belongs to ")) ||
                       strncmp(text, "... and ", 8) == 0;
        if (!foreign || strstr(text, f->top))
            fail_msg("a note about something other than another user's job file: %s", text);
        line += len + (end ? 1 : 0);
    }
}

static void test_a_valid_file_of_ours_is_believed(void **state)
{
    fixture *f = *state;
    char text[512];
    job_text(text, sizeof text, "");
    plant(f, "job-127.0.0.1-29701.info", text, 0600);
    pt_job_list jobs;
    pt_jobs_list(&jobs);
    assert_int_equal(jobs.count, 2);
    expect_only_foreign_notes(f, jobs.notes);
    pt_job_list_free(&jobs);
}

static void test_symlink_is_not_followed(void **state)
{
    fixture *f = *state;
    char text[512], target[256], link[256];
    job_text(text, sizeof text, "");
    snprintf(target, sizeof target, "%s/elsewhere.info", f->top);
    int fd = open(target, O_CREAT | O_WRONLY, 0600);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    snprintf(link, sizeof link, "%s/job-link.info", f->keys);
    assert_int_equal(symlink(target, link), 0);
    expect_only_good(f, "job-link.info: Too many levels of symbolic links");
}

static void test_fifo_does_not_block(void **state)
{
    fixture *f = *state;
    char path[256];
    snprintf(path, sizeof path, "%s/job-fifo.info", f->keys);
    assert_int_equal(mkfifo(path, 0600), 0);
    expect_only_good(f, "job-fifo.info is not a regular file");
}

static void test_oversized_file_is_refused(void **state)
{
    fixture *f = *state;
    char text[512], padding[9000];
    memset(padding, 'x', sizeof padding - 2);
    padding[0] = '#', padding[sizeof padding - 2] = '\n', padding[sizeof padding - 1] = '\0';
    job_text(text, sizeof text, "");
    char *big = malloc(sizeof text + sizeof padding);
    snprintf(big, sizeof text + sizeof padding, "%s%s", text, padding);
    plant(f, "job-big.info", big, 0600);
    free(big);
    expect_only_good(f, "more than a job file's 8192");
}

static void test_file_others_may_write_is_refused(void **state)
{
    fixture *f = *state;
    char text[512];
    job_text(text, sizeof text, "");
    plant(f, "job-writable.info", text, 0622);
    expect_only_good(f, "can be written by other users (mode 0622)");
}

static void test_values_out_of_range_are_refused(void **state)
{
    fixture *f = *state;
    char text[512];
    job_text(text, sizeof text, "world_size 2147483647\n");
    plant(f, "job-world.info", text, 0600);
    expect_only_good(f, "job-world.info has an invalid world_size ('2147483647')");
    job_text(text, sizeof text, "port 70000\n");
    plant(f, "job-world.info", text, 0600);
    expect_only_good(f, "has an invalid port ('70000')");
    job_text(text, sizeof text, "pid 12abc\n");
    plant(f, "job-world.info", text, 0600);
    expect_only_good(f, "has an invalid pid ('12abc')");
}

static void test_another_users_file_is_refused(void **state)
{
    fixture *f = *state;
    if (geteuid() != 0)
        skip(); /* only root can give a file away */
    char text[512], path[256];
    job_text(text, sizeof text, "");
    plant(f, "job-foreign.info", text, 0600);
    snprintf(path, sizeof path, "%s/job-foreign.info", f->keys);
    assert_int_equal(chown(path, 64020, 64020), 0);
    expect_only_good(f, "job-foreign.info: it belongs to uid 64020, not to this user");
}

static void test_directory_others_may_enter_is_not_read(void **state)
{
    fixture *f = *state;
    chmod(f->keys, 0755);
    pt_job_list jobs;
    pt_jobs_list(&jobs);
    assert_int_equal(jobs.count, 0);
    assert_non_null(strstr(jobs.notes, "with mode 0755, and job files are trusted only in a directory"));
    pt_job_list_free(&jobs);
    char why[PT_RUNTIME_PATH_MAX];
    assert_false(pt_runtime_dir_is_private(f->keys, why, sizeof why));
    assert_non_null(strstr(why, "is this user's, but its mode 0755 lets other users in"));
    pt_error err;
    assert_int_equal(pt_runtime_dir_ensure(f->keys, &err), -1);
    assert_non_null(strstr(err.message, "not a private directory of this user"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_a_valid_file_of_ours_is_believed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_symlink_is_not_followed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fifo_does_not_block, setup, teardown),
        cmocka_unit_test_setup_teardown(test_oversized_file_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_others_may_write_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_values_out_of_range_are_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_another_users_file_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_directory_others_may_enter_is_not_read, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
