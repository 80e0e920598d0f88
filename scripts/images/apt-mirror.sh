#!/usr/bin/env bash
# Prints the Debian mirror this machine's apt uses for SUITE (default bookworm): the URI of the
# first enabled `deb` source for SUITE with component `main`, read where apt reads it
# (Dir::Etc::sourcelist one-line entries, then Dir::Etc::sourceparts *.list and deb822 *.sources
# in name order; `Enabled: no` paragraphs and non-http(s)/file URIs skipped). Prints nothing
# (exit 0) when there is none. Used by build-base.sh so debootstrap takes a local mirror or
# proxying mirror from apt's configuration instead of a hard-coded host.
#
#   scripts/images/apt-mirror.sh [SUITE]     # APT_CONFIG=FILE selects another apt configuration
set -euo pipefail
SUITE="${1:-bookworm}"

list=/etc/apt/sources.list
parts=/etc/apt/sources.list.d
if command -v apt-config >/dev/null 2>&1; then
  eval "$(apt-config shell list Dir::Etc::sourcelist/f parts Dir::Etc::sourceparts/d)"
fi

files=()
[ -f "$list" ] && files+=("$list")
for f in "$parts"/*; do
  case "$f" in *.list|*.sources) [ -f "$f" ] && files+=("$f") ;; esac
done
[ "${#files[@]}" -gt 0 ] || exit 0

awk -v suite="$SUITE" '
  function has(words, word,   n, a, i) {
    n = split(words, a)
    for (i = 1; i <= n; i++) if (a[i] == word) return 1
    return 0
  }
  function usable(uri) { return uri ~ /^(https?|file):/ }
  function first_usable(words,   n, a, i) {
    n = split(words, a)
    for (i = 1; i <= n; i++) if (usable(a[i])) return a[i]
    return ""
  }
  function found(uri) { print uri; done = 1; exit }
  # deb822: one paragraph is complete at a blank line or at the end of its file.
  function paragraph(   uri) {
    if (seen && !has(tolower(f["enabled"]), "no") && has(f["types"], "deb") &&
        has(f["suites"], suite) && has(f["components"], "main") &&
        (uri = first_usable(f["uris"])) != "") found(uri)
    seen = 0; key = ""; split("", f)
  }
  FNR == 1 { paragraph() }
  FILENAME ~ /\.sources$/ {
    if ($0 ~ /^#/) next
    if ($0 ~ /^[ \t]*$/) { paragraph(); next }
    if ($0 ~ /^[ \t]/) { if (key != "") f[key] = f[key] " " $0; next }
    key = tolower(substr($0, 1, index($0, ":") - 1))
    f[key] = substr($0, index($0, ":") + 1)
    seen = 1
    next
  }
  {
    sub(/#.*/, "")
    if ($1 != "deb") next
    i = 2
    if ($2 ~ /^\[/) { while (i < NF && $i !~ /\]$/) i++; i++ }
    components = ""
    for (j = i + 2; j <= NF; j++) components = components " " $j
    if ($(i + 1) == suite && has(components, "main") && usable($i)) found($i)
  }
  END { if (!done) paragraph() }
' "${files[@]}"
