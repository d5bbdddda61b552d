/* Kernel names from the two trace paths: a native trace holds the linkage name CUPTI
 * reports, a Kineto trace the name PyTorch's profiler demangled. The summarizer must give
 * both the same name and the same kernel key (name + grid + block). The names below are
 * real: one kernel of the H200 job in ../shared/data/traces/h200 as each path wrote it. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "summarize/demangle.h"
#include "summarize/summarize.h"
#include "trace/native_writer.h"

static const char *const mangled = "_ZN7cutlass7Kernel2I43cutlass_80_simt_sgemm_128x128_8x4_nt_align1EEvNT_6ParamsE";
static const char *const kineto_name = "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x128_8x4_nt_align1>"
                                       "(cutlass_80_simt_sgemm_128x128_8x4_nt_align1::Params)";
static const char *const kineto_key = "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x128_8x4_nt_align1>"
                                      "(cutlass_80_simt_sgemm_128x128_8x4_nt_align1::Params)36_1_9|128_1_1";

static void demangles_like_kineto(void **state)
{
    (void)state;
    char *out = pt_demangle(mangled, strlen(mangled));
    assert_non_null(out);
    assert_string_equal(out, kineto_name);
    free(out);
    /* A template with nested template arguments: Kineto's text keeps the "> >" spacing. */
    const char *fill = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_";
    out = pt_demangle(fill, strlen(fill));
    assert_non_null(out);
    assert_string_equal(out, "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
                             "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)");
    free(out);
    /* Not mangled, or not valid: left alone. The length is honoured (no NUL needed). */
    assert_null(pt_demangle("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n", 37));
    assert_null(pt_demangle(kineto_name, strlen(kineto_name)));
    assert_null(pt_demangle("_Z", 2));
    assert_null(pt_demangle("_Zgarbage!", 10));
    char unterminated[] = {'_', 'Z', '1', 'f', 'v', 'X', 'X'};
    out = pt_demangle(unterminated, 5);
    assert_non_null(out);
    assert_string_equal(out, "f()");
    free(out);
}

static void intern_caches_by_mangled_name(void **state)
{
    (void)state;
    pt_strtab names;
    pt_strtab_init(&names);
    pt_demangler d;
    pt_demangler_init(&d);
    uint32_t plain = pt_demangler_intern(&d, &names, kineto_name, strlen(kineto_name));
    uint32_t first = pt_demangler_intern(&d, &names, mangled, strlen(mangled));
    uint32_t again = pt_demangler_intern(&d, &names, mangled, strlen(mangled));
    assert_int_equal(first, plain); /* both spellings of the kernel are one name */
    assert_int_equal(again, plain);
    assert_int_equal(d.mangled.count, 1);
    uint32_t bad = pt_demangler_intern(&d, &names, "_Zgarbage!", 10);
    assert_string_equal(pt_strtab_get(&names, bad), "_Zgarbage!");
    assert_int_equal(names.count, 2);
    pt_demangler_free(&d);
    pt_strtab_free(&names);
}

static char *temp_path(const char *suffix)
{
    char *path = malloc(64);
    snprintf(path, 64, "/tmp/pt-demangle-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    unlink(path);
    strcat(path, suffix);
    return path;
}

/* One step and the same kernel twice, as the collector writes them. */
static char *native_trace(void)
{
    char *path = temp_path(".ptrace");
    pt_error err;
    pt_native_writer *w = pt_native_writer_open(path, &err);
    assert_non_null(w);
    pt_trace_meta meta;
    pt_trace_meta_init(&meta);
    meta.rank = 0;
    meta.pid = 42;
    assert_int_equal(pt_native_writer_meta(w, &meta), 0);
    uint32_t step = pt_native_writer_string(w, "ProfilerStep#1", 14);
    uint32_t kernel = pt_native_writer_string(w, mangled, strlen(mangled));
    pt_event ev;
    pt_event_init(&ev, PT_EVENT_STEP);
    ev.tid = 42, ev.step = 1, ev.ts_ns = 1000000, ev.dur_ns = 1000000;
    assert_int_equal(pt_native_writer_event(w, &ev, step, PT_NATIVE_NO_STRING), 0);
    pt_event_init(&ev, PT_EVENT_GPU_KERNEL);
    ev.tid = 7, ev.device = 0;
    ev.grid[0] = 36, ev.grid[1] = 1, ev.grid[2] = 9;
    ev.block[0] = 128, ev.block[1] = 1, ev.block[2] = 1;
    for (int i = 0; i < 2; i++) {
        ev.ts_ns = 1100000 + i * 400000, ev.dur_ns = 250000;
        assert_int_equal(pt_native_writer_event(w, &ev, kernel, PT_NATIVE_NO_STRING), 0);
    }
    assert_int_equal(pt_native_writer_close(w, &err), 0);
    return path;
}

/* The same step and kernels as torch.profiler writes them (times in us). */
static char *kineto_trace(void)
{
    char *path = temp_path(".json");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f,
            "{\"traceEvents\": [\n"
            " {\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#1\", \"pid\": 42, \"tid\": 42,"
            " \"ts\": 1000, \"dur\": 1000},\n"
            " {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"%s\", \"pid\": 0, \"tid\": 7, \"ts\": 1100, \"dur\": 250,"
            " \"args\": {\"device\": 0, \"stream\": 7, \"grid\": [36, 1, 9], \"block\": [128, 1, 1]}},\n"
            " {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"%s\", \"pid\": 0, \"tid\": 7, \"ts\": 1500, \"dur\": 250,"
            " \"args\": {\"device\": 0, \"stream\": 7, \"grid\": [36, 1, 9], \"block\": [128, 1, 1]}}\n"
            "], \"distributedInfo\": {\"rank\": 0, \"world_size\": 1}}\n",
            kineto_name, kineto_name);
    fclose(f);
    return path;
}

static const pt_function_summary *only_kernel(const pt_worker_summary *s)
{
    const pt_function_summary *found = NULL;
    for (size_t i = 0; i < s->function_count; i++) {
        if (s->functions[i].cls != PT_CLASS_COMPUTE)
            continue;
        assert_null(found); /* exactly one compute kernel key */
        found = &s->functions[i];
    }
    assert_non_null(found);
    return found;
}

static void same_kernel_key_from_both_paths(void **state)
{
    (void)state;
    pt_read_options opts = {0};
    pt_error err;
    char *paths[2] = {native_trace(), kineto_trace()};
    const pt_function_summary *kernels[2];
    pt_worker_summary *summaries[2];
    for (int i = 0; i < 2; i++) {
        summaries[i] = pt_summarize_file(paths[i], &opts, &err);
        if (!summaries[i])
            fail_msg("%s: %s", paths[i], err.message);
        kernels[i] = only_kernel(summaries[i]);
        assert_string_equal(kernels[i]->name, kineto_key);
    }
    assert_int_equal(kernels[0]->count, 2);
    assert_int_equal(kernels[1]->count, 2);
    assert_int_equal(kernels[0]->total_ns, kernels[1]->total_ns);
    for (int i = 0; i < 2; i++) {
        pt_summary_free(summaries[i]);
        unlink(paths[i]);
        free(paths[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(demangles_like_kineto),
        cmocka_unit_test(intern_caches_by_mangled_name),
        cmocka_unit_test(same_kernel_key_from_both_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
