/* report/report_text.c: what the terminal shows of a report, from report.json texts
 * written here. The verdict comes first, a partial input's problem under it (a mixed
 * input's, its one finding, once); a warning several workers share is one line by
 * rank, at the bound of the ranks listed (8 runs, 9 runs); ratios round at the bounds of
 * their forms (<0.01%, 0.01%, 1%); workers are ranks in the sections, unknown names stay
 * names; a name two workers share names no rank; members of the wrong type are skipped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/report.h"

static pt_json *parse(const char *text)
{
    pt_error err = {{0}};
    pt_json *doc = pt_json_parse(text, strlen(text), 64, &err);
    if (!doc)
        fail_msg("bad test JSON: %s", err.message);
    return doc;
}

/* The text pt_report_render_text makes of report (with the warnings, digests). */
static char *render(const char *report, bool sections_json)
{
    pt_json *doc = parse(report);
    pt_buf out = PT_BUF_INIT;
    pt_report_text_options options = {true, sections_json};
    pt_report_render_text(doc, &options, &out);
    pt_json_free(doc);
    return pt_buf_take(&out);
}

static void assert_has(const char *text, const char *want)
{
    if (!strstr(text, want))
        fail_msg("missing %s\nin:\n%s", want, text);
}

/* ------------------------------------------------------------ warnings */

typedef struct lines {
    char text[16][256];
    size_t count, sources[16];
} lines;

static void collect(void *ctx, const char *line, const size_t *sources, size_t count)
{
    (void)sources;
    lines *l = ctx;
    assert_true(l->count < 16);
    snprintf(l->text[l->count], sizeof l->text[0], "%s", line);
    l->sources[l->count++] = count;
}

/* n workers named w<rank>.json with ranks 0, 2, 4, ... (every one a run of its own), each
 * with the warning "same". */
static lines warnings_of_spaced_workers(int n)
{
    char json[8192] = "{\"workers\": [";
    for (int i = 0; i < n; i++)
        snprintf(json + strlen(json), sizeof json - strlen(json), "%s{\"rank\": %d, \"name\": \"w%d.json\"}",
                 i ? ", " : "", 2 * i, 2 * i);
    strcat(json, "], \"warnings\": [");
    for (int i = 0; i < n; i++)
        snprintf(json + strlen(json), sizeof json - strlen(json), "%s\"w%d.json: same\"", i ? ", " : "", 2 * i);
    strcat(json, "]}");
    pt_json *doc = parse(json);
    lines l = {0};
    assert_int_equal(pt_report_each_warning(doc, collect, &l), 1);
    pt_json_free(doc);
    return l;
}

static void test_rank_list_bound(void **state)
{
    (void)state;
    lines seven = warnings_of_spaced_workers(7), eight = warnings_of_spaced_workers(8);
    lines nine = warnings_of_spaced_workers(9);
    assert_string_equal(seven.text[0], "7 workers (ranks 0, 2, 4, 6, 8, 10, 12): same");
    assert_string_equal(eight.text[0], "8 workers (ranks 0, 2, 4, 6, 8, 10, 12, 14): same");
    assert_string_equal(nine.text[0], "9 workers (ranks 0, 2, 4, 6, 8, 10, 12, 14, ...): same");
    assert_int_equal(nine.sources[0], 9);
}

static void test_warnings_grouped(void **state)
{
    (void)state;
    pt_json *doc = parse("{\"workers\": ["
                         "{\"rank\": 0, \"name\": \"a.json\"}, {\"rank\": 1, \"name\": \"b.json\"},"
                         "{\"rank\": 2, \"name\": \"c.json\"}, {\"rank\": 5, \"name\": \"x: y.json\"},"
                         "{\"rank\": 6, \"name\": \"twice.json\"}, {\"rank\": 7, \"name\": \"twice.json\"}],"
                         "\"warnings\": [\"b.json: no GPU events\", \"a.json: no GPU events\", 7,"
                         "\"c.json: steps: from the clock\", \"x: y.json: odd\", \"twice.json: dup\","
                         "\"nobody.json: not a worker\", \"3 ranks of the job have no trace: 3 4 8\","
                         "\"3 ranks of the job have no trace: 3 4 8\"]}");
    lines l = {0};
    assert_int_equal(pt_report_each_warning(doc, collect, &l), 6);
    assert_string_equal(l.text[0], "2 workers (ranks 0-1): no GPU events");
    assert_int_equal(l.sources[0], 2);
    assert_string_equal(l.text[1], "rank 2 (c.json): steps: from the clock");
    assert_string_equal(l.text[2], "rank 5 (x: y.json): odd");  /* a name holding ": " */
    assert_string_equal(l.text[3], "twice.json: dup");          /* two workers' name: no rank */
    assert_string_equal(l.text[4], "nobody.json: not a worker");
    assert_string_equal(l.text[5], "3 ranks of the job have no trace: 3 4 8 (2 times)");
    pt_json_free(doc);
}

/* ------------------------------------------------------------ the text */

static const char report_head[] =
    "{\"job\": {\"world_size\": 8, \"workers_analyzed\": 6, \"workers_failed\": 0, \"missing_ranks\": [3, 5],"
    " \"missing_count\": 2, \"steps\": 2, \"median_step_time_ms\": 1003.4},"
    " \"workers\": [{\"rank\": 0, \"name\": \"node0_0_1.json\"}, {\"rank\": 7, \"name\": \"node0_7_8.json\"}],"
    " \"diagnosis\": {\"verdict\": \"degraded\", \"joint_impact\": 0.3, \"findings\": ["
    "  {\"category\": \"python\", \"impact\": 0.2512, \"summary\": \"Rank 7 is slow.\"},"
    "  {\"category\": \"gpu_compute\", \"impact\": 0.05, \"summary\": \"A kernel.\"}],"
    "  \"inputs\": \"partial\", \"input_problem\": \"Partial: 6 of the job's 8 ranks were analysed.\"},";

