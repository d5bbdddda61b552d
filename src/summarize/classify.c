/* classify.c -- naming knowledge (see classify.h). Bandwidth peaks are public figures
 * per GPU generation; they only scale "throughput %", never decide an outlier. */
#include "summarize/classify.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static bool contains_ci(const char *s, size_t n, const char *needle)
{
    size_t m = strlen(needle);
    for (size_t i = 0; i + m <= n; i++) {
        size_t k = 0;
        while (k < m && tolower((unsigned char)s[i + k]) == needle[k])
            k++;
        if (k == m)
            return true;
    }
    return false;
}

static bool starts_with(const char *s, size_t n, const char *prefix)
{
    size_t m = strlen(prefix);
    return n >= m && memcmp(s, prefix, m) == 0;
}

bool pt_kernel_is_collective(const char *name, size_t n)
{
    return contains_ci(name, n, "nccl") || contains_ci(name, n, "rccl") || contains_ci(name, n, "msccl");
}

int pt_pinned_copy_direction(const char *name, size_t n)
{
    static const char to_host[] = "Memcpy DtoH (Device -> Pinned)", to_device[] = "Memcpy HtoD (Pinned -> Device)";
    if (n == sizeof to_host - 1 && memcmp(name, to_host, n) == 0)
        return 1;
    if (n == sizeof to_device - 1 && memcmp(name, to_device, n) == 0)
        return -1;
    return 0;
}

bool pt_cpu_is_collective(const char *name, size_t n)
{
    static const char *const prefixes[] = {"nccl:", "gloo:", "c10d::", "mpi:", "ucc:"};
    for (size_t i = 0; i < PT_ARRAY_LEN(prefixes); i++)
        if (starts_with(name, n, prefixes[i]))
            return true;
    /* torch/distributed/distributed_c10d.py: <fn>, with or without "(line)". */
    static const char marker[] = "distributed_c10d.py";
    const char *at = NULL;
    for (size_t i = 0; i + sizeof marker - 1 <= n; i++)
        if (memcmp(name + i, marker, sizeof marker - 1) == 0) {
            at = name + i + sizeof marker - 1;
            break;
        }
    if (!at)
        return false;
    const char *colon = memchr(at, ':', (size_t)(name + n - at));
    if (!colon)
        return false;
    const char *fn = colon + 1;
    while (fn < name + n && *fn == ' ')
        fn++;
    size_t fn_len = (size_t)(name + n - fn);
    static const char *const blocking[] = {
        "barrier", "monitored_barrier", "all_reduce", "broadcast", "all_gather",
        "all_gather_into_tensor", "_all_gather_base", "reduce_scatter", "reduce_scatter_tensor",
        "_reduce_scatter_base", "all_to_all", "all_to_all_single", "reduce", "gather", "scatter",
        "send", "recv", "all_gather_object", "broadcast_object_list", "gather_object"};
    for (size_t i = 0; i < PT_ARRAY_LEN(blocking); i++)
        if (strlen(blocking[i]) == fn_len && memcmp(fn, blocking[i], fn_len) == 0)
            return true;
    return false;
}

void pt_normalize_frame(pt_buf *out, const char *name, size_t n)
{
    /* "file.py(123): func" */
    const char *paren = NULL;
    for (size_t i = 0; i + 4 < n; i++) {
        if (name[i] == '.' && name[i + 1] == 'p' && name[i + 2] == 'y' && name[i + 3] == '(') {
            paren = name + i + 3;
            break;
        }
    }
    if (paren) {
        const char *close = memchr(paren, ')', (size_t)(name + n - paren));
        bool digits = close && close > paren + 1;
        for (const char *d = paren + 1; digits && d < close; d++)
            digits = *d >= '0' && *d <= '9';
        if (digits && close + 1 < name + n && close[1] == ':') {
            pt_buf_append(out, name, (size_t)(paren - name));
            pt_buf_append(out, close + 1, (size_t)(name + n - close - 1));
            return;
        }
    }
    /* "... at 0x7f0012ab>" -> "... at 0x>" */
    static const char at[] = " at 0x";
    for (size_t i = 0; i + sizeof at - 1 <= n; i++) {
        if (memcmp(name + i, at, sizeof at - 1) != 0)
            continue;
        size_t j = i + sizeof at - 1;
        while (j < n && isxdigit((unsigned char)name[j]))
            j++;
        pt_buf_append(out, name, i + sizeof at - 1);
        pt_buf_append(out, name + j, n - j);
        return;
    }
    pt_buf_append(out, name, n);
}

