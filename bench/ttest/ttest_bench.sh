#!/bin/sh
# ttest benchmarks (make bench), each a ratio against a baseline timed in the
# same run:
#  1. 40 tests that sleep 0.1 .. 3 s, 4 workers: ttest's wall time against
#     the lower bound max(longest, total / 4), against `bats --jobs 4` (when
#     GNU parallel is installed) and Automake's `make -j4 check`;
#  2. overhead per test: 500 tests that exit at once, against prove and bats.
# Run from the build folder; TTEST names the ttest to time.
set -eu
. "$(dirname "$0")/../quick.sh"
TTEST=${TTEST:-$PWD/bin/ttest/ttest}
[ -x "$TTEST" ] || { echo "ttest_bench: $TTEST is not built" >&2; exit 1; }
case $TTEST in /*) ;; *) TTEST=$PWD/$TTEST ;; esac
W=$(mktemp -d "${TMPDIR:-/tmp}/ttest_bench.XXXXXX")
trap 'rm -rf "$W"' EXIT INT TERM

now() { date +%s.%N; }
since() { echo "$(now) $1" | awk '{ printf "%.2f", $1 - $2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

# ---- 1. the synthetic suite: test i sleeps 0.1 + 2.9 (i-1)/39 s; the names
# are a fixed shuffle so that name order is not duration order.
mkdir -p "$W/suite"
: >"$W/durations"
i=1
ntests=40
[ -z "$quick" ] || ntests=4
while [ $i -le $ntests ]; do
    s=$(awk -v i=$i -v q="$quick" 'BEGIN { printf "%.3f", q ? 0.01 : 0.1 + 2.9 * (i - 1) / 39 }')
    n=$(printf 't%02d' $(( (i * 17) % 40 + 1 )))
    printf '#!/bin/sh\nsleep %s\necho 1..1\necho ok 1\n' "$s" >"$W/suite/$n"
    chmod +x "$W/suite/$n"
    printf '%s\t1\t%s\tpass\n' "suite/$n" "$s" >>"$W/durations"
    printf '#!/usr/bin/env bats\n@test "%s" { sleep %s; }\n' "$n" "$s" >"$W/suite-bats-$n.bats"
    i=$((i + 1))
done
bound=$(awk -F'\t' '{ t += $3; if ($3 > m) m = $3 } END { b = t / 4; printf "%.2f", (m > b ? m : b) }' "$W/durations")
echo "synthetic suite: $ntests tests, 0.1 .. 3 s each, 4 workers; lower bound max(longest, total/4) = $bound s"

t0=$(now)
(cd "$W" && "$TTEST" -q -j4 --no-progress --durations durations suite >/dev/null)
tt=$(since "$t0")
echo "  ttest -j4 (recorded durations): $tt s = $(ratio "$tt" "$bound") x the lower bound"
quick_done "ttest on $ntests tests"
t0=$(now)
(cd "$W" && "$TTEST" -q -j4 --no-progress suite >/dev/null)
tn=$(since "$t0")
echo "  ttest -j4 (no durations: name order): $tn s = $(ratio "$tn" "$bound") x the lower bound"

if command -v bats >/dev/null && command -v parallel >/dev/null; then
    mkdir -p "$W/bats4" && mv "$W"/suite-bats-*.bats "$W/bats4/"
    t0=$(now)
    bats --jobs 4 "$W/bats4" >/dev/null
    tb=$(since "$t0")
    echo "  bats --jobs 4: $tb s = $(ratio "$tb" "$bound") x the lower bound; ttest takes $(ratio "$tt" "$tb") x its time"
else
    echo "  bats --jobs 4: not measured (bats --jobs needs GNU parallel, which is not installed)"
fi

if command -v autoreconf >/dev/null; then
    mkdir -p "$W/am"
    cp "$W"/suite/t* "$W/am/"
    cat >"$W/am/configure.ac" <<'EOF2'
AC_INIT([synthetic], [1])
AM_INIT_AUTOMAKE([foreign parallel-tests])
AC_CONFIG_FILES([Makefile])
AC_OUTPUT
EOF2
    (cd "$W/am" && ls t?? | sort | tr '\n' ' ' | sed 's/^/TESTS = /' >Makefile.am && echo >>Makefile.am)
    if (cd "$W/am" && autoreconf -i >/dev/null 2>&1 && ./configure -q >/dev/null 2>&1); then
        t0=$(now)
        (cd "$W/am" && make -s -j4 check >/dev/null 2>&1)
        tm=$(since "$t0")
        echo "  Automake make -j4 check: $tm s = $(ratio "$tm" "$bound") x the lower bound; ttest takes $(ratio "$tt" "$tm") x its time"
    else
        echo "  Automake make -j4 check: not measured (autoreconf or configure failed)"
    fi
else
    echo "  Automake make -j4 check: not measured (autoreconf is not installed)"
fi

# ---- 2. overhead: 500 tests that exit at once, one process at a time.
mkdir -p "$W/instant"
i=1
{ echo '#!/usr/bin/env bats'; } >"$W/instant.bats"
while [ $i -le 500 ]; do
    n=$(printf 'i%03d' $i)
    printf '#!/bin/sh\necho 1..1\necho ok 1\n' >"$W/instant/$n"
    chmod +x "$W/instant/$n"
    printf '@test "%s" { true; }\n' "$n" >>"$W/instant.bats"
    i=$((i + 1))
done
echo "overhead per test: 500 tests that exit at once, one at a time"
t0=$(now)
(cd "$W" && "$TTEST" -q -j1 --no-progress instant >/dev/null)
to=$(since "$t0")
echo "  ttest -j1: $to s, $(awk -v t="$to" 'BEGIN { printf "%.2f", t * 1000 / 500 }') ms per test"
if command -v prove >/dev/null; then
    t0=$(now)
    (cd "$W/instant" && prove -e '' ./i* >/dev/null 2>&1) || true
    tp=$(since "$t0")
    echo "  prove: $tp s, $(awk -v t="$tp" 'BEGIN { printf "%.2f", t * 1000 / 500 }') ms per test; ttest takes $(ratio "$to" "$tp") x its time"
else
    echo "  prove: not measured (not installed)"
fi
if command -v bats >/dev/null; then
    t0=$(now)
    bats "$W/instant.bats" >/dev/null 2>&1 || true
    tb=$(since "$t0")
    echo "  bats (one file of 500 tests): $tb s, $(awk -v t="$tb" 'BEGIN { printf "%.2f", t * 1000 / 500 }') ms per test; ttest takes $(ratio "$to" "$tb") x its time"
else
    echo "  bats: not measured (not installed)"
fi
