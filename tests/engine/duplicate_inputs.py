"""The same file given to `analyze` more than once -- a repeated argument, a directory and
a file in it, a symlink, a hard link -- is analysed once, with a note on stderr, and the
report is the one the files named once give."""
import os
import subprocess

from engine_common import TempDir, analyze, run


def workers(report):
    return [(w["rank"], w["name"], w["step_time_ms"]) for w in report["workers"]]


def main():
    with TempDir() as tmp:
        job = os.path.join(tmp, "job")
        run("synth", "-n", "4", "--steps", "2", "--layers", "2", "--fault", "slow_gpu", "--quiet", "-o", job)
        files = sorted(os.path.join(job, f) for f in os.listdir(job) if f.startswith("node"))
        assert len(files) == 4, files
        rc, once, stderr = analyze([job], os.path.join(tmp, "once"))
        assert rc == 0 and "note:" not in stderr, (rc, stderr)

        link = os.path.join(tmp, "link.json")
        os.symlink(files[1], link)
        hard = os.path.join(tmp, "hard.json")
        os.link(files[2], hard)
        inputs = [job, files[0], link, hard, job, files[3]]
        rc, twice, stderr = analyze(inputs, os.path.join(tmp, "twice"))
        assert rc == 0, (rc, stderr)
        assert workers(twice) == workers(once), (workers(twice), workers(once))
        assert not any("duplicate" in w.lower() for w in twice["warnings"]), twice["warnings"]
        for name in (files[0], link, hard, files[3]):
            assert any(line.startswith("perftracker: note: " + name) and "analysed once" in line
                       for line in stderr.splitlines()), (name, stderr)
        assert f"4 of the files in {job} were already named" in stderr, stderr

        # Files named only once are all read, whatever their names share.
        copy = os.path.join(tmp, "copy.json")
        with open(files[0], "rb") as src, open(copy, "wb") as dst:
            dst.write(src.read())
        p = subprocess.run([os.environ.get("PT_CLI", "perftracker"), "analyze", "-q", "-o", os.path.join(tmp, "copy"),
                            files[0], copy], capture_output=True, text=True)
        assert "analysed once" not in p.stderr, "a copy is another file, not the same one: " + p.stderr
    print("PASS: a file named twice is analysed once, with a note")


if __name__ == "__main__":
    main()