const char *pt_collective_pattern(const char *name, size_t n)
{
    /* The first part of the kernel's name found (any case) names its pattern. */
    static const char *const parts[][2] = {
        {"sendrecv", "sendrecv"}, {"alltoall", "alltoall"}, {"nvls", "nvls"},  {"collnet", "collnet"},
        {"_tree", "tree"},        {"_ring", "ring"},        {"_send", "sendrecv"}, {"_recv", "sendrecv"},
    };
    for (size_t i = 0; i < PT_ARRAY_LEN(parts); i++)
        if (contains_ci(name, n, parts[i][0]))
            return parts[i][1];
    return "other";
}

bool pt_collective_is_point_to_point(const char *name)
{
    return strcmp(pt_collective_pattern(name, strlen(name)), "sendrecv") == 0;
}

static bool has_nvlink(const char *device)
{
    static const char *const models[] = {"V100-SXM", "A100", "A800", "H100", "H200", "H800",
                                         "H20", "B100", "B200", "GB200", "GB300", "B300", "SXM"};
    for (size_t i = 0; i < PT_ARRAY_LEN(models); i++)
        if (strstr(device, models[i]) && !strstr(device, "PCIe"))
            return true;
    return false;
}

const char *pt_collective_link(const char *device_name, int device_count, int group_size)
{
    if (group_size > 1 && device_count > 0 && group_size > device_count)
        return "network";
    if (strstr(device_name, "MI2") || strstr(device_name, "MI3") || strstr(device_name, "Instinct"))
        return "xgmi";
    return has_nvlink(device_name) ? "nvlink" : "pcie";
}

double pt_link_peak_gbps(const char *link, const char *device_name)
{
    if (strcmp(link, "network") == 0)
        return 50.0; /* one 400 Gb/s NIC per GPU */
    if (strcmp(link, "pcie") == 0) /* Gen5 x16 on Hopper and later, Gen4 x16 before */
        return strstr(device_name, "H100") || strstr(device_name, "H200") || strstr(device_name, "B200") ? 64.0 : 32.0;
    static const struct {
        const char *model;
        double gbps;
    } peaks[] = {
        {"V100", 150}, {"A100", 300}, {"A800", 200}, {"H100", 450}, {"H200", 450},
        {"H800", 200}, {"H20", 450},  {"B100", 900}, {"B200", 900}, {"B300", 900},
        {"MI250", 200}, {"MI300", 448}, {"MI325", 448}, {"MI355", 538},
    };
    for (size_t i = 0; i < PT_ARRAY_LEN(peaks); i++)
        if (strstr(device_name, peaks[i].model))
            return peaks[i].gbps;
    return 300.0;
}

double pt_busbw_factor(const char *coll, size_t len, int n, bool *uses_output_size)
{
    *uses_output_size = false;
    if (n < 2)
        return 1.0;
    double ring = (double)(n - 1) / n;
    if (contains_ci(coll, len, "allreduce") || contains_ci(coll, len, "all_reduce"))
        return 2.0 * ring;
    if (contains_ci(coll, len, "allgather") || contains_ci(coll, len, "all_gather")) {
        *uses_output_size = true;
        return ring;
    }
    if (contains_ci(coll, len, "reducescatter") || contains_ci(coll, len, "reduce_scatter") ||
        contains_ci(coll, len, "alltoall") || contains_ci(coll, len, "all_to_all"))
        return ring;
    return 1.0; /* broadcast, reduce, send/recv */
}