static void test_verdict_first_and_rounding(void **state)
{
    (void)state;
    char json[4096];
    snprintf(json, sizeof json, "%s"
             "\"GPU Compute\": {\"min/median/max GPU utilization (in [0,1])\": [0.000099, 0.0001, 0.000101],"
             " \"workers with abnormal GPU utilization\": {\"node0_7_8.json\": 0.0099, \"gone.json\": 0.01},"
             " \"major_kernel_executions\": {\"void at::native::k<int>(float*, int)1_1_1|128_1_1\":"
             "   {\"median cost per execution (ms)\": 0.0172, \"bottleneck ratio (in [0,1])\": 0.010100}},"
             " \"workers with potential GPU issues\": [\"node0_7_8.json\"], \"detailed report\": {}},"
             "\"CUDA Runtime\": {\"cudaLaunchKernel\": {\"avg bottleneck ratio (in [0,1])\": 0.0651,"
             " \"avg execution time / monitoring duration (in [0,1])\": 0.089,"
             " \"abnormal_workers\": {\"node0_0_1.json\": 0.06, \"node0_7_8.json\": 0.07}}},"
             "\"Python functions\": {\"a.py: <module>|a.py: main|a.py: train|<built-in function sleep>\":"
             " {\"node0_7_8.json\": 0.9961234567891234}},"
             "\"warnings\": [\"node0_7_8.json: no GPU events\"]}", report_head);
    char *text = render(json, false);
    assert_true(strncmp(text, "Diagnosis:\n", 11) == 0);
    const char *verdict = strstr(text, "INFO: verdict: degraded\n"
                                       "Partial: 6 of the job's 8 ranks were analysed.\n"
                                       "  1. [python, impact 25.1%] Rank 7 is slow.\n"
                                       "  2. [gpu_compute, impact 5.0%] A kernel.\n"
                                       "Fixing all 2 findings at once saves 30.0% of the step.\n");
    assert_non_null(verdict);
    assert_true(verdict < strstr(text, "GPU Compute:\n"));
    assert_has(text, "Job: 6 of 8 workers analysed, 2 missing (ranks 3, 5); 2 profiled steps, median step 1003 ms\n");
    assert_has(text, "  rank 7 (node0_7_8.json): no GPU events\n");
    /* 0.0099% / 0.010% / 0.0101%, and 0.99% / 1.0% / 1.01% */
    assert_has(text, "GPU utilization min <0.01%, median 0.010%, max 0.010%;");
    assert_has(text, "abnormal: gone.json 1.0%, rank 7 0.99%;");
    assert_has(text, "kernels slower than on the other workers: rank 7\n");
    assert_has(text, "    1.0% of the window, 0.0172 ms each: k<int>(...) 1_1_1|128_1_1\n");
    assert_has(text, "    6.5% (8.9% with overlap) cudaLaunchKernel; above 1% on: ranks 0, 7\n");
    assert_has(text, "    ... > a.py: train > <built-in function sleep>: rank 7 99.6%\n");
    assert_null(strstr(text, "node0_0_1.json"));
    assert_null(strstr(text, "0.99612"));
    free(text);

    text = render(json, true); /* --verbose: the seed's JSON, whole */
    assert_true(strncmp(text, "Diagnosis:\n", 11) == 0);
    assert_has(text, "(gpu_compute.c) INFO: {\n    \"min/median/max GPU utilization (in [0,1])\": [");
    assert_has(text, "\"node0_7_8.json\": 0.9961234567891234");
    free(text);
}

/* Mixed input: the one finding is the problem's sentence, said once. */
static void test_input_problem_once(void **state)
{
    (void)state;
    char *text = render("{\"diagnosis\": {\"verdict\": \"degraded\", \"inputs\": \"mixed\","
                        " \"input_problem\": \"Not one job.\", \"findings\": [{\"category\": \"other\","
                        " \"impact\": 0, \"summary\": \"Not one job.\"}]}}", false);
    assert_has(text, "INFO: verdict: degraded\n  1. [other, impact 0.0%] Not one job.\n");
    assert_null(strstr(strstr(text, "Not one job.") + 1, "Not one job.")); /* said once */
    free(text);
}

static void test_hostile_types(void **state)
{
    (void)state;
    char *text = render("{\"workers\": \"none\", \"job\": [], \"diagnosis\": {\"findings\": {}, \"input_problem\": 5},"
                        " \"warnings\": [null, {\"a\": 1}, \"left as it is\"],"
                        " \"GPU Compute\": {\"min/median/max GPU utilization (in [0,1])\": [\"x\", 1],"
                        "  \"major_kernel_executions\": {\"k()\": 3, \"(\": {}, \")\": {\"bottleneck ratio (in [0,1])\": 1}}},"
                        " \"Communication\": {\"g\": [1, 2], \"h\": {\"k\": {\"example_of_normal_worker\": 5}}},"
                        " \"CUDA Runtime\": [1], \"Python functions\": {\"|||\": {\"w\": \"x\"}, \"\": {\"w\": 0.5}}}",
                        false);
    assert_has(text, "verdict: unknown\n");
    assert_has(text, "  left as it is\n");
    assert_has(text, "GPU utilization unknown;");
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rank_list_bound),
        cmocka_unit_test(test_warnings_grouped),
        cmocka_unit_test(test_verdict_first_and_rounding),
        cmocka_unit_test(test_input_problem_once),
        cmocka_unit_test(test_hostile_types),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
