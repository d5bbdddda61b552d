#!/usr/bin/env bash
# Writes docs/cli.md, the text of the man page docs/perftracker.1 (the one CLI reference),
# so it reads on a repository page too. Edit the man page, then run this.
#   scripts/cli-doc.sh            rewrite docs/cli.md
#   scripts/cli-doc.sh --print    print what docs/cli.md should hold (the flags test's check)
# Needs groff (Debian: groff-base, which man-db brings).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
page="$repo/docs/perftracker.1"
command -v groff >/dev/null || { echo "cli-doc: groff is missing (apt-get install groff-base)" >&2; exit 1; }
render() {
    cat <<'HEAD'
# perftracker command-line reference

The text of the man page [`perftracker.1`](perftracker.1) (`man perftracker` once
installed with `make install`). It is generated: edit `docs/perftracker.1`, then run
`scripts/cli-doc.sh`. `tests/reliability/cli_reference.py` checks that this text is the
page's, and that the page, each command's `--help` and the README's "Command line" list
the same options and exit statuses.

```
HEAD
    # Plain ASCII, no hyphenation, ragged right, no overstrikes: text that diffs well.
    LC_ALL=C groff -man -Tascii -rHY=0 -rLL=88n -P-cbou "$page" | sed 's/[[:space:]]*$//' | cat -s
    echo '```'
}
if [[ "${1:-}" == "--print" ]]; then
    render
else
    render > "$repo/docs/cli.md"
    echo "cli-doc: wrote docs/cli.md from docs/perftracker.1"
fi