pt_runtime_kind pt_runtime_kind_of(const char *name)
{
    if (strstr(name, "Launch"))
        return PT_RUNTIME_LAUNCH;
    if (strstr(name, "Synchronize") || strstr(name, "WaitEvent") || strstr(name, "EventQuery"))
        return PT_RUNTIME_SYNC;
    if (strstr(name, "Memcpy") || strstr(name, "Memset"))
        return PT_RUNTIME_COPY;
    if (strstr(name, "Malloc") || strstr(name, "Free") || strstr(name, "HostAlloc") || strstr(name, "HostRegister") ||
        strstr(name, "MemAlloc"))
        return PT_RUNTIME_MEMORY;
    return PT_RUNTIME_OTHER;
}

bool pt_runtime_is_hip(const char *name)
{
    return strncmp(name, "hip", 3) == 0;
}

/* The standard library's modules that are Python files or packages (CPython 3.11's
 * sys.stdlib_module_names with a .py file or a package folder), sorted: the collector
 * names their frames relative to the standard library ("multiprocessing/process.py"). */
static const char *const stdlib_modules[] = {
    "abc", "aifc", "antigravity", "argparse", "ast", "asynchat", "asyncio", "asyncore", "base64", "bdb",
    "bisect", "bz2", "cProfile", "calendar", "cgi", "cgitb", "chunk", "cmd", "code", "codecs", "codeop",
    "collections", "colorsys", "compileall", "concurrent", "configparser", "contextlib", "contextvars",
    "copy", "copyreg", "crypt", "csv", "ctypes", "curses", "dataclasses", "datetime", "dbm", "decimal",
    "difflib", "dis", "distutils", "doctest", "email", "encodings", "ensurepip", "enum", "filecmp",
    "fileinput", "fnmatch", "fractions", "ftplib", "functools", "genericpath", "getopt", "getpass", "gettext",
    "glob", "graphlib", "gzip", "hashlib", "heapq", "hmac", "html", "http", "imaplib", "imghdr", "imp",
    "importlib", "inspect", "io", "ipaddress", "json", "keyword", "lib2to3", "linecache", "locale", "logging",
    "lzma", "mailbox", "mailcap", "mimetypes", "modulefinder", "multiprocessing", "netrc", "nntplib",
    "ntpath", "nturl2path", "numbers", "opcode", "operator", "optparse", "os", "pathlib", "pdb", "pickle",
    "pickletools", "pipes", "pkgutil", "platform", "plistlib", "poplib", "posixpath", "pprint", "profile",
    "pstats", "pty", "py_compile", "pyclbr", "pydoc", "pydoc_data", "queue", "quopri", "random", "re",
    "reprlib", "rlcompleter", "runpy", "sched", "secrets", "selectors", "shelve", "shlex", "shutil", "signal",
    "site", "smtpd", "smtplib", "sndhdr", "socket", "socketserver", "sqlite3", "sre_compile", "sre_constants",
    "sre_parse", "ssl", "stat", "statistics", "string", "stringprep", "struct", "subprocess", "sunau",
    "symtable", "sysconfig", "tabnanny", "tarfile", "telnetlib", "tempfile", "textwrap", "this", "threading",
    "timeit", "token", "tokenize", "tomllib", "trace", "traceback", "tracemalloc", "tty", "turtle", "types",
    "typing", "unittest", "urllib", "uu", "uuid", "venv", "warnings", "wave", "weakref", "webbrowser",
    "wsgiref", "xdrlib", "xml", "xmlrpc", "zipapp", "zipfile", "zipimport", "zoneinfo",
};

static int by_module(const void *key, const void *item)
{
    return strcmp(key, *(const char *const *)item);
}

bool pt_file_in_stdlib(const char *file, size_t len)
{
    size_t n = 0;
    while (n < len && file[n] != '/')
        n++;
    if (n == len) { /* a module of one file: "threading.py" */
        if (len < 4 || memcmp(file + len - 3, ".py", 3) != 0)
            return false;
        n = len - 3;
    }
    char head[32];
    if (n == 0 || n >= sizeof head)
        return false;
    memcpy(head, file, n);
    head[n] = 0;
    return bsearch(head, stdlib_modules, PT_ARRAY_LEN(stdlib_modules), sizeof *stdlib_modules, by_module) != NULL;
}
