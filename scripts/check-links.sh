#!/usr/bin/env bash
# Every relative link in the repository's Markdown files resolves, and so
# does every repository path they name in backticks. scripts/test-all.sh
# calls this; exit 1 names each file:line and what is missing.
#
# Checked, in every *.md that git tracks or would track (so target/ and
# other ignored folders are left out), outside fenced code blocks:
#  * a link or image `[text](target)` that is not a URL: the file or folder
#    must exist relative to the Markdown file, and a `#fragment` must name a
#    heading of the target (GitHub's anchors: lower case, punctuation
#    dropped, spaces as hyphens);
#  * a word in backticks that is a repository path: its first component is
#    a top-level entry of the repository (`lens-cli/src/main.rs`,
#    `scripts/test-all.sh`, `CHANGELOG.md`) and it has a `/` or is a
#    top-level file; words with `<`, `*`, `{`, `$` or `…` are patterns, not
#    paths, and are skipped, as is `target/`, the build output.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
git ls-files --cached --others --exclude-standard -z -- '*.md' |
  python3 -c '
import os, re, sys

files = [f for f in sys.stdin.read().split("\0") if f and os.path.isfile(f)]
top = {e for e in os.listdir(".") if not e.startswith(".") and e != "target"}
top_files = {e for e in top if os.path.isfile(e)}

def slug(heading):
    h = heading.strip().lower().replace("`", "")
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")

anchors_cache = {}
def anchors(path):
    if path not in anchors_cache:
        seen, out, fence = {}, set(), False
        for line in open(path, encoding="utf-8"):
            if line.lstrip().startswith("```"):
                fence = not fence
            m = None if fence else re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                s = slug(m.group(1))
                n = seen.get(s, 0)
                seen[s] = n + 1
                out.add(s if n == 0 else f"{s}-{n}")
        anchors_cache[path] = out
    return anchors_cache[path]

link_re = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
code_re = re.compile(r"`([^`]+)`")
bad = []
for f in sorted(files):
    base = os.path.dirname(f)
    fence = False
    for no, line in enumerate(open(f, encoding="utf-8"), 1):
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        if fence:
            continue
        for target in link_re.findall(line):
            if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("//"):
                continue  # a URL (https:, mailto:, …)
            path, _, frag = target.partition("#")
            full = os.path.normpath(os.path.join(base, path)) if path else f
            if not os.path.exists(full):
                bad.append(f"{f}:{no}: link to a missing path: {target}")
            elif frag and full.endswith(".md") and frag not in anchors(full):
                bad.append(f"{f}:{no}: link to a missing heading: {target}")
        # backticked words, links removed first so a link text is not read twice
        for span in code_re.findall(link_re.sub("", line)):
            for word in span.split():
                word = word.rstrip(".,;:)").lstrip("(")
                if any(c in word for c in "<*{$…") or "://" in word:
                    continue
                first = word.split("/")[0]
                if first not in top or ("/" not in word and word not in top_files):
                    continue
                if not os.path.exists(word.rstrip("/")):
                    bad.append(f"{f}:{no}: names a missing path: {word}")
for b in bad:
    print(b, file=sys.stderr)
if bad:
    print(f"check-links: {len(bad)} broken link(s) or path(s)", file=sys.stderr)
    sys.exit(1)
print(f"ok: every relative link and repository path in {len(files)} Markdown files resolves")
'
